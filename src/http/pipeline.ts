/**
 * The one request pipeline (docs/architecture.md, decision 23), for built-in routes and the
 * endpoints of an application bundle alike, free of any transport:
 *
 *   route → authenticate (the endpoint's policies) → validate → forward or execute (by the
 *   endpoint's mode) → consistency (`committed` writes, `linearizable` reads) →
 *   x-covenant-transaction-id → the one error mapping.
 *
 * The HTTPS server (server.ts) is an adapter: it reads a request, hands its head to route() before
 * the body is read (a bearer token is checked before its body is accepted), then the body to
 * execute(), and writes the answer. A request a backup forwarded arrives at the primary's
 * handle() with the caller the backup authenticated (forwarding.ts), and the node simulator calls
 * handle() directly. Handlers read and write through `ctx.state`, which the pipeline gives as the
 * request's consistency asks; they never choose it themselves.
 *
 * An InvariantError raised while executing a request is not an answer: the pipeline hands it to
 * the injected failStop (the node logs it as fatal and its process ends), and no answer is sent.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { InvariantError, assert } from '../base/assert.js';
import { CovenantError } from '../base/errors.js';
import { formatTxId, parseTxId, type TxId } from '../base/ids.js';
import type { Logger } from '../base/log.js';
import type { Tx } from '../kv/index.js';
import type { NodeTransactions, WriteOptions, WriteResult } from '../node/api.js';
import { notPrimary } from '../node/errors.js';
import { errorHeaders, httpErrors, toCovenantError } from './errors.js';
import { buildRequestContext } from './request-context.js';
import {
  modeOf,
  type AuthPolicy,
  type Caller,
  type EndpointMode,
  type HttpMethod,
  type RequestContext,
  type RequestState,
  type Route,
  type RouteResponse,
  type StateReader,
} from './route.js';
import type { Router } from './router.js';

/** Asks for a write answered once committed, or a read confirmed by consensus (see EndpointMode). */
export const CONSISTENCY_HEADER = 'x-covenant-consistency';
/** The transaction an answer names: the one a write made, or the state a read read. */
export const TRANSACTION_ID_HEADER = 'x-covenant-transaction-id';

export type RequestHeaders = IncomingHttpHeaders;

export interface Authenticator {
  /**
   * Returns the caller for a policy or throws a 401 CovenantError; a promise (rejected with the
   * 401) when the check is asynchronous (a bearer token seen for the first time).
   */
  authenticate(policy: AuthPolicy, request: { headers: RequestHeaders; clientCertificateDer: Buffer | undefined }): Caller | Promise<Caller>;
}

/** Sends a request that needs the primary to it, from a backup (forwarding.ts). */
export interface RequestForwarder {
  /**
   * `unrouted`: this node found no route for it (UNROUTED_APP_REQUEST): the primary routes it and
   * authenticates its caller itself, from the client's certificate and headers.
   */
  forward(ctx: RequestContext, rawQuery: string, unrouted: boolean): Promise<RouteResponse>;
}

/** What the pipeline needs of the node: whether it leads, and its transactions and their fate. */
export type PipelineNode = Pick<
  NodeTransactions,
  'isPrimary' | 'executeWrite' | 'executeReadAt' | 'confirmLinearizableRead' | 'readCommitted' | 'checkCommitWaitRoom' | 'awaitCommit'
>;

/** A request as it arrived, before its body is read. */
export interface RequestHead {
  readonly method: HttpMethod;
  readonly path: string;
  readonly rawQuery: string;
  readonly headers: RequestHeaders;
  readonly clientCertificateDer: Buffer | undefined;
  readonly remoteAddress: string | undefined;
  readonly interfaceName: string;
  /** The operator features of the interface it arrived on; absent for a forwarded request (checked by the backup). */
  readonly enabledFeatures?: ReadonlySet<string>;
  /** Set on a request a backup forwarded: the caller the backup authenticated (the channel authenticates the backup). */
  readonly forwardedCaller?: Caller;
  /**
   * Set on a request a backup forwarded without a route of its own for it: routed and
   * authenticated here, from the client's certificate as the backup received it (the channel
   * authenticates the backup, which checked the client's possession of its key).
   */
  readonly forwardedUnrouted?: boolean;
}

/** A whole request: its head and its body's bytes. */
export interface PipelineRequest extends RequestHead {
  readonly body: Buffer;
}

/** A request matched to its route and authenticated, before its body is read. */
export interface RoutedRequest<C = Caller | Promise<Caller>> {
  readonly route: Route;
  readonly params: Record<string, string>;
  readonly head: RequestHead;
  readonly caller: C;
}

export interface RequestPipelineOptions {
  readonly router: Router;
  readonly authenticator: Authenticator;
  /** The node the requests run on; absent, routes run without consistency or forwarding (a bare route table). */
  readonly node?: PipelineNode;
  /** Sends what needs the primary to it when this node is a backup; absent: everything runs here. */
  readonly forwarder?: RequestForwarder;
  readonly logger: Logger;
  /** A broken invariant while executing a request: the node must stop (log fatal, end the process). */
  readonly failStop: (error: InvariantError) => void;
}

type Consistency = 'default' | 'committed' | 'linearizable';

const ANONYMOUS: Caller = { kind: 'anonymous' };

/**
 * What a backup routes a request under /app/ to when its state holds no endpoint for it but the
 * request needs the primary (a write method, or a consistency asked for): an application deployed
 * or changed on the primary may not have reached this backup yet, and only the primary can say
 * whether the endpoint exists. Forwarded as it came (forwardsUnrouted); run only if this node
 * became primary meanwhile, and then its own state says: no such endpoint.
 */
const UNROUTED_APP_REQUEST: Route = {
  method: ['GET', 'HEAD', 'POST', 'PUT', 'DELETE'],
  path: '/app/{unrouted}',
  summary: 'an application request this backup has no endpoint for, forwarded to the primary',
  mode: 'readwrite',
  handler: (ctx) => {
    throw httpErrors.notFound(ctx.path);
  },
};

export class RequestPipeline {
  constructor(private readonly options: RequestPipelineOptions) {}

  get router(): Router {
    return this.options.router;
  }

  /** route → authenticate: the route, its path parameters and the caller (a promise while a token is checked). */
  route(head: RequestHead): RoutedRequest {
    const result = this.options.router.match(head.method, head.path);
    if (result.kind === 'not-found') {
      if (this.forwardsUnrouted(head)) return { route: UNROUTED_APP_REQUEST, params: {}, head, caller: ANONYMOUS };
      throw httpErrors.notFound(head.path);
    }
    if (result.kind === 'method-not-allowed') throw httpErrors.methodNotAllowed(head.method, head.path, result.allowed);
    const { route, params } = result.match;
    if (route.feature !== undefined && head.enabledFeatures !== undefined && !head.enabledFeatures.has(route.feature)) {
      throw new CovenantError('ResourceNotFound', `${head.path} requires the ${route.feature} operator feature, which is not enabled on interface ${head.interfaceName}`, 404);
    }
    return { route, params, head, caller: head.forwardedCaller ?? this.authenticate(route, head) };
  }

  /** Whether a request no route matches goes to the primary to be routed there (UNROUTED_APP_REQUEST). */
  private forwardsUnrouted(head: RequestHead): boolean {
    const node = this.options.node;
    if (node === undefined || this.options.forwarder === undefined || node.isPrimary() || !head.path.startsWith('/app/')) return false;
    if (head.forwardedCaller !== undefined || head.forwardedUnrouted === true) return false;
    return (head.method !== 'GET' && head.method !== 'HEAD') || head.headers[CONSISTENCY_HEADER] !== undefined;
  }

  private authenticate(route: Route, head: RequestHead): Caller | Promise<Caller> {
    const request = { headers: head.headers, clientCertificateDer: head.clientCertificateDer };
    if (route.authenticate) return route.authenticate(request);
    const policy = route.auth ?? 'none';
    return policy === 'none' ? ANONYMOUS : this.options.authenticator.authenticate(policy, request);
  }

  /**
   * validate → forward or execute → consistency → transaction id. Synchronous when the handler is
   * (most are: a request then costs no promise). Throws, or rejects, with what failure() maps.
   */
  execute(routed: RoutedRequest<Caller>, body: Buffer): RouteResponse | Promise<RouteResponse> {
    const { route, head } = routed;
    const mode = modeOf(route, head.method);
    const consistency = consistencyOf(mode, head.headers[CONSISTENCY_HEADER]);
    const node = this.options.node;
    const linearizable = mode === 'readonly' && consistency === 'linearizable';
    const state = new PipelineState(node, linearizable);
    const ctx = buildRequestContext(route, {
      method: head.method,
      path: head.path,
      params: routed.params,
      rawQuery: head.rawQuery,
      rawBody: body,
      headers: head.headers,
      caller: routed.caller,
      clientCertificateDer: head.clientCertificateDer,
      remoteAddress: head.remoteAddress,
      interfaceName: head.interfaceName,
      state,
    });
    if (node === undefined) return run(route, ctx, state);
    if ((mode === 'readwrite' || linearizable) && !node.isPrimary()) {
      // Only the primary executes writes and confirms reads; a request forwarded once is not forwarded again.
      if (head.forwardedCaller !== undefined || head.forwardedUnrouted === true) throw notPrimary('the node the request was forwarded to is no longer primary');
      const forwarder = this.options.forwarder;
      if (forwarder !== undefined) return forwarder.forward(ctx, head.rawQuery, route === UNROUTED_APP_REQUEST);
    }
    if (mode === 'readwrite' && consistency !== 'default') return this.executeCommitted(route, ctx, state, node);
    if (linearizable) return node.confirmLinearizableRead().then(() => run(route, ctx, state));
    return run(route, ctx, state);
  }

  /** A write answered once its transaction is committed (refused before it runs when too many wait already). */
  private executeCommitted(route: Route, ctx: RequestContext, state: PipelineState, node: PipelineNode): Promise<RouteResponse> {
    node.checkCommitWaitRoom();
    const waitForCommit = (response: RouteResponse): RouteResponse | Promise<RouteResponse> => {
      const txId = state.writtenTxId ?? namedTxId(response);
      if (txId === undefined) return response;
      return node.awaitCommit(txId).then(() => response);
    };
    const answer = run(route, ctx, state);
    return answer instanceof Promise ? answer.then(waitForCommit) : Promise.resolve(waitForCommit(answer));
  }

  /**
   * The whole pipeline for a request already read: a forwarded one on the primary, or the
   * simulator's. Resolves to the answer, errors included; rejects only with an InvariantError,
   * after failStop (nothing may be answered then).
   */
  handle(request: PipelineRequest): Promise<RouteResponse> {
    try {
      const routed = this.route(request);
      const caller = routed.caller;
      const answer =
        caller instanceof Promise ? caller.then((known) => this.execute({ ...routed, caller: known }, request.body)) : this.execute(routed as RoutedRequest<Caller>, request.body);
      return Promise.resolve(answer).then(undefined, (e: unknown) => this.answerFor(e));
    } catch (e) {
      return Promise.resolve().then(() => this.answerFor(e));
    }
  }

  private answerFor(e: unknown): RouteResponse {
    const error = this.failure(e);
    if (error === undefined) throw e;
    return errorResponse(error);
  }

  /**
   * The one error mapping. A CovenantError is the answer; anything else is 500 InternalError
   * (logged, its message never leaked). An InvariantError is no answer: failStop is called and
   * undefined returned — the caller sends nothing.
   */
  failure(e: unknown): CovenantError | undefined {
    if (e instanceof InvariantError) {
      this.options.failStop(e);
      return undefined;
    }
    const error = toCovenantError(e);
    if (error.code === 'InternalError') {
      this.options.logger.fail('request failed with an internal error', { reason: e instanceof Error ? (e.stack ?? e.message) : String(e) });
    }
    return error;
  }
}

/** An error as an answer: the JSON body, its headers (Retry-After, WWW-Authenticate, Allow) and `extra`. */
export function errorResponse(error: CovenantError, extra?: Record<string, string>): RouteResponse {
  const headers = errorHeaders(error);
  return { status: error.status, body: error.toBody(), bodyKind: 'json', headers: extra === undefined ? headers : { ...headers, ...extra } };
}

/**
 * The consistency a request asks for, checked against its endpoint's mode: a write may ask
 * `committed` (or `linearizable`, the same for a write), a read `linearizable`; the other modes
 * take no such header and ignore it.
 */
function consistencyOf(mode: EndpointMode, value: string | string[] | undefined): Consistency {
  if (value === undefined || mode === 'historical' || mode === 'operator') return 'default';
  if (mode === 'readwrite') {
    if (value === 'committed' || value === 'linearizable') return 'committed';
    throw badConsistency(value, '"committed" or "linearizable" on a write');
  }
  if (value === 'linearizable') return 'linearizable';
  throw badConsistency(value, '"linearizable" on a read');
}

function badConsistency(value: unknown, allowed: string): CovenantError {
  return new CovenantError('InvalidHeaderValue', `${CONSISTENCY_HEADER} must be ${allowed} (got "${String(value).slice(0, 64)}")`, 400);
}

/** The transaction id the handler put in its answer itself (a write the node ran for it, such as a recovery share's). */
function namedTxId(response: RouteResponse): TxId | undefined {
  const named = response.headers?.[TRANSACTION_ID_HEADER];
  return typeof named === 'string' ? parseTxId(named) : undefined;
}

/** Runs the handler: its answer, or its error's, with the transaction id of what it read or wrote. */
function run(route: Route, ctx: RequestContext, state: PipelineState): RouteResponse | Promise<RouteResponse> {
  let answer: RouteResponse | Promise<RouteResponse>;
  try {
    answer = route.handler(ctx);
  } catch (e) {
    return failedAfter(e, state);
  }
  return finish(answer, state);
}

/** The answer with the transaction id of what the request read or wrote, unless the handler named one. */
function finish(answer: RouteResponse | Promise<RouteResponse>, state: PipelineState): RouteResponse | Promise<RouteResponse> {
  if (answer instanceof Promise) return answer.then((response) => withTxId(response, state), (e: unknown) => failedAfter(e, state));
  return withTxId(answer, state);
}

function withTxId(response: RouteResponse, state: PipelineState): RouteResponse {
  const txId = state.txId;
  if (txId === undefined || response.headers?.[TRANSACTION_ID_HEADER] !== undefined) return response;
  return { ...response, headers: { ...response.headers, [TRANSACTION_ID_HEADER]: formatTxId(txId) } };
}

/** A handler that failed after reading or writing: its error answer names the state it read (a read's 404). */
function failedAfter(e: unknown, state: PipelineState): RouteResponse {
  const txId = state.txId;
  if (txId === undefined || !(e instanceof CovenantError)) throw e;
  return errorResponse(e, { [TRANSACTION_ID_HEADER]: formatTxId(txId) });
}

/** ctx.state: the store as the request's consistency gives it, recording the transaction the answer names. */
class PipelineState implements RequestState {
  /** The last transaction read or written. */
  txId: TxId | undefined;
  /** The last transaction written (the one a committed write waits for). */
  writtenTxId: TxId | undefined;

  constructor(
    private readonly node: PipelineNode | undefined,
    private readonly linearizable: boolean,
  ) {}

  read<T>(fn: (reader: StateReader, version: number) => T): T {
    const node = this.node;
    assert(node !== undefined, 'a route that reads the store is served with a node');
    const { result, txId } = this.linearizable ? node.readCommitted((view) => fn(view, Number(view.version))) : node.executeReadAt((tx) => fn(tx, Number(tx.startVersion)));
    this.txId = txId;
    return result;
  }

  write<T>(fn: (tx: Tx) => T, options?: WriteOptions): WriteResult<T> {
    const node = this.node;
    assert(node !== undefined, 'a route that writes the store is served with a node');
    const written = node.executeWrite(fn, options);
    if (written.txId !== undefined) this.txId = this.writtenTxId = written.txId;
    return written;
  }
}
