/**
 * RSA-OAEP with SHA-256 (and MGF1-SHA-256, empty label) for encrypting a share to a member's
 * encryption key (docs/architecture.md, decision 15): `node:crypto`'s `publicEncrypt` and
 * `privateDecrypt` with `RSA_PKCS1_OAEP_PADDING` and `oaepHash: 'sha256'`.
 *
 * OpenSSL draws the OAEP seed from its own generator, not from the injected source: the encrypted
 * shares are not reproducible from a seed (their format and length are). Nothing's control flow
 * depends on their bytes, and shares are encrypted when the node prepares them, outside any KV
 * transaction.
 */
import nodeCrypto, { type KeyObject } from 'node:crypto';
import { isCovenantError } from '../base/index.js';
import { loadPrivateKey, loadPublicKey } from '../crypto/index.js';
import { RecoveryError } from './errors.js';

const HASH_LENGTH_BYTES = 32;
/** Below 2048 bits RSA no longer protects a share for the years a ledger is kept. */
export const RSA_MODULUS_BITS_MIN = 2048;

/** The member's RSA public key, refused with InvalidEncryptionKey unless it is RSA of at least 2048 bits. */
export function loadEncryptionPublicKey(pem: string, memberId?: string): KeyObject {
  const who = memberId === undefined ? 'encryption public key' : `encryption public key of member ${memberId}`;
  return loadRsaPublicKey(pem, who, memberId === undefined ? undefined : { memberId });
}

/** An RSA public key of at least 2048 bits, or InvalidEncryptionKey naming `who` (a member's or a node's key). */
export function loadRsaPublicKey(pem: string, who: string, details?: Record<string, unknown>): KeyObject {
  let key: KeyObject;
  try {
    key = loadPublicKey(pem);
  } catch (e) {
    if (isCovenantError(e)) throw new RecoveryError('InvalidEncryptionKey', `${who}: ${e.message}`, details);
    throw e;
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  if (key.asymmetricKeyType !== 'rsa' || bits < RSA_MODULUS_BITS_MIN) {
    throw new RecoveryError('InvalidEncryptionKey', `${who} is ${key.asymmetricKeyType ?? 'unknown'}${bits ? ` of ${bits} bits` : ''}, not RSA of at least ${RSA_MODULUS_BITS_MIN} bits`, details);
  }
  return key;
}

/** RSA-OAEP-SHA256 encryption of `plaintext` (OpenSSL's, with OpenSSL's random seed). */
export function encryptRsaOaepSha256(publicKey: KeyObject, plaintext: Uint8Array): Uint8Array {
  const k = Math.ceil(publicKey.asymmetricKeyDetails!.modulusLength! / 8);
  // The caller's plaintexts are shares of a few dozen bytes, far below the k - 2h - 2 that OAEP carries;
  // the check gives a longer one a RecoveryError rather than OpenSSL's message.
  const messageMaxBytes = k - 2 * HASH_LENGTH_BYTES - 2;
  if (plaintext.byteLength > messageMaxBytes) {
    throw new RecoveryError('InvalidEncryptionKey', `an RSA key of ${k} bytes carries at most ${messageMaxBytes} bytes with OAEP-SHA256, not ${plaintext.byteLength}`);
  }
  return new Uint8Array(nodeCrypto.publicEncrypt({ key: publicKey, padding: nodeCrypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, plaintext));
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
  const plaintext = privateDecryptRsaOaepSha256(key, ciphertext);
  if (plaintext === undefined) throw new RecoveryError('ShareDecryptionFailed', 'the encrypted share does not decrypt with this key (encrypted to another member, or tampered)');
  return plaintext;
}

/** RSA-OAEP-SHA256 decryption with an RSA private key; undefined when OAEP refuses (another key, or tampered bytes). */
export function privateDecryptRsaOaepSha256(key: KeyObject, ciphertext: Uint8Array): Uint8Array | undefined {
  try {
    return new Uint8Array(nodeCrypto.privateDecrypt({ key, padding: nodeCrypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, ciphertext));
  } catch {
    return undefined;
  }
}
