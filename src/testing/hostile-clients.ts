/**
 * Hostile clients for the hostile e2e suite and bench/hostile.ts: connections that pipeline
 * requests without waiting for their answers (keeping `depth` unanswered on each), connections to
 * the node-to-node port that never authenticate, and a normal client that measures the longest
 * gap between its answers. Every socket they open is closed by their stop().
 */
import { readdirSync, readFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { Worker } from 'node:worker_threads';

export interface FloodTarget {
  readonly host: string;
  readonly port: number;
  readonly ca: string;
  readonly cert?: string;
  readonly key?: string;
}

export interface PipelineFloodOptions {
  readonly connections: number;
  /** Requests written ahead on each connection: all at once, then one more per answer. */
  readonly depth: number;
  /** The raw HTTP/1.1 request (keep-alive). */
  readonly request: Buffer;
  /** Source addresses, used in turn (loopback aliases such as 127.0.0.2). */
  readonly localAddresses: readonly string[];
  /** Whether each answer is followed by one more request (default true); false: one burst of `depth`. */
  readonly refill?: boolean;
  /** Whether a connection the node closes is opened again (default true). */
  readonly reopen?: boolean;
}

export interface FloodCounts {
  readonly opened: number;
  readonly sent: number;
  /** Answers by status. */
  readonly statuses: Record<string, number>;
  /** Error codes of the answers that carried one. */
  readonly codes: Record<string, number>;
  /** Connections the node closed. */
  readonly closedByNode: number;
  /** The first message of each error code. */
  readonly messages?: Record<string, string>;
}

export interface Flood {
  counts(): FloodCounts;
  /** Connections still open. */
  open(): number;
  stop(): void;
}

/** Starts `connections` pipelining connections, each reopened a moment after the node closes it. */
export function pipelineFlood(target: FloodTarget, options: PipelineFloodOptions): Flood {
  let running = true;
  const sockets = new Set<tls.TLSSocket>();
  let opened = 0;
  let sent = 0;
  let closedByNode = 0;
  const statuses: Record<string, number> = {};
  const codes: Record<string, number> = {};
  const messages: Record<string, string> = {};
  const open = (n: number): void => {
    if (!running) return;
    const localAddress = options.localAddresses[n % options.localAddresses.length]!;
    const socket = tls.connect({ host: target.host, port: target.port, ca: target.ca, cert: target.cert, key: target.key, ...({ localAddress } as tls.ConnectionOptions) });
    opened++;
    sockets.add(socket);
    const reader = new ResponseReader((status, body) => {
      statuses[status] = (statuses[status] ?? 0) + 1;
      const code = /"code":"([A-Za-z]+)"/.exec(body)?.[1];
      if (code !== undefined) {
        codes[code] = (codes[code] ?? 0) + 1;
        messages[code] ??= /"message":"([^"]*)"/.exec(body)?.[1] ?? '';
      }
      if (running && !socket.destroyed && (options.refill ?? true)) {
        socket.write(options.request);
        sent++;
      }
    });
    socket.once('secureConnect', () => {
      for (let i = 0; i < options.depth; i++) socket.write(options.request);
      sent += options.depth;
    });
    socket.on('data', (chunk: Buffer) => reader.push(chunk));
    socket.on('error', () => undefined);
    socket.once('close', () => {
      sockets.delete(socket);
      if (!running) return;
      closedByNode++;
      if (options.reopen ?? true) setTimeout(() => open(n), 50);
    });
  };
  for (let n = 0; n < options.connections; n++) open(n);
  return {
    counts: () => ({ opened, sent, statuses: { ...statuses }, codes: { ...codes }, closedByNode, messages: { ...messages } }),
    open: () => sockets.size,
    stop: () => {
      running = false;
      for (const socket of sockets) socket.destroy();
    },
  };
}

/** Splits a stream of HTTP/1.1 answers (each with a Content-Length) into status and body. */
class ResponseReader {
  private buffer: Buffer = Buffer.alloc(0);

  constructor(private readonly onResponse: (status: number, body: string) => void) {}

  push(chunk: Buffer): void {
    this.buffer = this.buffer.length === 0 ? chunk : Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end === -1) return;
      const head = this.buffer.subarray(0, end).toString('latin1');
      const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
      if (this.buffer.length < end + 4 + length) return;
      const body = this.buffer.subarray(end + 4, end + 4 + length).toString('utf8');
      this.buffer = this.buffer.subarray(end + 4 + length);
      this.onResponse(Number(head.slice(9, 12)), body);
    }
  }
}

/** Connections that open TCP (and, with `tls`, a TLS handshake) and then send nothing, reopened when closed. */
export function idleFlood(host: string, port: number, options: { connections: number; localAddresses: readonly string[]; tls?: { ca?: string } }): Flood {
  let running = true;
  const sockets = new Set<net.Socket>();
  let opened = 0;
  let closedByNode = 0;
  const open = (n: number): void => {
    if (!running) return;
    const localAddress = options.localAddresses[n % options.localAddresses.length]!;
    const socket =
      options.tls === undefined
        ? net.connect({ host, port, localAddress })
        : tls.connect({ host, port, ca: options.tls.ca, rejectUnauthorized: false, ...({ localAddress } as tls.ConnectionOptions) });
    opened++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('data', () => undefined);
    socket.once('close', () => {
      sockets.delete(socket);
      if (!running) return;
      closedByNode++;
      setTimeout(() => open(n), 50);
    });
  };
  for (let n = 0; n < options.connections; n++) open(n);
  return {
    counts: () => ({ opened, sent: 0, statuses: {}, codes: {}, closedByNode }),
    open: () => sockets.size,
    stop: () => {
      running = false;
      for (const socket of sockets) socket.destroy();
    },
  };
}

export interface NormalClientReport {
  readonly answered: number;
  /** Answers other than `expected`, by status and error code ("503 SessionCapExhausted"), or by connection error. */
  readonly failures: Record<string, number>;
  /** Longest time between two expected answers (or from the start to the first), in ms. */
  readonly longestGapMs: number;
}

/**
 * A normal client: one request at a time on a new connection each time (so it needs a free
 * session too), `pauseMs` apart, until stop() resolves with what it saw.
 */
export function normalClient(
  target: FloodTarget & { localAddress?: string },
  request: { method: string; path: string; headers?: Record<string, string>; body?: string; expected: number },
  pauseMs = 20,
): { stop(): Promise<NormalClientReport> } {
  let running = true;
  let answered = 0;
  const failures: Record<string, number> = {};
  let last = performance.now();
  let longestGapMs = 0;
  const loop = (async () => {
    while (running) {
      const status = await new Promise<number | string>((resolve) => {
        const req = https.request(
          {
            host: target.host,
            port: target.port,
            method: request.method,
            path: request.path,
            headers: request.headers ?? {},
            ca: target.ca,
            cert: target.cert,
            key: target.key,
            localAddress: target.localAddress ?? '127.0.0.1',
            agent: false,
            timeout: 30_000,
          },
          (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString('utf8')));
            res.on('end', () => {
              const code = /"code":"([A-Za-z]+)"/.exec(text)?.[1];
              resolve(res.statusCode === request.expected || code === undefined ? res.statusCode! : `${res.statusCode} ${code}`);
            });
          },
        );
        req.on('timeout', () => req.destroy(new Error('timeout')));
        req.on('error', (e) => resolve((e as NodeJS.ErrnoException).code ?? e.message));
        req.end(request.body);
      });
      const now = performance.now();
      if (status === request.expected) {
        answered++;
        longestGapMs = Math.max(longestGapMs, now - last);
        last = now;
      } else failures[status] = (failures[status] ?? 0) + 1;
      await new Promise((r) => setTimeout(r, pauseMs));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      longestGapMs = Math.max(longestGapMs, performance.now() - last);
      return { answered, failures, longestGapMs: Math.round(longestGapMs) };
    },
  };
}

/** VmRSS of a process in KiB, read from /proc. */
export function rssKb(pid: number): number {
  const match = /VmRSS:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (match === null) throw new Error(`no VmRSS for process ${pid}`);
  return Number(match[1]);
}

/** Open file descriptors of a process, counted in /proc. */
export function openFdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

/** normalClient in a worker thread (normal-client-worker.ts): the attackers' work in this thread does not delay it. */
export function normalClientInWorker(
  target: FloodTarget & { localAddress?: string },
  request: Parameters<typeof normalClient>[1],
  pauseMs = 20,
): { stop(): Promise<NormalClientReport> } {
  const worker = new Worker(new URL('./normal-client-worker.js', import.meta.url), { workerData: { target, request, pauseMs } });
  const report = new Promise<NormalClientReport>((resolve, reject) => {
    worker.once('message', (r: NormalClientReport) => resolve(r));
    worker.once('error', reject);
  });
  return {
    stop: async () => {
      worker.postMessage('stop');
      const r = await report;
      await worker.terminate();
      return r;
    },
  };
}
