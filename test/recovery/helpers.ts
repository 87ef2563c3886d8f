/** Shared test fixtures of recovery: the documented seeded random source and members' RSA keys. */
import { generateRsaKeyPair, sha256, type KeyPair } from '../../src/crypto/index.js';
import { concatBytes, utf8 } from '../../src/base/index.js';
import type { RandomBytes } from '../../src/recovery/index.js';

/**
 * The seeded source of docs/recovery.md, "Test vectors": the stream SHA-256(seed ‖ counter) for
 * counter = 0, 1, 2, ... (counter a u32 little-endian), each call taking the next n bytes.
 */
export function seededRandomBytes(seed: string): RandomBytes & { drawnBytes: () => number } {
  const seedBytes = utf8.encode(seed);
  let counter = 0;
  let pool: Uint8Array = new Uint8Array(0);
  let drawn = 0;
  const randomBytes = (n: number): Uint8Array => {
    while (pool.byteLength < n) {
      const c = new Uint8Array(4);
      new DataView(c.buffer).setUint32(0, counter++, true);
      pool = concatBytes([pool, sha256(concatBytes([seedBytes, c]))]);
    }
    const out = pool.slice(0, n);
    pool = pool.slice(n);
    drawn += n;
    return out;
  };
  return Object.assign(randomBytes, { drawnBytes: () => drawn });
}

// RSA key generation costs tens of milliseconds: a test file makes its members' keys once.
const keys: KeyPair[] = [];

export function memberKeys(count: number): KeyPair[] {
  while (keys.length < count) keys.push(generateRsaKeyPair(2048));
  return keys.slice(0, count);
}

export function recoveryMembers(count: number): { members: { memberId: string; encryptionPublicKeyPem: string }[]; privateKeys: Map<string, string> } {
  const pairs = memberKeys(count);
  const members = pairs.map((k, i) => ({ memberId: `member${i}`, encryptionPublicKeyPem: k.publicKeyPem }));
  return { members, privateKeys: new Map(pairs.map((k, i) => [`member${i}`, k.privateKeyPem])) };
}
