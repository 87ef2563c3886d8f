/**
 * Client requests under the node simulator, through each node's request pipeline
 * (src/http/node-pipeline.ts: the same route table, authentication, forwarding, consistency and
 * error mapping as `covenant node`, without the HTTPS adapter). A member activates itself, opens
 * the service and deploys a JavaScript application with governance proposals and ballots, sent to
 * nodes drawn by the seed (a backup forwards them to the primary); then, through crashes,
 * restarts, partitions and lossy links, clients call the application's endpoints on any node:
 * writes asking `x-covenant-consistency: committed` (a backup forwards them) and reads asking
 * `linearizable`.
 *
 * Checkers, besides NodeSim's after every step:
 * - request-answer: every answer is a success or a refusal a client may retry (503, or a 404 of a
 *   key never written); never a 500 (a handler failure, an internal error);
 * - acknowledged-write: a write answered 200 names its transaction, which is committed on every
 *   node once the network healed;
 * - linearizable-read: a read sees every write acknowledged before it was sent (its state's seqno
 *   is at least theirs), and the value it returns is the one the newest acknowledged write at or
 *   below that seqno gave (or a later one not yet acknowledged).
 * Forwarded frames are lost and delayed like any other, never duplicated: the TLS channels never
 * duplicate a frame, and forwarding counts on it.
 * An InvariantError while a node executes a request stops that node (its process ends: the
 * pipeline's failStop) and is reported as an `invariant` violation.
 */
import { CovenantError } from '../../base/errors.js';
import { InvariantError } from '../../base/assert.js';
import { formatTxId, parseTxId, type TxId } from '../../base/ids.js';
import { utf8 } from '../../base/bytes.js';
import { X509Certificate } from 'node:crypto';
import { certificateId, generateIdentity } from '../../crypto/index.js';
import { COSE_CONTENT_TYPE, DEFAULT_SANDBOX_LIMITS, loadJsEngine, signGovRequest, type GovMessageType, type JsEngine } from '../../gov/index.js';
import { createNodePipeline } from '../../http/node-pipeline.js';
import type { PrimaryForwarder } from '../../http/forwarding.js';
import { CONSISTENCY_HEADER, TRANSACTION_ID_HEADER, type RequestPipeline } from '../../http/pipeline.js';
import type { Route, RouteResponse } from '../../http/route.js';
import { AppEngine, jsApplicationOn, type JsAppFrontend } from '../../apps/js/index.js';
import { loggingAppRoutes } from '../../apps/logging.js';
import { FrameKind, type CovenantNode } from '../../node/node.js';
import { Violation, type CheckerName } from './checker.js';
import { NodeSim, type NodeSimOptions, type NodeSimReport, type SimHost } from './node-sim.js';
import { writeFile } from './node-sim-config.js';

export interface RequestSimOptions extends NodeSimOptions {
  /** Routes added to every node's table (a test's route that breaks an invariant). */
  readonly extraRoutes?: readonly Route[];
  /**
   * 'default': the clients read without x-covenant-consistency (served at once from the state of
   * whichever node they reach), and the linearizable-read checker must catch a stale read.
   * Default 'linearizable'.
   */
  readonly readConsistency?: 'linearizable' | 'default';
}

export interface RequestSimReport extends NodeSimReport {
  /** Answers by status and code (`200`, `503 NoPrimary`, ...). */
  readonly answers: Readonly<Record<string, number>>;
  readonly acknowledgedWrites: number;
  readonly linearizableReads: number;
  /** Requests a backup forwarded to the primary and that were answered. */
  readonly forwardedAnswers: number;
  readonly governance: readonly string[];
}

/** The application the member deploys: values by key, in a private map. */
export const SIM_BUNDLE = {
  metadata: {
    endpoints: {
      '/values/{key}': {
        put: { js_module: 'app.js', js_function: 'put', authn_policies: ['member_cert'], mode: 'readwrite' },
        get: { js_module: 'app.js', js_function: 'get', authn_policies: ['member_cert'], mode: 'readonly' },
      },
    },
  },
  modules: [
    {
      name: 'app.js',
      module: [
        "const values = () => covenant.kv['values'];",
        'export function put(request) {',
        '  values().set(covenant.strToBuf(request.params.key), request.body.arrayBuffer());',
        '  return { body: { key: request.params.key } };',
        '}',
        'export function get(request) {',
        '  const value = values().get(covenant.strToBuf(request.params.key));',
        "  if (value === undefined) return { statusCode: 404, body: { error: { code: 'ResourceNotFound', message: 'no value' } } };",
        '  return { body: { value: covenant.bufToStr(value) } };',
        '}',
      ].join('\n'),
    },
  ],
};

/** Refusals a client retries: the primary changed or is unknown, a wait ran out, a bound was reached. */
const RETRYABLE_CODES = new Set([
  'NoPrimary',
  'NotPrimary',
  'ForwardingTimedOut',
  'ForwardingFailed',
  'PrimaryChanged',
  'TooManyForwardedRequests',
  'TransactionRolledBack',
  'CommitWaitTimedOut',
  'TooManyPendingTransactions',
  'TooManyCommitWaiters',
  'ReadNotConfirmed',
  'TooManyPendingReads',
  'JsAppChanged',
]);

const KEYS = 5;
const GOVERNANCE_STEPS_MAX = 3000;
/** Wall-clock budgets of the governance sandbox: generous, so that the machine's load does not steer a run. */
const GOV_SANDBOX_TIME_MS_MAX = 30_000;

interface Serving {
  readonly node: CovenantNode;
  readonly pipeline: RequestPipeline;
  readonly forwarder: PrimaryForwarder;
  readonly application: JsAppFrontend;
}

interface Member {
  readonly id: string;
  readonly privateKeyPem: string;
  readonly certificateDer: Buffer;
}

export interface AckedWrite {
  readonly key: string;
  readonly value: string;
  readonly seqno: number;
  readonly txId: string;
}

export class RequestSim extends NodeSim {
  private readonly serving = new Map<SimHost, Serving>();
  private member: Member | undefined;
  private sandbox: Promise<JsEngine> | undefined;
  private appEngine: AppEngine | undefined;
  private signedCount = 0;
  private readonly answers: Record<string, number> = {};
  private readonly acked: AckedWrite[] = [];
  private readonly governanceTrace: string[] = [];
  private linearizableReads = 0;
  private forwardedAnswers = 0;
  private nextValue = 0;
  /** What the request checkers found, reported by check() after the step. */
  private readonly requestViolations: { checker: CheckerName; message: string }[] = [];
  /** Client requests are sent during the steps (after the governance phase). */
  clientsOn = false;

  constructor(override readonly options: RequestSimOptions) {
    super(options);
    // The TLS channels never duplicate a frame, and forwarding counts on it (a write forwarded twice would run twice).
    this.network.neverDuplicated = new Set([FrameKind.ForwardedRequest, FrameKind.ForwardedResponse]);
  }

  override async setUp(): Promise<void> {
    const identity = await generateIdentity({ commonName: 'member0' });
    this.member = { id: certificateId(identity.certificatePem), privateKeyPem: identity.privateKeyPem, certificateDer: new X509Certificate(identity.certificatePem).raw };
    writeFile(this.hosts[0]!.disk, '/sim/n0/member0_cert.pem', identity.certificatePem);
    this.sandbox = loadJsEngine();
    // Loaded and started before the run: afterwards a governance request settles in promise callbacks only.
    await (await this.sandbox).ready();
    this.appEngine = await AppEngine.load();
    await super.setUp();
    await this.until('every node joined', () => this.hosts.every((h) => h.node?.state === 'PartOfNetwork'));
    await this.governance();
  }

  // ------------------------------------------------------------------ each node serves its pipeline

  protected override attach(host: SimHost, node: CovenantNode): void {
    super.attach(host, node);
    this.unserve(host);
    const application = jsApplicationOn(this.appEngine!, {
      node,
      logger: node.logger,
      bearer: () => {
        throw new CovenantError('InvalidAuthenticationInfo', 'the simulated clients present no tokens', 401);
      },
      historicalCache: host.startConfig.historical_cache,
    });
    // Indexing follows commit on a wall-clock timer, outside the seeded run (no index is declared here).
    application.indexing.stop();
    const { pipeline, forwarder } = createNodePipeline({
      node,
      config: host.startConfig,
      logger: node.logger,
      appRoutes: loggingAppRoutes,
      application,
      extraRoutes: this.options.extraRoutes ?? [],
      failStop: (error) => this.failStop(host, node, error),
      governanceSandbox: this.sandbox!,
      governanceSandboxLimits: { ...DEFAULT_SANDBOX_LIMITS, executionTimeMsMax: GOV_SANDBOX_TIME_MS_MAX },
    });
    this.serving.set(host, { node, pipeline, forwarder, application });
  }

  /** The node's process ends: what it was forwarding is never answered (`stopping`: it stops in order, answering 503 NodeStopping). */
  private unserve(host: SimHost, stopping = false): void {
    const serving = this.serving.get(host);
    if (serving === undefined) return;
    this.serving.delete(host);
    if (stopping) serving.forwarder.close();
    serving.application.close();
  }

  /** The pipeline's failStop: the node's process ends at once; the run reports the broken invariant. */
  private failStop(host: SimHost, node: CovenantNode, error: InvariantError): void {
    if (host.node !== node) return;
    this.failures.push(`${host.name} stopped on a broken invariant while executing a request: ${error.message}`);
    this.crash(host);
  }

  override crash(host: SimHost, powerLoss = false): void {
    this.unserve(host);
    super.crash(host, powerLoss);
  }

  override stopAll(): void {
    for (const host of this.hosts) this.unserve(host, true);
    super.stopAll();
  }

  // ------------------------------------------------------------------ requests

  /** A request to `host`'s pipeline as a client with the member's certificate would send it. */
  send(host: SimHost, method: 'GET' | 'POST' | 'PUT' | 'DELETE', path: string, options: { body?: Uint8Array; headers?: Record<string, string> } = {}): Promise<RouteResponse> {
    const serving = this.serving.get(host);
    if (serving === undefined || host.node === undefined) throw new Violation('invariant', `${host.name} is down: no request can be sent to it`);
    const q = path.indexOf('?');
    return serving.pipeline.handle({
      method,
      path: q === -1 ? path : path.slice(0, q),
      rawQuery: q === -1 ? '' : path.slice(q + 1),
      headers: options.headers ?? {},
      body: Buffer.from(options.body ?? new Uint8Array(0)),
      clientCertificateDer: this.member!.certificateDer,
      remoteAddress: '127.0.0.100',
      interfaceName: 'primary',
      enabledFeatures: new Set(host.addresses.rpc[0]!.enabledOperatorFeatures),
    });
  }

  /** Sends a request and steps the network and clock until it is answered. */
  async request(host: SimHost, method: 'GET' | 'POST' | 'PUT', path: string, options: { body?: Uint8Array; headers?: Record<string, string> } = {}): Promise<RouteResponse> {
    let answer: RouteResponse | undefined;
    let failed: unknown;
    this.send(host, method, path, options).then(
      (response) => (answer = response),
      (e: unknown) => (failed = e ?? new Error('rejected')),
    );
    await this.until(`${method} ${path} on ${host.name} is answered`, () => answer !== undefined || failed !== undefined);
    if (failed !== undefined) throw failed instanceof InvariantError ? new Violation('invariant', failed.message) : failed;
    return answer!;
  }

  private async until(what: string, done: () => boolean): Promise<void> {
    for (let i = 0; i < GOVERNANCE_STEPS_MAX; i++) {
      if (done()) return;
      await this.advanceSettled(false);
    }
    throw new Violation('liveness', `${what}: not within ${GOVERNANCE_STEPS_MAX} steps`);
  }

  /** A live node drawn by the seed: primary or backup. */
  private anyLiveHost(): SimHost | undefined {
    const live = this.hosts.filter((h) => h.node !== undefined && this.serving.has(h) && h.node.state === 'PartOfNetwork');
    return live.length === 0 ? undefined : this.rng.pick(live);
  }

  // ------------------------------------------------------------------ governance, through the pipeline

  private signed(type: GovMessageType, payload: unknown, proposalId?: string): Uint8Array {
    const member = this.member!;
    return signGovRequest({
      type,
      payload: payload === undefined ? '' : JSON.stringify(payload),
      privateKeyPem: member.privateKeyPem,
      memberId: member.id,
      // Each request its own creation time: a replayed request is refused.
      createdAtSeconds: Math.floor(this.clock.nowMs() / 1000) + this.signedCount++,
      ...(proposalId !== undefined ? { proposalId } : {}),
    });
  }

  /** A signed governance write to a node drawn by the seed, until one is answered 200 (a retryable refusal is sent again). */
  private async govWrite(path: string, type: GovMessageType, payload: unknown, proposalId?: string): Promise<any> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const host = this.anyLiveHost();
      if (host === undefined) throw new Violation('liveness', 'no live node to take a governance request');
      const answer = await this.request(host, 'POST', path, { body: this.signed(type, payload, proposalId), headers: { 'content-type': COSE_CONTENT_TYPE, [CONSISTENCY_HEADER]: 'committed' } });
      const forwarded = host.node?.isPrimary() === false;
      // Ids (of keys the crypto library draws) left out: the trace is a function of the seed.
      const shape = path.replace(this.member!.id, '{member_id}').replace(/proposals\/[0-9a-f]{64}/, 'proposals/{proposal_id}');
      this.governanceTrace.push(`t=${this.step} ${shape} on ${host.name}${forwarded ? ' (backup)' : ''}: ${answer.status}`);
      if (answer.status === 200) {
        if (typeof answer.headers?.[TRANSACTION_ID_HEADER] !== 'string') throw new Violation('acknowledged-write', `${path} answered 200 without ${TRANSACTION_ID_HEADER}`);
        return bodyOf(answer);
      }
      // A ballot sent again after a refusal that left open whether it ran (a forward timed out, the
      // primary changed): the first may have closed the proposal. The primary's state says.
      if (type === 'ballot' && attempt > 0 && answer.status === 400 && errorCodeOf(answer) === 'ProposalNotOpen') {
        const proposal = await this.govRead(`/gov/members/proposals/${proposalId!}`);
        if (proposal.state === 'Accepted') return proposal;
      }
      this.checkAnswer(answer, path);
    }
    throw new Violation('liveness', `${path}: refused 20 times`);
  }

  /** A linearizable governance read from a node drawn by the seed, until one is answered 200 (a retryable refusal is sent again). */
  private async govRead(path: string): Promise<any> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const host = this.anyLiveHost();
      if (host === undefined) throw new Violation('liveness', 'no live node to take a governance read');
      const answer = await this.request(host, 'GET', path, { headers: { [CONSISTENCY_HEADER]: 'linearizable' } });
      if (answer.status === 200) return bodyOf(answer);
      this.checkAnswer(answer, path);
    }
    throw new Violation('liveness', `${path}: refused 20 times`);
  }

  private async propose(actions: unknown[]): Promise<void> {
    const created = await this.govWrite('/gov/members/proposals:create', 'proposal', { actions });
    const id = created.proposal_id as string;
    const ballot = { ballot: 'export function vote(proposal, proposerId) { return true; }' };
    const voted = created.state === 'Open' ? await this.govWrite(`/gov/members/proposals/${id}/ballots/${this.member!.id}:submit`, 'ballot', ballot, id) : created;
    if (voted.state !== 'Accepted') throw new Violation('liveness', `proposal ${JSON.stringify(actions).slice(0, 80)} ended ${voted.state}: ${JSON.stringify(voted.failure ?? null)}`);
  }

  /** The member acknowledges the state digest, opens the service and deploys the application. */
  private async governance(): Promise<void> {
    const member = this.member!.id;
    const digest = await this.govWrite(`/gov/members/state-digests/${member}:update`, 'state_digest', undefined);
    await this.govWrite(`/gov/members/state-digests/${member}:ack`, 'ack', { state_digest: digest.state_digest });
    await this.propose([{ name: 'transition_service_to_open', args: {} }]);
    await this.propose([{ name: 'set_js_app', args: { bundle: SIM_BUNDLE } }]);
    this.trace.push(`t=${this.step} service open, application deployed`);
  }

  // ------------------------------------------------------------------ the client workload

  override advance(faults: boolean): void {
    if (this.clientsOn && this.rng.chance(0.3)) this.clientRequest();
    super.advance(faults);
  }

  /** A committed write or a linearizable read of the application, on a node drawn by the seed. */
  private clientRequest(): void {
    const host = this.anyLiveHost();
    if (host === undefined) return;
    const key = `k${this.rng.int(0, KEYS - 1)}`;
    const forwarded = !host.node!.isPrimary();
    if (this.rng.chance(0.5)) {
      const value = `v${this.nextValue++}`;
      void this.send(host, 'PUT', `/app/values/${key}`, { body: utf8.encode(value), headers: { [CONSISTENCY_HEADER]: 'committed' } }).then(
        (answer) => this.writeAnswered(answer, key, value, forwarded),
        (e: unknown) => this.rejected(e),
      );
    } else {
      // Every write acknowledged so far was answered before this read is sent.
      const ackedBefore = this.acked.filter((w) => w.key === key);
      const headers: Record<string, string> = this.options.readConsistency === 'default' ? {} : { [CONSISTENCY_HEADER]: 'linearizable' };
      void this.send(host, 'GET', `/app/values/${key}`, { headers }).then(
        (answer) => this.readAnswered(answer, key, ackedBefore, forwarded),
        (e: unknown) => this.rejected(e),
      );
    }
  }

  private rejected(e: unknown): void {
    // Only a broken invariant rejects (after failStop, which reported it).
    if (!(e instanceof InvariantError)) this.failures.push(`a request was rejected instead of answered: ${String(e)}`);
  }

  private writeAnswered(answer: RouteResponse, key: string, value: string, forwarded: boolean): void {
    if (!this.checkAnswer(answer, `PUT /app/values/${key}`)) return;
    if (forwarded) this.forwardedAnswers++;
    const named = answer.headers?.[TRANSACTION_ID_HEADER];
    const txId = typeof named === 'string' ? parseTxId(named) : undefined;
    if (txId === undefined) {
      this.violation('acknowledged-write', `PUT /app/values/${key} answered 200 without a transaction id`);
      return;
    }
    this.acked.push({ key, value, seqno: txId.seqno, txId: formatTxId(txId) });
  }

  private readAnswered(answer: RouteResponse, key: string, ackedBefore: readonly AckedWrite[], forwarded: boolean): void {
    if (!this.checkAnswer(answer, `GET /app/values/${key}`)) return;
    if (forwarded) this.forwardedAnswers++;
    this.linearizableReads++;
    const named = answer.headers?.[TRANSACTION_ID_HEADER];
    const readAt = typeof named === 'string' ? parseTxId(named) : undefined;
    if (readAt === undefined) {
      this.violation('linearizable-read', `GET /app/values/${key} answered without the id of the state it read`);
      return;
    }
    const problem = staleReadProblem(key, answer.status === 404 ? undefined : String(bodyOf(answer).value), readAt, ackedBefore, this.acked);
    if (problem !== undefined) this.violation('linearizable-read', problem);
  }

  /** request-answer: true for a 200; a retryable refusal is counted; anything else is a violation. */
  private checkAnswer(answer: RouteResponse, what: string): boolean {
    const code = answer.status === 200 ? undefined : errorCodeOf(answer);
    const label = code === undefined ? String(answer.status) : `${answer.status} ${code}`;
    this.answers[label] = (this.answers[label] ?? 0) + 1;
    if (answer.status === 200) return true;
    // A read of a key no write reached yet.
    if (answer.status === 404 && code === 'ResourceNotFound' && what.startsWith('GET')) return true;
    if (answer.status !== 503 || code === undefined || !RETRYABLE_CODES.has(code)) this.violation('request-answer', `${what} answered ${label}: ${JSON.stringify(bodyOf(answer)).slice(0, 200)}`);
    return false;
  }

  private violation(checker: CheckerName, message: string): void {
    this.requestViolations.push({ checker, message });
  }

  /** NodeSim's checkers, then what the request checkers found since. */
  override check(): void {
    super.check();
    const first = this.requestViolations[0];
    if (first !== undefined) throw new Violation(first.checker, first.message);
  }

  /** After the liveness phase: a linearizable read of every key, on a node drawn by the seed, sees the acknowledged writes. */
  async finalReads(): Promise<void> {
    for (let k = 0; k < KEYS; k++) {
      const key = `k${k}`;
      const host = this.anyLiveHost()!;
      const ackedBefore = this.acked.filter((w) => w.key === key);
      const answer = await this.request(host, 'GET', `/app/values/${key}`, { headers: { [CONSISTENCY_HEADER]: 'linearizable' } });
      this.readAnswered(answer, key, ackedBefore, !host.node!.isPrimary());
      this.check();
    }
  }

  /** After the liveness phase: every acknowledged write is committed on every node. */
  checkAcknowledged(): void {
    for (const host of this.hosts) {
      const node = host.node;
      if (node === undefined) continue;
      for (const write of this.acked) {
        const status = node.statusOf(parseTxId(write.txId)!);
        if (status !== 'Committed') throw new Violation('acknowledged-write', `the write of ${write.key} answered with ${write.txId} is ${status} on ${host.name}`);
      }
    }
  }

  override report(): RequestSimReport {
    return {
      ...super.report(),
      answers: { ...this.answers },
      acknowledgedWrites: this.acked.length,
      linearizableReads: this.linearizableReads,
      forwardedAnswers: this.forwardedAnswers,
      governance: [...this.governanceTrace],
    };
  }
}

/** The JSON of an answer's body, as a client would parse it. */
function bodyOf(answer: RouteResponse): any {
  if (answer.body === undefined) return undefined;
  if (answer.bodyKind === 'text') return JSON.parse(String(answer.body));
  if (answer.bodyKind === 'bytes') return JSON.parse(utf8.decode(answer.body as Uint8Array));
  return answer.body;
}

/**
 * Why a linearizable read of `key` at `readAt`, returning `value` (undefined: none), is stale, or
 * undefined when it is not: it must reach every write acknowledged before it was sent, and return
 * the newest acknowledged write at or below its seqno — or a write not (yet) acknowledged, newer
 * than that one.
 */
export function staleReadProblem(key: string, value: string | undefined, readAt: TxId, ackedBefore: readonly AckedWrite[], acked: readonly AckedWrite[]): string | undefined {
  for (const write of ackedBefore) {
    if (write.seqno > readAt.seqno) return `a read of ${key} at ${formatTxId(readAt)} misses the write ${write.txId} acknowledged before it was sent`;
  }
  const reached = acked.filter((w) => w.key === key && w.seqno <= readAt.seqno).sort((a, b) => b.seqno - a.seqno)[0];
  if (reached === undefined || reached.value === value) return undefined;
  const returned = acked.find((w) => w.key === key && w.value === value);
  if (returned !== undefined && returned.seqno <= reached.seqno) {
    return `a read of ${key} at ${formatTxId(readAt)} returned ${value} (written at ${returned.txId}), older than ${reached.value} (${reached.txId})`;
  }
  if (value === undefined) return `a read of ${key} at ${formatTxId(readAt)} found nothing, though ${reached.txId} wrote it`;
  return undefined;
}

/** A whole run: set-up with governance, the fault phase with client requests, the liveness phase, then the acknowledged writes. */
export async function runRequestSim(options: RequestSimOptions): Promise<RequestSimReport> {
  const sim = new RequestSim(options);
  try {
    await sim.setUp();
    sim.clientsOn = true;
    try {
      for (let i = 0; i < options.steps; i++) await sim.advanceSettled(true);
      sim.clientsOn = false;
      await sim.checkLiveness();
      sim.checkAcknowledged();
      await sim.finalReads();
    } catch (e) {
      if (e instanceof Violation) e.message = `seed ${options.seed}, step ${sim.step}: ${e.message}\n${sim.trace.slice(-30).join('\n')}`;
      throw e;
    }
    return sim.report();
  } finally {
    sim.stopAll();
  }
}

/** The error code of a refusal's JSON body (undefined when it has none). */
function errorCodeOf(answer: RouteResponse): string | undefined {
  return (bodyOf(answer) as { error?: { code?: string } } | undefined)?.error?.code;
}
