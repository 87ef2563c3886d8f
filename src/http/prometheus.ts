/**
 * The node's metrics in the Prometheus text exposition format (`GET /node/metrics` with Accept
 * `text/plain` or `application/openmetrics-text`), with prom-client. Names follow etcd's style,
 * units last; docs/operations.md lists each with its meaning.
 *
 * Two kinds: what the node's hot paths observe as it happens (request latency per route and
 * status, ledger appends and syncs) is recorded in histograms at the cost of a label lookup; every
 * other figure (consensus, service, governance, files, certificates, token refresh) is read from
 * the node when scraped, so it costs nothing between scrapes.
 */
import { X509Certificate } from 'node:crypto';
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { COMMIT_STAGES, type CommitStage, type CommitStageTimings, type NodeOperatorQueries } from '../node/api.js';
import { GovTableDefs, PROPOSAL_STATES } from '../gov/index.js';
import type { SessionMetrics } from './sessions.js';
import type { WaitingWorkMetrics } from './waiting-work.js';
import type { RequestRateMetrics } from './request-rate.js';
import { LedgerFolderStats, SnapshotFolderStats } from './metrics-files.js';

/** The content type of the text exposition format (Prometheus asks for it, OpenMetrics or not). */
export const PROMETHEUS_CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

/** Whether an Accept header asks for the text format rather than JSON. */
export function wantsPrometheusText(accept: string | undefined): boolean {
  return accept !== undefined && /(^|[\s,])(text\/plain|application\/openmetrics-text)/.test(accept);
}

/** What the scrape reads from the node, besides its operator queries. */
export interface MetricsSources {
  readonly node: NodeOperatorQueries;
  readonly sessions: () => Record<string, SessionMetrics & { readonly request_rate?: RequestRateMetrics }>;
  /** The node-wide budget of waiting requests (src/http/waiting-work.ts). */
  readonly waitingWork: () => WaitingWorkMetrics;
  readonly ledgerDirectory: string;
  readonly snapshotsDirectory: string;
  /** The node's current TLS certificate (service-endorsed once joined). */
  readonly nodeCertificatePem: () => string;
}

const LATENCY_BUCKETS_SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Fine enough below 50 ms to read a stage's median and p99 from the buckets (bench/commit-stages.ts). */
const COMMIT_STAGE_BUCKETS_SECONDS = [
  0.0001, 0.00025, 0.0005, 0.00075, 0.001, 0.0015, 0.002, 0.0025, 0.003, 0.004, 0.005, 0.006, 0.007, 0.008, 0.009, 0.01, 0.012, 0.014, 0.016, 0.018, 0.02, 0.025,
  0.03, 0.035, 0.04, 0.05, 0.075, 0.1, 0.25, 0.5, 1, 2.5, 8,
];
const DISK_BUCKETS_SECONDS = [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];
/**
 * The node's reports read once per scrape, however many gauges use them (each report reads the
 * store; the network report parses the service certificate).
 */
type NetworkReport = ReturnType<NodeOperatorQueries['networkReport']>;
type ConsensusReport = ReturnType<NodeOperatorQueries['consensusReport']>;
type NodeStateReport = ReturnType<NodeOperatorQueries['stateReport']>;

class ScrapeReads {
  private network: NetworkReport | undefined;
  private consensus: ConsensusReport | undefined;
  private state: NodeStateReport | undefined;
  private sessionsRead: ReturnType<MetricsSources['sessions']> | undefined;
  private ledger: ReturnType<LedgerFolderStats['read']> | undefined;

  constructor(readonly sources: MetricsSources) {}

  networkReport(): NetworkReport {
    return (this.network ??= this.sources.node.networkReport());
  }
  consensusReport(): ConsensusReport {
    return (this.consensus ??= this.sources.node.consensusReport());
  }
  stateReport(): NodeStateReport {
    return (this.state ??= this.sources.node.stateReport());
  }
  sessions(): ReturnType<MetricsSources['sessions']> {
    return (this.sessionsRead ??= this.sources.sessions());
  }
  ledgerFiles(stats: LedgerFolderStats | undefined): ReturnType<LedgerFolderStats['read']> | undefined {
    return (this.ledger ??= stats?.read());
  }
}

/** The registry of one node process; also the ledger files' DiskTimings (src/platform/fs-disk.ts) and the commit stages' timings. */
export class NodeMetrics implements CommitStageTimings {
  readonly registry = new Registry();
  private readonly requestSeconds: Histogram<'interface' | 'route' | 'method' | 'status'>;
  /** Children of requestSeconds by their labels joined: a request costs a string and a Map lookup. */
  private readonly requestChildren = new Map<string, { observe(value: number): void }>();
  private readonly appendSeconds: Histogram;
  private readonly appendedBytes: Counter;
  private readonly syncSeconds: Histogram;
  /** Children of commitStageSeconds, one a stage (fixed: no label is built per write). */
  private readonly commitStageChildren = new Map<CommitStage, { observe(value: number): void }>();
  private sources: MetricsSources | undefined;
  /** What the scrape in progress read from the node (undefined between scrapes). */
  private reads: ScrapeReads | undefined;
  private ledgerFiles: LedgerFolderStats | undefined;
  private snapshotFiles: SnapshotFolderStats | undefined;
  /** Changes of primary as of a view whose first entry was already in the history (the count moves only with a new view). */
  private primaryChanges: { view: number; count: number } | undefined;
  /** Expiry of the certificates last parsed, by PEM (they change with a renewal, not between scrapes). */
  private readonly expiries = new Map<string, number | undefined>();

  constructor() {
    collectDefaultMetrics({ register: this.registry });
    const registers = [this.registry];
    this.requestSeconds = new Histogram({
      name: 'covenant_http_request_duration_seconds',
      help: 'Time from a request read to its answer handed to the socket, by interface, route template, method and status (its _count counts requests)',
      labelNames: ['interface', 'route', 'method', 'status'],
      buckets: LATENCY_BUCKETS_SECONDS,
      registers,
    });
    this.appendSeconds = new Histogram({ name: 'covenant_ledger_append_duration_seconds', help: 'Duration of one write of ledger entries to a chunk file', buckets: DISK_BUCKETS_SECONDS, registers });
    this.appendedBytes = new Counter({ name: 'covenant_ledger_appended_bytes_total', help: 'Bytes appended to ledger files', registers });
    this.syncSeconds = new Histogram({ name: 'covenant_ledger_fsync_duration_seconds', help: 'Duration of one fdatasync of a ledger file (durability point)', buckets: DISK_BUCKETS_SECONDS, registers });
    const commitStageSeconds = new Histogram({
      name: 'covenant_commit_stage_seconds',
      help: "Time from a committed write's request read to each stage of its commit round, on the primary (docs/performance.md)",
      labelNames: ['stage'],
      buckets: COMMIT_STAGE_BUCKETS_SECONDS,
      registers,
    });
    for (const stage of COMMIT_STAGES) this.commitStageChildren.set(stage, commitStageSeconds.labels(stage));
    this.defineScraped();
  }

  commitStage(stage: CommitStage, seconds: number): void {
    this.commitStageChildren.get(stage)?.observe(seconds);
  }

  /** The node and its files, once they exist (before, the scraped figures are absent). */
  attach(sources: MetricsSources): void {
    this.sources = sources;
    this.ledgerFiles = new LedgerFolderStats(sources.ledgerDirectory);
    this.snapshotFiles = new SnapshotFolderStats(sources.snapshotsDirectory);
  }

  requestDone(interfaceName: string, route: string, method: string, status: number, seconds: number): void {
    const key = `${interfaceName} ${method} ${status} ${route}`;
    let child = this.requestChildren.get(key);
    if (child === undefined) {
      child = this.requestSeconds.labels(interfaceName, route, method, String(status));
      this.requestChildren.set(key, child);
    }
    child.observe(seconds);
  }

  append(seconds: number, bytes: number): void {
    this.appendSeconds.observe(seconds);
    this.appendedBytes.inc(bytes);
  }

  sync(seconds: number): void {
    this.syncSeconds.observe(seconds);
  }

  async text(): Promise<string> {
    const reads = this.sources === undefined ? undefined : new ScrapeReads(this.sources);
    this.reads = reads;
    try {
      return await this.registry.metrics();
    } finally {
      if (this.reads === reads) this.reads = undefined;
    }
  }

  /** Changes of primary over the service's life: the view history is walked only when the view moved since it was last complete. */
  private primaryChangesNow(s: ScrapeReads): number {
    const view = s.consensusReport().current_view;
    if (this.primaryChanges !== undefined && this.primaryChanges.view === view) return this.primaryChanges.count;
    const history = s.sources.node.viewHistory();
    const count = Math.max(0, history.length - 1);
    const lastView = Number(history[history.length - 1]?.split('.')[0] ?? 0);
    // Until the new view's first entry is in the history, the count may still move: walk again next time.
    this.primaryChanges = lastView === view ? { view, count } : undefined;
    return count;
  }

  private expiryOf(pem: string): number | undefined {
    if (this.expiries.has(pem)) return this.expiries.get(pem);
    const expiry = expiryOf(pem);
    if (this.expiries.size >= 8) this.expiries.clear();
    this.expiries.set(pem, expiry);
    return expiry;
  }

  /** Gauges whose value is read from the node at scrape time. */
  private defineScraped(): void {
    const registers = [this.registry];
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- prom-client calls collect with the gauge as `this`
    const self = this;
    const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[], collect: (g: Gauge<L>, s: ScrapeReads) => void) =>
      new Gauge<L>({
        name,
        help,
        labelNames,
        registers,
        collect: function (this: Gauge<L>) {
          this.reset();
          const reads = self.reads ?? (self.sources === undefined ? undefined : new ScrapeReads(self.sources));
          if (reads !== undefined) collect(this, reads);
        },
      });
    gauge('covenant_node_is_primary', 'Whether this node is the primary (1) or not (0)', [], (g, s) => g.set(s.sources.node.isPrimary() ? 1 : 0));
    gauge('covenant_node_state', "This node's lifecycle state: 1 for the current one", ['state'], (g, s) => g.labels(s.sources.node.state).set(1));
    gauge('covenant_service_is_open', 'Whether the service is Open (1) or not (0)', [], (g, s) => g.set(s.networkReport().service_status === 'Open' ? 1 : 0));
    gauge('covenant_service_status', "The service's status as this node knows it: 1 for the current one", ['status'], (g, s) => g.labels(s.networkReport().service_status).set(1));
    gauge('covenant_service_recovery_count', 'Disaster recoveries the service went through', [], (g, s) => g.set(s.networkReport().recovery_count));
    gauge('covenant_consensus_view', 'The current view (Raft term); it rises with every election', [], (g, s) => g.set(s.consensusReport().current_view));
    gauge('covenant_consensus_primary_changes', 'Views that have entries in the ledger, less one: changes of primary over the service\'s life', [], (g, s) =>
      g.set(self.primaryChangesNow(s)),
    );
    gauge('covenant_consensus_commit_seqno', 'The highest committed seqno this node knows', [], (g, s) => g.set(s.consensusReport().commit_seqno));
    gauge('covenant_consensus_last_seqno', 'The last seqno in this node\'s ledger', [], (g, s) => g.set(s.consensusReport().last_seqno));
    gauge('covenant_ledger_last_signed_seqno', 'The seqno of the last signature transaction', [], (g, s) => g.set(s.stateReport().last_signed_seqno));
    gauge('covenant_ledger_unsigned_entries', 'Entries after the last signature (the signature interval in entries, as it stands)', [], (g, s) =>
      g.set(Math.max(0, s.consensusReport().last_seqno - s.stateReport().last_signed_seqno)),
    );
    gauge('covenant_governance_proposals', 'Governance proposals by state', ['state'], (g, s) => {
      const counts = new Map<string, number>(PROPOSAL_STATES.map((state) => [state, 0]));
      s.sources.node.executeRead((tx) => tx.table(GovTableDefs.proposalsInfo).forEach((info) => {
        const state = String(info?.state ?? 'Unknown');
        counts.set(state, (counts.get(state) ?? 0) + 1);
      }));
      for (const [state, count] of counts) g.labels(state).set(count);
    });
    gauge('covenant_nodes', 'Nodes of the service by status (Pending nodes await members\' trust)', ['status'], (g, s) => {
      const counts = new Map<string, number>();
      for (const n of s.sources.node.listNodes()) counts.set(n.status, (counts.get(n.status) ?? 0) + 1);
      for (const [status, count] of counts) g.labels(status).set(count);
    });
    for (const [field, help] of [
      ['active', 'Client sessions open'],
      ['peak', 'The most client sessions open at once since start'],
      ['dropped', 'Connections closed at accept (cap or address share exhausted) since start'],
      ['timed_out', 'Connections closed for want of a TLS handshake or a first request in time, since start'],
      ['evicted', 'Sessions closed to make room for a client on an address holding fewer, since start'],
    ] as const) {
      gauge(`covenant_http_sessions_${field}`, help, ['interface'], (g, s) => {
        for (const [name, metrics] of Object.entries(s.sessions())) g.labels(name).set(metrics[field]);
      });
    }
    gauge('covenant_http_requests_rate_limited', 'Requests refused beyond their address\'s rate (429 TooManyRequests) since start', ['interface'], (g, s) => {
      for (const [name, metrics] of Object.entries(s.sessions())) {
        if (metrics.request_rate !== undefined) g.labels(name).set(metrics.request_rate.refused);
      }
    });
    gauge('covenant_http_waiting_work_bytes', 'Bytes of requests waiting (bodies, linearizable reads, commits, forwards) against the node-wide budget', [], (g, s) => g.set(s.sources.waitingWork().used_bytes));
    gauge('covenant_http_waiting_work_max_bytes', 'The node-wide budget of waiting requests (max_waiting_work_size)', [], (g, s) => g.set(s.sources.waitingWork().max_bytes));
    gauge('covenant_http_waiting_work_refused', 'Requests refused for want of budget (503 WaitingWorkBudgetExhausted) since start', [], (g, s) => g.set(s.sources.waitingWork().refused));
    gauge('covenant_ledger_chunks', 'Ledger chunk files in ledger.directory', [], (g, s) => g.set(s.ledgerFiles(self.ledgerFiles)?.chunks ?? 0));
    gauge('covenant_ledger_size_bytes', 'Bytes of the ledger chunk files in ledger.directory', [], (g, s) => g.set(s.ledgerFiles(self.ledgerFiles)?.sizeBytes ?? 0));
    gauge('covenant_snapshot_last_seqno', 'The seqno of the newest committed snapshot (0: none)', [], (g) => g.set(self.snapshotFiles?.newest()?.seqno ?? 0));
    gauge('covenant_snapshot_size_bytes', 'The size of the newest committed snapshot', [], (g) => {
      const newest = self.snapshotFiles?.newest();
      if (newest !== undefined) g.set(newest.sizeBytes);
    });
    gauge('covenant_snapshot_age_seconds', 'Seconds since the newest committed snapshot was written', [], (g, s) => {
      const newest = self.snapshotFiles?.newest();
      if (newest !== undefined) g.set(Math.max(0, (s.sources.node.clock.nowMs() - newest.mtimeMs) / 1000));
    });
    gauge('covenant_certificate_expiry_timestamp_seconds', 'When a certificate this node serves stops being valid (Unix seconds)', ['certificate'], (g, s) => {
      const service = self.expiryOf(s.networkReport().service_certificate);
      if (service !== undefined) g.labels('service').set(service);
      const own = self.expiryOf(s.sources.nodeCertificatePem());
      if (own !== undefined) g.labels('node').set(own);
    });
    for (const [field, help] of [
      ['attempts', 'Token signing-key refreshes attempted'],
      ['successes', 'Token signing-key refreshes that succeeded'],
      ['failures', 'Token signing-key refreshes that failed'],
      ['consecutive_failures', 'Token signing-key refreshes that failed since the last success'],
    ] as const) {
      gauge(`covenant_jwt_key_refresh_${field}`, `${help}, by issuer (this node refreshes while primary)`, ['issuer'], (g, s) => {
        for (const [issuer, report] of Object.entries(s.sources.node.jwtRefreshMetrics().issuers)) g.labels(issuer).set(report[field]);
      });
    }
    gauge('covenant_jwt_key_refresh_last_success_timestamp_seconds', 'When an issuer\'s keys were last refreshed (Unix seconds)', ['issuer'], (g, s) => {
      for (const [issuer, report] of Object.entries(s.sources.node.jwtRefreshMetrics().issuers)) {
        if (report.last_success_at !== undefined) g.labels(issuer).set(Date.parse(report.last_success_at) / 1000);
      }
    });
  }
}

function expiryOf(pem: string): number | undefined {
  try {
    return Math.floor(Date.parse(new X509Certificate(pem).validTo) / 1000);
  } catch {
    return undefined; // not a certificate (yet)
  }
}
