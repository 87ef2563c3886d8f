/**
 * Composes the frontends of one node onto its RPC interfaces: the operator frontend (/node), the
 * application (/app), and later governance (/gov). The route table is shared by every interface;
 * operator features decide per interface which download routes exist.
 */
import type { Logger } from '../base/log.js';
import type { NodeConfig } from '../config/index.js';
import { CovenantError } from '../base/errors.js';
import type { NodeOperatorQueries, NodeServices, NodeTransactions } from '../node/api.js';
import { TokenValidator } from '../jwt/index.js';
import { StoreAuthenticator } from './auth.js';
import { operatorRoutes } from './frontends/operator.js';
import { governanceRoutes } from './frontends/governance.js';
import { statementRoutes } from './frontends/statements.js';
import { downloadDepsOf, downloadRoutes } from './frontends/downloads.js';
import { openApiDocument } from './openapi.js';
import { json, type HttpMethod, type OperatorFeature, type Route } from './route.js';
import { Router, type MatchResult } from './router.js';
import { PROMETHEUS_CONTENT_TYPE, wantsPrometheusText, type NodeMetrics } from './prometheus.js';
import type { SessionMetrics } from './sessions.js';
import { RpcInterface, type TlsIdentity } from './server.js';
import { PrimaryForwarder } from './forwarding.js';
import { WaitingWorkBudget } from './waiting-work.js';
import { waitingWorkBytesDefault } from '../node/node.js';
import { requestRateLimitsOf } from './request-rate-config.js';
import { RequestTurnBudget } from './turn-budget.js';
import { requestsPerTurnMax, requestTurnMs } from '../node/node.js';
import { EventLoopDelayMonitor } from '../platform/event-loop-delay.js';

export interface NodeServerOptions {
  readonly node: NodeServices;
  readonly config: NodeConfig;
  readonly logger: Logger;
  /** The built-in application's routes (served while no application bundle is installed). */
  readonly appRoutes: (node: NodeTransactions) => Route[];
  /** The hosted JavaScript application (src/apps/js), when the node hosts one. */
  readonly application?: ApplicationFrontend;
  readonly tls: TlsIdentity;
  /** Prometheus metrics (GET /node/metrics asked for text); without it, the JSON figures only. */
  readonly metrics?: NodeMetrics;
}

/**
 * An application deployed by governance, served beside the fixed route table: its routes change
 * when members install another bundle. Kept a separate frontend so that the request pipeline can
 * take it in whole.
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

export class NodeServer {
  readonly interfaces: RpcInterface[] = [];
  private readonly router: Router;
  private readonly forwarder: PrimaryForwarder;
  /** One budget for the waiting requests of every interface and the requests forwarded to this node. */
  private readonly waitingWork: WaitingWorkBudget;
  /** One bound on the request work of an event-loop turn, for every interface. */
  private readonly turnBudget = new RequestTurnBudget(requestsPerTurnMax, requestTurnMs);

  private tls: TlsIdentity;
  private readonly eventLoop = new EventLoopDelayMonitor();

  constructor(private readonly options: NodeServerOptions) {
    const { node } = options;
    this.tls = options.tls;
    options.metrics?.attach({
      node,
      sessions: () => this.sessionReport(),
      waitingWork: () => this.waitingWork.metrics(),
      ledgerDirectory: options.config.ledger.directory,
      snapshotsDirectory: options.config.snapshots.directory,
      nodeCertificatePem: () => this.tls.certificatePem,
    });
    this.waitingWork = new WaitingWorkBudget(options.config.max_waiting_work_size ?? waitingWorkBytesDefault);
    let routes: Route[] = [];
    const application = options.application;
    const openApi = () => openApiDocument([...routes, ...(application?.routes() ?? [])], { title: 'Covenant node API', version: node.versionReport().version });
    routes = [
      ...operatorRoutes({
        node,
        openApi,
        primaryAddress: (interfaceName) => this.primaryAddress(interfaceName),
        ...(application
          ? { jsMetrics: () => application.metrics(), historicalCache: () => application.historicalCacheReport(), indexStrategies: () => application.indexStrategies() }
          : {}),
      }),
      ...downloadRoutes(
        downloadDepsOf(options.config, {
          isPrimary: () => node.isPrimary(),
          primaryAddress: (interfaceName) => this.primaryAddress(interfaceName),
          requestSnapshot: () => node.requestSnapshot(),
          servedSnapshotVerdict: (path, name, stamp, read) => node.servedSnapshotVerdict(path, name, stamp, read),
        }),
      ),
      ...governanceRoutes(node, { nowMs: () => node.clock.nowMs(), ...(application ? { checkAppBundle: (bundle: unknown) => application.checkBundle(bundle) } : {}) }),
      ...statementRoutes({ node, primaryAddress: (interfaceName) => this.primaryAddress(interfaceName) }),
      ...options.appRoutes(node).map((route) => whileAppOpen(route, node)),
      {
        method: 'GET',
        path: '/node/metrics',
        summary:
          "This node's metrics: in the Prometheus text format when Accept asks for text/plain or application/openmetrics-text (docs/operations.md), else as JSON: the client sessions of each RPC interface (open, peak, caps, dropped, timed out, pipelining), its waiting work, the expiry of the certificates it serves, its event-loop delay and the snapshots it wrote",
        responses: {
          200: 'Prometheus text; or JSON: session counts by interface name, the waiting-work budget, certificates.node and certificates.service (valid_from, valid_to, seconds_until_expiry), event-loop delay (max, p99, mean) since start and recently, snapshot generation',
        },
        handler: async (ctx) => {
          const metrics = options.metrics;
          if (metrics !== undefined && wantsPrometheusText(ctx.headers.accept)) {
            return { status: 200, headers: { 'content-type': PROMETHEUS_CONTENT_TYPE }, body: await metrics.text(), bodyKind: 'text' };
          }
          return json(200, {
            sessions: this.sessionReport(),
            waiting_work: this.waitingWork.metrics(),
            request_turns: this.turnBudget.metrics(),
            certificates: node.certificateMetrics(),
            event_loop: this.eventLoop.report(),
            snapshots: node.snapshotMetrics(),
          });
        },
      },
    ];
    this.router = new Router(routes, application ? (method, path) => application.match(method, path) : undefined);
    this.forwarder = new PrimaryForwarder(node, () => this.router, options.logger.child({ component: 'forwarding' }), node.clock, undefined, this.waitingWork);
    const tokens = new TokenValidator({ lookup: (kid) => node.jwtSigningKeyRaw(kid), nowMs: () => node.clock.nowMs() });
    const authenticator = new StoreAuthenticator({ isUser: (id) => node.isUser(id) }, tokens);
    for (const [name, iface] of Object.entries(options.config.rpc_interfaces)) {
      const { host, port } = splitHostPort(iface.bind_address);
      this.interfaces.push(
        new RpcInterface({
          name,
          host,
          port,
          tls: options.tls,
          router: this.router,
          enabledFeatures: iface.enabled_operator_features as OperatorFeature[],
          maxBodySizeBytes: iface.max_body_size,
          maxOpenSessions: iface.max_open_sessions,
          ...(iface.max_sessions_per_address !== undefined ? { maxSessionsPerAddress: iface.max_sessions_per_address } : {}),
          tlsHandshakeTimeoutMs: iface.tls_handshake_timeout,
          firstRequestTimeoutMs: iface.first_request_timeout,
          ...(iface.max_pipelined_requests !== undefined ? { maxPipelinedRequests: iface.max_pipelined_requests } : {}),
          requestRate: requestRateLimitsOf(iface),
          turnBudget: this.turnBudget,
          waitingWork: this.waitingWork,
          authenticator,
          forwarder: this.forwarder,
          logger: options.logger.child({ interface: name }),
          ...(options.metrics !== undefined ? { onRequestDone: options.metrics.requestDone.bind(options.metrics) } : {}),
        }),
      );
    }
  }

  /**
   * Listens on every interface; returns name → actual "host:port" (port 0 resolved). `preferPorts`
   * names ports to try first (a restarted node's previous ones); one that is taken is logged and
   * the configured address is bound instead.
   */
  async listen(preferPorts: ReadonlyMap<string, number> = new Map()): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    for (const iface of this.interfaces) {
      const address = await listenPreferring(preferPorts.get(iface.name), (port) => iface.listen(port), (reason) =>
        this.options.logger.fail(`RPC interface ${iface.name}: ${reason}`),
      );
      const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
      out.set(iface.name, `${host}:${address.port}`);
    }
    return out;
  }

  setTlsIdentity(tls: TlsIdentity): void {
    this.tls = tls;
    for (const iface of this.interfaces) iface.setTlsIdentity(tls);
  }

  private sessionReport(): Record<string, SessionMetrics> {
    return Object.fromEntries(this.interfaces.map((i) => [i.name, i.sessionMetrics()]));
  }

  /**
   * The primary's published address on its interface named like `interfaceName` (the one the
   * request came in on), else on its first interface. Interfaces differ in their operator
   * features: a download redirected to another interface could find its route switched off.
   */
  private primaryAddress(interfaceName?: string): string | undefined {
    const primary = this.options.node.listNodes().find((n) => n.primary);
    if (!primary) return undefined;
    const same = interfaceName === undefined ? undefined : primary.rpc_interfaces[interfaceName];
    return (same ?? Object.values(primary.rpc_interfaces)[0])?.published_address;
  }

  async close(): Promise<void> {
    this.forwarder.close();
    this.eventLoop.stop();
    await Promise.all(this.interfaces.map((i) => i.close()));
  }
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

export function splitHostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  let host = address.slice(0, i);
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return { host, port: Number(address.slice(i + 1)) };
}

/**
 * Binds `preferredPort` if there is one and it is free, else the configured address (listen with
 * no port). Only "address in use" falls back; any other failure is the caller's.
 */
export async function listenPreferring<T>(preferredPort: number | undefined, listen: (port?: number) => Promise<T>, log: (reason: string) => void): Promise<T> {
  if (preferredPort !== undefined) {
    try {
      return await listen(preferredPort);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw e;
      log(`port ${preferredPort}, bound before the restart, is taken now: binding the configured address instead (peers learn the new one when this node rejoins)`);
    }
  }
  return listen();
}
