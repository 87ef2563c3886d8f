/**
 * One Covenant node: the composition root of its parts and the facade the layers above use
 * (docs/node.md has the module map). Each part owns its state and is reached through a narrow
 * interface:
 *
 *  - lifecycle (the state and its table), identity/ (node keys, service identity, ledger secrets),
 *    persistence (the node state file), replica (store, tree, ledger, commit seqnos),
 *  - driver (the consensus core and the order of a step's side effects), write/ (transactions,
 *    the proposer and its sealing pipeline, signatures), peers (node-to-node channels),
 *  - join/ (the joiner's requests, the primary's admission chain), tasks/ (primary-only work),
 *    queries/ (receipts and operator reports), flows/ (one start-up flow per command.type).
 *
 * Transactions execute synchronously on the primary (docs/architecture.md, decision 2); commit
 * advances to signature transactions held by a majority of every active configuration (decision
 * 4). Everything time- or I/O-related comes in through NodeInit.
 */
import { isIP } from 'node:net';
import { assert } from '../base/assert.js';
import { toHex } from '../base/bytes.js';
import type { TxId } from '../base/ids.js';
import type { Logger } from '../base/log.js';
import { parseHostPort } from '../config/index.js';
import { jsonCodec, type Tx, type WriteSet } from '../kv/index.js';
import type { Entry, Ready } from '../consensus/index.js';
import { BytesRandom } from '../base/random.js';
import type { Receipt, SignatureReceipt } from '../merkle/index.js';
import type { QuoteInfo } from '../attestation/virtual.js';
import type { NodeAddresses, NodeFrames, NodeGovernanceHost, NodeInit, NodeOperatorQueries } from './api.js';
import { MAX_ENTRY_BYTES, type NodeChannels } from './channels.js';
import { ConsensusDriver, type DriverHost } from './driver.js';
import { FilesCleanup } from './cleanup.js';
import type { FlowContext, RestoredConsensus } from './flows/context.js';
import { checkStartInputs, flowFor, joinFlow, restartFlow, startConstitution, startFlow } from './flows/index.js';
import { nodeError } from './errors.js';
import type { JoinClient } from './join.js';
import { LedgerSecrets, type LedgerSecretRecord } from './identity/ledger-secrets.js';
import { NodeIdentity } from './identity/node-identity.js';
import { ServiceIdentity } from './identity/service-identity.js';
import { ADMISSION_CHECKS, admit } from './join/admission.js';
import type { JoinRequest, JoinResponse, NetworkInfo } from './join.js';
import { Lifecycle, type LifecycleTrigger, type NodeLifecycleState } from './lifecycle.js';
import { NodeStateFile, type BoundAddresses, type PersistedNodeState } from './persistence.js';
import { FrameKind, Peers, trustedPeersOf } from './peers.js';
import { OperatorQueries } from './queries/operator-reports.js';
import { Receipts } from './queries/receipts.js';
import { Replica } from './replica.js';
import type { ConsensusReport, NetworkReport, NodeStateReport, NodeSummary, VersionReport } from './reports.js';
import { SnapshotManager, type StartupSnapshot } from './snapshots.js';
import { SINGLETON_KEY, Tables, type NodeInfo, type ServiceInfo, type ServiceStatus } from './tables.js';
import { PendingNodeCleanup } from './tasks/pending-cleanup.js';
import { PrimaryTasks } from './tasks/primary-tasks.js';
import type { TxStatus } from './tx-status.js';
import { Proposer } from './write/proposer.js';
import { Signatures } from './write/signatures.js';
import { Transactions, type WriteResult } from './write/transactions.js';

export type { NodeAddresses, NodeInit, RpcInterfaceAddress } from './api.js';
export type { BoundAddresses } from './persistence.js';
export { NODE_STATE_FILE } from './persistence.js';
export type { WriteResult } from './write/transactions.js';
export { FrameKind } from './peers.js';

const json = jsonCodec<any>();

export class CovenantNode implements NodeOperatorQueries, NodeGovernanceHost, NodeFrames {
  readonly init: NodeInit;
  readonly logger: Logger;
  readonly clock: NodeInit['clock'];
  private readonly lifecycle: Lifecycle;
  readonly identity: NodeIdentity;
  readonly service = new ServiceIdentity();
  readonly secrets = new LedgerSecrets();
  readonly stateFile: NodeStateFile;
  readonly replica: Replica;
  readonly snapshots: SnapshotManager;
  readonly filesCleanup: FilesCleanup;
  readonly driver: ConsensusDriver;
  readonly proposer: Proposer;
  readonly signatures: Signatures;
  readonly transactions: Transactions;
  readonly peers: Peers;
  private readonly primaryTasks = new PrimaryTasks();
  private readonly pendingCleanup: PendingNodeCleanup;
  private readonly receipts: Receipts;
  private readonly queries: OperatorQueries;
  private addresses: NodeAddresses | undefined;
  private genesisConfiguration: { seqno: number; nodes: string[] } | undefined;
  /** The snapshot this node starts from (joining), until consensus is created from it. */
  private startupSnapshot: StartupSnapshot | undefined;
  /** The service status in the last join response, reported until the service record is replicated. */
  private joinReportedServiceStatus: ServiceStatus | undefined;
  /** The service record's bytes last read by appFrontendOpen, and whether they said Open. */
  private serviceRecordSeen: { raw: Uint8Array | undefined; open: boolean } = { raw: undefined, open: false };
  private stopped = false;

  constructor(init: NodeInit) {
    this.init = init;
    this.logger = init.logger;
    this.clock = init.clock;
    this.lifecycle = new Lifecycle(init.logger);
    this.lifecycle.transition('config', ['config']);
    this.identity = new NodeIdentity(init.version, init.hostData);
    this.stateFile = new NodeStateFile(init.disk, init.config.node_certificate_file, init.writeSecretFile);
    const { config } = init;
    this.replica = new Replica({
      disk: init.disk,
      logger: init.logger,
      clock: init.clock,
      ledgerDirectory: config.ledger.directory,
      readOnlyLedgerDirectories: config.ledger.read_only_directories,
      secrets: this.secrets,
    });
    this.snapshots = new SnapshotManager({
      config,
      disk: init.disk,
      logger: init.logger,
      clock: init.clock,
      store: () => this.replica.store,
      tree: () => this.replica.tree,
      encryptor: () => this.secrets.latest.seal.encryptor,
      serviceCertificatePem: () => this.service.certificatePem,
      genesisConfiguration: () => this.genesisConfiguration!,
      viewHistory: () => this.driver.raft?.status().viewHistory ?? [],
      commitEvidence: (view, seqno) => this.replica.commitEvidence(view, seqno),
      isPrimary: () => this.isPrimary(),
      requestSignature: () => this.signatures.request(),
    });
    this.replica.observe(this.snapshots);
    this.filesCleanup = new FilesCleanup({
      config,
      disk: init.disk,
      logger: init.logger,
      clock: init.clock,
      relocateChunk: (name, directory) => this.replica.ledger.relocateCommittedChunk(name, directory),
      yieldControl: () => new Promise((resolve) => init.clock.setTimer(0, resolve)),
    });
    this.peers = new Peers(() => this.identity.nodeId, init.logger);
    this.driver = new ConsensusDriver(this.driverHost());
    this.peers.onFrame(FrameKind.Consensus, (from, payload) => this.driver.onFrame(from, payload));
    const raft = () => {
      assert(this.driver.raft, 'consensus exists');
      return this.driver.raft;
    };
    this.proposer = new Proposer({
      logger: init.logger,
      replica: this.replica,
      secrets: this.secrets,
      chunkSizeBytes: config.ledger.chunk_size,
      entryBytesMax: init.maxEntryBytes ?? MAX_ENTRY_BYTES,
      createEntrySealer: init.createEntrySealer,
      raft,
      isPrimary: () => this.isPrimary(),
      schedulePump: () => this.driver.schedulePump(),
      snapshotWantsEntry: (flags) => this.snapshots.wantsEntry(flags),
      snapshotAfterEntry: (entry) => this.snapshots.afterEntry(entry),
    });
    this.queries = new OperatorQueries({
      replica: this.replica,
      version: init.version,
      nodeId: () => this.identity.nodeId,
      state: () => this.lifecycle.state,
      raft: () => this.driver.raft,
      joinReportedServiceStatus: () => this.joinReportedServiceStatus,
      serviceCertificatePem: () => this.service.certificatePem,
    });
    this.signatures = new Signatures({
      config,
      clock: init.clock,
      identity: this.identity,
      replica: this.replica,
      proposer: this.proposer,
      snapshots: this.snapshots,
      isPrimary: () => this.isPrimary(),
      stopped: () => this.stopped,
      currentView: () => raft().status().view,
      viewOf: (seqno) => this.queries.viewOf(seqno),
      pump: () => this.driver.pump(),
    });
    this.transactions = new Transactions({
      replica: this.replica,
      proposer: this.proposer,
      signatures: this.signatures,
      raft: () => this.driver.raft,
      isPrimary: () => this.isPrimary(),
      stateName: () => this.lifecycle.state,
    });
    this.receipts = new Receipts({
      replica: this.replica,
      service: this.service,
      secrets: this.secrets,
      statusOf: (txId) => this.queries.statusOf(txId),
      viewOf: (seqno) => this.queries.viewOf(seqno),
    });
    this.pendingCleanup = new PendingNodeCleanup({
      clock: init.clock,
      logger: init.logger,
      timeoutMs: config.pending_node_timeout,
      executeRead: (fn) => this.executeRead(fn),
      executeWrite: (fn) => this.executeWrite(fn),
    });
    this.primaryTasks.register(this.pendingCleanup);
    this.replica.watchStore((store) => {
      this.peers.markDirty();
      store.onRollback(() => this.peers.markDirty());
      store.onMapCommit(Tables.nodesInfo, () => this.peers.markDirty());
      // trigger_snapshot: the primary snapshots at the next signature.
      store.onMapCommit(Tables.snapshotRequests, () => {
        if (this.isPrimary()) this.snapshots.request();
      });
    });
  }

  /** The driver's side effects, each handed to the part that owns it. */
  private driverHost(): DriverHost {
    return {
      logger: this.init.logger,
      clock: this.init.clock,
      storeVersion: () => this.replica.store.version,
      ledgerLastSeqno: () => this.replica.ledger.lastSeqno,
      commitSeqno: () => this.replica.commitSeqno,
      forgetProposals: () => this.proposer.forgetProposals(),
      abandonIfDeposed: () => this.proposer.abandonIfDeposed(),
      rollbackTo: (seqno) => {
        this.proposer.forgetProposals();
        this.replica.rollbackTo(seqno);
        this.signatures.onRollback();
      },
      applyReplicated: (entry) => this.replica.applyReplicated(entry),
      persistEntries: (frames, truncateAfterSeqno) => this.replica.persist(frames, truncateAfterSeqno),
      persistHardState: () => this.persistState(),
      send: (to, message) => void this.peers.send(to, FrameKind.Consensus, message),
      advanceCommit: (seqno) => {
        if (!this.replica.advanceCommit(seqno)) return;
        // Forgets the proposals every peer has acknowledged: none will be sent again (a peer that loses them catches up from the ledger).
        let acknowledged = Number.POSITIVE_INFINITY;
        for (const peer of this.driver.raft?.status().peers ?? []) acknowledged = Math.min(acknowledged, peer.matchSeqno);
        this.proposer.dropAcknowledged(acknowledged);
      },
      onRoleChange: (change) => this.onRoleChange(change),
      reportSnapshotsNeeded: (ids) => this.reportSnapshotsNeeded(ids),
      isPrimary: () => this.isPrimary(),
      emitSignature: () => this.signatures.emit(),
      recordRetirements: (ids) => this.transactions.recordRetirements(ids),
      afterPump: () => this.peers.refreshIfDirty((fn) => this.executeRead(fn)),
      entryAt: (seqno: number): Entry | undefined => {
        if (seqno < 1 || seqno > this.replica.ledger.lastSeqno) return undefined;
        return this.proposer.recent(seqno) ?? this.replica.entryFromLedger(seqno);
      },
    };
  }

  private onRoleChange({ role, view, primaryId }: NonNullable<Ready['roleChange']>): void {
    this.logger.info(`consensus: ${role} in view ${view}${primaryId ? ` (primary ${primaryId.slice(0, 12)})` : ''}`);
    const primary = role === 'Primary';
    if (!primary) this.signatures.cancelTimer();
    else this.proposer.onBecomePrimary();
    this.primaryTasks.update(primary && this.lifecycle.allows.primaryTasks);
  }

  /**
   * Peers that lack entries this node no longer holds (it started from a snapshot after them):
   * replication cannot bring them up to date. Consensus reports a change of this set once; the
   * operator sees it here and in GET /node/consensus (acks[id].needs_snapshot).
   */
  private reportSnapshotsNeeded(ids: readonly string[]): void {
    const peers = this.driver.raft?.status().peers ?? [];
    for (const id of ids) {
      const peer = peers.find((p) => p.id === id);
      this.logger.fail(
        `peer ${id} needs entries from seqno ${peer ? peer.matchSeqno + 1 : '?'} on, before this node's first entry ` +
          `(${this.replica.startupSeqno + 1}, it started from a snapshot): it cannot catch up by replication. ` +
          'Stop it and join it again from a recent snapshot (command.type Join), or remove it from the network.',
      );
    }
  }

  // ---------------------------------------------------------------- composition steps the flows share

  /** The parts and steps a start-up flow works with (src/node/flows). */
  flowContext(): FlowContext {
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const node = this;
    return {
      init: this.init,
      logger: this.logger,
      identity: this.identity,
      service: this.service,
      secrets: this.secrets,
      stateFile: this.stateFile,
      replica: this.replica,
      snapshots: this.snapshots,
      driver: this.driver,
      peers: this.peers,
      transactions: this.transactions,
      signatures: this.signatures,
      get genesisConfiguration() {
        return node.genesisConfiguration;
      },
      set genesisConfiguration(value) {
        node.genesisConfiguration = value;
      },
      get startupSnapshot() {
        return node.startupSnapshot;
      },
      set startupSnapshot(value) {
        node.startupSnapshot = value;
      },
      get joinReportedServiceStatus() {
        return node.joinReportedServiceStatus;
      },
      set joinReportedServiceStatus(value) {
        node.joinReportedServiceStatus = value;
      },
      transition: (trigger: LifecycleTrigger, allowed: readonly LifecycleTrigger[]) => {
        this.lifecycle.transition(trigger, allowed);
        this.primaryTasks.update(this.isPrimary() && this.lifecycle.allows.primaryTasks);
      },
      setAddresses: (addresses) => {
        this.addresses = addresses;
      },
      subjectAltNames: () => this.subjectAltNames(),
      rpcInterfacesRecord: () => this.rpcInterfacesRecord(),
      installLedgerSecrets: (records) => {
        this.secrets.installRecords(records);
        this.proposer.useLatestSecret();
      },
      installLedgerSecret: (fromSeqno, secret) => {
        this.secrets.install(fromSeqno, secret);
        this.proposer.useLatestSecret();
      },
      createConsensus: (restored) => this.createConsensus(restored),
      persistState: () => this.persistState(),
      startBackgroundWork: () => {
        this.snapshots.start();
        this.filesCleanup.start();
        this.driver.startTicking();
      },
      pump: () => this.driver.pump(),
      stopped: () => this.stopped,
      sleep: (ms) => new Promise((resolve) => this.init.clock.setTimer(ms, resolve)),
    };
  }

  private createConsensus(restored?: RestoredConsensus): void {
    const genesis = this.genesisConfiguration;
    assert(genesis, 'the genesis configuration is known before consensus starts');
    const snapshot = this.startupSnapshot;
    const start = snapshot
      ? {
          configs: snapshot.parts.meta.configurations.map((c) => ({ seqno: c.seqno, nodes: [...c.nodes] })),
          startSeqno: snapshot.seqno,
          startView: snapshot.parts.meta.view,
          viewHistory: [...snapshot.parts.meta.view_history],
        }
      : { configs: [genesis], startSeqno: 0 };
    const initial = restored
      ? { ...start, lastSeqno: restored.lastSeqno, view: restored.view, commitSeqno: restored.commitSeqno, ...(restored.votedFor !== undefined ? { votedFor: restored.votedFor } : {}) }
      : snapshot
        ? { ...start, lastSeqno: snapshot.seqno, view: snapshot.parts.meta.view, commitSeqno: snapshot.seqno }
        : { ...start, lastSeqno: 0 };
    const { election_timeout, message_timeout } = this.init.config.consensus;
    this.driver.create({
      selfId: this.identity.nodeId,
      random: new BytesRandom(this.init.randomBytes),
      electionTimeoutMs: election_timeout,
      messageTimeoutMs: message_timeout,
      initial,
    });
  }

  /** Writes the node state file (identity, service identity, secrets, hard state); nothing before the node holds them all. */
  private persistState(): void {
    if (!this.identity.exists || !this.secrets.held || !this.service.holdsKey || !this.genesisConfiguration) return;
    const state: PersistedNodeState = {
      format: 1,
      node_id: this.identity.nodeId,
      private_key: this.identity.privateKeyPem,
      self_signed_certificate: this.identity.selfSignedCertificatePem,
      node_certificate: this.identity.nodeCertificatePem,
      service_certificate: this.service.certificatePem,
      service_key: this.service.keyPem,
      ledger_secrets: this.secrets.records(),
      genesis_configuration: this.genesisConfiguration,
      view: this.driver.hardView,
      voted_for: this.driver.hardVotedFor ?? null,
      startup_seqno: this.replica.startupSeqno,
      ...(this.addresses ? { bound_addresses: boundAddressesOf(this.addresses) } : {}),
    };
    this.stateFile.save(state);
  }

  /**
   * The names in the node's certificates: node_certificate.subject_alt_names when configured,
   * otherwise the hosts of the RPC interfaces' published addresses (spec "Authentication" 3), as
   * bound once the interfaces listen, as configured before.
   */
  private subjectAltNames(): string[] {
    const configured = this.init.config.node_certificate.subject_alt_names;
    if (configured !== undefined) return [...configured];
    const published = this.addresses
      ? this.addresses.rpc.map((a) => a.publishedAddress)
      : Object.values(this.init.config.rpc_interfaces).map((i) => i.published_address ?? i.bind_address);
    return subjectAltNamesOf(published);
  }

  private rpcInterfacesRecord(): NodeInfo['rpc_interfaces'] {
    const out: NodeInfo['rpc_interfaces'] = {};
    for (const a of this.addresses?.rpc ?? []) {
      out[a.name] = { bind_address: a.bindAddress, published_address: a.publishedAddress, enabled_operator_features: [...a.enabledOperatorFeatures] };
    }
    return out;
  }

  // ---------------------------------------------------------------- identity (before the interfaces listen)

  /** Whether this node has state from an earlier run that it can resume (a Join node restarting). */
  hasPersistedState(): boolean {
    return this.init.config.command.type === 'Join' && this.stateFile.exists();
  }

  /**
   * The addresses this node's interfaces were bound to in its previous run (when it restarts from
   * its persisted state). Peers and clients know the node there until it announces new ones, and
   * announcing needs a primary, which may need this node: a restart binds the same ports again.
   */
  previousBoundAddresses(): BoundAddresses | undefined {
    return this.hasPersistedState() ? this.stateFile.load().bound_addresses : undefined;
  }

  /** Creates (or restores) the node's key, self-signed certificate and quote, before its interfaces listen. */
  async prepareIdentity(): Promise<void> {
    if (this.hasPersistedState()) {
      const state = this.stateFile.load();
      this.identity.restore({ privateKeyPem: state.private_key, nodeId: state.node_id, selfSignedCertificatePem: state.self_signed_certificate });
      this.logger.info(`node identity ${this.identity.nodeId} restored from ${this.stateFile.path}`);
      return;
    }
    await this.identity.create(this.subjectAltNames(), this.init.config.node_certificate.initial_validity_days);
    this.logger.info(`node identity ${this.identity.nodeId} (virtual mode: NO hardware attestation, never for production)`);
  }

  get nodeId(): string {
    return this.identity.nodeId;
  }
  get selfSignedCertificatePem(): string {
    return this.identity.selfSignedCertificatePem;
  }
  get nodeCertificatePem(): string {
    return this.identity.nodeCertificatePem;
  }
  get serviceCertificatePem(): string {
    return this.service.certificatePem;
  }
  get nodePrivateKeyPem(): string {
    return this.identity.privateKeyPem;
  }
  get quoteInfo(): QuoteInfo | undefined {
    return this.identity.quoteInfo;
  }
  get state(): NodeLifecycleState {
    return this.lifecycle.state;
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
    const ctx = this.flowContext();
    switch (flow) {
      case 'start':
        await startFlow(ctx, addresses);
        onEndorsed();
        return;
      case 'join':
      case 'restart':
        assert(client, 'a joining node has a join client');
        await (flow === 'join' ? joinFlow : restartFlow)(ctx, addresses, client, onEndorsed);
        return;
      case 'recover':
        throw nodeError('InvalidConfiguration', '"command.type": Recover is not supported by this version of the node yet');
    }
  }

  // ---------------------------------------------------------------- channels

  attachChannels(channels: NodeChannels): void {
    this.peers.attach(channels);
  }

  onFrame(kind: number, handler: (from: string, payload: Uint8Array) => void): void {
    this.peers.onFrame(kind, handler);
  }

  sendFrame(to: string, kind: number, payload: Uint8Array): boolean {
    return this.peers.send(to, kind, payload);
  }

  // ---------------------------------------------------------------- join (primary side)

  /**
   * Handles a join request on the primary (POST /node/join). `clientPublicKeyDer` is the key of
   * the TLS client certificate: the joiner proves it holds the key it asks to be recorded with.
   */
  handleJoin(request: JoinRequest, clientPublicKeyDer: Uint8Array | undefined): Promise<JoinResponse> {
    return admit(
      {
        logger: this.logger,
        ownMeasurement: this.identity.measurement,
        startupSeqno: this.replica.startupSeqno,
        checks: ADMISSION_CHECKS,
        isPrimary: () => this.isPrimary(),
        executeRead: (fn) => this.executeRead(fn),
        executeWrite: (fn) => this.executeWrite(fn),
        serviceStatus: () => this.serviceInfo()?.status,
        endorse: (publicKeyPem, sans) => this.service.endorse(publicKeyPem, sans, this.init.config.node_certificate.initial_validity_days),
        networkInfoFor: (endorsed) => this.networkInfoFor(endorsed),
        seen: (nodeId) => this.pendingCleanup.seen(nodeId),
      },
      request,
      clientPublicKeyDer,
    );
  }

  private networkInfoFor(endorsedCertificatePem: string): NetworkInfo {
    return {
      service_certificate: this.service.certificatePem,
      service_key: this.service.keyPem,
      ledger_secrets: this.secrets.records() satisfies LedgerSecretRecord[],
      endorsed_certificate: endorsedCertificatePem,
      genesis_configuration: this.genesisConfiguration!,
      peers: this.executeRead(trustedPeersOf),
    };
  }

  // ---------------------------------------------------------------- transactions

  executeWrite<T>(fn: (tx: Tx) => T): WriteResult<T> {
    return this.transactions.executeWrite(fn);
  }

  executeRead<T>(fn: (tx: Tx) => T): T {
    return this.transactions.executeRead(fn);
  }

  /** POST /node/snapshot:create: a snapshot at the next signature transaction. */
  requestSnapshot(): void {
    this.snapshots.request();
  }

  /** Requests that the next signature ends the current ledger chunk (trigger_ledger_chunk). */
  forceLedgerChunk(): void {
    this.proposer.forceLedgerChunk();
  }

  treeRootHex(): string {
    return toHex(this.replica.tree.root());
  }

  /**
   * Whether the application frontend serves users: members have opened the service
   * (transition_service_to_open; spec "Service opening") and this node's state allows it.
   * Asked on every application request: the service record is parsed again only when written.
   */
  appFrontendOpen(): boolean {
    if (!this.lifecycle.allows.applicationFrontend) return false;
    const raw = this.replica.store.currentRaw(Tables.serviceInfo, SINGLETON_KEY);
    if (raw !== this.serviceRecordSeen.raw) {
      this.serviceRecordSeen = { raw, open: raw !== undefined && (json.decode(raw) as ServiceInfo).status === 'Open' };
    }
    return this.serviceRecordSeen.open;
  }

  /** Whether a user certificate with this id (SHA-256 of its DER, hex) is registered. Asked on every user request: no transaction. */
  isUser(id: string): boolean {
    return this.replica.store.currentRaw(Tables.usersCerts, id) !== undefined;
  }

  /** Why the application frontend does not serve users yet (GET /node/ready/app and the /app routes say it). */
  appFrontendClosedReason(): string {
    return this.lifecycle.allows.applicationFrontend
      ? 'the service is not open to users yet: members open it with a transition_service_to_open proposal'
      : `this node is ${this.lifecycle.state}, not part of the network yet`;
  }

  // ---------------------------------------------------------------- queries

  receipt(txId: TxId): Receipt | SignatureReceipt | 'pending' {
    return this.receipts.receipt(txId);
  }
  coseReceipt(txId: TxId): Uint8Array | 'pending' {
    return this.receipts.coseReceipt(txId);
  }
  historicalWrites(txId: TxId): WriteSet | 'pending' {
    return this.receipts.historicalWrites(txId);
  }
  statusOf(txId: TxId): TxStatus {
    return this.queries.statusOf(txId);
  }
  commitTxId(): TxId {
    return this.queries.commitTxId();
  }
  viewHistory(since = 0): string[] {
    return this.queries.viewHistory(since);
  }
  stateReport(): NodeStateReport {
    return this.queries.stateReport();
  }
  consensusReport(): ConsensusReport {
    return this.queries.consensusReport();
  }
  serviceInfo(): ServiceInfo | undefined {
    return this.queries.serviceInfo();
  }
  networkReport(): NetworkReport {
    return this.queries.networkReport();
  }
  listNodes(): NodeSummary[] {
    return this.queries.listNodes();
  }
  serviceConfiguration(): unknown {
    return this.queries.serviceConfiguration();
  }
  previousServiceIdentity(): string | undefined {
    return this.queries.previousServiceIdentity();
  }
  versionReport(): VersionReport {
    return this.queries.versionReport();
  }

  isPrimary(): boolean {
    return this.driver.raft?.summary().role === 'Primary';
  }

  primaryId(): string | undefined {
    return this.driver.raft?.summary().primaryId;
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.signatures.cancelTimer();
    this.driver.stop();
    this.peers.stop();
    this.primaryTasks.update(false);
    this.proposer.close();
    this.snapshots.stop();
    this.filesCleanup.stop();
    this.replica.close();
    this.lifecycle.transition('stop', []);
  }
}

function boundAddressesOf(addresses: NodeAddresses): BoundAddresses {
  const rpc: Record<string, string> = {};
  for (const a of addresses.rpc) rpc[a.name] = a.bindAddress;
  return { node_to_node: addresses.nodeToNode.bindAddress, rpc };
}

/** "iPAddress:" or "dNSName:" names for the hosts of "host:port" addresses (wildcard hosts name nothing; loopback when none is left). */
export function subjectAltNamesOf(addresses: readonly string[]): string[] {
  const names = new Set<string>();
  for (const address of addresses) {
    const parsed = parseHostPort(address);
    if (typeof parsed === 'string' || parsed.host === '0.0.0.0' || parsed.host === '::') continue;
    names.add(isIP(parsed.host) ? `iPAddress:${parsed.host}` : `dNSName:${parsed.host}`);
  }
  return names.size > 0 ? [...names] : ['iPAddress:127.0.0.1'];
}
