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
   * Client sessions served at once (max_open_sessions): a request on a session beyond this many
   * is answered 503 SessionCapExhausted and the session closed; TCP connections beyond it plus
   * SESSION_HARD_CAP_EXTRA are closed as soon as they are accepted.
   */
  readonly maxOpenSessions?: number;
  readonly authenticator: Authenticator;
  readonly logger: Logger;
  readonly forwarder?: RequestForwarder;
}

const ANONYMOUS: Caller = { kind: 'anonymous' };
/** Connections accepted beyond max_open_sessions only to be told so (as CCF's soft and hard caps). */
export const SESSION_HARD_CAP_EXTRA = 10;

export class RpcInterface {
  private readonly server: https.Server;
  private readonly options: RpcInterfaceOptions;
  private readonly features: ReadonlySet<string>;
  private readonly sockets = new Set<Socket>();
  /** TLS sessions open, and those opened while max_open_sessions were (answered 503). */
  private sessions = 0;
  private readonly overCap = new WeakSet<Socket>();
  private held: { res: ServerResponse; response: RouteResponse; isHead: boolean }[] = [];

  constructor(options: RpcInterfaceOptions) {
    this.options = options;
    this.features = new Set(options.enabledFeatures);
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
        handshakeTimeout: 10_000,
        // An HTTP/1.1 request without Host is refused in route() with the JSON error body
        // (Node's own check answers an empty 400).
        requireHostHeader: false,
      },
      (req, res) => this.handle(req, res),
    );
    // Every TCP connection, handshake finished or not, so that close() can end them all.
    this.server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    const maxSessions = options.maxOpenSessions;
    if (maxSessions !== undefined && maxSessions > 0) {
      this.server.maxConnections = maxSessions + SESSION_HARD_CAP_EXTRA;
      this.server.on('secureConnection', (socket: Socket) => {
        if (this.sessions >= maxSessions) this.overCap.add(socket);
        this.sessions++;
        socket.once('close', () => this.sessions--);
      });
    }
    this.server.on('tlsClientError', (err) => options.logger.debug('TLS handshake failed', { interface: options.name, reason: err.message }));
    this.server.on('clientError', (err: NodeJS.ErrnoException, socket) => {
      options.logger.debug('malformed HTTP request', { interface: options.name, reason: err.message });
      if (socket.writable) socket.end(clientErrorAnswer(err));
    });
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
    if (this.overCap.has(req.socket)) {
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
    if (req.headers.host === undefined && req.httpVersionMajor === 1 && req.httpVersionMinor === 1) {
      throw new CovenantError('MissingHostHeader', 'an HTTP/1.1 request must carry a Host header (RFC 9112)', 400);
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
  const tooLarge = err.code === 'HPE_HEADER_OVERFLOW';
  const error = tooLarge
    ? new CovenantError('RequestHeaderTooLarge', 'the request headers exceed the limit', 431)
    : new CovenantError('MalformedRequest', `the request is not valid HTTP/1.1 (${err.code ?? 'parse error'})`, 400);
  const text = JSON.stringify(error.toBody());
  const reason = tooLarge ? 'Request Header Fields Too Large' : 'Bad Request';
  return `HTTP/1.1 ${error.status} ${reason}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`;
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
