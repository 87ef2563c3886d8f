/**
 * One RPC interface: an HTTPS server (HTTP/1.1 keep-alive) that requests client certificates
 * without requiring them, matches the route table, enforces the body limit, validates query and
 * body with zod, authenticates the caller and maps every failure to the JSON error body.
 * A request can never crash the node: every path ends in an answer. Session accounting lives in
 * sessions.ts, the checks of a connection and request head in protocol-checks.ts.
 */
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { AddressInfo, Socket } from 'node:net';
import { type Readable, pipeline } from 'node:stream';
import { CovenantError } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { Router } from './router.js';
import type { AuthPolicy, Caller, HttpMethod, OperatorFeature, RequestContext, Route, RouteResponse } from './route.js';
import { errorHeaders, httpErrors, toCovenantError } from './errors.js';
import { buildRequestContext, readBody } from './request-context.js';
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

export interface Authenticator {
  /**
   * Returns the caller for a policy or throws a 401 CovenantError; a promise (rejected with the
   * 401) when the check is asynchronous (a bearer token seen for the first time).
   */
  authenticate(policy: AuthPolicy, request: { headers: IncomingMessage['headers']; clientCertificateDer: Buffer | undefined }): Caller | Promise<Caller>;
}

/** Sends requests that need the primary to it when this node is a backup (see forwarding.ts). */
export interface RequestForwarder {
  /** `headers`: a read that asks to be linearizable (x-covenant-consistency) is forwarded too. */
  shouldForward(route: Route, method: HttpMethod, headers: RequestContext['headers']): boolean;
  forward(route: Route, ctx: RequestContext, rawQuery: string): Promise<RouteResponse>;
}

export interface RpcInterfaceOptions extends SessionLimits {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly tls: TlsIdentity;
  readonly router: Router;
  readonly enabledFeatures: readonly OperatorFeature[];
  readonly maxBodySizeBytes: number;
  /** Time from TCP accept to a completed TLS handshake (tls_handshake_timeout). */
  readonly tlsHandshakeTimeoutMs?: number;
  readonly authenticator: Authenticator;
  readonly logger: Logger;
  readonly forwarder?: RequestForwarder;
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

const ANONYMOUS: Caller = { kind: 'anonymous' };

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
   * Routes, authenticates, reads the body and runs the handler. Callbacks rather than async
   * functions: most handlers answer synchronously, and a request then costs no promise at all.
   * Every failure, thrown or rejected, ends in fail().
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
      this.fail(res, new CovenantError('SessionCapExhausted', `this interface serves at most ${max} client sessions at once: retry shortly`, 503), undefined);
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
      request = this.route(req, res);
      matched(request.route.path);
    } catch (e) {
      this.fail(res, toCovenantError(e), e);
      return;
    }
    const caller = request.caller;
    if (caller instanceof Promise) {
      // A bearer token seen for the first time: its signature is checked before the body is read.
      caller.then(
        (known) => this.readAndDispatch(req, res, { ...request, caller: known }),
        (e: unknown) => this.fail(res, toCovenantError(e), e),
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
      this.fail(res, tooManyPipelinedRequests(this.options.maxPipelinedRequests ?? pipelinedRequestsPerSessionDefault), undefined);
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
        this.fail(res, refusal, undefined);
        return false;
      }
    }
    const budget = this.options.waitingWork;
    if (budget === undefined) return true;
    const release = budget.tryTake(clientRequestCostBytes(req), req.socket.remoteAddress ?? '');
    if (release === undefined) {
      this.pipelining.holdBack(req.socket);
      this.fail(res, waitingWorkExhausted(budget), undefined);
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
      if (error !== undefined) this.fail(res, error, error);
      else this.dispatch(req, res, request, rawBody);
    });
  }

  /** Checks the request head, matches the route, checks its operator feature and authenticates the caller (401 otherwise). */
  private route(req: IncomingMessage, res: ServerResponse): RoutedRequest {
    checkRequestHead(req, res);
    const rawUrl = req.url ?? '/';
    const q = rawUrl.indexOf('?');
    const path = q === -1 ? rawUrl : rawUrl.slice(0, q);
    // Any other method (OPTIONS, PATCH, ...) matches no route: 404, or 405 naming the path's methods in Allow.
    const method = (req.method ?? 'GET') as HttpMethod;
    const result = this.options.router.match(method, path);
    if (result.kind === 'not-found') throw httpErrors.notFound(path);
    if (result.kind === 'method-not-allowed') {
      res.setHeader('allow', result.allowed.join(', '));
      throw httpErrors.methodNotAllowed(method, path, result.allowed);
    }
    const { route, params } = result.match;
    if (route.feature !== undefined && !this.features.has(route.feature)) {
      throw new CovenantError(
        'ResourceNotFound',
        `${path} requires the ${route.feature} operator feature, which is not enabled on interface ${this.options.name}`,
        404,
      );
    }

    const clientCertificateDer = peerCertificateDer(req.socket as TLSSocket);
    const policy = route.auth ?? 'none';
    const caller = route.authenticate
      ? route.authenticate({ headers: req.headers, clientCertificateDer })
      : policy === 'none'
        ? ANONYMOUS
        : this.options.authenticator.authenticate(policy, { headers: req.headers, clientCertificateDer });
    const remoteAddress = req.socket.remoteAddress;
    return { route, params, method, path, rawQuery: q === -1 ? '' : rawUrl.slice(q + 1), caller, clientCertificateDer, remoteAddress };
  }

  /** Validates query and body, then forwards the request to the primary or runs its handler. */
  private dispatch(req: IncomingMessage, res: ServerResponse, request: RoutedRequest<Caller>, rawBody: Buffer): void {
    const isHead = request.method === 'HEAD';
    try {
      const { route, method, rawQuery } = request;
      const ctx = buildRequestContext(route, {
        method,
        path: request.path,
        params: request.params,
        rawQuery,
        rawBody,
        headers: req.headers,
        caller: request.caller,
        clientCertificateDer: request.clientCertificateDer,
        remoteAddress: request.remoteAddress,
        interfaceName: this.options.name,
      });
      const forwarder = this.options.forwarder;
      const answer = forwarder && forwarder.shouldForward(route, method, ctx.headers) ? forwarder.forward(route, ctx, rawQuery) : route.handler(ctx);
      if (answer instanceof Promise) {
        answer.then(
          (response) => this.send(res, response, isHead),
          (e: unknown) => this.fail(res, toCovenantError(e), e),
        );
      } else {
        this.send(res, answer, isHead);
      }
    } catch (e) {
      this.fail(res, toCovenantError(e), e);
    }
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
        this.fail(res, toCovenantError(e), e);
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

  private fail(res: ServerResponse, error: CovenantError, original: unknown): void {
    this.answered(res);
    if (error.status >= 500 && error.code === 'InternalError') {
      this.options.logger.fail('request failed with an internal error', {
        reason: original instanceof Error ? (original.stack ?? original.message) : String(original),
      });
    }
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

/** A request matched to its route and authenticated, before its body is read. */
interface RoutedRequest<C = Caller | Promise<Caller>> {
  readonly route: Route;
  readonly params: Record<string, string>;
  readonly method: HttpMethod;
  readonly path: string;
  readonly rawQuery: string;
  readonly caller: C;
  readonly clientCertificateDer: Buffer | undefined;
  readonly remoteAddress: string | undefined;
}
