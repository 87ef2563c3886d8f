/**
 * Why a bearer token is refused. Every refusal is 401 with one of these codes, and the HTTP layer
 * adds `WWW-Authenticate: Bearer ... error="invalid_token"` (RFC 6750, 3.1). test/jwt/validate.test.ts
 * lists them.
 */
import { CovenantError } from '../base/errors.js';

export const TOKEN_ERROR_CODES = [
  /** Not a compact JWS with a JSON header and payload, a required claim missing (exp) or of the wrong type. */
  'TokenMalformed',
  /** The header's alg is not an asymmetric signature algorithm the key can verify (none, HS*, ...). */
  'TokenAlgorithmNotAllowed',
  /** No signing key of a registered issuer has the header's kid. */
  'TokenKeyUnknown',
  /** iss is neither the issuer of the key nor allowed by the key's constraint. */
  'TokenIssuerInvalid',
  /** The signature does not verify with the key. */
  'TokenSignatureInvalid',
  /** exp is at or before the node's clock. */
  'TokenExpired',
  /** nbf is after the node's clock. */
  'TokenNotYetValid',
] as const;

export type TokenErrorCode = (typeof TOKEN_ERROR_CODES)[number];

export class TokenError extends CovenantError {
  declare readonly code: TokenErrorCode;
  constructor(code: TokenErrorCode, message: string) {
    super(code, message, 401);
    this.name = 'TokenError';
  }
}

export function tokenError(code: TokenErrorCode, message: string): TokenError {
  return new TokenError(code, message);
}

export function isTokenError(e: unknown): e is TokenError {
  return e instanceof TokenError;
}
