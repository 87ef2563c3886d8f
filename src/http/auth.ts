/**
 * Caller authentication for the app and governance frontends. A user TLS client certificate is
 * recognised by the SHA-256 of its DER (the user id) among the certificates registered in the
 * store; a bearer token (`Authorization: Bearer <JWT>`, policy user_cert_or_jwt) is validated by
 * src/jwt against the signing keys governance registered (docs/tokens.md).
 */
import { createHash } from 'node:crypto';
import { CovenantError } from '../base/errors.js';
import { tokenError, type TokenIdentity } from '../jwt/index.js';
import type { AuthPolicy, Caller } from './route.js';
import type { Authenticator } from './server.js';

export interface IdentityLookup {
  isUser(id: string): boolean;
}

/** Validates bearer tokens (src/jwt TokenValidator). */
export interface TokenCheck {
  validate(token: string): TokenIdentity | Promise<TokenIdentity>;
}

const certificateIds = new WeakMap<Buffer, string>();

/** The caller a valid token makes: its subject as id, its claims (iss among them) as they came. */
export function tokenCaller(identity: TokenIdentity): Caller {
  return identity.subject === undefined ? { kind: 'jwt', claims: identity.claims } : { kind: 'jwt', id: identity.subject, claims: identity.claims };
}

export class StoreAuthenticator implements Authenticator {
  constructor(
    private readonly lookup: IdentityLookup,
    private readonly tokens?: TokenCheck,
  ) {}

  authenticate(policy: AuthPolicy, request: { headers: Record<string, unknown>; clientCertificateDer: Buffer | undefined }): Caller | Promise<Caller> {
    if (policy === 'none') return { kind: 'anonymous' };
    if (policy === 'user_cert' || policy === 'user_cert_or_jwt') {
      const der = request.clientCertificateDer;
      if (der && der.length > 0) {
        // The DER buffer is the same object for every request of a TLS session: hash it once.
        let id = certificateIds.get(der);
        if (id === undefined) {
          id = createHash('sha256').update(der).digest('hex');
          certificateIds.set(der, id);
        }
        if (this.lookup.isUser(id)) return { kind: 'user', id };
        throw new CovenantError('InvalidAuthenticationInfo', `Could not find matching user certificate (id ${id})`, 401);
      }
      const authorization = request.headers.authorization;
      if (policy === 'user_cert_or_jwt' && typeof authorization === 'string') return this.bearer(authorization);
      throw new CovenantError('InvalidAuthenticationInfo', 'This endpoint requires a user TLS client certificate (or a bearer token)', 401);
    }
    throw new CovenantError('InvalidAuthenticationInfo', `Authentication policy ${policy} is not available on this endpoint`, 401);
  }

  private bearer(authorization: string): Caller | Promise<Caller> {
    const match = /^Bearer +(\S+) *$/i.exec(authorization);
    if (match === null) throw tokenError('TokenMalformed', 'the Authorization header is not "Bearer <token>"');
    if (this.tokens === undefined) {
      throw new CovenantError('InvalidAuthenticationInfo', 'Bearer token authentication is not available on this interface', 401);
    }
    const identity = this.tokens.validate(match[1]!);
    return identity instanceof Promise ? identity.then(tokenCaller) : tokenCaller(identity);
  }
}
