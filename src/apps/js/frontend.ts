/**
 * The application frontend: serves the bundle members installed (set_js_app) under /app, beside
 * the node's fixed route table (docs/apps.md). While no bundle is installed it answers for nothing
 * and the built-in message log is the application; /app/tx, /app/commit and /app/caller stay built in.
 *
 * Each endpoint becomes a Route declaring its mode and its authentication policies; the request
 * pipeline (src/http/pipeline.ts) authenticates it before its body is read (so a backup
 * authenticates what it forwards), forwards it to the primary when it is `readwrite` (or asks to
 * be linearizable), and gives the handler the state its consistency asks for. The engine runs it
 * inside one KV transaction: a write transaction on the primary, or a read of the state the
 * pipeline gives (`readonly`: the node's current state, or the committed state confirmed by the
 * primary for x-covenant-consistency: linearizable).
 */
import { randomBytes } from 'node:crypto';
import { assert } from '../../base/assert.js';
import { CovenantError } from '../../base/errors.js';
import { formatTxId, type TxId } from '../../base/ids.js';
import type { Logger } from '../../base/log.js';
import type { Codec, StoreView, TableDef, Tx, WriteSet } from '../../kv/index.js';
import { TRANSACTION_ID_HEADER } from '../../http/pipeline.js';
import type { Caller, HttpMethod, RequestContext, Route, RouteResponse, StateReader } from '../../http/route.js';
import { Router, type MatchResult } from '../../http/router.js';
import type { ApplicationFrontend } from '../../http/service.js';
import { parseTxId } from '../../base/ids.js';
import type { NodeTransactions } from '../../node/api.js';
import { transactionInvalid } from '../../node/errors.js';
import { SINGLETON_KEY, TableDefs, Tables } from '../../node/tables.js';
import { authenticate, type AuthnDeps } from './authn.js';
import { BUILT_IN_APP_PATHS, parseBundle, type AppBundle, type AppEndpoint } from './bundle.js';
import { AppEngine, EngineUnavailable, runtimeOptionsOf } from './engine.js';
import type { RequestScope } from './host.js';
import { ScriptFailure, type RuntimeOptions, type ScriptRequest, type ScriptResponse } from './interpreter.js';
import { HistoricalCache, historicalPending, type HistoricalCacheLimits } from './historical.js';
import { RequestHistory } from './historical-scope.js';
import { IndexingService } from './indexing.js';
import { INDEX_INTERVAL_MS } from './limits.js';

/** What the frontend needs of the node. */
export interface JsAppNode extends NodeTransactions {
  appFrontendOpen(): boolean;
  appFrontendClosedReason(): string;
  /** The writes of the committed entry at `seqno`, from the ledger files (historical endpoints, indexes). */
  historicalEntryAt(seqno: number): { view: number; writes: WriteSet };
  /** The JSON receipt of a committed transaction (GET /node/receipt's `receipt`), or 'pending'. */
  receipt(txId: TxId): Promise<unknown>;
}

/** Stored values as the store holds them: the same object until the key is written again. */
const identityCodec: Codec<Uint8Array> = { encode: (v) => v, decode: (v) => v };
/**
 * The application bundle and runtime options, declared here as raw bytes: the frontend parses a
 * record again only when its bytes are no longer the same object (governance writes them as JSON).
 */
const StoredAppTables = {
  jsApp: { name: Tables.jsApp, codec: identityCodec },
  jsRuntimeOptions: { name: Tables.jsRuntimeOptions, codec: identityCodec },
} as const satisfies Record<string, TableDef<Uint8Array>>;
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The installed bundle, parsed once per stored record. */
interface InstalledApp {
  readonly raw: Uint8Array;
  readonly bundle: AppBundle | undefined;
  /** Why the stored bundle cannot be served (a custom constitution stored it unchecked). */
  readonly invalid: string | undefined;
  readonly routes: readonly Route[];
  readonly router: Router;
}

/** A handler's error answer whose writes are dropped (it did not call setApplyWrites(true)). */
class DropWrites extends Error {
  constructor(readonly response: ScriptResponse) {
    super('the handler answered an error without setApplyWrites(true)');
  }
}

/** The answer to a handler that failed: 500 naming the cause (its writes are dropped with its transaction). */
function scriptError(kind: ScriptFailure['kind'], message: string): CovenantError {
  switch (kind) {
    case 'Exception':
      return new CovenantError('JsException', message, 500);
    case 'Timeout':
      return new CovenantError('JsTimeout', message, 500);
    case 'OutOfMemory':
      return new CovenantError('JsOutOfMemory', message, 500);
    case 'StackOverflow':
      return new CovenantError('JsStackOverflow', message, 500);
    case 'InvalidResponse':
      return new CovenantError('JsInvalidResponse', message, 500);
    case 'Syntax':
    case 'MissingExport':
      return new CovenantError('JsAppInvalid', message, 500);
  }
}

export class JsAppFrontend implements ApplicationFrontend {
  private installedApp: InstalledApp | undefined;
  private optionsSeen: { raw: Uint8Array | undefined; options: RuntimeOptions } | undefined;
  private executions = 0;
  private failures = 0;
  private executionTimeMsTotal = 0;
  private readonly history: HistoricalCache;
  readonly indexing: IndexingService;

  constructor(
    private readonly node: JsAppNode,
    private readonly engine: AppEngine,
    private readonly authn: AuthnDeps,
    private readonly logger: Logger,
    historicalLimits: HistoricalCacheLimits,
  ) {
    this.history = new HistoricalCache(node, historicalLimits, logger);
    this.indexing = new IndexingService(
      { historicalEntryAt: (seqno) => node.historicalEntryAt(seqno), commitSeqno: () => node.commitTxId().seqno },
      logger,
      INDEX_INTERVAL_MS,
      () => this.installed()?.bundle?.indexes ?? [],
    );
    this.indexing.start();
  }

  /** GET /node/historical_cache. */
  historicalCacheReport(): Record<string, number> {
    return this.history.report();
  }

  /** GET /node/index/strategies. */
  indexStrategies(): Record<string, unknown>[] {
    return this.indexing.report();
  }

  /** Stops the background work (the node is stopping). */
  close(): void {
    this.indexing.stop();
  }

  match(method: HttpMethod, path: string): MatchResult | undefined {
    if (!path.startsWith('/app/') || BUILT_IN_APP_PATHS.has(path.slice(4))) return undefined;
    const app = this.installed();
    return app === undefined ? undefined : app.router.match(method, path);
  }

  routes(): readonly Route[] {
    return this.installed()?.routes ?? [];
  }

  checkBundle(bundle: unknown): void {
    this.engine.checkBundle(bundle);
  }

  metrics(): Record<string, unknown> {
    const app = this.installed();
    const options = this.runtimeOptions(this.node.executeRead((tx) => tx));
    const cached = this.engine.cachedInterpreter();
    return {
      bytecode_size: cached?.bytecodeBytes ?? 0,
      bytecode_used: cached !== undefined && cached.bytecodeBytes > 0,
      max_heap_size: options.heapBytesMax,
      max_stack_size: options.stackBytesMax,
      max_execution_time: options.executionTimeMsMax,
      max_cached_interpreters: 1,
      app_installed: app !== undefined,
      modules: app?.bundle?.modules.size ?? 0,
      endpoints: app?.bundle?.endpoints.length ?? 0,
      heap_used_bytes: cached?.usedBytes ?? 0,
      interpreters_built: this.engine.interpretersBuilt,
      engine_instances_replaced: this.engine.instancesReplaced,
      executions: this.executions,
      execution_failures: this.failures,
      execution_time_ms_total: Math.round(this.executionTimeMsTotal * 1000) / 1000,
    };
  }

  /** The bundle in the store now (parsed again only when its record was written again). */
  private installed(): InstalledApp | undefined {
    const raw = this.node.executeRead((tx) => tx.table(StoredAppTables.jsApp).get(SINGLETON_KEY));
    if (raw === undefined) {
      this.installedApp = undefined;
      return undefined;
    }
    if (this.installedApp?.raw === raw) return this.installedApp;
    let bundle: AppBundle | undefined;
    let invalid: string | undefined;
    try {
      bundle = parseBundle(JSON.parse(utf8.decode(raw)));
    } catch (e) {
      invalid = (e as Error).message;
    }
    const routes = bundle ? bundle.endpoints.map((endpoint) => this.routeOf(raw, endpoint)) : [];
    const router = new Router(invalid === undefined ? routes : [this.invalidRoute(invalid)]);
    this.installedApp = { raw, bundle, invalid, routes, router };
    return this.installedApp;
  }

  private invalidRoute(reason: string): Route {
    return {
      method: ['GET', 'POST', 'PUT', 'DELETE'],
      path: '/app/{path}',
      summary: 'The installed application cannot be served',
      handler: () => {
        throw new CovenantError('JsAppInvalid', `the installed application bundle is invalid: ${reason}`, 500);
      },
    };
  }

  private routeOf(raw: Uint8Array, endpoint: AppEndpoint): Route {
    const { properties } = endpoint;
    const policies = properties.authn_policies;
    return {
      method: endpoint.method,
      path: `/app${endpoint.path}`,
      summary: typeof properties.openapi?.summary === 'string' ? properties.openapi.summary : `${properties.js_module} ${properties.js_function} (${properties.mode})`,
      authenticate: (request) => authenticate(policies, request, this.authn),
      mode: properties.mode,
      openapi: { ...(properties.openapi ?? {}), 'x-covenant-authn-policies': policies, 'x-covenant-mode': properties.mode },
      handler: (ctx) => this.execute(raw, endpoint, ctx),
    };
  }

  private execute(raw: Uint8Array, endpoint: AppEndpoint, ctx: RequestContext): RouteResponse | Promise<RouteResponse> {
    if (!this.node.appFrontendOpen()) throw new CovenantError('FrontendNotOpen', `the application frontend is not open: ${this.node.appFrontendClosedReason()}`, 503);
    if (!this.engine.available) {
      return this.engine.ready().then(() => {
        if (!this.engine.available) throw unavailable();
        return this.execute(raw, endpoint, ctx);
      });
    }
    // Built only if the handler reads a field other than its body.
    const fields = () => requestJsonOf(endpoint, ctx, (table, id) => this.node.executeRead((tx) => tx.table(table).get(id)));
    if (endpoint.properties.mode === 'historical') return this.historical(raw, endpoint, ctx, fields);
    if (endpoint.properties.mode === 'readwrite') return this.write(raw, endpoint, ctx, fields);
    // The state the pipeline gives: current, or committed and confirmed (linearizable); the answer names it.
    const result = ctx.state.read((reader, version) =>
      this.run(raw, endpoint, this.scopeOf(reader, undefined), { fields, body: ctx.rawBody, seed: version, writable: false }, reader),
    );
    return responseOf(result, undefined);
  }

  private write(raw: Uint8Array, endpoint: AppEndpoint, ctx: RequestContext, fields: () => string): RouteResponse {
    let scope: RequestScope | undefined;
    const fn = (tx: Tx): ScriptResponse => {
      scope = this.scopeOf(tx, tx);
      const response = this.run(raw, endpoint, scope, { fields, body: ctx.rawBody, seed: Number(tx.startVersion), writable: true }, tx);
      if (response.status >= 400 && !scope.applyWrites) throw new DropWrites(response);
      return response;
    };
    // Read by the node after the handler ran: the digest the handler set, if any.
    const options = {
      get claimsDigest() {
        return scope?.claimsDigest;
      },
    };
    try {
      // The pipeline names the transaction in the answer (and waits for its commit when asked).
      return responseOf(ctx.state.write(fn, options).result, undefined);
    } catch (e) {
      if (e instanceof DropWrites) return responseOf(e.response, undefined);
      throw e;
    }
  }

  /**
   * A historical endpoint: the committed transaction named by x-covenant-transaction-id, its
   * receipt and the state right after it (historical-scope.ts); 202 until the entries it needs are
   * read from the ledger files, TransactionInvalid (404) for a transaction that never committed.
   */
  private historical(raw: Uint8Array, endpoint: AppEndpoint, ctx: RequestContext, fields: () => string): RouteResponse {
    const header = ctx.headers[TRANSACTION_ID_HEADER];
    if (typeof header !== 'string') {
      throw new CovenantError('MissingRequiredHeader', `the ${TRANSACTION_ID_HEADER} header names the transaction a historical endpoint reads (<view>.<seqno>)`, 400);
    }
    const txId = parseTxId(header);
    if (!txId) throw new CovenantError('InvalidHeaderValue', `${TRANSACTION_ID_HEADER} "${header.slice(0, 64)}" is not a transaction id <view>.<seqno>`, 400);
    const status = this.node.statusOf(txId);
    if (status === 'Invalid') throw transactionInvalid(header);
    if (status !== 'Committed') return historicalPending(header, `transaction ${header} is ${status}`);
    const target = this.history.entry(txId.seqno, txId);
    if (target === undefined) return historicalPending(header, `transaction ${header} is being read from the ledger files`);
    assert(target.view === txId.view, () => `committed transaction ${header} is the ledger entry at its seqno (view ${target.view})`);
    const history = new RequestHistory(target, this.history, this.indexing, this.node.commitTxId().seqno);
    const run = (tx: Tx) => {
      const scope = { ...this.scopeOf(tx, undefined), historical: history };
      try {
        return this.run(raw, endpoint, scope, { fields, body: ctx.rawBody, seed: txId.seqno, writable: false }, tx);
      } catch (e) {
        if (history.notReady !== undefined || history.failure !== undefined) return undefined;
        throw e;
      }
    };
    const { result } = this.node.executeReadAt(run);
    if (history.notReady !== undefined) return historicalPending(header, `${history.notReady} is being read`);
    if (history.failure !== undefined) throw history.failure;
    return responseOf(result!, txId);
  }

  private scopeOf(reader: Pick<StoreView, 'map'>, tx: Tx | undefined): RequestScope {
    return {
      reader,
      tx,
      commitTxId: () => formatTxId(this.node.commitTxId()),
      randomBytes: (n) => new Uint8Array(randomBytes(n)),
      nowMs: () => this.node.clock.nowMs(),
      applyWrites: false,
      claimsDigest: undefined,
    };
  }

  /** Runs the handler; maps the script's failures to 500 answers (nothing it wrote is kept: the transaction is dropped). */
  private run(raw: Uint8Array, endpoint: AppEndpoint, scope: RequestScope, request: ScriptRequest, reader: StateReader): ScriptResponse {
    const app = this.installed();
    // The bundle was replaced between routing and execution: the request ran against the old one's routes.
    if (app?.raw !== raw || app.bundle === undefined) {
      throw new CovenantError('JsAppChanged', 'the application was replaced while this request was routed: retry', 503, undefined, 1);
    }
    const bundle = app.bundle;
    const options = this.runtimeOptions(reader);
    const startedMs = performance.now();
    this.executions++;
    try {
      return this.engine.withInterpreter(raw, bundle, options, scope, (interpreter) =>
        interpreter.call(endpoint.properties.js_module, endpoint.properties.js_function, request),
      );
    } catch (e) {
      // A historical read that is not ready stops the handler: the request is answered 202, not failed.
      if (e instanceof ScriptFailure && scope.historical?.notReady !== undefined) throw scriptError(e.kind, e.message);
      this.failures++;
      if (e instanceof ScriptFailure) {
        this.logger.info('application handler failed', { endpoint: `${endpoint.method} ${endpoint.path}`, kind: e.kind, reason: e.message });
        throw scriptError(e.kind, `${endpoint.properties.js_module} ${endpoint.properties.js_function}: ${e.message}`);
      }
      if (e instanceof EngineUnavailable) throw unavailable();
      throw e;
    } finally {
      this.executionTimeMsTotal += performance.now() - startedMs;
    }
  }

  private runtimeOptions(reader: Pick<StoreView, 'table'>): RuntimeOptions {
    const raw = reader.table(StoredAppTables.jsRuntimeOptions).get(SINGLETON_KEY);
    const seen = this.optionsSeen;
    if (seen !== undefined && seen.raw === raw) return seen.options;
    let stored: unknown;
    try {
      stored = raw === undefined ? undefined : JSON.parse(utf8.decode(raw));
    } catch {
      stored = undefined;
    }
    const options = runtimeOptionsOf(stored);
    this.optionsSeen = { raw, options };
    return options;
  }
}

function unavailable(): CovenantError {
  return new CovenantError('JsEngineUnavailable', 'the application engine is restarting after a failure: retry shortly', 503, undefined, 1);
}

/** The request as the handler sees it (its body goes separately, as bytes). */
/** The registered certificate (PEM) of a user or member id, from the state the request runs on. */
type CertificateOf = (table: TableDef<string>, id: string) => string | undefined;

function requestJsonOf(endpoint: AppEndpoint, ctx: RequestContext, certificateOf: CertificateOf): string {
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(ctx.headers)) {
    if (value === undefined) continue;
    headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return JSON.stringify({
    method: ctx.method,
    path: ctx.path,
    route: endpoint.path,
    params: ctx.params,
    query: new URLSearchParams(ctx.query as Record<string, string>).toString(),
    headers,
    caller: callerOf(ctx.caller, certificateOf),
  });
}

function callerOf(caller: Caller, certificateOf: CertificateOf): Record<string, unknown> {
  const policy = caller.policy ?? 'no_auth';
  switch (caller.kind) {
    case 'user':
      return { policy, id: caller.id, cert: certificateOf(TableDefs.usersCerts, caller.id!) ?? null };
    case 'member':
      return { policy, id: caller.id, cert: certificateOf(TableDefs.membersCerts, caller.id!) ?? null };
    case 'jwt': {
      const claims = caller.claims ?? {};
      return { policy: 'jwt', jwt: { issuer: claims.iss, subject: caller.id ?? null, claims } };
    }
    default:
      return caller.cert === undefined ? { policy } : { policy, id: caller.id, cert: caller.cert };
  }
}

const DEFAULT_CONTENT_TYPES: Record<ScriptResponse['kind'], string | undefined> = {
  none: undefined,
  json: 'application/json',
  text: 'text/plain; charset=utf-8',
  bytes: 'application/octet-stream',
};

function responseOf(response: ScriptResponse, txId: TxId | undefined): RouteResponse {
  const headers: Record<string, string> = { ...response.headers };
  if (txId !== undefined) headers[TRANSACTION_ID_HEADER] = formatTxId(txId);
  const contentType = DEFAULT_CONTENT_TYPES[response.kind];
  if (contentType !== undefined && headers['content-type'] === undefined) headers['content-type'] = contentType;
  if (response.kind === 'none') return { status: response.status, headers, bodyKind: 'none' };
  if (response.kind === 'bytes') return { status: response.status, headers, bodyKind: 'bytes', body: response.bytes };
  return { status: response.status, headers, bodyKind: 'text', body: response.text };
}
