/**
 * Submitted shares kept encrypted in the store until enough arrive, so that a primary change
 * during share collection loses none (docs/recovery.md, "Submitted shares in the store").
 *
 * The key: HKDF-SHA256 of the service identity's private scalar. Every trusted node of the
 * recovering service holds that key (it is how they all sign as the service), nothing outside the
 * service does, and it is not the ledger secret, which is exactly what recovery is still looking
 * for. The private scalar is used rather than a PEM's bytes so that two nodes holding the key in
 * different encodings derive the same storage key. The recovery makes a new service identity
 * (decision 16) before it collects shares, so each recovery's shares live under a key of their own.
 *
 * Layout: 0x01 ‖ iv[12] ‖ AES-256-GCM(share) ‖ tag[16], AAD = 0x01 ‖ member id (UTF-8), so that a
 * stored share cannot be moved to another member's row.
 */
import { concatBytes, isCovenantError, utf8 } from '../base/index.js';
import { AES_GCM_IV_LENGTH_BYTES, AES_GCM_KEY_LENGTH_BYTES, AES_GCM_TAG_LENGTH_BYTES, hkdfSha256, loadPrivateKey, openAesGcm, sealAesGcm } from '../crypto/index.js';
import { RecoveryError } from './errors.js';
import { draw, type RandomBytes } from './random.js';

export const STORED_SHARE_VERSION = 1;
const STORAGE_KEY_INFO = 'covenant recovery submitted shares v1';
const EMPTY = new Uint8Array(0);

/** The storage key of submitted shares, from the service identity's private key (an EC key, PEM). */
export function submittedShareStorageKey(serviceIdentityPrivateKeyPem: string): Uint8Array {
  const key = loadPrivateKey(serviceIdentityPrivateKeyPem);
  const jwk = key.export({ format: 'jwk' });
  if (key.asymmetricKeyType !== 'ec' || typeof jwk.d !== 'string') {
    throw new RecoveryError('InvalidEncryptionKey', `the service identity key is ${key.asymmetricKeyType}, not an EC key`);
  }
  const scalar = new Uint8Array(Buffer.from(jwk.d, 'base64url'));
  try {
    return hkdfSha256(scalar, EMPTY, STORAGE_KEY_INFO, AES_GCM_KEY_LENGTH_BYTES);
  } finally {
    scalar.fill(0);
  }
}

function aadFor(memberId: string): Uint8Array {
  return concatBytes([new Uint8Array([STORED_SHARE_VERSION]), utf8.encode(memberId)]);
}

/** Encrypts a member's submitted share for the store; one 12-byte IV drawn from `randomBytes`. */
export function encryptSubmittedShare(storageKey: Uint8Array, memberId: string, share: Uint8Array, randomBytes: RandomBytes): Uint8Array {
  const iv = draw(randomBytes, AES_GCM_IV_LENGTH_BYTES);
  return concatBytes([new Uint8Array([STORED_SHARE_VERSION]), iv, sealAesGcm(storageKey, iv, share, aadFor(memberId))]);
}

/** Inverse of encryptSubmittedShare. */
export function decryptSubmittedShare(storageKey: Uint8Array, memberId: string, stored: Uint8Array): Uint8Array {
  if (stored.byteLength < 1 + AES_GCM_IV_LENGTH_BYTES + AES_GCM_TAG_LENGTH_BYTES || stored[0] !== STORED_SHARE_VERSION) {
    throw new RecoveryError('MalformedStoredShare', `stored share of member ${memberId} is not version ${STORED_SHARE_VERSION} ‖ iv ‖ ciphertext ‖ tag (${stored.byteLength} bytes)`, { memberId });
  }
  const iv = stored.subarray(1, 1 + AES_GCM_IV_LENGTH_BYTES);
  try {
    return new Uint8Array(openAesGcm(storageKey, iv, stored.subarray(1 + AES_GCM_IV_LENGTH_BYTES), aadFor(memberId)));
  } catch (e) {
    if (isCovenantError(e) && e.code === 'DecryptionFailed') {
      throw new RecoveryError('StoredShareDecryptionFailed', `stored share of member ${memberId} does not decrypt (another service key, another member's row, or tampered)`, { memberId });
    }
    throw e;
  }
}
