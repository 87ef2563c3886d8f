/**
 * The one HTTPS client of the CLI, the join protocol, tests and benchmarks: keep-alive agents per
 * client identity, the service certificate as the only CA (and Node's standard check that the
 * server certificate names the host), an optional client certificate, JSON in and out.
 */
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';

export interface ClientIdentity {
  readonly certificatePem: string;
  readonly privateKeyPem: string;
}

export interface HttpAnswer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly text: string;
  /** The raw body (for answers that are not JSON, such as COSE receipts). */
  readonly bytes: Buffer;
  readonly body: any;
}

export interface RequestOptions {
  readonly body?: unknown;
  readonly rawBody?: Buffer | string;
  readonly headers?: Record<string, string>;
  readonly identity?: ClientIdentity;
  readonly timeoutMs?: number;
}

export class HttpsClient {
  private readonly agents = new Map<string, https.Agent>();

  constructor(
    readonly address: string,
    private readonly caPem: string,
  ) {}

  private agent(identity: ClientIdentity | undefined): https.Agent {
    const key = identity?.certificatePem ?? '';
    let agent = this.agents.get(key);
    if (!agent) {
      agent = new https.Agent({
        keepAlive: true,
        ca: this.caPem,
        ...(identity ? { cert: identity.certificatePem, key: identity.privateKeyPem } : {}),
      });
      this.agents.set(key, agent);
    }
    return agent;
  }

  request(method: string, path: string, options: RequestOptions = {}): Promise<HttpAnswer> {
    const i = this.address.lastIndexOf(':');
    const host = this.address.slice(0, i).replace(/^\[|\]$/g, '');
    const payload =
      options.rawBody !== undefined ? Buffer.from(options.rawBody) : options.body !== undefined ? Buffer.from(JSON.stringify(options.body)) : undefined;
    const headers: Record<string, string | number> = { ...(options.headers ?? {}) };
    if (payload !== undefined) {
      headers['content-length'] = payload.length;
      if (!Object.keys(headers).some((h) => h.toLowerCase() === 'content-type')) headers['content-type'] = 'application/json';
    }
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host,
          port: Number(this.address.slice(i + 1)),
          method,
          path,
          headers,
          agent: this.agent(options.identity),
          timeout: options.timeoutMs ?? 10_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const bytes = Buffer.concat(chunks);
            const text = bytes.toString('utf8');
            let body: unknown = undefined;
            if (text.length > 0) {
              try {
                body = JSON.parse(text);
              } catch {
                body = undefined;
              }
            }
            resolve({ status: res.statusCode ?? 0, headers: res.headers, text, bytes, body });
          });
          res.on('error', reject);
        },
      );
      req.on('error', reject);
      req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
      req.end(payload);
    });
  }

  close(): void {
    for (const agent of this.agents.values()) agent.destroy();
    this.agents.clear();
  }
}
