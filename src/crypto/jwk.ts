/**
 * The public key of one JSON Web Key (RFC 7517) as governance stores it: from the first
 * certificate of `x5c` (base64 DER), or from the key parameters (`n`/`e` for RSA, `crv`/`x`/`y`
 * for EC). A key carrying private parameters is refused: a key set for token validation must not
 * hold secrets, and the ledger would publish them.
 */
import nodeCrypto, { type KeyObject } from 'node:crypto';
import { cryptoError, CryptoErrorCode } from './errors.js';

export interface JwkPublicKey {
  /** SubjectPublicKeyInfo PEM. */
  readonly publicKeyPem: string;
  /** The certificate the key came from (x5c[0]), PEM; absent for a key given by its parameters. */
  readonly certificatePem?: string;
  readonly keyType: 'RSA' | 'EC';
}

const PRIVATE_PARAMETERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
const EC_CURVES = new Set(['P-256', 'P-384', 'P-521']);
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;
const BASE64URL = /^[A-Za-z0-9_-]+$/;

function invalid(message: string): never {
  throw cryptoError(CryptoErrorCode.InvalidKey, message);
}

/** PEM of one base64 DER certificate (an x5c entry). */
export function certificatePemFromBase64Der(b64: string): string {
  if (!BASE64.test(b64)) invalid('x5c entries are base64 (not base64url) DER certificates');
  return `-----BEGIN CERTIFICATE-----\n${b64.match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
}

function keyTypeOf(key: KeyObject): 'RSA' | 'EC' | undefined {
  if (key.asymmetricKeyType === 'rsa' || key.asymmetricKeyType === 'rsa-pss') return 'RSA';
  if (key.asymmetricKeyType === 'ec') return 'EC';
  return undefined;
}

/** The public key of a JWK (an object with `kty` and `x5c` or the key parameters); throws InvalidKey. */
export function jwkPublicKey(jwk: Record<string, unknown>): JwkPublicKey {
  if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) invalid('a JWK is an object');
  const kty = jwk.kty;
  if (kty !== 'RSA' && kty !== 'EC') invalid(`unsupported kty ${JSON.stringify(kty)} (RSA or EC)`);
  for (const name of PRIVATE_PARAMETERS) {
    if (jwk[name] !== undefined) invalid(`the key holds the private parameter "${name}": publish public keys only`);
  }
  let key: KeyObject;
  let certificatePem: string | undefined;
  if (jwk.x5c !== undefined) {
    if (!Array.isArray(jwk.x5c) || jwk.x5c.length === 0 || typeof jwk.x5c[0] !== 'string') invalid('x5c must be a non-empty array of base64 DER certificates');
    certificatePem = certificatePemFromBase64Der(jwk.x5c[0]);
    try {
      key = new nodeCrypto.X509Certificate(certificatePem).publicKey;
    } catch (e) {
      invalid(`x5c[0] is not a certificate: ${(e as Error).message}`);
    }
  } else {
    const params: Record<string, string> = { kty };
    const names = kty === 'RSA' ? ['n', 'e'] : ['crv', 'x', 'y'];
    for (const name of names) {
      const value = jwk[name];
      if (typeof value !== 'string' || value.length === 0) invalid(`a ${kty} key needs "${name}" (or x5c)`);
      if (name !== 'crv' && !BASE64URL.test(value)) invalid(`"${name}" must be base64url`);
      params[name] = value;
    }
    if (kty === 'EC' && !EC_CURVES.has(params.crv!)) invalid(`unsupported curve ${params.crv} (P-256, P-384, P-521)`);
    try {
      key = nodeCrypto.createPublicKey({ key: params as nodeCrypto.JsonWebKey, format: 'jwk' });
    } catch (e) {
      invalid(`the ${kty} key parameters are not a valid key: ${(e as Error).message}`);
    }
  }
  const actual = keyTypeOf(key);
  if (actual !== kty) invalid(`kty is ${kty} but the key is ${key.asymmetricKeyType ?? 'of an unknown type'}`);
  if (kty === 'RSA' && (key.asymmetricKeyDetails?.modulusLength ?? 0) < 2048) invalid('RSA signing keys need at least 2048 bits');
  const publicKeyPem = key.export({ format: 'pem', type: 'spki' }).toString();
  return certificatePem === undefined ? { publicKeyPem, keyType: kty } : { publicKeyPem, certificatePem, keyType: kty };
}
