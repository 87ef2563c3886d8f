/**
 * The joining node's side of POST /node/join over HTTPS. The target is verified against the
 * service certificate only, and its certificate must name the host of target_rpc_address (Node's
 * standard server identity check against the SANs) — spec "Authentication" 3. The joiner presents
 * its self-signed identity certificate, proving it holds the key it asks to be recorded with.
 */
import { HttpsClient } from './https-client.js';

export interface JoinClientIdentity {
  readonly serviceCertificatePem: string;
  readonly certificatePem: string;
  readonly privateKeyPem: string;
}

export function createJoinClient(identity: () => JoinClientIdentity, timeoutMs = 10_000) {
  return {
    async postJoin(targetAddress: string, request: unknown): Promise<{ status: number; body: unknown; location?: string; retryAfterMs?: number }> {
      const id = identity();
      const client = new HttpsClient(targetAddress, id.serviceCertificatePem);
      try {
        const answer = await client.request('POST', '/node/join', {
          body: request,
          identity: { certificatePem: id.certificatePem, privateKeyPem: id.privateKeyPem },
          timeoutMs,
        });
        const location = typeof answer.headers.location === 'string' ? answer.headers.location : undefined;
        // Retry-After in seconds (a refusal by rate or capacity); an HTTP date is not sent by Covenant.
        const retryAfterSeconds = Number(answer.headers['retry-after']);
        const retryAfter = Number.isFinite(retryAfterSeconds) && retryAfterSeconds > 0 ? { retryAfterMs: retryAfterSeconds * 1000 } : {};
        return { status: answer.status, body: answer.body ?? answer.text, ...(location ? { location } : {}), ...retryAfter };
      } finally {
        client.close();
      }
    },
  };
}
