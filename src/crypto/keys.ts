/**
 * Asymmetric keys: EC identity keys (nodes, members, users, the service) and RSA encryption keys
 * (members' recovery-share keys). Keys are node:crypto KeyObjects; PEM text is parsed once and
 * cached, because the same few keys are used for every signature.
 */
import nodeCrypto, { type KeyObject } from 'node:crypto';
import { toHex } from '../base/index.js';
import { cryptoError, CryptoErrorCode } from './errors.js';
import { sha256 } from './digest.js';

export type EcCurve = 'P-384' | 'P-256';
export type SignatureEncoding = 'der' | 'ieee-p1363';

export interface KeyPair {
  readonly privateKey: KeyObject;
  readonly publicKey: KeyObject;
  /** PKCS#8 PEM. */
  readonly privateKeyPem: string;
  /** SubjectPublicKeyInfo PEM. */
  readonly publicKeyPem: string;
}

const NODE_CURVE_NAMES: Record<EcCurve, string> = { 'P-384': 'secp384r1', 'P-256': 'prime256v1' };

function keyPairFromObjects(privateKey: KeyObject, publicKey: KeyObject): KeyPair {
  return {
    privateKey,
    publicKey,
    privateKeyPem: privateKey.export({ format: 'pem', type: 'pkcs8' }).toString(),
    publicKeyPem: publicKey.export({ format: 'pem', type: 'spki' }).toString(),
  };
}

export function generateEcKeyPair(curve: EcCurve = 'P-384'): KeyPair {
  const { privateKey, publicKey } = nodeCrypto.generateKeyPairSync('ec', { namedCurve: NODE_CURVE_NAMES[curve] });
  return keyPairFromObjects(privateKey, publicKey);
}

/** RSA keys for RSA-OAEP-SHA256 wrapping (members' encryption keys for recovery shares). */
export function generateRsaKeyPair(bits = 2048): KeyPair {
  if (!Number.isInteger(bits) || bits < 2048 || bits > 8192) {
    throw cryptoError(CryptoErrorCode.InvalidKey, `RSA key size must be an integer in [2048, 8192], got ${bits}`);
  }
  const { privateKey, publicKey } = nodeCrypto.generateKeyPairSync('rsa', { modulusLength: bits, publicExponent: 0x10001 });
  return keyPairFromObjects(privateKey, publicKey);
}

// PEM → KeyObject caches. Bounded: entries are evicted oldest-first past the limit.
const KEY_CACHE_ENTRIES_MAX = 1024;
const privateKeyCache = new Map<string, KeyObject>();
const publicKeyCache = new Map<string, KeyObject>();

function cached(cache: Map<string, KeyObject>, pem: string, load: () => KeyObject): KeyObject {
  const hit = cache.get(pem);
  if (hit !== undefined) return hit;
  const key = load();
  if (cache.size >= KEY_CACHE_ENTRIES_MAX) cache.delete(cache.keys().next().value as string);
  cache.set(pem, key);
  return key;
}

/** Loads a private key from PEM (PKCS#8, SEC1 or PKCS#1). */
export function loadPrivateKey(pem: string): KeyObject {
  return cached(privateKeyCache, pem, () => {
    try {
      return nodeCrypto.createPrivateKey({ key: pem, format: 'pem' });
    } catch (e) {
      throw cryptoError(CryptoErrorCode.InvalidKey, `not a private key PEM: ${(e as Error).message}`);
    }
  });
}

/** Loads a public key from PEM: SubjectPublicKeyInfo, a certificate (its key), or a private key (its public half). */
export function loadPublicKey(pem: string): KeyObject {
  return cached(publicKeyCache, pem, () => {
    try {
      return nodeCrypto.createPublicKey({ key: pem, format: 'pem' });
    } catch (e) {
      throw cryptoError(CryptoErrorCode.InvalidKey, `not a public key or certificate PEM: ${(e as Error).message}`);
    }
  });
}

function asPublicKey(key: KeyObject | string): KeyObject {
  if (typeof key === 'string') return loadPublicKey(key);
  return key.type === 'private' ? nodeCrypto.createPublicKey(key) : key;
}

/** DER SubjectPublicKeyInfo of a public key (or of the public half of a private key, or of a PEM). */
export function publicKeyDer(key: KeyObject | string): Uint8Array {
  const der = asPublicKey(key).export({ format: 'der', type: 'spki' });
  return new Uint8Array(der.buffer, der.byteOffset, der.byteLength);
}

export function publicKeyPem(key: KeyObject | string): string {
  return asPublicKey(key).export({ format: 'pem', type: 'spki' }).toString();
}

/** Node id: lower-case hex SHA-256 of the DER SubjectPublicKeyInfo of the node's identity key. */
export function nodeIdFromPublicKey(key: KeyObject | string): string {
  return toHex(sha256(publicKeyDer(key)));
}

/** The curve of an EC key, or an InvalidKey error for any other key. */
export function ecCurveOf(key: KeyObject): EcCurve {
  const curve = key.asymmetricKeyType === 'ec' ? key.asymmetricKeyDetails?.namedCurve : undefined;
  if (curve === 'secp384r1') return 'P-384';
  if (curve === 'prime256v1') return 'P-256';
  throw cryptoError(CryptoErrorCode.InvalidKey, `expected an EC P-384 or P-256 key, got ${key.asymmetricKeyType ?? 'unknown'} ${curve ?? ''}`.trim());
}

/** The hash that goes with each curve: SHA-384 for P-384, SHA-256 for P-256. */
export function hashForCurve(curve: EcCurve): 'sha384' | 'sha256' {
  return curve === 'P-384' ? 'sha384' : 'sha256';
}

export function signEcdsa(privateKey: KeyObject, data: Uint8Array, encoding: SignatureEncoding = 'der'): Uint8Array {
  const signature = nodeCrypto.sign(hashForCurve(ecCurveOf(privateKey)), data, { key: privateKey, dsaEncoding: encoding });
  return new Uint8Array(signature.buffer, signature.byteOffset, signature.byteLength);
}

/** False for a wrong or malformed signature; throws only for an unusable key. */
export function verifyEcdsa(publicKey: KeyObject | string, data: Uint8Array, signature: Uint8Array, encoding: SignatureEncoding = 'der'): boolean {
  const key = asPublicKey(publicKey);
  const hash = hashForCurve(ecCurveOf(key));
  return nodeCrypto.verify(hash, data, { key, dsaEncoding: encoding }, signature);
}

/**
 * verifyEcdsa on libuv's thread pool: `done` runs later from the event loop (never within the
 * call) with the outcome, or with the Error of an unusable key.
 */
export function verifyEcdsaLater(
  publicKey: KeyObject | string,
  data: Uint8Array,
  signature: Uint8Array,
  encoding: SignatureEncoding,
  done: (outcome: boolean | Error) => void,
): void {
  try {
    const key = asPublicKey(publicKey);
    nodeCrypto.verify(hashForCurve(ecCurveOf(key)), data, { key, dsaEncoding: encoding }, signature, (e, ok) => done(e ?? ok));
  } catch (e) {
    queueMicrotask(() => done(e as Error));
  }
}

/**
 * verifyEcdsaLater as a promise: a caller with many signatures to check (a recovery reading a
 * ledger) goes on with its work while they are checked. Rejects only for an unusable key.
 */
export function verifyEcdsaAsync(publicKey: KeyObject | string, data: Uint8Array, signature: Uint8Array, encoding: SignatureEncoding = 'der'): Promise<boolean> {
  return new Promise((resolve, reject) => verifyEcdsaLater(publicKey, data, signature, encoding, (outcome) => (outcome instanceof Error ? reject(outcome) : resolve(outcome))));
}

/** RSA-OAEP with SHA-256 (for both the OAEP hash and MGF1), as used for recovery shares. */
export function wrapRsaOaep(publicKey: KeyObject | string, plaintext: Uint8Array): Uint8Array {
  const out = nodeCrypto.publicEncrypt({ key: asPublicKey(publicKey), padding: nodeCrypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, plaintext);
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

export function unwrapRsaOaep(privateKey: KeyObject | string, ciphertext: Uint8Array): Uint8Array {
  const key = typeof privateKey === 'string' ? loadPrivateKey(privateKey) : privateKey;
  try {
    const out = nodeCrypto.privateDecrypt({ key, padding: nodeCrypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, ciphertext);
    return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
  } catch (e) {
    throw cryptoError(CryptoErrorCode.DecryptionFailed, `RSA-OAEP unwrap failed: ${(e as Error).message}`);
  }
}
