/**
 * The constitution's token key work done by the host (svc.jwt, docs/tokens.md): checking a JWKS
 * given to set_jwt_issuer / set_jwt_public_signing_keys, and replacing or removing an issuer's keys
 * in public:svc.gov.jwt.public_signing_keys_metadata_v2. In member JavaScript each of these cost a
 * host call per key (and the duplicate check a scan per key), which an issuer of a few thousand
 * keys pushed past the 300 ms budget of a request: such an issuer could no longer be removed. Here
 * they cost one call, and a JWKS is bounded (JWT_ISSUER_KEYS_MAX keys,
 * JWT_ISSUER_KEYS_STORED_BYTES_MAX stored bytes) as the primary's refresh bounds a fetched one.
 */
import nodeCrypto from 'node:crypto';
import { certificatePemFromBase64Der, jwkPublicKey } from '../crypto/index.js';
import { checkIssuerKeyBounds, JWT_ISSUER_KEYS_MAX, keyTableChanges, type KeyMetadata } from '../jwt/index.js';

/** One declared table as the constitution's apply sees it (its staged writes included). */
export interface StagedTable<V> {
  entriesMentioning(text: string): Map<string, V>;
  get(key: string): V | undefined;
  put(key: string, value: V): void;
  stageRemoval(key: string): void;
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return `a ${typeof value}`;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function nonEmptyString(value: unknown, where: string): string {
  if (typeof value !== 'string' || value.length === 0) throw new Error(`"${where}" must be a non-empty string`);
  return value;
}

/**
 * The metadata governance stores for `jwks` as the keys of `issuer`, by kid; throws the reason a
 * member sees (named after the argument `name`) when the set is not one to store.
 */
export function governanceJwksMetadata(issuer: string, jwks: unknown, name: string): Map<string, KeyMetadata> {
  if (!isObject(jwks)) throw new Error(`"${name}" must be an object, not ${describe(jwks)}`);
  const keys = jwks.keys;
  if (!Array.isArray(keys) || keys.length === 0) throw new Error(`"${name}.keys" must be a non-empty array`);
  // Before parsing any: each key costs a parse on the request's thread.
  if (keys.length > JWT_ISSUER_KEYS_MAX) throw new Error(`"${name}.keys" has ${keys.length} keys, more than the ${JWT_ISSUER_KEYS_MAX} an issuer may have`);
  const out = new Map<string, KeyMetadata>();
  keys.forEach((key: unknown, i) => {
    const where = `${name}.keys[${i}]`;
    if (!isObject(key)) throw new Error(`"${where}" must be an object, not ${describe(key)}`);
    const kty = nonEmptyString(key.kty, `${where}.kty`);
    const kid = nonEmptyString(key.kid, `${where}.kid`);
    if (out.has(kid)) throw new Error(`"${where}.kid": kid ${kid} appears twice`);
    if (key.issuer !== undefined) nonEmptyString(key.issuer, `${where}.issuer`);
    if (key.x5c !== undefined) checkX5c(key.x5c, `${where}.x5c`);
    let parsed;
    try {
      parsed = jwkPublicKey(key);
    } catch (e) {
      throw new Error(`"${where}": ${(e as Error).message}`);
    }
    const metadata: { public_key: string; issuer: string; kty: string; cert?: string; constraint?: string } = { public_key: parsed.publicKeyPem, issuer, kty };
    if (parsed.certificatePem !== undefined) metadata.cert = parsed.certificatePem;
    if (typeof key.issuer === 'string') metadata.constraint = key.issuer;
    out.set(kid, metadata);
  });
  try {
    checkIssuerKeyBounds(out);
  } catch (e) {
    throw new Error(`"${name}": ${(e as Error).message}`);
  }
  return out;
}

/** Every entry of an x5c is a base64 DER certificate (the key is the first one's). */
function checkX5c(x5c: unknown, where: string): void {
  if (!Array.isArray(x5c) || x5c.length === 0) throw new Error(`"${where}" must be a non-empty array of base64 certificates`);
  x5c.forEach((entry: unknown, j) => {
    const b64 = nonEmptyString(entry, `${where}[${j}]`);
    try {
      new nodeCrypto.X509Certificate(certificatePemFromBase64Der(b64));
    } catch (e) {
      throw new Error(`"${where}[${j}]": invalid certificate: ${(e as Error).message}`);
    }
  });
}

/**
 * Makes `fresh` the issuer's keys (an empty map removes them all); other issuers' entries under the
 * same kids are kept. Writes only the kids that change.
 */
export function replaceIssuerKeys(signingKeys: StagedTable<KeyMetadata[]>, issuer: string, fresh: ReadonlyMap<string, KeyMetadata>): void {
  // Every entry listing the issuer holds its name as a JSON string; the fresh kids' entries are
  // needed too (another issuer's entry under the same kid is kept beside ours).
  const current = signingKeys.entriesMentioning(JSON.stringify(issuer));
  for (const kid of fresh.keys()) {
    if (current.has(kid)) continue;
    const list = signingKeys.get(kid);
    if (list !== undefined) current.set(kid, list);
  }
  for (const [kid, list] of keyTableChanges(current, issuer, fresh)) {
    if (list === null) signingKeys.stageRemoval(kid);
    else signingKeys.put(kid, list);
  }
}
