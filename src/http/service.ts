/**
 * Serves the request pipeline of one node (node-pipeline.ts: every frontend in one route table)
 * on its RPC interfaces. Every interface shares the pipeline; operator features decide per
 * interface which download routes exist.
 */
import type { InvariantError } from '../base/assert.js';
import type { Logger } from '../base/log.js';
import type { NodeConfig } from '../config/index.js';
import type { NodeServices, NodeTransactions } from '../node/api.js';
import { json, type OperatorFeature, type Route } from './route.js';
import { PROMETHEUS_CONTENT_TYPE, wantsPrometheusText, type NodeMetrics } from './prometheus.js';
import type { SessionMetrics } from './sessions.js';
import { RpcInterface, type TlsIdentity } from './server.js';
import type { PrimaryForwarder } from './forwarding.js';
import { WaitingWorkBudget } from './waiting-work.js';
import { waitingWorkBytesDefault } from '../node/node.js';
import { requestRateLimitsOf } from './request-rate-config.js';
import { RequestTurnBudget } from './turn-budget.js';
import { requestsPerTurnMax, requestTurnMs } from '../node/node.js';
import { EventLoopDelayMonitor } from '../platform/event-loop-delay.js';
import { createNodePipeline, type ApplicationFrontend } from './node-pipeline.js';

export type { ApplicationFrontend } from './node-pipeline.js';

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
  /**
   * An invariant broke while a request executed: the node must stop at once (log it as fatal, end
   * the process with a non-zero status), never answer 500 and carry on.
   */
  readonly failStop: (error: InvariantError) => void;
}

export class NodeServer {
  readonly interfaces: RpcInterface[] = [];
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
    const metricsRoute: Route = {
      method: 'GET',
      path: '/node/metrics',
      summary:
        "This node's metrics: in the Prometheus text format when Accept asks for text/plain or application/openmetrics-text (docs/operations.md), else as JSON: the client sessions of each RPC interface (open, peak, caps, dropped, timed out, pipelining), its waiting work, the expiry of the certificates it serves, its event-loop delay and the snapshots it wrote",
      mode: 'operator',
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
    };
    const { pipeline, forwarder } = createNodePipeline({
      node,
      config: options.config,
      logger: options.logger,
      appRoutes: options.appRoutes,
      ...(options.application ? { application: options.application } : {}),
      extraRoutes: [metricsRoute],
      failStop: options.failStop,
      waitingWork: this.waitingWork,
    });
    this.forwarder = forwarder;
    for (const [name, iface] of Object.entries(options.config.rpc_interfaces)) {
      const { host, port } = splitHostPort(iface.bind_address);
      this.interfaces.push(
        new RpcInterface({
          name,
          host,
          port,
          tls: options.tls,
          pipeline,
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

  async close(): Promise<void> {
    this.forwarder.close();
    this.eventLoop.stop();
    await Promise.all(this.interfaces.map((i) => i.close()));
  }
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
