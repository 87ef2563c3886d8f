/**
 * SHA-2 digests. Small inputs go through `crypto.hash` (one native call, about twice as fast as
 * createHash for the 64-byte inputs of the Merkle tree); streams go through `createHasher`.
 *
 * Digests come back as a latin1 ('binary') string copied into a fresh Uint8Array: V8 keeps
 * arrays of up to 64 bytes inside its heap, while a Buffer result costs a separate native
 * allocation that the garbage collector must track — about three times the cost of the hash
 * itself at ledger rates.
 */
import nodeCrypto from 'node:crypto';

export type DigestAlgorithm = 'sha-256' | 'sha-384' | 'sha-512';

const NODE_NAMES: Record<DigestAlgorithm, string> = { 'sha-256': 'sha256', 'sha-384': 'sha384', 'sha-512': 'sha512' };

/** Byte length of each digest. */
export const DIGEST_LENGTH_BYTES: Readonly<Record<DigestAlgorithm, number>> = { 'sha-256': 32, 'sha-384': 48, 'sha-512': 64 };

function toUint8(buffer: Buffer): Uint8Array {
  return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
}

function fromLatin1(text: string): Uint8Array {
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
  return out;
}

export function digest(alg: DigestAlgorithm, data: Uint8Array | string): Uint8Array {
  return fromLatin1(nodeCrypto.hash(NODE_NAMES[alg], data, 'binary'));
}

export function sha256(data: Uint8Array | string): Uint8Array {
  return fromLatin1(nodeCrypto.hash('sha256', data, 'binary'));
}

export function sha384(data: Uint8Array | string): Uint8Array {
  return fromLatin1(nodeCrypto.hash('sha384', data, 'binary'));
}

export function sha512(data: Uint8Array | string): Uint8Array {
  return fromLatin1(nodeCrypto.hash('sha512', data, 'binary'));
}

/** Lower-case hex SHA-256, the form ids and digests take in JSON. */
export function sha256Hex(data: Uint8Array | string): string {
  return nodeCrypto.hash('sha256', data, 'hex');
}

/** Incremental digest for inputs read in pieces (ledger chunk files, snapshots). Single use. */
export interface Hasher {
  update(data: Uint8Array | string): Hasher;
  /** Finishes the digest; the hasher cannot be updated afterwards. */
  digest(): Uint8Array;
}

export function createHasher(alg: DigestAlgorithm): Hasher {
  const hash = nodeCrypto.createHash(NODE_NAMES[alg]);
  const hasher: Hasher = {
    update(data) {
      hash.update(data);
      return hasher;
    },
    digest() {
      return toUint8(hash.digest());
    },
  };
  return hasher;
}

/** HMAC-SHA256, used for deterministic derivations (commit evidence nonces). */
export function hmacSha256(key: Uint8Array, data: Uint8Array | string): Uint8Array {
  return toUint8(nodeCrypto.createHmac('sha256', key).update(data).digest());
}

/** HMAC-SHA256 under one key for many messages (the key is imported once). */
export function keyedHmacSha256(key: Uint8Array): (data: Uint8Array | string) => Uint8Array {
  const keyObject = nodeCrypto.createSecretKey(key);
  return (data) => fromLatin1(nodeCrypto.createHmac('sha256', keyObject).update(data).digest('binary'));
}
