/**
 * AES-256-GCM for the private domain of the ledger and for wrapping secrets, plus HKDF-SHA256.
 * Sealed form: ciphertext ‖ 16-byte tag. The IV of a ledger entry is derived from its transaction
 * id, so it is unique per ledger secret without being stored twice.
 */
import nodeCrypto from 'node:crypto';
import { assert } from '../base/index.js';
import { cryptoError, CryptoErrorCode } from './errors.js';

export const AES_GCM_KEY_LENGTH_BYTES = 32;
export const AES_GCM_IV_LENGTH_BYTES = 12;
export const AES_GCM_TAG_LENGTH_BYTES = 16;

function checkKeyAndIv(key: Uint8Array, iv: Uint8Array): void {
  if (key.byteLength !== AES_GCM_KEY_LENGTH_BYTES) {
    throw cryptoError(CryptoErrorCode.InvalidKey, `AES-256-GCM key must be ${AES_GCM_KEY_LENGTH_BYTES} bytes, got ${key.byteLength}`);
  }
  if (iv.byteLength !== AES_GCM_IV_LENGTH_BYTES) {
    throw cryptoError(CryptoErrorCode.InvalidKey, `AES-GCM IV must be ${AES_GCM_IV_LENGTH_BYTES} bytes, got ${iv.byteLength}`);
  }
}

/** Encrypts and authenticates; returns ciphertext ‖ tag. */
export function sealAesGcm(key: Uint8Array, iv: Uint8Array, plaintext: Uint8Array, aad?: Uint8Array): Uint8Array {
  checkKeyAndIv(key, iv);
  const cipher = nodeCrypto.createCipheriv('aes-256-gcm', key, iv, { authTagLength: AES_GCM_TAG_LENGTH_BYTES });
  if (aad !== undefined) cipher.setAAD(aad);
  const head = cipher.update(plaintext);
  const tail = cipher.final();
  const tag = cipher.getAuthTag();
  const out = new Uint8Array(head.byteLength + tail.byteLength + tag.byteLength);
  out.set(head, 0);
  out.set(tail, head.byteLength);
  out.set(tag, head.byteLength + tail.byteLength);
  return out;
}

/** Decrypts ciphertext ‖ tag; a DecryptionFailed error if anything (key, iv, aad, bytes) differs. */
export function openAesGcm(key: Uint8Array, iv: Uint8Array, sealed: Uint8Array, aad?: Uint8Array): Uint8Array {
  checkKeyAndIv(key, iv);
  if (sealed.byteLength < AES_GCM_TAG_LENGTH_BYTES) {
    throw cryptoError(CryptoErrorCode.DecryptionFailed, `sealed data is ${sealed.byteLength} bytes, shorter than the tag`);
  }
  const split = sealed.byteLength - AES_GCM_TAG_LENGTH_BYTES;
  const decipher = nodeCrypto.createDecipheriv('aes-256-gcm', key, iv, { authTagLength: AES_GCM_TAG_LENGTH_BYTES });
  decipher.setAuthTag(sealed.subarray(split));
  if (aad !== undefined) decipher.setAAD(aad);
  const head = decipher.update(sealed.subarray(0, split));
  let tail: Buffer;
  try {
    tail = decipher.final();
  } catch {
    throw cryptoError(CryptoErrorCode.DecryptionFailed, 'AES-GCM authentication failed: wrong key or tampered data');
  }
  if (tail.byteLength === 0) return new Uint8Array(head.buffer, head.byteOffset, head.byteLength);
  const out = new Uint8Array(head.byteLength + tail.byteLength);
  out.set(head, 0);
  out.set(tail, head.byteLength);
  return out;
}

export function randomAesKey(): Uint8Array {
  return new Uint8Array(nodeCrypto.randomBytes(AES_GCM_KEY_LENGTH_BYTES));
}

/** IV purposes: the top bit of the view field keeps snapshot IVs apart from ledger-entry IVs. */
export type IvPurpose = 'ledger-entry' | 'snapshot';

/** Largest view an IV can carry: bit 31 of the view field is the purpose bit. */
export const IV_VIEW_MAX = 0x7fff_ffff;

/**
 * The 12-byte AES-GCM IV of a transaction (layout as in CCF's GCM header):
 *   bytes 0..7   seqno, unsigned 64-bit little-endian
 *   bytes 8..11  view, unsigned 32-bit little-endian, with bit 31 set for 'snapshot'
 * Distinct (view, seqno, purpose) give distinct IVs, so an IV is never reused under one key as long
 * as a transaction id is encrypted once per purpose.
 */
export function ivFromTxId(view: number, seqno: number, purpose: IvPurpose = 'ledger-entry'): Uint8Array {
  assert(Number.isSafeInteger(seqno) && seqno >= 0, () => `seqno ${seqno} is not a non-negative safe integer`);
  assert(Number.isInteger(view) && view >= 0 && view <= IV_VIEW_MAX, () => `view ${view} does not fit 31 bits`);
  const iv = new Uint8Array(AES_GCM_IV_LENGTH_BYTES);
  const dv = new DataView(iv.buffer);
  dv.setBigUint64(0, BigInt(seqno), true);
  dv.setUint32(8, (view | (purpose === 'snapshot' ? 0x8000_0000 : 0)) >>> 0, true);
  return iv;
}

/** HKDF-SHA256 (RFC 5869). */
export function hkdfSha256(ikm: Uint8Array, salt: Uint8Array, info: Uint8Array | string, lengthBytes: number): Uint8Array {
  assert(Number.isInteger(lengthBytes) && lengthBytes > 0 && lengthBytes <= 255 * 32, () => `bad HKDF length ${lengthBytes}`);
  const infoBytes = typeof info === 'string' ? Buffer.from(info, 'utf8') : info;
  return new Uint8Array(nodeCrypto.hkdfSync('sha256', ikm, salt, infoBytes, lengthBytes));
}
