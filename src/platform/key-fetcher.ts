/**
 * Fetches token issuers' OpenID discovery documents and key sets for the primary's key refresh
 * (docs/tokens.md): undici, one agent per issuer whose TLS trusts only that issuer's CA bundle, no
 * redirects, and each response bounded: a declared length over the limit is refused before the
 * body, and a body that grows beyond it is cut (the connection closed) at the limit.
 */
import { Agent, request } from 'undici';

export interface JsonFetchRequest {
  readonly issuer: string;
  readonly url: string;
  readonly caBundlePem: string;
  readonly maxBytes: number;
}

const TIMEOUT_MS = 10_000;

export class CaPinnedJsonFetcher {
  private readonly agents = new Map<string, { caBundlePem: string; agent: Agent }>();

  private agentFor(issuer: string, caBundlePem: string): Agent {
    const known = this.agents.get(issuer);
    if (known !== undefined && known.caBundlePem === caBundlePem) return known.agent;
    if (known !== undefined) void known.agent.close();
    const agent = new Agent({
      connect: { ca: caBundlePem, rejectUnauthorized: true, timeout: TIMEOUT_MS },
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
      connections: 2,
    });
    this.agents.set(issuer, { caBundlePem, agent });
    return agent;
  }

  async getJson(req: JsonFetchRequest): Promise<unknown> {
    const url = new URL(req.url);
    if (url.protocol !== 'https:') throw new Error(`${req.url} is not an https URL`);
    const response = await request(url, {
      method: 'GET',
      dispatcher: this.agentFor(req.issuer, req.caBundlePem),
      headers: { accept: 'application/json' },
    });
    const body = response.body;
    if (response.statusCode !== 200) {
      body.destroy();
      throw new Error(`GET ${req.url} answered ${response.statusCode}`);
    }
    const declared = Number(response.headers['content-length']);
    if (Number.isFinite(declared) && declared > req.maxBytes) {
      body.destroy();
      throw new Error(`GET ${req.url}: the response (${declared} bytes) is larger than ${req.maxBytes} bytes (jwt.key_refresh_max_response_size)`);
    }
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of body) {
      total += (chunk as Buffer).length;
      if (total > req.maxBytes) {
        body.destroy();
        throw new Error(`GET ${req.url}: the response is larger than ${req.maxBytes} bytes (jwt.key_refresh_max_response_size)`);
      }
      chunks.push(chunk as Buffer);
    }
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown;
    } catch (e) {
      throw new Error(`GET ${req.url}: the response is not JSON: ${(e as Error).message}`);
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.agents.values()].map((a) => a.agent.close()));
    this.agents.clear();
  }
}
