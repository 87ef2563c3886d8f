/**
 * Fetches token issuers' OpenID discovery documents and key sets for the primary's key refresh
 * (docs/tokens.md): undici, one agent per issuer whose TLS trusts only that issuer's CA bundle, no
 * redirects, and each response bounded: a declared length over the limit is refused before the
 * body, a body that grows beyond it is cut (the connection closed) at the limit, and the caller's
 * signal (the issuer's total deadline) aborts the request wherever it is, a trickling body too.
 *
 * An issuer's server is not trusted to behave: every way its answer can fail (a redirect or an
 * error status with or without a body, a reset, a body cut short, an abort) ends as a rejection of
 * getJson, never as an error event that nobody listens to. A response body is therefore read or
 * dropped only with an 'error' listener attached: undici turns a bare `destroy()` of a body into an
 * abort error (UND_ERR_ABORTED) emitted on it, which would otherwise end the process.
 */
import { Agent, request } from 'undici';
import type { Readable } from 'node:stream';

export interface JsonFetchRequest {
  readonly issuer: string;
  readonly url: string;
  readonly caBundlePem: string;
  readonly maxBytes: number;
  /** Aborts the request, the body included (the issuer's deadline); its reason is the rejection. */
  readonly signal?: AbortSignal;
}

/** Connect, first-byte and idle limits of one request; the caller's signal bounds the total. */
const TIMEOUT_MS = 10_000;
/** Agents (connection pools) kept, one per issuer: more than a service registers, fewer than a leak. */
const AGENTS_MAX = 256;

export class CaPinnedJsonFetcher {
  private readonly agents = new Map<string, { caBundlePem: string; agent: Agent }>();

  private agentFor(issuer: string, caBundlePem: string): Agent {
    const known = this.agents.get(issuer);
    if (known !== undefined && known.caBundlePem === caBundlePem) {
      // Most recently used last.
      this.agents.delete(issuer);
      this.agents.set(issuer, known);
      return known.agent;
    }
    if (known !== undefined) closeQuietly(known.agent);
    const agent = new Agent({
      connect: { ca: caBundlePem, rejectUnauthorized: true, timeout: TIMEOUT_MS },
      headersTimeout: TIMEOUT_MS,
      bodyTimeout: TIMEOUT_MS,
      connections: 2,
    });
    this.agents.delete(issuer);
    this.agents.set(issuer, { caBundlePem, agent });
    // Issuers come and go by governance: the agent unused the longest is closed beyond the bound.
    if (this.agents.size > AGENTS_MAX) {
      const [oldest, entry] = this.agents.entries().next().value as [string, { agent: Agent }];
      this.agents.delete(oldest);
      closeQuietly(entry.agent);
    }
    return agent;
  }

  async getJson(req: JsonFetchRequest): Promise<unknown> {
    const url = new URL(req.url);
    if (url.protocol !== 'https:') throw new Error(`${req.url} is not an https URL`);
    req.signal?.throwIfAborted();
    const response = await request(url, {
      method: 'GET',
      dispatcher: this.agentFor(req.issuer, req.caBundlePem),
      headers: { accept: 'application/json' },
      ...(req.signal !== undefined ? { signal: req.signal } : {}),
    });
    const body = response.body;
    if (response.statusCode !== 200) {
      const location = response.headers['location'];
      const where = typeof location === 'string' ? ` (to ${location.slice(0, 200)}; redirects are not followed)` : '';
      const failure = new Error(`GET ${req.url} answered ${response.statusCode}${where}`);
      discard(body, failure);
      throw failure;
    }
    const declared = Number(response.headers['content-length']);
    if (Number.isFinite(declared) && declared > req.maxBytes) {
      const failure = tooLarge(req, ` (${declared} bytes)`);
      discard(body, failure);
      throw failure;
    }
    const bytes = await readBounded(body, req);
    try {
      return JSON.parse(bytes.toString('utf8')) as unknown;
    } catch (e) {
      throw new Error(`GET ${req.url}: the response is not JSON: ${(e as Error).message}`);
    }
  }

  async close(): Promise<void> {
    await Promise.all([...this.agents.values()].map((a) => a.agent.close()));
    this.agents.clear();
  }
}

function tooLarge(req: JsonFetchRequest, size = ''): Error {
  return new Error(`GET ${req.url}: the response${size} is larger than ${req.maxBytes} bytes (jwt.key_refresh_max_response_size)`);
}

/** Errors of a body already given up (its rejection was reported). */
function ignore(): void {}

/** The whole body, rejected when it passes req.maxBytes (the connection is then closed), fails or is aborted. */
function readBounded(body: Readable, req: JsonFetchRequest): Promise<Buffer> {
  return new Promise<Buffer>((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    body.on('error', reject);
    body.on('data', (chunk: Buffer) => {
      total += chunk.length;
      if (total > req.maxBytes) {
        body.destroy(tooLarge(req));
        return;
      }
      chunks.push(chunk);
    });
    body.on('end', () => resolve(Buffer.concat(chunks, total)));
  });
}

/**
 * Drops a body not wanted (an error status's, a refused one's) with its connection: a failing
 * server's body may trickle or never end, and reading it would only hold the refresh. The 'error'
 * listener comes first: destroying a body emits an error (undici's abort error without a reason).
 */
function discard(body: Readable, reason: Error): void {
  body.on('error', ignore);
  body.destroy(reason);
}

function closeQuietly(agent: Agent): void {
  agent.close().catch(ignore);
}
