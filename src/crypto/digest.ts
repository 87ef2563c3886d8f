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

/**
 * HMAC-SHA256 under one key for many short messages (commit evidence nonces, one per
 * transaction). RFC 2104 written out over two one-shot hashes of preallocated blocks (the key
 * XOR ipad, then the key XOR opad, each followed by the message or the inner digest): about half
 * the cost of a createHmac object per message. Messages longer than the block fall back to
 * createHmac. `encoding` 'hex' returns the digest as lower-case hex text.
 */
export function keyedHmacSha256(key: Uint8Array): (data: Uint8Array | string) => Uint8Array;
export function keyedHmacSha256(key: Uint8Array, encoding: 'hex'): (data: Uint8Array | string) => string;
export function keyedHmacSha256(key: Uint8Array, encoding?: 'hex'): (data: Uint8Array | string) => Uint8Array | string {
  const keyCopy = new Uint8Array(key);
  const block = keyCopy.byteLength > HMAC_BLOCK_BYTES ? nodeCrypto.hash('sha256', keyCopy, 'buffer') : keyCopy;
  const inner = Buffer.alloc(HMAC_BLOCK_BYTES + HMAC_SHORT_MESSAGE_BYTES, 0x36);
  const outer = Buffer.alloc(HMAC_BLOCK_BYTES + 32, 0x5c);
  for (let i = 0; i < block.byteLength; i++) {
    inner[i] = block[i]! ^ 0x36;
    outer[i] = block[i]! ^ 0x5c;
  }
  const finish = (innerDigest: string): Uint8Array | string => {
    outer.write(innerDigest, HMAC_BLOCK_BYTES, 32, 'latin1');
    return encoding === 'hex' ? sha256Hex(outer) : sha256(outer);
  };
  return (data) => {
    // A string of n UTF-16 units takes at most 3n bytes in UTF-8, so this check is conservative.
    if (typeof data === 'string' ? data.length * 3 <= HMAC_SHORT_MESSAGE_BYTES : data.byteLength <= HMAC_SHORT_MESSAGE_BYTES) {
      const length = typeof data === 'string' ? inner.write(data, HMAC_BLOCK_BYTES, 'utf8') : (inner.set(data, HMAC_BLOCK_BYTES), data.byteLength);
      return finish(nodeCrypto.hash('sha256', inner.subarray(0, HMAC_BLOCK_BYTES + length), 'binary'));
    }
    const mac = nodeCrypto.createHmac('sha256', keyCopy).update(data);
    return encoding === 'hex' ? mac.digest('hex') : fromLatin1(mac.digest('binary'));
  };
}

const HMAC_BLOCK_BYTES = 64;
const HMAC_SHORT_MESSAGE_BYTES = 192;
