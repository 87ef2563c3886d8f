/**
 * Caller authentication for the app and governance frontends. A user TLS client certificate is
 * recognised by the SHA-256 of its DER (the user id) among the certificates registered in the
 * store; bearer JWTs come with the JWT capability.
 */
import { createHash } from 'node:crypto';
import { CovenantError } from '../base/errors.js';
import type { AuthPolicy, Caller } from './route.js';
import type { Authenticator } from './server.js';

export interface IdentityLookup {
  isUser(id: string): boolean;
}

const certificateIds = new WeakMap<Buffer, string>();

export class StoreAuthenticator implements Authenticator {
  constructor(private readonly lookup: IdentityLookup) {}

  authenticate(policy: AuthPolicy, request: { headers: Record<string, unknown>; clientCertificateDer: Buffer | undefined }): Caller {
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
      if (policy === 'user_cert_or_jwt' && typeof request.headers.authorization === 'string') {
        throw new CovenantError('InvalidAuthenticationInfo', 'Bearer token authentication is not configured: no token issuer is registered', 401);
      }
      throw new CovenantError('InvalidAuthenticationInfo', 'This endpoint requires a user TLS client certificate (or a bearer token)', 401);
    }
    throw new CovenantError('InvalidAuthenticationInfo', `Authentication policy ${policy} is not available on this endpoint`, 401);
  }
}
