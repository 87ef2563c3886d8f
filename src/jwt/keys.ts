/**
 * Token signing keys as governance stores them in public:svc.gov.jwt.public_signing_keys_metadata_v2:
 * kid → a list of metadata, one per issuer that publishes a key with that kid. The same records
 * are written by set_jwt_issuer / set_jwt_public_signing_keys (the constitution) and by the
 * primary's key refresh (metadataFromJwks).
 */
import nodeCrypto, { type KeyObject } from 'node:crypto';
import { jwkPublicKey } from '../crypto/index.js';

export interface KeyMetadata {
  /** SubjectPublicKeyInfo PEM of the key. */
  readonly public_key: string;
  /** The issuer that published the key. */
  readonly issuer: string;
  readonly kty: string;
  /** The certificate the key came from (x5c[0]), PEM. */
  readonly cert?: string;
  /** An issuer the key may also sign for: the JWK's own `issuer` (`{tenantid}` matches one path segment). */
  readonly constraint?: string;
}

/** A stored key ready to verify with. */
export interface SigningKey {
  readonly issuer: string;
  readonly constraint: string | undefined;
  readonly key: KeyObject;
  /** The algorithms this key may verify: RS256-512 and PS256-512 for RSA, the ES algorithm of its curve for EC. */
  readonly algorithms: readonly string[];
}

const RSA_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'];
const EC_ALGORITHMS: Record<string, string> = { prime256v1: 'ES256', secp384r1: 'ES384', secp521r1: 'ES512' };

/** Every algorithm a token may name: asymmetric signatures only (never none, never HS*). */
export const TOKEN_ALGORITHMS: ReadonlySet<string> = new Set([...RSA_ALGORITHMS, ...Object.values(EC_ALGORITHMS)]);

export function algorithmsFor(key: KeyObject): readonly string[] {
  if (key.asymmetricKeyType === 'rsa') return RSA_ALGORITHMS;
  if (key.asymmetricKeyType === 'ec') {
    const alg = EC_ALGORITHMS[key.asymmetricKeyDetails?.namedCurve ?? ''];
    return alg === undefined ? [] : [alg];
  }
  return [];
}

/** The keys of one stored metadata list (the bytes of the table's value). */
export function signingKeysOf(raw: Uint8Array): SigningKey[] {
  const list = JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8')) as KeyMetadata[];
  const out: SigningKey[] = [];
  for (const m of list) {
    const key = nodeCrypto.createPublicKey(m.public_key ?? (m.cert as string));
    out.push({ issuer: m.issuer, constraint: m.constraint, key, algorithms: algorithmsFor(key) });
  }
  return out;
}

/** Whether `iss` satisfies a key's constraint: equal, or equal with `{tenantid}` standing for one path segment. */
export function satisfiesConstraint(constraint: string, iss: string): boolean {
  const at = constraint.indexOf('{tenantid}');
  if (at === -1) return constraint === iss;
  const prefix = constraint.slice(0, at);
  const suffix = constraint.slice(at + '{tenantid}'.length);
  if (!iss.startsWith(prefix) || !iss.endsWith(suffix) || iss.length <= prefix.length + suffix.length) return false;
  const tenant = iss.slice(prefix.length, iss.length - suffix.length);
  return /^[^/?#]+$/.test(tenant);
}

/**
 * The metadata of a JWKS fetched from `issuer`, by kid (what the constitution would store for the
 * same key set). Throws on a key set that does not parse: a refresh then writes nothing.
 */
export function metadataFromJwks(issuer: string, jwks: unknown): Map<string, KeyMetadata> {
  if (typeof jwks !== 'object' || jwks === null || !Array.isArray((jwks as { keys?: unknown }).keys)) {
    throw new Error('the JWKS is not an object with a "keys" array');
  }
  const out = new Map<string, KeyMetadata>();
  for (const [i, key] of ((jwks as { keys: unknown[] }).keys).entries()) {
    if (typeof key !== 'object' || key === null) throw new Error(`keys[${i}] is not an object`);
    const jwk = key as Record<string, unknown>;
    // Encryption keys are not for us (RFC 7517 "use"); keys of other types are skipped as well.
    if (jwk.use !== undefined && jwk.use !== 'sig') continue;
    if (jwk.kty !== 'RSA' && jwk.kty !== 'EC') continue;
    if (typeof jwk.kid !== 'string' || jwk.kid.length === 0) throw new Error(`keys[${i}] has no kid`);
    if (out.has(jwk.kid)) throw new Error(`kid ${jwk.kid} appears twice`);
    // Before parsing more: a set of thousands of keys would cost the primary's thread for nothing.
    if (out.size === JWT_ISSUER_KEYS_MAX) throw new Error(`the key set has more than the ${JWT_ISSUER_KEYS_MAX} keys an issuer may have`);
    if (jwk.issuer !== undefined && (typeof jwk.issuer !== 'string' || jwk.issuer.length === 0)) throw new Error(`keys[${i}].issuer must be a non-empty string`);
    let parsed;
    try {
      parsed = jwkPublicKey(jwk);
    } catch (e) {
      throw new Error(`keys[${i}] (kid ${jwk.kid}): ${(e as Error).message}`);
    }
    const metadata: { public_key: string; issuer: string; kty: string; cert?: string; constraint?: string } = { public_key: parsed.publicKeyPem, issuer, kty: jwk.kty };
    if (parsed.certificatePem !== undefined) metadata.cert = parsed.certificatePem;
    if (typeof jwk.issuer === 'string') metadata.constraint = jwk.issuer;
    out.set(jwk.kid, metadata);
  }
  return out;
}

/**
 * Most signing keys one issuer may have stored (the provider's key set, or a JWKS given to
 * set_jwt_issuer / set_jwt_public_signing_keys). Providers publish a handful (the current key and
 * the next, a few per tenant). The bound keeps every governance action over an issuer's keys within
 * the member JavaScript budget of a request (300 ms, host calls included): each key is parsed once
 * by the request (tens of microseconds on an idle core, ten times more on a loaded one).
 */
export const JWT_ISSUER_KEYS_MAX = 64;

/**
 * Most bytes of one issuer's stored key metadata (its entries' JSON, kids included): 64 RSA-4096
 * keys with their certificates take about a third of it; more would be a refresh or a proposal
 * writing megabytes.
 */
export const JWT_ISSUER_KEYS_STORED_BYTES_MAX = 512 * 1024;

/** Throws (with the reason) when one issuer's keys pass JWT_ISSUER_KEYS_MAX or JWT_ISSUER_KEYS_STORED_BYTES_MAX. */
export function checkIssuerKeyBounds(keys: ReadonlyMap<string, KeyMetadata>): void {
  if (keys.size > JWT_ISSUER_KEYS_MAX) {
    throw new Error(`the key set has ${keys.size} keys, more than the ${JWT_ISSUER_KEYS_MAX} an issuer may have`);
  }
  let bytes = 0;
  for (const [kid, metadata] of keys) bytes += Buffer.byteLength(kid) + Buffer.byteLength(JSON.stringify(metadata));
  if (bytes > JWT_ISSUER_KEYS_STORED_BYTES_MAX) {
    throw new Error(`the key set would store ${bytes} bytes, more than the ${JWT_ISSUER_KEYS_STORED_BYTES_MAX} an issuer may have`);
  }
}

/** Whether two metadata records describe the same key for the same issuer. */
export function sameMetadata(a: KeyMetadata, b: KeyMetadata): boolean {
  return a.public_key === b.public_key && a.issuer === b.issuer && a.kty === b.kty && a.cert === b.cert && a.constraint === b.constraint;
}
