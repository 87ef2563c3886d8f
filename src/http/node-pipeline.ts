/**
 * The request pipeline of one node (pipeline.ts) with every frontend in its route table: the
 * operator frontend (/node), governance (/gov), signed statements, downloads, the built-in
 * application and an application bundle (/app). Transport-free: the node's RPC interfaces
 * (service.ts) serve it over HTTPS, and the node simulator drives the same pipeline directly.
 */
import type { InvariantError } from '../base/assert.js';
import { CovenantError } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { NodeConfig } from '../config/index.js';
import type { JsEngine, SandboxLimits } from '../gov/index.js';
import type { NodeOperatorQueries, NodeServices, NodeTransactions } from '../node/api.js';
import { TokenValidator } from '../jwt/index.js';
import { StoreAuthenticator } from './auth.js';
import { operatorRoutes } from './frontends/operator.js';
import { governanceRoutes } from './frontends/governance.js';
import { statementRoutes } from './frontends/statements.js';
import { downloadDepsOf, downloadRoutes } from './frontends/downloads.js';
import { openApiDocument } from './openapi.js';
import { RequestPipeline } from './pipeline.js';
import { PrimaryForwarder } from './forwarding.js';
import type { HttpMethod, Route, RouteResponse } from './route.js';
import { Router, type MatchResult } from './router.js';
import type { WaitingWorkBudget } from './waiting-work.js';

/**
 * An application deployed by governance, served beside the fixed route table: its routes change
 * when members install another bundle. The pipeline routes to it first (Router's overlay).
 */
export interface ApplicationFrontend {
  /** The installed bundle's route for a request under /app; undefined when no bundle answers for the path. */
  match(method: HttpMethod, path: string): MatchResult | undefined;
  /** The installed bundle's routes (for GET /node/api). */
  routes(): readonly Route[];
  /** GET /node/js_metrics. */
  metrics(): unknown;
  /** Checks a set_js_app bundle; throws an Error naming what is wrong. */
  checkBundle(bundle: unknown): void;
  /** GET /node/historical_cache. */
  historicalCacheReport(): unknown;
  /** GET /node/index/strategies: the installed bundle's indexes and their progress. */
  indexStrategies(): unknown[];
}

export interface NodePipelineOptions {
  readonly node: NodeServices;
  readonly config: NodeConfig;
  readonly logger: Logger;
  /** The built-in application's routes (served while no application bundle is installed). */
  readonly appRoutes: (node: NodeTransactions) => Route[];
  /** The hosted JavaScript application (src/apps/js), when the node hosts one. */
  readonly application?: ApplicationFrontend;
  /** Routes of whoever serves the pipeline (the RPC interfaces' GET /node/metrics). */
  readonly extraRoutes?: readonly Route[];
  /** A broken invariant while executing a request: the node must stop. */
  readonly failStop: (error: InvariantError) => void;
  /** The node-wide waiting-work budget, which requests forwarded to this node wait in too. */
  readonly waitingWork?: WaitingWorkBudget;
  /** The governance sandbox to use (several nodes of one process may share one); default: one loaded for this node. */
  readonly governanceSandbox?: Promise<JsEngine>;
  /** The governance sandbox's budgets; default: DEFAULT_SANDBOX_LIMITS. */
  readonly governanceSandboxLimits?: SandboxLimits;
}

export interface NodePipeline {
  readonly pipeline: RequestPipeline;
  readonly forwarder: PrimaryForwarder;
}

export function createNodePipeline(options: NodePipelineOptions): NodePipeline {
  const { node } = options;
  const router = new Router(nodeRoutes(options), options.application ? (method, path) => options.application!.match(method, path) : undefined);
  const tokens = new TokenValidator({ lookup: (kid) => node.jwtSigningKeyRaw(kid), nowMs: () => node.clock.nowMs() });
  const pipeline: RequestPipeline = new RequestPipeline({
    router,
    authenticator: new StoreAuthenticator({ isUser: (id) => node.isUser(id) }, tokens),
    node,
    // The forwarder runs what is forwarded to this node through this pipeline: each needs the other.
    forwarder: { forward: (ctx, rawQuery, unrouted): Promise<RouteResponse> => forwarder.forward(ctx, rawQuery, unrouted) },
    logger: options.logger,
    failStop: options.failStop,
  });
  const forwarder: PrimaryForwarder = new PrimaryForwarder(node, () => pipeline, options.logger.child({ component: 'forwarding' }), node.clock, undefined, options.waitingWork);
  return { pipeline, forwarder };
}

function nodeRoutes(options: NodePipelineOptions): Route[] {
  const { node, application } = options;
  let routes: Route[] = [];
  const openApi = () => openApiDocument([...routes, ...(application?.routes() ?? [])], { title: 'Covenant node API', version: node.versionReport().version });
  const primaryAddress = (interfaceName?: string) => primaryAddressOf(node, interfaceName);
  routes = [
    ...operatorRoutes({
      node,
      openApi,
      primaryAddress,
      ...(application ? { jsMetrics: () => application.metrics(), historicalCache: () => application.historicalCacheReport(), indexStrategies: () => application.indexStrategies() } : {}),
    }),
    ...downloadRoutes(
      downloadDepsOf(options.config, {
        isPrimary: () => node.isPrimary(),
        primaryAddress,
        requestSnapshot: () => node.requestSnapshot(),
        servedSnapshotVerdict: (path, name, stamp, read) => node.servedSnapshotVerdict(path, name, stamp, read),
      }),
    ),
    ...governanceRoutes(node, {
      nowMs: () => node.clock.nowMs(),
      ...(application ? { checkAppBundle: (bundle: unknown) => application.checkBundle(bundle) } : {}),
      ...(options.governanceSandbox ? { sandbox: options.governanceSandbox } : {}),
      ...(options.governanceSandboxLimits ? { sandboxLimits: options.governanceSandboxLimits } : {}),
    }),
    ...statementRoutes({ node, primaryAddress }),
    ...options.appRoutes(node).map((route) => whileAppOpen(route, node)),
    ...(options.extraRoutes ?? []),
  ];
  return routes;
}

/**
 * The primary's published address on its interface named like `interfaceName` (the one the
 * request came in on), else on its first interface. Interfaces differ in their operator
 * features: a download redirected to another interface could find its route switched off.
 */
function primaryAddressOf(node: Pick<NodeOperatorQueries, 'listNodes'>, interfaceName?: string): string | undefined {
  const primary = node.listNodes().find((n) => n.primary);
  if (!primary) return undefined;
  const same = interfaceName === undefined ? undefined : primary.rpc_interfaces[interfaceName];
  return (same ?? Object.values(primary.rpc_interfaces)[0])?.published_address;
}

/**
 * An application route that answers only once members have opened the service to users (spec
 * "Service opening"); before, 503 FrontendNotOpen, as GET /node/ready/app says. A backup forwards
 * writes before this check: the primary, which executes them, decides.
 */
function whileAppOpen(route: Route, node: Pick<NodeOperatorQueries, 'appFrontendOpen' | 'appFrontendClosedReason'>): Route {
  const handler = route.handler;
  return {
    ...route,
    handler: (ctx) => {
      if (!node.appFrontendOpen()) {
        throw new CovenantError('FrontendNotOpen', `the application frontend is not open: ${node.appFrontendClosedReason()}`, 503);
      }
      return handler(ctx);
    },
  };
}
