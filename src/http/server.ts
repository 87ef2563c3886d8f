/**
 * One RPC interface: an HTTPS server (HTTP/1.1 keep-alive) that requests client certificates
 * without requiring them, matches the route table, enforces the body limit, validates query and
 * body with zod, authenticates the caller and maps every failure to the JSON error body.
 * A request can never crash the node: every path ends in an answer.
 */
import { isUtf8 } from 'node:buffer';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import type { AddressInfo, Socket } from 'node:net';
import { type Readable, pipeline } from 'node:stream';
import { z } from 'zod';
import { CovenantError } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import { parseExternalJson } from '../base/json.js';
import type { Router } from './router.js';
import type { AuthPolicy, Caller, HttpMethod, OperatorFeature, RequestContext, Route, RouteResponse } from './route.js';
import { httpErrors, toCovenantError, zodIssuesMessage } from './errors.js';

export interface TlsIdentity {
  readonly keyPem: string;
  readonly certificatePem: string;
}

export interface Authenticator {
  /** Returns the caller for a policy or throws a 401 CovenantError. */
  authenticate(policy: AuthPolicy, request: { headers: IncomingMessage['headers']; clientCertificateDer: Buffer | undefined }): Caller;
}

/** Sends requests that need the primary to it when this node is a backup (see forwarding.ts). */
export interface RequestForwarder {
  shouldForward(route: Route, method: HttpMethod): boolean;
  forward(route: Route, ctx: RequestContext, rawQuery: string): Promise<RouteResponse>;
}

export interface RpcInterfaceOptions {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly tls: TlsIdentity;
  readonly router: Router;
  readonly enabledFeatures: readonly OperatorFeature[];
  readonly maxBodySizeBytes: number;
  /**
   * Client sessions served at once (max_open_sessions). A connection accepted beyond them (or
   * beyond its address's share) is still taken through the TLS handshake and its first request
   * answered 503 SessionCapExhausted, then closed; connections beyond that are closed at once.
   * A connection counts from TCP accept, handshake finished or not. Undefined: no cap.
   */
  readonly maxOpenSessions?: number;
  /** Sessions one client address may hold (max_sessions_per_address); default defaultMaxSessionsPerAddress. */
  readonly maxSessionsPerAddress?: number;
  /** Time from TCP accept to a completed TLS handshake (tls_handshake_timeout). */
  readonly tlsHandshakeTimeoutMs?: number;
  /** Time from the completed TLS handshake to the first request's headers (first_request_timeout). */
  readonly firstRequestTimeoutMs?: number;
  readonly authenticator: Authenticator;
  readonly logger: Logger;
  readonly forwarder?: RequestForwarder;
}

const ANONYMOUS: Caller = { kind: 'anonymous' };

/** A client that has not finished the TLS handshake by then is dropped (Node's own default waits 120 s). */
export const DEFAULT_TLS_HANDSHAKE_TIMEOUT_MS = 10_000;
/**
 * A session that has sent no complete request head by then is closed: an idle connection would
 * otherwise hold one of max_open_sessions for as long as its client likes.
 */
export const DEFAULT_FIRST_REQUEST_TIMEOUT_MS = 10_000;
/** A session whose request the HTTP parser refused is closed this long after its error answer, read or not. */
const CLIENT_ERROR_LINGER_MS = 2_000;

/**
 * The default share of max_open_sessions one client address may hold: half of them, but never
 * fewer than 100 (or all of them when there are fewer). Generous, so that one host running many
 * clients (a load generator, a test network on loopback) is not refused, yet a single address
 * can never lock every other client out.
 */
export function defaultMaxSessionsPerAddress(maxOpenSessions: number): number {
  return Math.max(Math.min(maxOpenSessions, 100), Math.ceil(maxOpenSessions / 2));
}

/**
 * Connections accepted beyond the session caps only to be answered 503 SessionCapExhausted: a
 * tenth of max_open_sessions, at least 10. Each address may hold the same share of these as of
 * the sessions. Connections beyond these are closed as soon as they are accepted.
 */
export function sessionRefusalSlots(maxOpenSessions: number, maxSessionsPerAddress: number): { total: number; perAddress: number } {
  const total = Math.max(10, Math.ceil(maxOpenSessions / 10));
  const perAddress = Math.min(total, Math.max(1, Math.ceil((total * maxSessionsPerAddress) / maxOpenSessions)));
  return { total, perAddress };
}

/** Counts of one interface's client connections (GET /node/metrics). */
export interface SessionMetrics {
  /** Connections counted against max_open_sessions, from TCP accept to close. */
  readonly active: number;
  /** Connections held only to be answered 503 SessionCapExhausted. */
  readonly refusing: number;
  readonly peak: number;
  /** max_open_sessions (absent: no cap). */
  readonly soft_cap?: number;
  /** Connections beyond which new ones are closed at once. */
  readonly hard_cap?: number;
  readonly per_address_cap?: number;
  /** Connections closed at accept (hard cap or address share exhausted), since start. */
  readonly dropped: number;
  /** Connections closed for want of a TLS handshake or a first request in time, since start. */
  readonly timed_out: number;
}

/** One accepted TCP connection. */
interface Connection {
  readonly address: string;
  /** Counts toward max_open_sessions; otherwise its first request is answered 503 and it is closed. */
  readonly admitted: boolean;
  /** Runs until the first request's head arrives. */
  firstRequestTimer: NodeJS.Timeout | undefined;
}

interface AddressCount {
  admitted: number;
  refusing: number;
}

export class RpcInterface {
  private readonly server: https.Server;
  private readonly options: RpcInterfaceOptions;
  private readonly features: ReadonlySet<string>;
  private readonly sockets = new Set<Socket>();
  /** Accepted connections by "address port", until the TLS handshake hands them to `sessions`. */
  private readonly accepted = new Map<string, Connection>();
  /** Connections whose TLS handshake completed, by their TLS socket (the one requests arrive on). */
  private readonly sessions = new WeakMap<Socket, Connection>();
  private readonly byAddress = new Map<string, AddressCount>();
  private admittedCount = 0;
  private refusingCount = 0;
  private peakCount = 0;
  private droppedCount = 0;
  private timedOutCount = 0;
  private readonly caps: { sessions: number; perAddress: number; refusing: number; refusingPerAddress: number } | undefined;
  private readonly firstRequestTimeoutMs: number;
  private held: { res: ServerResponse; response: RouteResponse; isHead: boolean }[] = [];

  constructor(options: RpcInterfaceOptions) {
    this.options = options;
    this.features = new Set(options.enabledFeatures);
    this.firstRequestTimeoutMs = options.firstRequestTimeoutMs ?? DEFAULT_FIRST_REQUEST_TIMEOUT_MS;
    const maxSessions = options.maxOpenSessions;
    if (maxSessions !== undefined && maxSessions > 0) {
      const perAddress = Math.min(maxSessions, options.maxSessionsPerAddress ?? defaultMaxSessionsPerAddress(maxSessions));
      const refusal = sessionRefusalSlots(maxSessions, perAddress);
      this.caps = { sessions: maxSessions, perAddress, refusing: refusal.total, refusingPerAddress: refusal.perAddress };
    }
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
        // An HTTP/1.1 request without Host is refused in route() with the JSON error body
        // (Node's own check answers an empty 400).
        requireHostHeader: false,
      },
      (req, res) => this.handle(req, res),
    );
    // Node closes connections beyond this before any listener sees them: the cheapest refusal.
    if (this.caps) this.server.maxConnections = this.caps.sessions + this.caps.refusing;
    this.server.on('connection', (socket: Socket) => this.accept(socket));
    this.server.on('secureConnection', (socket: TLSSocket) => this.secured(socket));
    // Node's https server passes TLS errors (handshake timeout, garbage instead of a ClientHello)
    // to 'clientError' as well as HTTP parse errors.
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => this.clientError(err, socket));
    this.server.on('connect', (req: IncomingMessage, socket: Socket) => this.refuseConnect(req, socket));
  }

  /** Counts every TCP connection from accept, handshake finished or not, and sorts it: session, refused or dropped. */
  private accept(socket: Socket): void {
    const address = socket.remoteAddress;
    const key = connectionKey(socket);
    if (address === undefined || key === undefined) {
      // Already gone (reset before this turn).
      socket.destroy();
      return;
    }
    let count = this.byAddress.get(address);
    if (count === undefined) this.byAddress.set(address, (count = { admitted: 0, refusing: 0 }));
    let admitted = true;
    const caps = this.caps;
    if (caps !== undefined && (this.admittedCount >= caps.sessions || count.admitted >= caps.perAddress)) {
      if (this.refusingCount >= caps.refusing || count.refusing >= caps.refusingPerAddress) {
        this.droppedCount++;
        if (count.admitted === 0 && count.refusing === 0) this.byAddress.delete(address);
        socket.destroy();
        return;
      }
      admitted = false;
    }
    const connection: Connection = { address, admitted, firstRequestTimer: undefined };
    if (admitted) {
      count.admitted++;
      this.admittedCount++;
      if (this.admittedCount > this.peakCount) this.peakCount = this.admittedCount;
    } else {
      count.refusing++;
      this.refusingCount++;
    }
    this.sockets.add(socket);
    this.accepted.set(key, connection);
    socket.once('close', () => {
      this.sockets.delete(socket);
      if (this.accepted.get(key) === connection) this.accepted.delete(key);
      if (connection.firstRequestTimer !== undefined) clearTimeout(connection.firstRequestTimer);
      const c = this.byAddress.get(address)!;
      if (admitted) {
        c.admitted--;
        this.admittedCount--;
      } else {
        c.refusing--;
        this.refusingCount--;
      }
      if (c.admitted === 0 && c.refusing === 0) this.byAddress.delete(address);
    });
  }

  /** The handshake is done: the first request must now arrive within firstRequestTimeoutMs. */
  private secured(socket: TLSSocket): void {
    const key = connectionKey(socket);
    const connection = key === undefined ? undefined : this.accepted.get(key);
    if (connection === undefined || key === undefined) {
      socket.destroy();
      return;
    }
    this.accepted.delete(key);
    this.sessions.set(socket, connection);
    connection.firstRequestTimer = setTimeout(() => {
      connection.firstRequestTimer = undefined;
      this.timedOutCount++;
      this.options.logger.debug('no request in time after the TLS handshake: closing', { interface: this.options.name, address: connection.address });
      socket.destroy();
    }, this.firstRequestTimeoutMs);
    connection.firstRequestTimer.unref();
  }

  /**
   * A TLS error (no handshake in time, not TLS at all) or a request the HTTP parser refused. A
   * socket whose handshake never completed cannot carry an answer: ending it would wait forever
   * for a flush, holding the connection (and its share of the caps), so it is destroyed.
   */
  private clientError(err: NodeJS.ErrnoException, socket: Socket): void {
    const isHttpError = typeof err.code === 'string' && err.code.startsWith('HPE_');
    if (!isHttpError || !this.sessions.has(socket) || !socket.writable) {
      if (err.code === 'ERR_TLS_HANDSHAKE_TIMEOUT') this.timedOutCount++;
      this.options.logger.debug('TLS connection failed', { interface: this.options.name, reason: err.message });
      socket.destroy();
      return;
    }
    this.options.logger.debug('malformed HTTP request', { interface: this.options.name, reason: err.message });
    socket.end(clientErrorAnswer(err));
    // A client that does not read its answer does not keep the connection.
    setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS).unref();
  }

  /** CONNECT (no tunnels here): 405 with the error body, then the connection is closed. */
  private refuseConnect(req: IncomingMessage, socket: Socket): void {
    const error = new CovenantError('MethodNotAllowed', `${req.method ?? 'CONNECT'} is not supported: this node is not a proxy`, 405);
    const text = JSON.stringify(error.toBody());
    socket.end(
      `HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, HEAD, POST, PUT, DELETE\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
    );
    setTimeout(() => socket.destroy(), CLIENT_ERROR_LINGER_MS).unref();
  }

  /** Session counts for GET /node/metrics. */
  sessionMetrics(): SessionMetrics {
    const caps = this.caps;
    return {
      active: this.admittedCount,
      refusing: this.refusingCount,
      peak: this.peakCount,
      ...(caps ? { soft_cap: caps.sessions, hard_cap: caps.sessions + caps.refusing, per_address_cap: caps.perAddress } : {}),
      dropped: this.droppedCount,
      timed_out: this.timedOutCount,
    };
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
      for (const socket of this.sockets) socket.destroy();
    });
  }

  /**
   * Routes, authenticates, reads the body and runs the handler. Callbacks rather than async
   * functions: most handlers answer synchronously, and a request then costs no promise at all.
   * Every failure, thrown or rejected, ends in fail().
   */
  private handle(req: IncomingMessage, res: ServerResponse): void {
    const connection = this.sessions.get(req.socket);
    if (connection !== undefined && connection.firstRequestTimer !== undefined) {
      clearTimeout(connection.firstRequestTimer);
      connection.firstRequestTimer = undefined;
    }
    if (connection !== undefined && !connection.admitted) {
      const max = this.options.maxOpenSessions;
      this.fail(res, new CovenantError('SessionCapExhausted', `this interface serves at most ${max} client sessions at once: retry shortly`, 503), undefined);
      return;
    }
    let request: RoutedRequest;
    try {
      request = this.route(req, res);
    } catch (e) {
      this.fail(res, toCovenantError(e), e);
      return;
    }
    readBody(req, this.options.maxBodySizeBytes, (error, rawBody) => {
      if (error !== undefined) this.fail(res, error, error);
      else this.dispatch(req, res, request, rawBody);
    });
  }

  /** Matches the route, checks its operator feature and authenticates the caller (401 otherwise). */
  private route(req: IncomingMessage, res: ServerResponse): RoutedRequest {
    if (req.httpVersionMajor !== 1 || req.httpVersionMinor > 1) {
      res.setHeader('connection', 'close');
      throw new CovenantError('HttpVersionNotSupported', `HTTP/${req.httpVersion} is not supported: send HTTP/1.1`, 505);
    }
    if (req.headers.host === undefined) {
      if (req.httpVersionMinor === 1) throw new CovenantError('MissingHostHeader', 'an HTTP/1.1 request must carry a Host header (RFC 9112)', 400);
    } else if (hostHeaderCount(req.rawHeaders) > 1) {
      // Node keeps the first and drops the others; which one a proxy in front used is unknowable.
      throw new CovenantError('DuplicateHostHeader', 'the request carries more than one Host header (RFC 9112)', 400);
    }
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
    const caller = policy === 'none' ? ANONYMOUS : this.options.authenticator.authenticate(policy, { headers: req.headers, clientCertificateDer });
    return { route, params, method, path, rawQuery: q === -1 ? '' : rawUrl.slice(q + 1), caller, clientCertificateDer };
  }

  /** Validates query and body, then forwards the request to the primary or runs its handler. */
  private dispatch(req: IncomingMessage, res: ServerResponse, request: RoutedRequest, rawBody: Buffer): void {
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
        interfaceName: this.options.name,
      });
      const forwarder = this.options.forwarder;
      const answer = forwarder && forwarder.shouldForward(route, method) ? forwarder.forward(route, ctx, rawQuery) : route.handler(ctx);
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
    // The body was not read, or the session is one too many: the connection cannot go on.
    if (error.code === 'RequestBodyTooLarge' || error.code === 'SessionCapExhausted') res.setHeader('connection', 'close');
    res.end(text);
  }
}

/**
 * The answer to a request Node's HTTP parser refuses before any route sees it: the error body
 * like every other answer, 431 for oversized headers, and the connection closed.
 */
function clientErrorAnswer(err: NodeJS.ErrnoException): string {
  let error: CovenantError;
  let reason: string;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    error = new CovenantError('RequestHeaderTooLarge', 'the request headers exceed the limit', 431);
    reason = 'Request Header Fields Too Large';
  } else if (err.code === 'HPE_INVALID_VERSION') {
    error = new CovenantError('HttpVersionNotSupported', 'the request names an HTTP version this node does not speak: send HTTP/1.1', 505);
    reason = 'HTTP Version Not Supported';
  } else {
    error = new CovenantError('MalformedRequest', `the request is not valid HTTP/1.1 (${err.code ?? 'parse error'})`, 400);
    reason = 'Bad Request';
  }
  const text = JSON.stringify(error.toBody());
  return `HTTP/1.1 ${error.status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`;
}

/** Host headers in a request's raw header list (name, value, name, value, ...). */
function hostHeaderCount(rawHeaders: readonly string[]): number {
  let count = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') count++;
  }
  return count;
}

/** Identifies a live TCP connection, on the raw socket and on the TLS socket wrapping it alike. */
function connectionKey(socket: Socket): string | undefined {
  const { remoteAddress, remotePort } = socket;
  return remoteAddress === undefined || remotePort === undefined ? undefined : `${remoteAddress} ${remotePort}`;
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
interface RoutedRequest {
  readonly route: Route;
  readonly params: Record<string, string>;
  readonly method: HttpMethod;
  readonly path: string;
  readonly rawQuery: string;
  readonly caller: Caller;
  readonly clientCertificateDer: Buffer | undefined;
}

export interface RequestParts {
  readonly method: HttpMethod;
  readonly path: string;
  readonly params: Record<string, string>;
  readonly rawQuery: string;
  readonly rawBody: Buffer;
  readonly headers: IncomingMessage['headers'];
  readonly caller: Caller;
  readonly clientCertificateDer: Buffer | undefined;
  readonly interfaceName: string;
}

/** Validates the query and body of a request for its route (also used for forwarded requests). */
export function buildRequestContext(route: Route, parts: RequestParts): RequestContext {
  const queryObject: Record<string, string> = {};
  if (parts.rawQuery !== '') {
    for (const [k, v] of new URLSearchParams(parts.rawQuery)) {
      // No parameter of the API takes several values: which one was meant would be a guess.
      if (Object.hasOwn(queryObject, k)) throw httpErrors.invalidQuery(`query parameter "${k}" is given more than once`);
      queryObject[k] = v;
    }
  }
  let query: unknown = queryObject;
  if (route.query) {
    const parsed = route.query.safeParse(queryObject);
    if (!parsed.success) throw queryError(parsed.error, queryObject);
    query = parsed.data;
  }
  let body: unknown = undefined;
  if (route.body) {
    let value: unknown;
    if (parts.rawBody.length > 0) {
      // JSON is UTF-8 (RFC 8259); decoding other bytes would silently store U+FFFD instead.
      if (!isUtf8(parts.rawBody)) throw httpErrors.invalidJson('the body is not valid UTF-8');
      try {
        value = parseExternalJson(parts.rawBody.toString('utf8'));
      } catch (e) {
        throw httpErrors.invalidJson((e as Error).message);
      }
    }
    const parsed = route.body.safeParse(value);
    if (!parsed.success) throw httpErrors.invalidBody(zodIssuesMessage(parsed.error, 'body'));
    body = parsed.data;
  }
  return {
    method: parts.method,
    path: parts.path,
    params: parts.params,
    query: query as Record<string, string>,
    body,
    rawBody: parts.rawBody,
    headers: parts.headers,
    caller: parts.caller,
    clientCertificateDer: parts.clientCertificateDer,
    interfaceName: parts.interfaceName,
  };
}

function queryError(error: z.ZodError, given: Record<string, string>): CovenantError {
  const first = error.issues[0];
  const name = first?.path[0];
  if (typeof name === 'string' && !(name in given)) return httpErrors.missingQuery(name);
  return httpErrors.invalidQuery(zodIssuesMessage(error, 'query parameter'));
}

const NO_BODY = Buffer.alloc(0);

/** Reads the whole body, refusing (413) as soon as it exceeds the limit. `done` is called once. */
function readBody(req: IncomingMessage, limitBytes: number, done: (error: CovenantError | undefined, body: Buffer) => void): void {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limitBytes) {
    req.resume();
    done(httpErrors.payloadTooLarge(limitBytes), NO_BODY);
    return;
  }
  if (declared === 0 && req.headers['transfer-encoding'] === undefined) {
    req.resume();
    done(undefined, NO_BODY);
    return;
  }
  let chunks: Buffer[] | undefined;
  let first: Buffer | undefined;
  let received = 0;
  let finished = false;
  req.on('data', (chunk: Buffer) => {
    if (finished) return;
    received += chunk.length;
    if (received > limitBytes) {
      finished = true;
      done(httpErrors.payloadTooLarge(limitBytes), NO_BODY);
      return;
    }
    if (first === undefined) first = chunk;
    else (chunks ??= [first]).push(chunk);
  });
  req.on('end', () => {
    if (finished) return;
    finished = true;
    done(undefined, chunks !== undefined ? Buffer.concat(chunks) : (first ?? NO_BODY));
  });
  req.on('error', (e) => {
    if (finished) return;
    finished = true;
    done(new CovenantError('RequestAborted', `request body could not be read: ${e.message}`, 400), NO_BODY);
  });
}
