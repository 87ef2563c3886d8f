/**
 * The joining node's side of POST /node/join over HTTPS. The target is verified against the
 * service certificate only, and its certificate must name the host of target_rpc_address (Node's
 * standard server identity check against the SANs) — spec "Authentication" 3. The joiner presents
 * its self-signed identity certificate, proving it holds the key it asks to be recorded with.
 */
import https from 'node:https';

export interface JoinClientIdentity {
  readonly serviceCertificatePem: string;
  readonly certificatePem: string;
  readonly privateKeyPem: string;
}

export function createJoinClient(identity: () => JoinClientIdentity, timeoutMs = 10_000) {
  return {
    postJoin(targetAddress: string, request: unknown): Promise<{ status: number; body: unknown; location?: string }> {
      const i = targetAddress.lastIndexOf(':');
      let host = targetAddress.slice(0, i);
      if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
      const port = Number(targetAddress.slice(i + 1));
      const payload = Buffer.from(JSON.stringify(request));
      const id = identity();
      return new Promise((resolve, reject) => {
        const req = https.request(
          {
            host,
            port,
            method: 'POST',
            path: '/node/join',
            ca: id.serviceCertificatePem,
            cert: id.certificatePem,
            key: id.privateKeyPem,
            headers: { 'content-type': 'application/json', 'content-length': payload.length },
            timeout: timeoutMs,
            agent: false,
          },
          (res) => {
            const chunks: Buffer[] = [];
            res.on('data', (c: Buffer) => chunks.push(c));
            res.on('end', () => {
              const text = Buffer.concat(chunks).toString('utf8');
              let body: unknown;
              try {
                body = text ? JSON.parse(text) : undefined;
              } catch {
                body = text;
              }
              const location = typeof res.headers.location === 'string' ? res.headers.location : undefined;
              resolve({ status: res.statusCode ?? 0, body, ...(location ? { location } : {}) });
            });
            res.on('error', reject);
          },
        );
        req.on('error', reject);
        req.on('timeout', () => req.destroy(new Error(`join request to ${targetAddress} timed out`)));
        req.end(payload);
      });
    },
  };
}
