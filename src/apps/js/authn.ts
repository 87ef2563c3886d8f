/**
 * The authentication policies of application endpoints (app.json `authn_policies`): the first
 * policy of the list that accepts the request names the caller; none accepting is a 401 naming
 * what was tried. An empty list means no authentication.
 */
import { createHash, X509Certificate } from 'node:crypto';
import { CovenantError } from '../../base/errors.js';
import type { Caller } from '../../http/route.js';
import type { AuthnPolicy } from './bundle.js';

export interface AuthnRequest {
  readonly headers: Record<string, unknown>;
  readonly clientCertificateDer: Buffer | undefined;
}

export interface AuthnDeps {
  isUser(id: string): boolean;
  isMember(id: string): boolean;
  /** Validates the bearer token of the request (the service's token validation); throws a 401 otherwise. */
  bearer(request: AuthnRequest): Caller | Promise<Caller>;
}

const certificateIds = new WeakMap<Buffer, string>();

function certificateIdOf(der: Buffer): string {
  let id = certificateIds.get(der);
  if (id === undefined) {
    id = createHash('sha256').update(der).digest('hex');
    certificateIds.set(der, id);
  }
  return id;
}

function pemOf(der: Buffer): string {
  return new X509Certificate(der).toString();
}

function refused(message: string): CovenantError {
  return new CovenantError('InvalidAuthenticationInfo', message, 401);
}

/** One policy: the caller, or the reason it does not accept the request. */
function tryPolicy(policy: AuthnPolicy, request: AuthnRequest, deps: AuthnDeps): Caller | Promise<Caller> | string {
  const der = request.clientCertificateDer && request.clientCertificateDer.length > 0 ? request.clientCertificateDer : undefined;
  switch (policy) {
    case 'no_auth':
      return { kind: 'anonymous', policy };
    case 'user_cert': {
      if (der === undefined) return 'user_cert: no client certificate';
      const id = certificateIdOf(der);
      return deps.isUser(id) ? { kind: 'user', id, policy } : `user_cert: certificate ${id} is not a registered user's`;
    }
    case 'member_cert': {
      if (der === undefined) return 'member_cert: no client certificate';
      const id = certificateIdOf(der);
      return deps.isMember(id) ? { kind: 'member', id, policy } : `member_cert: certificate ${id} is not a registered member's`;
    }
    case 'any_cert':
      if (der === undefined) return 'any_cert: no client certificate';
      return { kind: 'anonymous', id: certificateIdOf(der), policy, cert: pemOf(der) };
    case 'jwt':
      if (typeof request.headers.authorization !== 'string') return 'jwt: no Authorization: Bearer header';
      return deps.bearer(request);
  }
}

export function authenticate(policies: readonly AuthnPolicy[], request: AuthnRequest, deps: AuthnDeps): Caller | Promise<Caller> {
  if (policies.length === 0) return { kind: 'anonymous', policy: 'no_auth' };
  const reasons: string[] = [];
  for (const policy of policies) {
    let outcome: Caller | Promise<Caller> | string;
    try {
      outcome = tryPolicy(policy, request, deps);
    } catch (e) {
      // A token that is present but invalid is the answer (its error says why, with WWW-Authenticate).
      if (policies.length === 1) throw e;
      reasons.push(`${policy}: ${(e as Error).message}`);
      continue;
    }
    if (typeof outcome !== 'string') return outcome instanceof Promise ? outcome.then((c) => ({ ...c, policy })) : outcome;
    reasons.push(outcome);
  }
  throw refused(`no authentication policy of this endpoint accepts the request (${reasons.join('; ')})`);
}
