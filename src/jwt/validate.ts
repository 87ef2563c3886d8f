/**
 * Bearer token validation (spec "Authentication" 4): a compact JWS whose header names an
 * asymmetric alg and the kid of a stored signing key, whose iss is that key's issuer (or allowed
 * by its constraint), whose signature verifies with the key (jose), and whose exp (required) and
 * nbf (optional) bracket the node's clock.
 *
 * No transaction per request: the stored metadata of a kid is read as raw bytes (`lookup`), and
 * the parsed keys are kept per kid for as long as the same bytes are stored. A token that
 * verified is remembered (bounded): until its exp, and as long as its kid's stored bytes are the
 * same, it is accepted again without a second signature check; removing or replacing the key
 * (remove_jwt_issuer, a refresh) makes it unusable at once.
 */
import { decodeJwt, decodeProtectedHeader, errors as joseErrors, jwtVerify, type JWTPayload } from 'jose';
import { signingKeysOf, satisfiesConstraint, TOKEN_ALGORITHMS, type SigningKey } from './keys.js';
import { tokenError, TokenError } from './errors.js';

export interface TokenIdentity {
  readonly issuer: string;
  readonly subject: string | undefined;
  readonly claims: Readonly<Record<string, unknown>>;
}

export interface TokenValidatorOptions {
  /** The stored metadata bytes of a kid (public:svc.gov.jwt.public_signing_keys_metadata_v2), or undefined. */
  readonly lookup: (kid: string) => Uint8Array | undefined;
  /** The node's wall clock, ms since the epoch. */
  readonly nowMs: () => number;
  /** Tokens remembered after their signature verified (default 4096). */
  readonly verifiedTokensMax?: number;
}

/** Longest token looked at; the HTTP layer's header limit (16 KiB) comes first. */
export const TOKEN_BYTES_MAX = 16 * 1024;

/**
 * Deepest nesting of a token's claims (the payload object is depth 1). Issuers' claims nest two or
 * three levels; a signed payload of arrays thousands deep fits in TOKEN_BYTES_MAX, and every later
 * reader of the claims (the forwarded request, the application's answer) would pay for its depth.
 */
export const TOKEN_CLAIMS_DEPTH_MAX = 32;

/** A NumericDate claim as we accept it: an integer count of seconds (not a fraction, not Infinity from 1e400, not a string). */
function checkNumericDate(payload: JWTPayload, claim: 'exp' | 'nbf'): void {
  const value: unknown = payload[claim];
  if (typeof value !== 'number' || !Number.isSafeInteger(value)) {
    const shown = typeof value === 'number' ? String(value) : `a ${typeof value}`;
    throw tokenError('TokenMalformed', `the ${claim} claim must be an integer number of seconds since the epoch, not ${shown}`);
  }
}

/** Refuses claims nested deeper than TOKEN_CLAIMS_DEPTH_MAX; iterative, so any depth is safe to look at. */
function checkClaimsDepth(payload: JWTPayload): void {
  const stack: [unknown, number][] = [[payload, 1]];
  while (stack.length > 0) {
    const [value, depth] = stack.pop()!;
    if (typeof value !== 'object' || value === null) continue;
    if (depth > TOKEN_CLAIMS_DEPTH_MAX) throw tokenError('TokenMalformed', `the token's claims nest deeper than ${TOKEN_CLAIMS_DEPTH_MAX} levels`);
    for (const child of Array.isArray(value) ? value : Object.values(value)) stack.push([child, depth + 1]);
  }
}

const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

interface KeysOfKid {
  readonly raw: Uint8Array;
  readonly keys: readonly SigningKey[];
}

interface VerifiedToken {
  readonly kid: string;
  readonly raw: Uint8Array;
  readonly expMs: number;
  readonly nbfMs: number;
  readonly identity: TokenIdentity;
}

export class TokenValidator {
  private readonly keysByKid = new Map<string, KeysOfKid>();
  private readonly verified = new Map<string, VerifiedToken>();
  private readonly verifiedMax: number;

  constructor(private readonly options: TokenValidatorOptions) {
    this.verifiedMax = options.verifiedTokensMax ?? 4096;
  }

  /**
   * The identity a token proves, or a TokenError (401). Synchronous when the token verified
   * before (the common case), otherwise a promise (jose verifies asynchronously).
   */
  validate(token: string): TokenIdentity | Promise<TokenIdentity> {
    const now = this.options.nowMs();
    const known = this.verified.get(token);
    if (known !== undefined && this.options.lookup(known.kid) === known.raw) {
      this.checkTime(known.expMs, known.nbfMs, now);
      return known.identity;
    }
    return this.verifyFirst(token, now);
  }

  private checkTime(expMs: number, nbfMs: number, now: number): void {
    if (now >= expMs) throw tokenError('TokenExpired', `the token expired at ${new Date(expMs).toISOString()}`);
    if (now < nbfMs) throw tokenError('TokenNotYetValid', `the token is not valid before ${new Date(nbfMs).toISOString()}`);
  }

  private async verifyFirst(token: string, now: number): Promise<TokenIdentity> {
    if (token.length > TOKEN_BYTES_MAX) throw tokenError('TokenMalformed', `the token is longer than ${TOKEN_BYTES_MAX} bytes`);
    if (!COMPACT_JWS.test(token)) throw tokenError('TokenMalformed', 'the token is not a compact JWS (three base64url parts separated by dots)');
    let header: ReturnType<typeof decodeProtectedHeader>;
    let payload: JWTPayload;
    try {
      header = decodeProtectedHeader(token);
      payload = decodeJwt(token);
    } catch (e) {
      throw tokenError('TokenMalformed', `the token cannot be decoded: ${(e as Error).message}`);
    }
    const alg = header.alg;
    if (typeof alg !== 'string' || !TOKEN_ALGORITHMS.has(alg)) {
      throw tokenError('TokenAlgorithmNotAllowed', `alg ${JSON.stringify(alg)} is not allowed (${[...TOKEN_ALGORITHMS].join(', ')})`);
    }
    const kid = header.kid;
    if (typeof kid !== 'string' || kid.length === 0) throw tokenError('TokenMalformed', 'the token header has no kid');
    if (typeof payload.iss !== 'string') throw tokenError('TokenMalformed', 'the token has no iss claim');
    if (payload.exp === undefined) throw tokenError('TokenMalformed', 'the token has no exp claim');
    checkNumericDate(payload, 'exp');
    if (payload.nbf !== undefined) checkNumericDate(payload, 'nbf');
    checkClaimsDepth(payload);
    const keys = this.keysOf(kid);
    if (keys === undefined) throw tokenError('TokenKeyUnknown', `no signing key with kid ${JSON.stringify(kid)} is registered`);
    const iss = payload.iss;
    const candidates = keys.keys.filter((k) => k.issuer === iss || (k.constraint !== undefined && satisfiesConstraint(k.constraint, iss)));
    if (candidates.length === 0) {
      throw tokenError('TokenIssuerInvalid', `the key ${JSON.stringify(kid)} does not sign for issuer ${JSON.stringify(iss)}`);
    }
    let last: TokenError | undefined;
    for (const candidate of candidates) {
      if (!candidate.algorithms.includes(alg)) {
        last = tokenError('TokenAlgorithmNotAllowed', `alg ${alg} does not go with the key ${JSON.stringify(kid)} (${candidate.algorithms.join(', ')})`);
        continue;
      }
      let verified: JWTPayload;
      try {
        ({ payload: verified } = await jwtVerify(token, candidate.key, {
          algorithms: [...candidate.algorithms],
          currentDate: new Date(now),
          requiredClaims: ['exp'],
          clockTolerance: 0,
        }));
      } catch (e) {
        last = mapJoseError(e);
        if (last.code === 'TokenSignatureInvalid' || last.code === 'TokenAlgorithmNotAllowed') continue;
        throw last;
      }
      return this.remember(token, kid, keys.raw, verified);
    }
    throw last ?? tokenError('TokenSignatureInvalid', 'the signature does not verify');
  }

  private remember(token: string, kid: string, raw: Uint8Array, payload: JWTPayload): TokenIdentity {
    const identity: TokenIdentity = { issuer: payload.iss as string, subject: typeof payload.sub === 'string' ? payload.sub : undefined, claims: payload };
    const expMs = (payload.exp as number) * 1000;
    const nbfMs = typeof payload.nbf === 'number' ? payload.nbf * 1000 : Number.NEGATIVE_INFINITY;
    if (this.verified.size >= this.verifiedMax) {
      // Forget the oldest: Map iterates in insertion order.
      const oldest = this.verified.keys().next();
      if (!oldest.done) this.verified.delete(oldest.value);
    }
    this.verified.set(token, { kid, raw, expMs, nbfMs, identity });
    return identity;
  }

  /** The parsed keys of a kid, parsed again only when the stored bytes change. */
  private keysOf(kid: string): KeysOfKid | undefined {
    const raw = this.options.lookup(kid);
    if (raw === undefined) {
      this.keysByKid.delete(kid);
      return undefined;
    }
    const cached = this.keysByKid.get(kid);
    if (cached !== undefined && cached.raw === raw) return cached;
    let keys: SigningKey[];
    try {
      keys = signingKeysOf(raw);
    } catch {
      throw tokenError('TokenKeyUnknown', `the stored key ${JSON.stringify(kid)} cannot be used`);
    }
    const entry = { raw, keys };
    if (this.keysByKid.size >= 1024) this.keysByKid.clear();
    this.keysByKid.set(kid, entry);
    return entry;
  }
}

function mapJoseError(e: unknown): TokenError {
  if (e instanceof joseErrors.JWTExpired) return tokenError('TokenExpired', `the token expired: ${e.message}`);
  if (e instanceof joseErrors.JWTClaimValidationFailed) {
    if (e.claim === 'nbf') return tokenError('TokenNotYetValid', `the token is not valid yet: ${e.message}`);
    return tokenError('TokenMalformed', `claim ${e.claim}: ${e.message}`);
  }
  if (e instanceof joseErrors.JWSSignatureVerificationFailed) return tokenError('TokenSignatureInvalid', 'the signature does not verify with the registered key');
  if (e instanceof joseErrors.JOSEAlgNotAllowed) return tokenError('TokenAlgorithmNotAllowed', e.message);
  if (e instanceof joseErrors.JOSEError) return tokenError('TokenMalformed', e.message);
  if (e instanceof TokenError) return e;
  // Anything else from the verifier (a truncated signature of the wrong length) is a bad signature.
  return tokenError('TokenSignatureInvalid', `the signature does not verify: ${(e as Error).message}`);
}
