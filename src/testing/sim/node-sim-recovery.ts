/**
 * Disaster recovery under the node simulator (docs/node.md "Under the simulator", docs/recovery.md).
 * The same production nodes as node-sim.ts, with snapshots every few transactions and small
 * ledger chunks, run a workload under faults; two members with recovery shares govern them. Then
 * the service is lost: every node (or a majority, for good). Recover nodes start on copies of the
 * survivors' ledger and snapshot folders (command.type Recover, the previous service certificate
 * given, so the newest valid snapshot is where reading starts); the one with the best ledger (the
 * highest last signed seqno) is kept, the others stop, fresh nodes join it. Members vote
 * transition_service_to_open with both service identities and submit their recovery shares through
 * the governance code the HTTP frontend runs (src/gov: COSE-signed requests, the constitution in
 * its sandbox, then CovenantNode.submitRecoveryShare); the private ledger is replayed, the service
 * opens, and the workload goes on under faults.
 *
 * Checkers, besides those of every step (one primary per view, commit on signatures, the same bytes
 * at every committed seqno on every node — which now spans both epochs: a node of the new service
 * that holds an entry of the old one must hold the bytes the old service committed there):
 *  - every transaction the old service committed is in the kept ledger when every ledger survived;
 *    when only a minority survived, what the kept ledger holds is kept and nothing above it counts;
 *  - a receipt a client kept from the old service, and receipts of old- and new-epoch transactions
 *    served by the new service, verify with the newest service certificate (and the published
 *    chain of endorsements for the old epoch);
 *  - the service opens and the liveness phase commits a write on every node.
 * `bug` plants a defect one of them must catch (test/sim/node-sim-recovery.test.ts).
 */
import { generateKeyPairSync } from 'node:crypto';
import { fromBase64, toBase64, utf8 } from '../../base/bytes.js';
import { formatTxId, type TxId } from '../../base/ids.js';
import { certificateId, generateEcKeyPair, generateIdentity, nodeIdFromPublicKey, type KeyPair } from '../../crypto/index.js';
import { COSE_CONTENT_TYPE, DEFAULT_SANDBOX_LIMITS, Governance, type JsEngine, loadJsEngine, signGovRequest, type GovMessageType, type GovRequest } from '../../gov/index.js';
import { serviceEndorsementsChainOf, verifyReceipt, type Receipt } from '../../merkle/index.js';
import type { NodeConfig } from '../../config/index.js';
import type { CovenantNode } from '../../node/node.js';
import { decryptShare } from '../../recovery/index.js';
import { edgeName, RECOVERY_EDGES } from '../../node/recovery/recovery-machine.js';
import { Violation } from './checker.js';
import { NodeSim, type NodeSimOptions, type SimHost } from './node-sim.js';
import { rawConfigOf, simConfig, writeFile } from './node-sim-config.js';
import { SimTables } from './sim-tables.js';

/** A defect planted to show the checkers can fail. */
export type RecoveryBug =
  /** A node of the new service serves another entry's bytes at one seqno of the old epoch. */
  | 'drop-old-entry'
  /** The receipt a client kept from the old service has one byte of its signature changed. */
  | 'corrupt-receipt';
export const RECOVERY_BUGS: readonly RecoveryBug[] = ['drop-old-entry', 'corrupt-receipt'];

export interface RecoverySimOptions extends NodeSimOptions {
  /** Steps of the new service's workload under faults, after it opened. */
  readonly stepsAfterRecovery: number;
  readonly bug?: RecoveryBug;
}

export interface RecoverySimReport {
  readonly seed: number;
  /** 'all' (every node's ledger survived) or 'minority' (a majority lost for good). */
  readonly survivors: 'all' | 'minority';
  /** Seqno the old service had committed when it was lost, and the last signed seqno of the kept ledger. */
  readonly oldCommitSeqno: number;
  readonly recoveredSeqno: number;
  /** Seqno of the snapshot the kept Recover node started from (0: it read the whole ledger). */
  readonly snapshotSeqno: number;
  readonly oldChunks: number;
  readonly receiptsVerified: number;
  readonly committedSeqno: number;
  readonly writes: number;
  readonly crashes: number;
  /** The recovery machine's edges (edgeName) some node of the run took. */
  readonly recoveryEdges: readonly string[];
  readonly trace: readonly string[];
}

const MEMBERS = 2;
const RECOVERY_THRESHOLD = 2;
/** Steps a phase (the service opening, the public or private ledger read, a join) may take. */
const PHASE_STEPS_MAX = 3000;
/** Ledger chunks and snapshots small enough that a short run writes several of each. */
const CHUNK_SIZE = '4KB';
const SNAPSHOT_TX_COUNT = 25;
/** Wall-clock budget of the members' JavaScript of one governance request in the simulator. */
const GOV_SANDBOX_TIME_MS_MAX = 30_000;

interface SimMember {
  readonly id: string;
  readonly certificatePem: string;
  readonly privateKeyPem: string;
  readonly encryptionPublicKeyPem: string;
  readonly encryptionPrivateKeyPem: string;
}

export class RecoverySim extends NodeSim {
  private members: SimMember[] = [];
  private engine: JsEngine | undefined;
  private governance: Governance | undefined;
  private keptReceipt: { txId: TxId; receipt: Receipt } | undefined;
  private survivors: 'all' | 'minority' = 'all';
  private oldCommitSeqno = 0;
  private recoveredSeqno = 0;
  private snapshotSeqno = 0;
  private oldChunks = 0;
  private receiptsVerified = 0;
  private requestCount = 0;
  /** Every node the run created: their recovery machines' edges make up the run's coverage. */
  private readonly created: CovenantNode[] = [];

  constructor(override readonly options: RecoverySimOptions) {
    super(options);
  }

  /** Snapshots every 25 transactions (whatever the ledger since: min_ledger_fraction 0), 4 KB chunks, and members with recovery shares. */
  protected override configFor(index: number, type: 'Start' | 'Join'): ReturnType<NodeSim['configFor']> {
    const raw = rawConfigOf(index, type, this.options.durability ?? 'Synced');
    raw.ledger.chunk_size = CHUNK_SIZE;
    raw.snapshots.tx_count = SNAPSHOT_TX_COUNT;
    raw.snapshots.min_ledger_fraction = 0;
    if (type === 'Start') {
      raw.command.start = {
        members: Array.from({ length: MEMBERS }, (_, i) => ({ certificate_file: `/sim/n${index}/member${i}_cert.pem`, encryption_public_key_file: `/sim/n${index}/member${i}_enc.pem` })),
        service_configuration: { recovery_threshold: RECOVERY_THRESHOLD },
      };
    }
    return simConfig(raw);
  }

  protected override createNode(host: SimHost, config: NodeConfig): CovenantNode {
    const node = super.createNode(host, config);
    this.created.push(node);
    return node;
  }

  override async setUp(): Promise<void> {
    for (let i = 0; i < MEMBERS; i++) {
      const identity = await generateIdentity({ commonName: `member${i}` });
      const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
      this.members.push({
        id: certificateId(identity.certificatePem),
        certificatePem: identity.certificatePem,
        privateKeyPem: identity.privateKeyPem,
        encryptionPublicKeyPem: rsa.publicKey.export({ type: 'spki', format: 'pem' }) as string,
        encryptionPrivateKeyPem: rsa.privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
      });
    }
    const first = this.hosts[0]!;
    this.members.forEach((m, i) => {
      writeFile(first.disk, `/sim/n0/member${i}_cert.pem`, m.certificatePem);
      writeFile(first.disk, `/sim/n0/member${i}_enc.pem`, m.encryptionPublicKeyPem);
    });
    // The sandbox's budget is wall-clock time: a generous one, so that the course of a run does not
    // depend on the machine's load (what the budget refuses is tested in test/gov).
    const sandboxLimits = { ...DEFAULT_SANDBOX_LIMITS, executionTimeMsMax: GOV_SANDBOX_TIME_MS_MAX };
    this.engine = await loadJsEngine();
    this.governance = new Governance({ engine: this.engine, nowMs: () => this.clock.nowMs(), sandboxLimits });
    await super.setUp();
    await this.untilSettled('the service has every node', () => this.hosts.every((h) => h.node?.state === 'PartOfNetwork'));
    for (const member of this.members) await this.activate(member);
    await this.openService({});
    this.trace.push(`t=${this.step} service open`);
  }

  // ------------------------------------------------------------------ governance, as a member would

  protected primary(): CovenantNode {
    const primaries = this.hosts.filter((h) => h.node?.isPrimary());
    if (primaries.length === 0) throw new Violation('liveness', 'no primary to take a governance request');
    return primaries[0]!.node!;
  }

  /** A member's COSE-signed request, as the member command sends it. */
  private signed(member: SimMember, type: GovMessageType, payload: unknown, proposalId?: string): GovRequest {
    // Each request a distinct creation time: a replayed request is refused.
    const createdAtSeconds = Math.floor(this.clock.nowMs() / 1000) + this.requestCount++;
    const body = signGovRequest({
      type,
      payload: payload === undefined ? '' : JSON.stringify(payload),
      privateKeyPem: member.privateKeyPem,
      memberId: member.id,
      createdAtSeconds,
      ...(proposalId !== undefined ? { proposalId } : {}),
    });
    return { body, contentType: COSE_CONTENT_TYPE };
  }

  /** One governance write on the primary, then the steps until it committed on every live node. */
  private async govWrite<T>(fn: (gov: Governance) => (tx: Parameters<Parameters<CovenantNode['executeWrite']>[0]>[0]) => T): Promise<T> {
    const gov = this.governance!;
    await gov.ready();
    const { result, txId } = this.primary().executeWrite(fn(gov));
    if (txId !== undefined) await this.untilCommitted(txId.seqno);
    return result;
  }

  private async activate(member: SimMember): Promise<void> {
    const digest = await this.govWrite((gov) => (tx) => gov.updateStateDigest(tx, this.signed(member, 'state_digest', undefined), member.id, this.primary().treeRootHex()).body);
    await this.govWrite((gov) => (tx) => gov.ackStateDigest(tx, this.signed(member, 'ack', { state_digest: digest.state_digest }), member.id));
  }

  /** transition_service_to_open, proposed by member 0 and accepted by the ballots of every member. */
  protected async openService(args: Record<string, string>): Promise<void> {
    const [proposer] = this.members;
    const actions = { actions: [{ name: 'transition_service_to_open', args }] };
    const created = await this.govWrite((gov) => (tx) => gov.createProposal(tx, this.signed(proposer!, 'proposal', actions)).body);
    const ballot = { ballot: 'export function vote(proposal, proposerId) { return true; }' };
    let state = created.state;
    for (const member of this.members) {
      if (state !== 'Open') break;
      state = (await this.govWrite((gov) => (tx) => gov.submitBallot(tx, this.signed(member, 'ballot', ballot, created.proposal_id), created.proposal_id, member.id).body)).state;
    }
    if (state !== 'Accepted') throw new Violation('liveness', `transition_service_to_open ended ${state}`);
  }

  /** Every member fetches its encrypted share, decrypts it and submits it (POST /gov/recovery/members/{id}:recover). */
  protected async submitShares(): Promise<void> {
    const gov = this.governance!;
    for (const member of this.members.slice(0, RECOVERY_THRESHOLD)) {
      await gov.ready();
      const node = this.primary();
      const encrypted = node.recoveryEncryptedShare(member.id).encrypted_share;
      const share = decryptShare(fromBase64(encrypted), member.encryptionPrivateKeyPem);
      const verified = node.executeRead((tx) => gov.recoveryShareRequest(tx, this.signed(member, 'recovery_share', { share: toBase64(share) }), member.id));
      // Taken once recorded (no commit needed): the clock stands still meanwhile.
      await this.withoutTime(`the share of member ${member.id.slice(0, 8)}`, node.submitRecoveryShare(verified.memberId, verified.share, verified.record));
    }
  }

  // ------------------------------------------------------------------ stepping

  protected async untilSettled(what: string, done: () => boolean): Promise<void> {
    for (let i = 0; i < PHASE_STEPS_MAX; i++) {
      if (done()) return;
      await this.advanceSettled(false);
    }
    throw new Violation('liveness', `${what}: not within ${PHASE_STEPS_MAX} steps`);
  }

  private async untilCommitted(seqno: number): Promise<void> {
    await this.untilSettled(`seqno ${seqno} commits`, () => this.hosts.every((h) => h.node === undefined || h.node.parts.replica.commitSeqno >= seqno));
  }

  private async receiptOf(node: CovenantNode, txId: TxId): Promise<Receipt> {
    let receipt: Awaited<ReturnType<CovenantNode['receipt']>> = 'pending';
    for (let i = 0; i < PHASE_STEPS_MAX && receipt === 'pending'; i++) {
      receipt = await node.receipt(txId);
      if (receipt === 'pending') await this.advanceSettled(false);
    }
    if (receipt === 'pending' || 'signed_root' in receipt) throw new Violation('liveness', `no receipt of ${formatTxId(txId)}`);
    return receipt as Receipt;
  }

  // ------------------------------------------------------------------ the disaster and the recovery

  /** The old service's workload ends: a client keeps the receipt of a committed write. */
  async keepReceipt(): Promise<void> {
    const node = this.primary();
    const { txId } = node.executeWrite((tx) => tx.table(SimTables.records).put('kept', this.step));
    await this.untilCommitted(txId!.seqno);
    this.keptReceipt = { txId: txId!, receipt: await this.receiptOf(node, txId!) };
  }

  /** Every node is lost; the ledgers of all (or of a minority) survive, copied for the Recover nodes. */
  async disaster(): Promise<void> {
    this.survivors = this.rng.chance(0.5) ? 'all' : 'minority';
    const oldService = utf8.decode(this.hosts[0]!.disk.readAll('/sim/n0/service_cert.pem'));
    this.oldCommitSeqno = Math.max(0, ...this.committed.keys());
    const minority = this.rng.shuffle([...this.hosts]).slice(0, Math.floor((this.hosts.length - 1) / 2));
    const survivors = this.survivors === 'all' ? [...this.hosts] : this.hosts.filter((h) => minority.includes(h));
    for (const host of this.hosts) this.crash(host);
    this.trace.push(`t=${this.step} disaster: every node lost, the ledgers of ${survivors.map((h) => h.name).join(' ')} survive`);
    const keys = this.sortedKeys(this.hosts.length * 2);
    const candidates = survivors.map((old, i) => this.recoverHost(old, keys[i]!, oldService));
    for (const host of candidates) await this.startRecoverNode(host);
    const kept = candidates.reduce((best, h) => (h.node!.parts.replica.serviceStartSeqno > best.node!.parts.replica.serviceStartSeqno ? h : best));
    for (const host of candidates.filter((h) => h !== kept)) this.retire(host);
    this.recoveredSeqno = kept.node!.parts.replica.serviceStartSeqno - 1;
    this.snapshotSeqno = kept.node!.parts.replica.startupSeqno;
    this.oldChunks = kept.disk.listDirectory(kept.node!.init.config.ledger.directory).filter((n) => n.endsWith('.committed')).length;
    this.trace.push(`t=${this.step} kept ${kept.name} (last signed ${this.recoveredSeqno}, snapshot ${this.snapshotSeqno}, ${this.oldChunks} committed chunks)`);
    this.checkKeptLedger();
    this.hosts.splice(0, this.hosts.length, kept);
    await this.joinNewNodes(kept, keys.slice(survivors.length));
  }

  private sortedKeys(count: number): KeyPair[] {
    return Array.from({ length: count }, () => generateEcKeyPair('P-384')).sort((a, b) => (nodeIdFromPublicKey(a.publicKey) < nodeIdFromPublicKey(b.publicKey) ? -1 : 1));
  }

  /** A Recover node on a copy of `old`'s ledger and snapshot folders (the operator keeps the originals). */
  private recoverHost(old: SimHost, keys: KeyPair, oldService: string): SimHost {
    const dir = `/sim/n${old.index}`;
    const raw = rawConfigOf(old.index, 'Join', this.options.durability ?? 'Synced');
    raw.command = {
      type: 'Recover',
      service_certificate_file: `${dir}/service_cert.pem`,
      recover: { previous_service_identity_file: `${dir}/previous_service_cert.pem`, initial_service_certificate_validity_days: 1 },
    };
    raw.ledger.chunk_size = CHUNK_SIZE;
    raw.snapshots.tx_count = SNAPSHOT_TX_COUNT;
    raw.snapshots.min_ledger_fraction = 0;
    const host = this.hostFor(old.index, `r${old.index}`, simConfig(raw), keys);
    for (const folder of [old.startConfig.ledger.directory, old.startConfig.snapshots.directory]) {
      if (!old.disk.exists(folder)) continue;
      host.disk.ensureDirectory(folder);
      for (const name of old.disk.listDirectory(folder)) {
        const file = host.disk.createFile(host.disk.join(folder, name));
        file.append([old.disk.readAll(old.disk.join(folder, name))]);
        file.sync();
        file.close();
      }
    }
    writeFile(host.disk, `${dir}/previous_service_cert.pem`, oldService);
    return host;
  }

  /** Starts a Recover node and runs its recovery flow to its end (PartOfPublicNetwork), alone: no time passes meanwhile. */
  private async startRecoverNode(host: SimHost): Promise<void> {
    const node = this.createNode(host, host.startConfig);
    host.node = node;
    await node.prepareIdentity();
    this.attach(host, node);
    await this.withoutTime(`${host.name} recovers the public ledger`, node.start(host.addresses, undefined, () => undefined), host);
  }

  /** A Recover node not kept stops (its process ends; its copy of the ledger stays the operator's). */
  private retire(host: SimHost): void {
    host.generation++;
    host.node?.stop();
    void host.channels?.close();
    host.node = undefined;
  }

  /** With every ledger kept, the best one holds every transaction the old service committed. */
  private checkKeptLedger(): void {
    if (this.survivors === 'all' && this.recoveredSeqno < this.oldCommitSeqno) {
      throw new Violation('committed-never-lost', `the old service committed up to ${this.oldCommitSeqno}, the best surviving ledger is signed only up to ${this.recoveredSeqno}`);
    }
    // Above the kept ledger, the new service writes its own entries.
    for (const seqno of [...this.committed.keys()]) if (seqno > this.recoveredSeqno) this.committed.delete(seqno);
  }

  /** Fresh nodes join the recovering service (from its snapshot when it started from one). */
  private async joinNewNodes(kept: SimHost, keys: KeyPair[]): Promise<void> {
    const indices = Array.from({ length: this.options.nodes }, (_, i) => i).filter((i) => i !== kept.index);
    for (const [k, index] of indices.entries()) {
      const raw = rawConfigOf(index, 'Join', this.options.durability ?? 'Synced');
      raw.ledger.chunk_size = CHUNK_SIZE;
      raw.snapshots.tx_count = SNAPSHOT_TX_COUNT;
      raw.snapshots.min_ledger_fraction = 0;
      await this.addJoiner(index, kept, raw, { keys: keys[k]! });
    }
    this.hosts.sort((a, b) => a.index - b.index);
  }

  /** Members open the recovered service with both identities and submit their shares; the private ledger is replayed. */
  async recover(): Promise<void> {
    const node = this.primary();
    const previous = node.previousServiceIdentity()!;
    await this.openService({ previous_service_identity: previous, next_service_identity: node.serviceCertificatePem });
    await this.submitShares();
    await this.untilSettled('the recovered service opens on every node', () =>
      this.hosts.every((h) => h.node?.state === 'PartOfNetwork' && h.node.serviceInfo()?.status === 'Open'),
    );
    this.trace.push(`t=${this.step} recovered service open`);
    // The Recover node's recovery ends when it renames its `.recovery` files, once the Open is
    // committed: a crash before that recovers again from the old ledger, which is not this run's
    // procedure (the node would have no state to restart from).
    await this.untilSettled('the Recover node completes its recovery', () => this.hosts.every((h) => h.node !== undefined && !h.node.parts.replica.recoveryInProgress));
    this.trace.push(`t=${this.step} recovery complete`);
    if (this.options.bug === 'drop-old-entry') this.plantDroppedEntry();
  }

  private plantDroppedEntry(): void {
    const host = this.hosts[this.hosts.length - 1]!;
    const ledger = host.node!.parts.replica.ledger;
    const seqno = Math.max(ledger.firstSeqno + 1, this.recoveredSeqno - 1);
    const original = ledger.getEntry.bind(ledger);
    ledger.getEntry = (s: number) => (s === seqno ? original(s - 1) : original(s));
    host.checkedSeqno = 0;
  }

  /** Receipts of both epochs verify with the newest service certificate (and its published chain for the old epoch). */
  async checkReceipts(): Promise<void> {
    const node = this.primary();
    const serviceCertificate = node.serviceCertificatePem;
    const chain = serviceEndorsementsChainOf(node.serviceEndorsements());
    const kept = this.keptReceipt!;
    let old = kept.receipt;
    if (this.options.bug === 'corrupt-receipt') old = { ...old, signature: flipBase64(old.signature) };
    const { txId: newTxId } = node.executeWrite((tx) => tx.table(SimTables.records).put('new-epoch', this.step));
    await this.untilCommitted(newTxId!.seqno);
    const checks: [string, Receipt, boolean][] = [[`the kept receipt of ${formatTxId(kept.txId)}`, old, true]];
    // The kept transaction as the new service serves it, when the kept ledger holds it.
    if (kept.txId.seqno <= this.recoveredSeqno && kept.txId.seqno > node.parts.replica.startupSeqno) checks.push([`the new service's receipt of ${formatTxId(kept.txId)}`, await this.receiptOf(node, kept.txId), true]);
    checks.push([`the receipt of ${formatTxId(newTxId!)}`, await this.receiptOf(node, newTxId!), false]);
    for (const [what, receipt, oldEpoch] of checks) {
      try {
        verifyReceipt(receipt, serviceCertificate, oldEpoch ? { serviceEndorsementsChain: chain } : {});
      } catch (e) {
        throw new Violation('receipts-verify', `${what} does not verify with the newest service certificate: ${String(e)}`);
      }
      this.receiptsVerified++;
    }
  }

  override stopAll(): void {
    super.stopAll();
    void this.engine?.close();
  }

  recoveryReport(): RecoverySimReport {
    const base = this.report();
    return {
      seed: base.seed,
      survivors: this.survivors,
      oldCommitSeqno: this.oldCommitSeqno,
      recoveredSeqno: this.recoveredSeqno,
      snapshotSeqno: this.snapshotSeqno,
      oldChunks: this.oldChunks,
      receiptsVerified: this.receiptsVerified,
      committedSeqno: base.committedSeqno,
      writes: base.writes,
      crashes: base.crashes,
      recoveryEdges: [...new Set(this.created.flatMap((node) => [...node.parts.recovery.machine.taken]))].sort(),
      trace: base.trace,
    };
  }
}

/** The recovery machine's edges runs took, against its table (an edge with `only` is outside the simulated procedure). */
export interface RecoveryEdgeCoverage {
  readonly taken: readonly string[];
  /** Edges of a recovery with members' shares that no run took. */
  readonly missing: readonly string[];
  /** Edges only another procedure takes (sealing-based recovery, a failed read): covered by unit tests. */
  readonly outside: readonly string[];
}

export function recoveryEdgeCoverage(reports: readonly Pick<RecoverySimReport, 'recoveryEdges'>[]): RecoveryEdgeCoverage {
  const seen = new Set(reports.flatMap((r) => r.recoveryEdges));
  const names = (edges: typeof RECOVERY_EDGES) => edges.map(edgeName);
  return {
    taken: names(RECOVERY_EDGES.filter((e) => seen.has(edgeName(e)))),
    missing: names(RECOVERY_EDGES.filter((e) => e.only === undefined && !seen.has(edgeName(e)))),
    outside: RECOVERY_EDGES.filter((e) => e.only !== undefined).map((e) => `${edgeName(e)} (${e.only})`),
  };
}

function flipBase64(text: string): string {
  const bytes = fromBase64(text);
  bytes[Math.floor(bytes.length / 2)]! ^= 0x01;
  return toBase64(bytes);
}

/**
 * A whole run: set-up and opening, the old service's workload under faults (and its liveness
 * phase), the disaster, the recovery, the new service's workload under faults, its liveness
 * phase, the receipts. Throws a Violation (with the seed) on a broken property.
 */
export async function runRecoverySim(options: RecoverySimOptions): Promise<RecoverySimReport> {
  const sim = new RecoverySim(options);
  try {
    try {
      await sim.setUp();
      for (let i = 0; i < options.steps; i++) await sim.advanceSettled(true);
      await sim.checkLiveness();
      await sim.keepReceipt();
      await sim.disaster();
      await sim.recover();
      for (let i = 0; i < options.stepsAfterRecovery; i++) await sim.advanceSettled(true);
      await sim.checkLiveness();
      await sim.checkReceipts();
    } catch (e) {
      if (e instanceof Violation) e.message = `seed ${options.seed}, step ${sim.step}: ${e.message}\n${sim.trace.slice(-30).join('\n')}`;
      throw e;
    }
    return sim.recoveryReport();
  } finally {
    sim.stopAll();
  }
}
