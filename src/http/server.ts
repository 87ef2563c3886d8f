/**
 * One RPC interface: an HTTPS server (HTTP/1.1 keep-alive) that requests client certificates
 * without requiring them, enforces the body limit and writes answers. It is the transport's
 * adapter to the request pipeline (pipeline.ts), which routes, authenticates, validates, forwards
 * or executes and maps errors: the head goes to the pipeline before the body is read, the body
 * after. A request never crashes the node: every path ends in an answer, except a broken invariant,
 * which stops the node (the pipeline's failStop). Session accounting lives in sessions.ts, the
 * checks of a connection and request head in protocol-checks.ts.
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { AddressInfo, Socket } from 'node:net';
import { type Readable, pipeline } from 'node:stream';
import { CovenantError } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { Caller, HttpMethod, OperatorFeature, RouteResponse } from './route.js';
import { errorHeaders } from './errors.js';
import { readBody } from './request-context.js';
import type { RequestHead, RequestPipeline, RoutedRequest } from './pipeline.js';
import { SessionTable, type SessionLimits, type SessionMetrics } from './sessions.js';
import { checkRequestHead, handleClientError, refuseConnect, type ClientErrorContext } from './protocol-checks.js';
import { PipeliningGate, tooManyPipelinedRequests, type PipeliningMetrics } from './pipelining.js';
import { clientRequestCostBytes, waitingWorkExhausted, type ReleaseWaitingWork, type WaitingWorkBudget } from './waiting-work.js';
import { pipelinedRequestsPerSessionDefault, requestsPerTurnMax, requestTurnMs } from '../node/node.js';
import { RequestTurnBudget } from './turn-budget.js';
import { RequestRateLimiter, tooManyRequests, type RequestRateLimits, type RequestRateMetrics } from './request-rate.js';

export interface TlsIdentity {
  readonly keyPem: string;
  readonly certificatePem: string;
}

export type { Authenticator, RequestForwarder } from './pipeline.js';

export interface RpcInterfaceOptions extends SessionLimits {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly tls: TlsIdentity;
  /** Routes, authenticates, validates, forwards or executes, and maps errors (pipeline.ts). */
  readonly pipeline: RequestPipeline;
  readonly enabledFeatures: readonly OperatorFeature[];
  readonly maxBodySizeBytes: number;
  /** Time from TCP accept to a completed TLS handshake (tls_handshake_timeout). */
  readonly tlsHandshakeTimeoutMs?: number;
  readonly logger: Logger;
  /** Called once each answer is handed to the socket: route template ('unmatched' if none), method, status, seconds since the request was read. */
  readonly onRequestDone?: (interfaceName: string, route: string, method: string, status: number, seconds: number) => void;
  /** Requests one connection may have read and not yet answered (max_pipelined_requests). */
  readonly maxPipelinedRequests?: number;
  /** The node-wide budget every request waits in, shared by the node's interfaces; absent: none. */
  readonly waitingWork?: WaitingWorkBudget;
  /** The rate at which one client address may send requests (request-rate.ts); absent: none. */
  readonly requestRate?: RequestRateLimits;
  /** The request work one event-loop turn may do, shared by the node's interfaces; absent: this interface's own. */
  readonly turnBudget?: RequestTurnBudget;
}

/** A client that has not finished the TLS handshake by then is dropped (Node's own default waits 120 s). */
export const DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS = 10_000;

export class RpcInterface {
  private readonly server: https.Server;
  private readonly options: RpcInterfaceOptions;
  private readonly features: ReadonlySet<string>;
  private readonly sessions: SessionTable;
  private readonly pipelining: PipeliningGate;
  private readonly requestRate: RequestRateLimiter | undefined;
  private readonly turns: RequestTurnBudget;
  /** What each request in progress took from the waiting-work budget, given back with its answer. */
  private readonly waiting = new WeakMap<ServerResponse, ReleaseWaitingWork>();
  private held: { res: ServerResponse; response: RouteResponse; isHead: boolean }[] = [];

  constructor(options: RpcInterfaceOptions) {
    this.options = options;
    this.features = new Set(options.enabledFeatures);
    const sessions = (this.sessions = new SessionTable(options, options.logger, options.name));
    this.pipelining = new PipeliningGate(options.maxPipelinedRequests ?? pipelinedRequestsPerSessionDefault);
    this.requestRate = options.requestRate === undefined ? undefined : new RequestRateLimiter(options.requestRate);
    this.turns = options.turnBudget ?? new RequestTurnBudget(requestsPerTurnMax, requestTurnMs);
    this.server = https.createServer(
      {
        key: options.tls.keyPem,
        cert: options.tls.certificatePem,
        // Client certificates are checked against the store (users, members), not against a CA.
        requestCert: true,
        rejectUnauthorized: false,
        keepAliveTimeout: 30_000,
        noDelay: true,
        // A client that stalls in the TLS handshake is dropped (Node's default waits 120 s).
        handshakeTimeout: options.tlsHandshakeTimeoutMs ?? DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS,
        // An HTTP/1.1 request without Host is refused by checkRequestHead() with the JSON error
        // body (Node's own check answers an empty 400).
        requireHostHeader: false,
      },
      (req, res) => this.handle(req, res),
    );
    // Node closes connections beyond this before any listener sees them: the cheapest refusal.
    const hardCap = sessions.hardCap;
    if (hardCap !== undefined) this.server.maxConnections = hardCap;
    this.server.on('connection', (socket: Socket) => sessions.accept(socket));
    this.server.on('secureConnection', (socket: TLSSocket) => sessions.secured(socket));
    // Node's https server passes TLS errors (handshake timeout, garbage instead of a ClientHello)
    // to 'clientError' as well as HTTP parse errors.
    const clientErrorContext: ClientErrorContext = { interfaceName: options.name, logger: options.logger, sessions };
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => handleClientError(err, socket, clientErrorContext));
    this.server.on('connect', (req: IncomingMessage, socket: Socket) => refuseConnect(req, socket));
  }

  /** Session counts for GET /node/metrics. */
  sessionMetrics(): SessionMetrics & { pipelining: PipeliningMetrics; request_rate?: RequestRateMetrics } {
    const rate = this.requestRate?.metrics();
    return { ...this.sessions.metrics(), pipelining: this.pipelining.metrics(), ...(rate !== undefined ? { request_rate: rate } : {}) };
  }

  get name(): string {
    return this.options.name;
  }

  /** Replaces the served certificate (a joining node's certificate is endorsed by the service later). */
  setTlsIdentity(tls: TlsIdentity): void {
    this.server.setSecureContext({ key: tls.keyPem, cert: tls.certificatePem });
  }

  /** Listens on the configured port, or on `port` when given (a restarted node's previous one). */
  async listen(port = this.options.port): Promise<AddressInfo> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, this.options.host, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    return this.server.address() as AddressInfo;
  }

  address(): AddressInfo {
    return this.server.address() as AddressInfo;
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.sessions.destroyAll();
    });
  }

  /**
   * Hands the request to the pipeline: its head first (route, authenticate), then, once read, its
   * body. Callbacks rather than async functions: most handlers answer synchronously, and a request
   * then costs no promise at all. Every failure, thrown or rejected, ends in failed().
   */
  private handle(req: IncomingMessage, res: ServerResponse): void {
    let routePath = 'unmatched';
    const observe = this.options.onRequestDone;
    if (observe !== undefined) {
      const startedMs = performance.now();
      res.once('finish', () => observe(this.options.name, routePath, req.method ?? '', res.statusCode, (performance.now() - startedMs) / 1000));
    }
    if (!this.sessions.requestArrived(req.socket, res)) {
      const max = this.options.maxOpenSessions;
      this.fail(res, new CovenantError('SessionCapExhausted', `this interface serves at most ${max} client sessions at once: retry shortly`, 503));
      return;
    }
    if (!this.admit(req, res)) return;
    // Routed and executed in this turn if it has room, else in a later one (turn-budget.ts).
    this.turns.run(() => this.routeAndRun(req, res, (path) => (routePath = path)), req.socket);
  }

  /** Matches the route, authenticates the caller, reads the body and runs the handler (or forwards). */
  private routeAndRun(req: IncomingMessage, res: ServerResponse, matched: (routePath: string) => void): void {
    if (req.socket.destroyed) {
      // Deferred, and its client went away meanwhile: no answer can reach it, nothing is run.
      this.answered(res);
      return;
    }
    let request: RoutedRequest;
    try {
      checkRequestHead(req, res);
      request = this.options.pipeline.route(this.headOf(req));
      matched(request.route.path);
    } catch (e) {
      this.failed(res, e);
      return;
    }
    const caller = request.caller;
    if (caller instanceof Promise) {
      // A bearer token seen for the first time: its signature is checked before the body is read.
      caller.then(
        (known) => this.readAndDispatch(req, res, { ...request, caller: known }),
        (e: unknown) => this.failed(res, e),
      );
      return;
    }
    this.readAndDispatch(req, res, request as RoutedRequest<Caller>);
  }

  /**
   * The request's place in its connection's pipeline, a token of its address's request rate and
   * its bytes in the node's waiting work, the first and last given back with its answer; false
   * when it was refused (answered 503, or 429 beyond the rate) for want of one of them.
   */
  private admit(req: IncomingMessage, res: ServerResponse): boolean {
    if (!this.pipelining.arrived(req.socket, res)) {
      this.fail(res, tooManyPipelinedRequests(this.options.maxPipelinedRequests ?? pipelinedRequestsPerSessionDefault));
      return false;
    }
    const rate = this.requestRate;
    if (rate !== undefined) {
      const waitMs = rate.take(req.socket.remoteAddress);
      if (waitMs > 0) {
        // Not read again for as long as the answer tells the client to wait: what it pipelines
        // meanwhile waits in TCP's buffers instead of costing the node one refusal each.
        const refusal = tooManyRequests(this.options.requestRate!, waitMs);
        this.pipelining.holdBackFor(req.socket, refusal.retryAfterSeconds! * 1000);
        this.fail(res, refusal);
        return false;
      }
    }
    const budget = this.options.waitingWork;
    if (budget === undefined) return true;
    const release = budget.tryTake(clientRequestCostBytes(req), req.socket.remoteAddress ?? '');
    if (release === undefined) {
      this.pipelining.holdBack(req.socket);
      this.fail(res, waitingWorkExhausted(budget));
      return false;
    }
    // Held until the handler answers, even when the client went away meanwhile: the work (a read
    // waiting for its confirmation, a write for its commit) waits on just the same. Every path
    // ends in send() or fail() (each wait has its own timeout).
    this.waiting.set(res, release);
    return true;
  }

  /** The request no longer waits: its answer is written (or the answer failed). */
  private answered(res: ServerResponse): void {
    const release = this.waiting.get(res);
    if (release === undefined) return;
    this.waiting.delete(res);
    release();
  }

  private readAndDispatch(req: IncomingMessage, res: ServerResponse, request: RoutedRequest<Caller>): void {
    readBody(req, this.options.maxBodySizeBytes, (error, rawBody) => {
      if (error !== undefined) this.fail(res, error);
      else this.dispatch(res, request, rawBody);
    });
  }

  /** The request head as the pipeline takes it. Any other method (OPTIONS, PATCH, ...) matches no route: 404, or 405 naming the path's methods in Allow. */
  private headOf(req: IncomingMessage): RequestHead {
    const rawUrl = req.url ?? '/';
    const q = rawUrl.indexOf('?');
    return {
      method: (req.method ?? 'GET') as HttpMethod,
      path: q === -1 ? rawUrl : rawUrl.slice(0, q),
      rawQuery: q === -1 ? '' : rawUrl.slice(q + 1),
      headers: req.headers,
      clientCertificateDer: peerCertificateDer(req.socket as TLSSocket),
      remoteAddress: req.socket.remoteAddress,
      interfaceName: this.options.name,
      enabledFeatures: this.features,
    };
  }

  /** The rest of the pipeline, with the body read: validate, forward or execute, consistency, transaction id. */
  private dispatch(res: ServerResponse, request: RoutedRequest<Caller>, rawBody: Buffer): void {
    const isHead = request.head.method === 'HEAD';
    try {
      const answer = this.options.pipeline.execute(request, rawBody);
      if (answer instanceof Promise) {
        answer.then(
          (response) => this.send(res, response, isHead),
          (e: unknown) => this.failed(res, e),
        );
      } else {
        this.send(res, answer, isHead);
      }
    } catch (e) {
      this.failed(res, e);
    }
  }

  /** A request failed: the pipeline's one error mapping says how to answer, or (a broken invariant) that nothing is answered. */
  private failed(res: ServerResponse, e: unknown): void {
    const error = this.options.pipeline.failure(e);
    if (error !== undefined) {
      this.fail(res, error);
      return;
    }
    this.answered(res);
    res.destroy();
  }

  /**
   * Answers at the end of this event-loop turn: the answers to all the requests read in one turn
   * leave together, after all of them were executed. Under load a client then wakes once for a
   * batch of answers instead of once per answer (which costs both sides more than the answer).
   */
  private send(res: ServerResponse, response: RouteResponse, isHead: boolean): void {
    this.answered(res);
    this.held.push({ res, response, isHead });
    if (this.held.length === 1) setImmediate(this.releaseHeld);
  }

  private readonly releaseHeld = (): void => {
    const held = this.held;
    this.held = [];
    for (const { res, response, isHead } of held) {
      try {
        this.sendNow(res, response, isHead);
      } catch (e) {
        // A body that cannot be serialised must not take the other answers (or the node) down.
        this.failed(res, e);
      }
    }
  };

  private sendNow(res: ServerResponse, response: RouteResponse, isHead: boolean): void {
    if (res.headersSent) return;
    const kind = response.bodyKind ?? (response.body === undefined ? 'none' : 'json');
    if (kind === 'json') {
      // The common answer, in one writeHead with a flat header list (no per-header bookkeeping).
      const text = JSON.stringify(response.body);
      const head: (string | number | readonly string[])[] = [];
      if (response.headers) for (const k in response.headers) if (k !== 'content-type' && k !== 'content-length') head.push(k, response.headers[k]!);
      head.push('content-type', 'application/json', 'content-length', Buffer.byteLength(text));
      res.writeHead(response.status, head as string[]);
      res.end(isHead ? undefined : text);
      return;
    }
    res.statusCode = response.status;
    if (response.headers) for (const [k, v] of Object.entries(response.headers)) res.setHeader(k, v as string | number | string[]);
    switch (kind) {
      case 'none':
        res.end();
        return;
      case 'text': {
        const text = String(response.body);
        if (!res.hasHeader('content-type')) res.setHeader('content-type', 'text/plain; charset=utf-8');
        res.setHeader('content-length', Buffer.byteLength(text));
        res.end(isHead ? undefined : text);
        return;
      }
      case 'bytes': {
        const data = response.body as Uint8Array;
        if (!res.hasHeader('content-type')) res.setHeader('content-type', 'application/octet-stream');
        if (!res.hasHeader('content-length')) res.setHeader('content-length', data.byteLength);
        res.end(isHead ? undefined : data);
        return;
      }
      case 'stream': {
        const source = response.body as Readable;
        if (isHead) {
          source.destroy();
          res.end();
          return;
        }
        // pipeline closes the source (and its file handle) when the client goes away mid-download.
        pipeline(source, res, (e) => {
          if (e && (e as NodeJS.ErrnoException).code !== 'ERR_STREAM_PREMATURE_CLOSE') {
            this.options.logger.fail('response stream failed', { reason: e.message });
          }
        });
        return;
      }
    }
  }

  /** Writes an error answer (a transport refusal, or the pipeline's mapping of a failure). */
  private fail(res: ServerResponse, error: CovenantError): void {
    this.answered(res);
    if (res.headersSent) {
      res.destroy();
      return;
    }
    const text = JSON.stringify(error.toBody());
    res.statusCode = error.status;
    res.setHeader('content-type', 'application/json');
    res.setHeader('content-length', Buffer.byteLength(text));
    for (const [name, value] of Object.entries(errorHeaders(error))) res.setHeader(name, value);
    // The body was not read, or the session is one too many: the connection cannot go on.
    // So is a connection that pipelined beyond its share (the requests read after it are not served).
    if (error.code === 'RequestBodyTooLarge' || error.code === 'SessionCapExhausted' || error.code === 'TooManyPipelinedRequests') {
      res.setHeader('connection', 'close');
    }
    res.end(text);
  }
}

/** The client certificate of a connection, read once per TLS session (getPeerCertificate is costly). */
const peerCertificates = new WeakMap<TLSSocket, Buffer | null>();
function peerCertificateDer(socket: TLSSocket): Buffer | undefined {
  let der = peerCertificates.get(socket);
  if (der === undefined) {
    const peer = typeof socket.getPeerCertificate === 'function' ? socket.getPeerCertificate() : undefined;
    der = peer && peer.raw ? peer.raw : null;
    peerCertificates.set(socket, der);
  }
  return der ?? undefined;
}

