/**
 * RSA-OAEP with SHA-256 (and MGF1-SHA-256, empty label) for encrypting a share to a member's
 * encryption key (docs/architecture.md, decision 15).
 *
 * Encryption encodes OAEP here (RFC 8017, 7.1.1) and applies the raw RSA operation, because
 * OpenSSL's OAEP draws its seed from its own generator and the encrypted shares are written to
 * the ledger: with the seed taken from the injected source, the simulator reproduces those bytes.
 * Decryption is OpenSSL's (its OAEP check is the part that must resist padding oracles); the tests
 * check that OpenSSL decrypts what this module encrypts and the reverse.
 */
import nodeCrypto, { type KeyObject } from 'node:crypto';
import { isCovenantError } from '../base/index.js';
import { loadPrivateKey, loadPublicKey, sha256 } from '../crypto/index.js';
import { RecoveryError } from './errors.js';
import { draw, type RandomBytes } from './random.js';

const HASH_LENGTH_BYTES = 32;
/** Below 2048 bits RSA no longer protects a share for the years a ledger is kept. */
export const RSA_MODULUS_BITS_MIN = 2048;
const EMPTY_LABEL_HASH = sha256(new Uint8Array(0));

/** MGF1 with SHA-256 (RFC 8017, B.2.1). */
function mgf1Sha256(seed: Uint8Array, lengthBytes: number): Uint8Array {
  const out = new Uint8Array(lengthBytes);
  const block = new Uint8Array(seed.byteLength + 4);
  block.set(seed, 0);
  const counterView = new DataView(block.buffer, seed.byteLength, 4);
  for (let counter = 0, offset = 0; offset < lengthBytes; counter++, offset += HASH_LENGTH_BYTES) {
    counterView.setUint32(0, counter, false);
    out.set(sha256(block).subarray(0, lengthBytes - offset), offset);
  }
  return out;
}

/** The member's RSA public key, refused with InvalidEncryptionKey unless it is RSA of at least 2048 bits. */
export function loadEncryptionPublicKey(pem: string, memberId?: string): KeyObject {
  const who = memberId === undefined ? 'encryption public key' : `encryption public key of member ${memberId}`;
  let key: KeyObject;
  try {
    key = loadPublicKey(pem);
  } catch (e) {
    if (isCovenantError(e)) throw new RecoveryError('InvalidEncryptionKey', `${who}: ${e.message}`, memberId === undefined ? undefined : { memberId });
    throw e;
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (key.asymmetricKeyType !== 'rsa' || bits < RSA_MODULUS_BITS_MIN) {
    throw new RecoveryError('InvalidEncryptionKey', `${who} is ${key.asymmetricKeyType ?? 'unknown'}${bits ? ` of ${bits} bits` : ''}, not RSA of at least ${RSA_MODULUS_BITS_MIN} bits`, memberId === undefined ? undefined : { memberId });
  }
  return key;
}

/** RSA-OAEP-SHA256 encryption of `plaintext`, its seed drawn from `randomBytes`. */
export function encryptRsaOaepSha256(publicKey: KeyObject, plaintext: Uint8Array, randomBytes: RandomBytes): Uint8Array {
  const k = Math.ceil(publicKey.asymmetricKeyDetails!.modulusLength! / 8);
  // The caller's plaintexts are shares of a few dozen bytes, far below the k - 2h - 2 that OAEP carries.
  const messageMaxBytes = k - 2 * HASH_LENGTH_BYTES - 2;
  if (plaintext.byteLength > messageMaxBytes) {
    throw new RecoveryError('InvalidEncryptionKey', `an RSA key of ${k} bytes carries at most ${messageMaxBytes} bytes with OAEP-SHA256, not ${plaintext.byteLength}`);
  }
  // DB = lHash ‖ PS (zeros) ‖ 0x01 ‖ M
  const db = new Uint8Array(k - HASH_LENGTH_BYTES - 1);
  db.set(EMPTY_LABEL_HASH, 0);
  db[db.byteLength - plaintext.byteLength - 1] = 0x01;
  db.set(plaintext, db.byteLength - plaintext.byteLength);
  const seed = new Uint8Array(draw(randomBytes, HASH_LENGTH_BYTES));
  const dbMask = mgf1Sha256(seed, db.byteLength);
  for (let i = 0; i < db.byteLength; i++) db[i]! ^= dbMask[i]!;
  const seedMask = mgf1Sha256(db, HASH_LENGTH_BYTES);
  for (let i = 0; i < HASH_LENGTH_BYTES; i++) seed[i]! ^= seedMask[i]!;
  // EM = 0x00 ‖ maskedSeed ‖ maskedDB: the leading zero keeps EM below the modulus.
  const em = new Uint8Array(k);
  em.set(seed, 1);
  em.set(db, 1 + HASH_LENGTH_BYTES);
  return new Uint8Array(nodeCrypto.publicEncrypt({ key: publicKey, padding: nodeCrypto.constants.RSA_NO_PADDING }, em));
}

/** RSA-OAEP-SHA256 decryption; ShareDecryptionFailed for another key or tampered bytes. */
export function decryptRsaOaepSha256(privateKeyPem: string, ciphertext: Uint8Array): Uint8Array {
  let key: KeyObject;
  try {
    key = loadPrivateKey(privateKeyPem);
  } catch (e) {
    if (isCovenantError(e)) throw new RecoveryError('InvalidEncryptionKey', `encryption private key: ${e.message}`);
    throw e;
  }
  if (key.asymmetricKeyType !== 'rsa') throw new RecoveryError('InvalidEncryptionKey', `encryption private key is ${key.asymmetricKeyType}, not RSA`);
  try {
    return new Uint8Array(nodeCrypto.privateDecrypt({ key, padding: nodeCrypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, ciphertext));
  } catch {
    throw new RecoveryError('ShareDecryptionFailed', 'the encrypted share does not decrypt with this key (encrypted to another member, or tampered)');
  }
}
