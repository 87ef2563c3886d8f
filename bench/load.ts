/**
 * A closed-loop HTTPS load generator on raw keep-alive TLS sockets: `connections` sockets, each
 * with one request in flight. It is lighter than Node's http client, so on a small machine more
 * of the CPU goes to the server being measured.
 */
import tls from 'node:tls';

export interface LoadTarget {
  readonly host: string;
  readonly port: number;
  readonly ca: string;
  readonly cert?: string;
  readonly key?: string;
}

export interface LoadOptions {
  readonly connections: number;
  readonly durationMs: number;
  /** Stop once this many requests were sent (and answered), even before durationMs. */
  readonly maxRequests?: number;
  /** Builds the raw HTTP/1.1 request for request number i (must ask for keep-alive). */
  readonly request: (i: number) => Buffer;
  /** Called with each complete response (status and raw header block) and the time it was sent. */
  readonly onResponse?: (status: number, headerBlock: string, sentAtMs: number) => void;
}

export interface LoadResult {
  readonly requests: number;
  readonly errors: number;
  readonly non2xx: number;
  readonly elapsedMs: number;
  readonly requestsPerSecond: number;
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
}

export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i]!;
}

export function buildRequest(method: string, path: string, host: string, body?: string): Buffer {
  const payload = body === undefined ? '' : body;
  const head =
    `${method} ${path} HTTP/1.1\r\nhost: ${host}\r\nconnection: keep-alive\r\n` +
    (body === undefined ? '' : `content-type: application/json\r\ncontent-length: ${Buffer.byteLength(payload)}\r\n`) +
    '\r\n';
  return Buffer.from(head + payload);
}

export async function runLoad(target: LoadTarget, options: LoadOptions): Promise<LoadResult> {
  let counter = 0;
  let requests = 0;
  let errors = 0;
  let non2xx = 0;
  const latencies: number[] = [];
  const start = performance.now();
  const deadline = start + options.durationMs;
  const maxRequests = options.maxRequests ?? Infinity;

  const worker = () =>
    new Promise<void>((resolve) => {
      const socket = tls.connect({
        host: target.host,
        port: target.port,
        ca: target.ca,
        ...(target.cert ? { cert: target.cert, key: target.key } : {}),
        checkServerIdentity: () => undefined,
      });
      let buffer: Buffer = Buffer.alloc(0);
      let sentAt = 0;
      const send = () => {
        if (performance.now() >= deadline || counter >= maxRequests) {
          socket.end();
          return;
        }
        sentAt = performance.now();
        socket.write(options.request(counter++));
      };
      socket.once('secureConnect', send);
      socket.on('data', (chunk: Buffer) => {
        buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk]);
        for (;;) {
          const headerEnd = buffer.indexOf('\r\n\r\n');
          if (headerEnd === -1) return;
          const headerBlock = buffer.subarray(0, headerEnd).toString('latin1');
          const m = /\r\ncontent-length:\s*(\d+)/i.exec(headerBlock);
          const length = m ? Number(m[1]) : 0;
          const total = headerEnd + 4 + length;
          if (buffer.length < total) return;
          buffer = buffer.subarray(total);
          const status = Number(headerBlock.slice(9, 12));
          const now = performance.now();
          requests++;
          latencies.push(now - sentAt);
          if (status < 200 || status >= 300) non2xx++;
          options.onResponse?.(status, headerBlock, sentAt);
          send();
        }
      });
      socket.on('error', () => {
        errors++;
        resolve();
      });
      socket.on('close', () => resolve());
    });

  await Promise.all(Array.from({ length: options.connections }, worker));
  const elapsedMs = performance.now() - start;
  latencies.sort((a, b) => a - b);
  return {
    requests,
    errors,
    non2xx,
    elapsedMs,
    requestsPerSecond: (requests / elapsedMs) * 1000,
    latencyP50Ms: percentile(latencies, 50),
    latencyP99Ms: percentile(latencies, 99),
  };
}
