/**
 * One Covenant node: the facade the layers above use (the HTTP layer, the application, the
 * command). Its parts are built and wired in src/node/compose.ts (docs/node.md has the module map). Each part owns its state and is reached through a narrow
 * interface:
 *
 *  - lifecycle (the state and its table), identity/ (node keys, service identity, ledger secrets),
 *    persistence (the node state file), replica (store, tree, ledger, commit seqnos),
 *  - driver (the consensus core and the order of a step's side effects), write/ (transactions,
 *    the proposer and its framing pipeline, signatures), peers (node-to-node channels),
 *  - join/ (the joiner's requests, the primary's admission chain), tasks/ (primary-only work),
 *    queries/ (receipts and operator reports), flows/ (one start-up flow per command.type).
 *
 * Transactions execute synchronously on the primary (docs/architecture.md, decision 2); commit
 * advances to signature transactions held by a majority of every active configuration (decision
 * 4). Everything time- or I/O-related comes in through NodeInit.
 */
import type { SnapshotGenerationMetrics } from './snapshot-generation.js';
import type { TxId } from '../base/ids.js';
import type { Logger } from '../base/log.js';
import type { StoreView, Tx, WriteSet } from '../kv/index.js';
import type { Receipt, SignatureReceipt } from '../merkle/index.js';
import type { QuoteInfo } from '../attestation/virtual.js';
import type { KeyRefreshMetrics } from '../jwt/index.js';
import { assert } from '../base/assert.js';
import { generateEcKeyPair } from '../crypto/index.js';
import { ecCurveOfCurveId } from './identity/node-identity.js';
import { toHex } from '../base/bytes.js';
import type { NodeAddresses, NodeFrames, NodeGovernanceHost, NodeInit, NodeOperatorQueries } from './api.js';
import type { NodeChannels } from './channels.js';
import { NodeComposition } from './compose.js';
import { nodeError } from './errors.js';
import { commitWaitTimeoutMs } from './limits.js';
import { formatTxId } from '../base/ids.js';
import { checkStartInputs, flowFor, joinFlow, recoverFlow, restartFlow, startConstitution, startFlow } from './flows/index.js';
import { ADMISSION_CHECKS, admit } from './join/admission.js';
import { pendingNodesMax } from './limits.js';
import { ServedSnapshotVerdicts } from './snapshot-trust.js';
import { digestInSlices } from './snapshot-loading.js';
import { verifySnapshotFile } from './snapshots.js';
import type { JoinClient, JoinRequest, JoinResponse } from './join.js';
import type { NodeLifecycleState } from './lifecycle.js';
import type { BoundAddresses } from './persistence.js';
import type { CertificateMetrics, ConsensusReport, NetworkReport, NodeStateReport, NodeSummary, ServiceEndorsementsReport, VersionReport } from './reports.js';
import { parseValidFrom, type CertificateRenewer } from '../gov/index.js';
import { SINGLETON_KEY, TableDefs, Tables, type NodeInfo, type ServiceInfo } from './tables.js';
import type { TxStatus } from './tx-status.js';
import type { SnapshotRequestOutcome } from './snapshots.js';
import type { WriteOptions, WriteResult } from './write/transactions.js';

export type { NodeAddresses, NodeInit, RpcInterfaceAddress } from './api.js';
export type { BoundAddresses } from './persistence.js';
export { NODE_STATE_FILE } from './persistence.js';
export type { WriteOptions, WriteResult } from './write/transactions.js';
export { FrameKind } from './peers.js';
export { subjectAltNamesOf } from './identity/node-identity.js';
export { RejoinRequested } from './flows/recover-sealing.js';
// The limits the HTTP layer applies to the waiting work it admits (limits.ts says why).
export {
  forwardedPrimaryCheckMs,
  forwardedRequestTimeoutMs,
  forwardedRequestsPendingMax,
  pipelinedRequestsPerSessionDefault,
  requestBurstPerAddressFactor,
  requestRateAddressesMax,
  requestRateExemptAddressesDefault,
  requestsPerSecondPerAddressDefault,
  requestsPerTurnMax,
  requestTurnMs,
  waitingRequestHeadFactor,
  waitingRequestOverheadBytes,
  waitingWorkBytesDefault,
  waitingWorkBytesMin,
  waitingWorkRetryAfterSeconds,
  waitingWorkShareOfOneHolder,
} from './limits.js';

export class CovenantNode implements NodeOperatorQueries, NodeGovernanceHost, NodeFrames {
  readonly init: NodeInit;
  readonly logger: Logger;
  readonly clock: NodeInit['clock'];
  /** The node's parts (src/node/compose.ts). */
  readonly parts: NodeComposition;
  /** The service record's bytes last read by appFrontendOpen, and whether they said Open. */
  private serviceRecordSeen: { raw: Uint8Array | undefined; open: boolean } = { raw: undefined, open: false };
  /** Checks of the snapshots this node serves, against the service certificate of the moment. */
  readonly #servedSnapshots: ServedSnapshotVerdicts;

  constructor(init: NodeInit) {
    this.init = init;
    this.logger = init.logger;
    this.clock = init.clock;
    this.parts = new NodeComposition(init);
    this.#servedSnapshots = new ServedSnapshotVerdicts(
      () => this.serviceCertificatePem,
      (name, bytes, certificate, evidenceDigest) => void verifySnapshotFile(name, bytes, certificate, evidenceDigest),
      init.logger,
      (bytes) => digestInSlices(init.clock, bytes),
    );
  }

  // ---------------------------------------------------------------- identity (before the interfaces listen)

  /**
   * Whether this node has state from an earlier run that it resumes (the same configuration run
   * again, Start or Join). A Start whose ledger directory holds a ledger but that has no state of
   * its own is refused: that ledger is someone else's.
   */
  hasPersistedState(): boolean {
    if (!this.parts.stateFile.exists()) return false;
    // A Recover node resumes as itself only once the service it recovered has opened.
    return this.init.config.command.type !== 'Recover' || this.parts.stateFile.load().recovering === false;
  }

  /**
   * The addresses this node's interfaces were bound to in its previous run (when it restarts from
   * its persisted state). Peers and clients know the node there until it announces new ones, and
   * announcing needs a primary, which may need this node: a restart binds the same ports again.
   */
  previousBoundAddresses(): BoundAddresses | undefined {
    return this.hasPersistedState() ? this.parts.stateFile.load().bound_addresses : undefined;
  }

  /** Creates (or restores) the node's key, self-signed certificate and quote, before its interfaces listen. */
  async prepareIdentity(): Promise<void> {
    if (this.restoreIdentity()) return;
    const { initial_validity_days, curve_id } = this.init.config.node_certificate;
    await this.parts.identity.create(this.parts.subjectAltNames(), initial_validity_days, this.init.identityKeyPair ?? generateEcKeyPair(ecCurveOfCurveId(curve_id)));
    this.logger.info(`node identity ${this.parts.identity.nodeId} (virtual mode: NO hardware attestation, never for production)`);
  }

  /** Restores the identity of an earlier run of this node, if it has one (synchronously); false when it must create one. */
  restoreIdentity(): boolean {
    if (!this.hasPersistedState()) return false;
    const state = this.parts.stateFile.load();
    this.parts.identity.restore({ privateKeyPem: state.private_key, nodeId: state.node_id, selfSignedCertificatePem: state.self_signed_certificate });
    this.logger.info(`node identity ${this.parts.identity.nodeId} restored from ${this.parts.stateFile.path}`);
    return true;
  }

  get nodeId(): string {
    return this.parts.identity.nodeId;
  }
  get selfSignedCertificatePem(): string {
    return this.parts.identity.selfSignedCertificatePem;
  }
  get nodeCertificatePem(): string {
    return this.parts.identity.nodeCertificatePem;
  }
  get serviceCertificatePem(): string {
    return this.parts.service.certificatePem;
  }
  get nodePrivateKeyPem(): string {
    return this.parts.identity.privateKeyPem;
  }
  get quoteInfo(): QuoteInfo | undefined {
    return this.parts.identity.quoteInfo;
  }
  get state(): NodeLifecycleState {
    return this.parts.lifecycle.state;
  }

  // ---------------------------------------------------------------- start-up

  /** Reads and checks every file a Start node's genesis needs, before anything is written. */
  checkStartInputs(): void {
    checkStartInputs(this.init);
  }

  /** The constitution a Start node's genesis records. */
  startConstitution(): string {
    return startConstitution(this.init);
  }

  /**
   * Runs the start-up flow command.type asks for (src/node/flows): Start creates the service, Join
   * joins it (or, on the node's own ledger and state, restarts as the same node). `onEndorsed`
   * runs once the node holds its service-endorsed certificate.
   */
  async start(addresses: NodeAddresses, client: JoinClient | undefined, onEndorsed: () => void): Promise<void> {
    const flow = flowFor(this.init.config, this.hasPersistedState());
    const ctx = this.parts.flowContext();
    // The certificates members renew later are presented the same way, once committed.
    this.parts.certificates.onInstall(onEndorsed);
    switch (flow) {
      case 'start':
        await startFlow(ctx, addresses);
        onEndorsed();
        return;
      case 'join':
        assert(client, 'a joining node has a join client');
        await joinFlow(ctx, addresses, client, onEndorsed);
        return;
      case 'restart':
        await restartFlow(ctx, addresses, client, onEndorsed);
        return;
      case 'recover':
        await recoverFlow(ctx, addresses);
        onEndorsed();
        return;
    }
  }

  // ---------------------------------------------------------------- channels

  attachChannels(channels: NodeChannels): void {
    this.parts.peers.attach(channels);
  }

  onFrame(kind: number, handler: (from: string, payload: Uint8Array) => void): void {
    this.parts.peers.onFrame(kind, handler);
  }

  sendFrame(to: string, kind: number, payload: Uint8Array): boolean {
    return this.parts.peers.send(to, kind, payload);
  }

  // ---------------------------------------------------------------- join (primary side)

  /**
   * Handles a join request on the primary (POST /node/join). `clientPublicKeyDer` is the key of
   * the TLS client certificate: the joiner proves it holds the key it asks to be recorded with.
   * `clientAddress` is the connection's remote address, whose rate of join requests is bounded.
   */
  handleJoin(request: JoinRequest, clientPublicKeyDer: Uint8Array | undefined, clientAddress: string | undefined): Promise<JoinResponse> {
    return admit(
      {
        logger: this.logger,
        ownMeasurement: this.parts.identity.measurement,
        startupSeqno: this.parts.replica.startupSeqno,
        pendingNodesMax,
        joinRate: this.parts.joinRate,
        checks: ADMISSION_CHECKS,
        isPrimary: () => this.isPrimary(),
        executeRead: (fn) => this.executeRead(fn),
        executeWrite: (fn) => this.executeWrite(fn),
        serviceStatus: () => this.serviceInfo()?.status,
        endorse: (publicKeyPem, sans, trusted) => this.endorseJoiner(publicKeyPem, sans, trusted),
        networkInfoFor: (endorsed) => this.parts.networkInfoFor(endorsed),
        seen: (nodeId) => this.parts.pendingCleanup.seen(nodeId),
        serviceIdentities: () => [this.parts.service.certificatePem, this.previousServiceIdentity()].filter((pem): pem is string => !!pem),
        joinPolicy: this.parts.joinPolicy,
      },
      request,
      clientPublicKeyDer,
      clientAddress,
    );
  }

  /**
   * A joiner's certificate: for the period members gave it in transition_node_to_trusted, else
   * from now for node_certificate.initial_validity_days. A period that does not hold the present
   * time would give the node a certificate its clients refuse: the default is used instead.
   */
  private endorseJoiner(publicKeyPem: string, sans: string[], trusted: Pick<NodeInfo, 'certificate_valid_from' | 'certificate_validity_period_days'> | undefined): Promise<string> {
    const initialDays = this.init.config.node_certificate.initial_validity_days;
    if (trusted?.certificate_valid_from === undefined) return this.parts.service.endorse(publicKeyPem, sans, trusted?.certificate_validity_period_days ?? initialDays);
    const days = trusted.certificate_validity_period_days ?? initialDays;
    let from: Date | undefined;
    try {
      from = parseValidFrom(trusted.certificate_valid_from);
    } catch (e) {
      this.logger.fail(`the node's certificate_valid_from cannot be used (${(e as Error).message}): its certificate is valid from now`);
    }
    const nowMs = this.clock.nowMs();
    if (from !== undefined && (from.getTime() > nowMs || from.getTime() + days * 86_400_000 <= nowMs)) {
      this.logger.fail(`the period members gave the node (from ${trusted.certificate_valid_from}, ${days} days) does not hold the present time: its certificate is valid from now`);
      from = undefined;
    }
    return this.parts.service.endorse(publicKeyPem, sans, days, from);
  }

  // ---------------------------------------------------------------- transactions

  executeWrite<T>(fn: (tx: Tx) => T, options?: WriteOptions): WriteResult<T> {
    return this.parts.transactions.executeWrite(fn, options);
  }

  executeRead<T>(fn: (tx: Tx) => T): T {
    return this.parts.transactions.executeRead(fn);
  }

  checkCommitWaitRoom(): void {
    this.parts.commitWaiters.checkRoom();
    this.parts.commitStages.requestRead();
  }

  async awaitCommit(txId: TxId): Promise<void> {
    const trace = this.parts.commitStages.executed(txId.seqno);
    // Signed at the end of this turn, with every write of the turn, not after ledger_signatures.delay.
    this.parts.signatures.requestAtTurnEnd();
    const id = formatTxId(txId);
    const status = await this.parts.commitWaiters.wait(txId, commitWaitTimeoutMs);
    this.parts.commitStages.answered(trace, status === 'Committed');
    if (status === 'Committed') return;
    if (status === 'Invalid') {
      throw nodeError('TransactionRolledBack', `transaction ${id} was rolled back (the primary changed before it committed): nothing of it remains; retry the write`, { transaction_id: id });
    }
    throw nodeError('CommitWaitTimedOut', `transaction ${id} did not commit within ${commitWaitTimeoutMs} ms; GET /app/tx?transaction_id=${id} tells its fate`, { transaction_id: id });
  }

  executeReadAt<T>(fn: (tx: Tx) => T): { readonly result: T; readonly txId: TxId } {
    // Synchronous: nothing is applied between the read and the id of what it read.
    return { result: this.parts.transactions.executeRead(fn), txId: this.parts.queries.appliedTxId() };
  }

  async confirmLinearizableRead(): Promise<void> {
    await this.parts.linearizableReads.waitForReadIndex();
  }

  readCommitted<T>(fn: (view: StoreView) => T): { readonly result: T; readonly txId: TxId } {
    // Synchronous: the committed state (at or beyond a confirmed read's seqno) and its id.
    const store = this.parts.replica.store;
    return { result: fn(store.readAt(store.committedVersion)), txId: this.parts.queries.commitTxId() };
  }

  /**
   * POST /node/snapshot:create: a snapshot at the next signature transaction, coalesced with one
   * already asked for; throws TooManySnapshotRequests (429) within snapshots.min_interval of the last.
   */
  requestSnapshot(): SnapshotRequestOutcome {
    return this.parts.snapshots.requestByOperator();
  }

  servedSnapshotVerdict(path: string, name: string, stamp: { sizeBytes: number; modifiedMs: number }, read: () => Promise<Uint8Array>): Promise<string | undefined> {
    return this.#servedSnapshots.verdict(path, name, stamp, read);
  }

  snapshotMetrics(): SnapshotGenerationMetrics {
    return this.parts.snapshots.metrics();
  }

  recoveryEncryptedShare(memberId: string): { encrypted_share: string } {
    return this.parts.recovery.encryptedShare(memberId);
  }

  submitRecoveryShare(memberId: string, share: Uint8Array, record: (tx: Tx) => void): Promise<{ message: string; submitted_count: number; recovery_threshold: number; txId: TxId | undefined }> {
    return this.parts.recovery.submitShare(memberId, share, record);
  }

  /** Requests that the next signature ends the current ledger chunk (trigger_ledger_chunk). */
  forceLedgerChunk(): void {
    this.parts.proposer.forceLedgerChunk();
  }

  treeRootHex(): string {
    return toHex(this.parts.replica.tree.root());
  }

  /**
   * Whether the application frontend serves users: members have opened the service
   * (transition_service_to_open; spec "Service opening") and this node's state allows it.
   * Asked on every application request: the service record is parsed again only when written.
   */
  appFrontendOpen(): boolean {
    if (!this.parts.lifecycle.allows.applicationFrontend) return false;
    const raw = this.parts.replica.store.currentRaw(Tables.serviceInfo, SINGLETON_KEY);
    if (raw !== this.serviceRecordSeen.raw) {
      this.serviceRecordSeen = { raw, open: raw !== undefined && TableDefs.serviceInfo.codec.decode(raw).status === 'Open' };
    }
    return this.serviceRecordSeen.open;
  }

  /** Whether a user certificate with this id (SHA-256 of its DER, hex) is registered. Asked on every user request: no transaction. */
  isUser(id: string): boolean {
    return this.parts.replica.store.currentRaw(Tables.usersCerts, id) !== undefined;
  }

  jwtRefreshMetrics(): KeyRefreshMetrics {
    return this.parts.jwtKeyRefresh.metrics();
  }

  certificateMetrics(): CertificateMetrics {
    return this.parts.certificates.metrics();
  }

  /** Renewals by the service key, for governance (the primary applies proposals; it holds the key). */
  get certificateRenewer(): CertificateRenewer {
    return this.parts.service;
  }

  /** The signing-key metadata of a token kid as stored (raw JSON bytes; the same object until it is written again). */
  jwtSigningKeyRaw(kid: string): Uint8Array | undefined {
    return this.parts.replica.store.currentRaw(Tables.jwtPublicSigningKeys, kid);
  }

  /** Why the application frontend does not serve users yet (GET /node/ready/app and the /app routes say it). */
  appFrontendClosedReason(): string {
    return this.parts.lifecycle.allows.applicationFrontend
      ? 'the service is not open to users yet: members open it with a transition_service_to_open proposal'
      : `this node is ${this.parts.lifecycle.state}, not part of the network yet`;
  }

  // ---------------------------------------------------------------- queries

  receipt(txId: TxId): Promise<Receipt | SignatureReceipt | 'pending'> {
    return this.parts.receipts.receipt(txId);
  }
  coseReceipt(txId: TxId): Promise<Uint8Array | 'pending'> {
    return this.parts.receipts.coseReceipt(txId);
  }
  historicalEntryAt(seqno: number): { view: number; writes: WriteSet } {
    return this.parts.receipts.historicalEntryAt(seqno);
  }

  historicalWrites(txId: TxId): WriteSet | 'pending' {
    return this.parts.receipts.historicalWrites(txId);
  }
  statusOf(txId: TxId): TxStatus {
    return this.parts.queries.statusOf(txId);
  }
  commitTxId(): TxId {
    return this.parts.queries.commitTxId();
  }
  viewHistory(since = 0): string[] {
    return this.parts.queries.viewHistory(since);
  }
  stateReport(): NodeStateReport {
    return this.parts.queries.stateReport();
  }
  consensusReport(): ConsensusReport {
    return this.parts.queries.consensusReport();
  }
  serviceInfo(): ServiceInfo | undefined {
    return this.parts.queries.serviceInfo();
  }
  networkReport(): NetworkReport {
    return this.parts.queries.networkReport();
  }
  listNodes(): NodeSummary[] {
    return this.parts.queries.listNodes();
  }
  serviceConfiguration(): unknown {
    return this.parts.queries.serviceConfiguration();
  }
  previousServiceIdentity(): string | undefined {
    return this.parts.queries.previousServiceIdentity();
  }
  serviceEndorsements(): ServiceEndorsementsReport {
    return this.parts.queries.serviceEndorsements();
  }
  versionReport(): VersionReport {
    return this.parts.queries.versionReport();
  }

  isPrimary(): boolean {
    return this.parts.driver.raft?.summary().role === 'Primary';
  }

  primaryId(): string | undefined {
    return this.parts.driver.raft?.summary().primaryId;
  }

  stop(): void {
    if (this.parts.stopped) return;
    this.parts.stopped = true;
    this.parts.signatures.cancelTimer();
    this.parts.driver.stop();
    this.parts.linearizableReads.close();
    this.parts.peers.stop();
    this.parts.primaryTasks.update(false);
    this.parts.proposer.close();
    this.parts.snapshots.stop();
    this.parts.filesCleanup.stop();
    this.parts.certificates.stop();
    this.parts.entryLeafReader.close();
    this.parts.recovery.close();
    this.parts.init.entryReplayer?.close();
    this.parts.replica.close();
    this.parts.lifecycle.transition('stop', []);
  }
}
