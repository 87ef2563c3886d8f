/**
 * The composition root of a node: builds its parts, wires each to the narrow interface of the
 * others it needs (the driver's side effects, the flows' context, admission), and holds the few
 * facts the start-up flows establish (genesis configuration, startup snapshot, addresses). The
 * facade the layers above use is src/node/node.ts; the module map is in docs/node.md.
 */
import { assert } from '../base/assert.js';
import type { Logger } from '../base/log.js';
import { type Tx } from '../kv/index.js';
import { inlineEntryLeafReader, inlineSnapshotWriter, type EntryLeafReader } from '../ledger/index.js';
import type { Entry, Raft, Ready } from '../consensus/index.js';
import { BytesRandom } from '../base/random.js';
import type { NodeAddresses, NodeInit } from './api.js';
import { MAX_ENTRY_BYTES } from './channels.js';
import { nodeCertificates, type NodeCertificates } from './certificates.js';
import { ConsensusDriver, type DriverHost } from './driver.js';
import { FilesCleanup } from './cleanup.js';
import { watchGovernanceEffects } from './gov-effects.js';
import type { FlowContext } from './flows/context.js';
import { initialConsensusState, type RestoredConsensus } from './consensus-start.js';
import { LedgerSecrets, type LedgerSecretRecord } from './identity/ledger-secrets.js';
import { NodeIdentity, subjectAltNamesOf } from './identity/node-identity.js';
import { ServiceIdentity } from './identity/service-identity.js';
import type { NetworkInfo } from './join.js';
import { JoinRateLimiter } from './join/rate.js';
import type { JoinPolicyEvaluator } from './join/admission.js';
import { SandboxJoinPolicy } from './join/policy.js';
import { Lifecycle, type LifecycleTrigger } from './lifecycle.js';
import { blockRebuildsConcurrentMax, commitWaitersMax, linearizableReadsMax, linearizableReadTimeoutMs, rebuiltBlocksCachedMax } from './limits.js';
import { LinearizableReads } from './queries/linearizable-reads.js';
import { notPrimary } from './errors.js';
import { NodeStateFile } from './persistence.js';
import { FrameKind, Peers, trustedPeersOf } from './peers.js';
import { OperatorQueries } from './queries/operator-reports.js';
import { CommitWaiters } from './queries/commit-waiters.js';
import { Receipts } from './queries/receipts.js';
import { ServiceEndorsements } from './queries/service-endorsements.js';
import { RebuiltBlocks } from './queries/rebuilt-blocks.js';
import { Recovery } from './recovery/recovery.js';
import { Rekey } from './recovery/rekey.js';
import { memberShares, ShareIssuer } from './recovery/share-issuer.js';
import { sealedShareIssuer, sealingInputsOf, type SealedShareIssuer } from './recovery/sealing.js';
import { Replica } from './replica.js';
import { SnapshotManager, type StartupSnapshot } from './snapshots.js';
import { type NodeInfo, type ServiceStatus } from './tables.js';
import { NO_KEY_FETCHER } from '../jwt/index.js';
import { JwtKeyRefresh } from './tasks/jwt-key-refresh.js';
import { PendingNodeCleanup } from './tasks/pending-cleanup.js';
import { PrimaryTasks } from './tasks/primary-tasks.js';
import { Proposer } from './write/proposer.js';
import { Signatures } from './write/signatures.js';
import { CommitStages, nodeCommitStages } from './write/commit-stages.js';
import { Transactions, type WriteResult } from './write/transactions.js';
import { JOINED_NETWORK_TRIGGERS } from './recovery/recovery-machine.js';

export class NodeComposition {
  readonly init: NodeInit;
  readonly logger: Logger;
  readonly clock: NodeInit['clock'];
  readonly lifecycle: Lifecycle;
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
  readonly primaryTasks = new PrimaryTasks();
  readonly pendingCleanup: PendingNodeCleanup;
  /** Token issuers' keys, refreshed by the primary (docs/tokens.md). */
  readonly jwtKeyRefresh: JwtKeyRefresh;
  /** The rate of join requests per client address this node admits while it is primary. */
  readonly joinRate: JoinRateLimiter;
  /** The members' join policy, run in the sandbox for joiners whose host data is not registered. */
  readonly joinPolicy: JoinPolicyEvaluator = new SandboxJoinPolicy();
  readonly receipts: Receipts;
  readonly entryLeafReader: EntryLeafReader;
  readonly queries: OperatorQueries;
  readonly commitWaiters: CommitWaiters;
  readonly commitStages: CommitStages;
  /** Disaster recovery's shares and private phase, rekeys, and the issue of recovery shares (src/node/recovery). */
  readonly recovery: Recovery;
  readonly rekey: Rekey;
  readonly shareIssuer: ShareIssuer;
  readonly sealedShareIssuer: SealedShareIssuer;
  readonly linearizableReads: LinearizableReads;
  /** The certificates the node serves: committed renewals adopted, expiry watched. */
  readonly certificates: NodeCertificates;
  private addresses: NodeAddresses | undefined;
  private genesisConfiguration: { seqno: number; nodes: string[] } | undefined;
  /** The snapshot this node starts from (joining), until consensus is created from it. */
  private startupSnapshot: StartupSnapshot | undefined;
  /** The service status in the last join response, reported until the service record is replicated. */
  joinReportedServiceStatus: ServiceStatus | undefined;
  /** The service record's bytes last read by appFrontendOpen, and whether they said Open. */
  stopped = false;

  constructor(init: NodeInit) {
    this.init = init;
    this.logger = init.logger;
    this.clock = init.clock;
    this.lifecycle = new Lifecycle(init.logger);
    this.lifecycle.transition('config', ['config']);
    this.identity = new NodeIdentity(init.version, init.hostData);
    this.stateFile = new NodeStateFile(init.disk, init.config.node_certificate_file, init.writeSecretFile);
    this.replica = new Replica({
      disk: init.disk,
      logger: init.logger,
      clock: init.clock,
      ledgerDirectory: init.config.ledger.directory,
      readOnlyLedgerDirectories: init.config.ledger.read_only_directories,
      secrets: this.secrets,
      durability: init.config.ledger.durability,
      signatureVerifier: init.signatureVerifier,
    });
    this.snapshots = this.buildSnapshots();
    this.replica.observe(this.snapshots);
    this.filesCleanup = this.buildFilesCleanup();
    this.peers = new Peers(() => this.identity.nodeId, init.logger);
    this.driver = new ConsensusDriver(this.driverHost());
    this.commitStages = nodeCommitStages(init.clock, this.replica, this.driver, init.commitStageTimings);
    this.replica.whenDurable(() => {
      this.commitStages.check();
      this.driver.schedulePump();
    });
    this.peers.onFrame(FrameKind.Consensus, (from, payload) => {
      this.driver.onFrame(from, payload);
      this.commitStages.check(true);
    });
    this.proposer = this.buildProposer();
    this.queries = this.buildQueries();
    this.signatures = this.buildSignatures();
    this.transactions = this.buildTransactions();
    this.entryLeafReader = init.entryLeafReader ?? inlineEntryLeafReader(init.disk);
    this.receipts = this.buildReceipts();
    this.pendingCleanup = this.buildPendingCleanup();
    this.commitWaiters = new CommitWaiters({ clock: init.clock, statusOf: (txId) => this.queries.statusOf(txId) }, commitWaitersMax);
    this.linearizableReads = new LinearizableReads(
      {
        clock: init.clock,
        commitSeqno: () => this.replica.commitSeqno,
        requestRead: () => this.requestRead(),
      },
      linearizableReadsMax,
      linearizableReadTimeoutMs,
    );
    this.primaryTasks.register(this.pendingCleanup);
    this.jwtKeyRefresh = new JwtKeyRefresh({
      clock: init.clock,
      logger: init.logger,
      intervalMs: init.config.jwt.key_refresh_interval,
      timeoutMs: init.config.jwt.key_refresh_timeout,
      maxResponseBytes: init.config.jwt.key_refresh_max_response_size,
      fetcher: init.jwtKeyFetcher ?? NO_KEY_FETCHER,
      executeRead: (fn) => this.executeRead(fn),
      executeWrite: (fn) => this.executeWrite(fn),
    });
    this.primaryTasks.register(this.jwtKeyRefresh);
    this.joinRate = new JoinRateLimiter(init.clock, init.logger);
    ({ recovery: this.recovery, rekey: this.rekey, shareIssuer: this.shareIssuer, sealedShareIssuer: this.sealedShareIssuer } = this.buildRecovery());
    this.primaryTasks.register(this.shareIssuer);
    this.primaryTasks.register(this.sealedShareIssuer);
    const { identity, service, replica } = this;
    this.certificates = nodeCertificates({ init, identity, service, replica, persistState: () => this.persistState() });
    this.watchStores();
  }

  isPrimary(): boolean {
    return this.driver.raft?.summary().role === 'Primary';
  }

  executeRead<T>(fn: (tx: Tx) => T): T {
    return this.transactions.executeRead(fn);
  }

  /** A read index from consensus (NotPrimary on a backup), sent to the peers at once. */
  private requestRead(): number {
    const raft = this.driver.raft;
    if (raft === undefined || !this.isPrimary()) throw notPrimary('this node is not the primary: linearizable reads go to the primary');
    const readId = raft.requestRead();
    this.driver.schedulePump();
    return readId;
  }

  /** executeRead, made once (the driver asks for it after every pump). */
  private readonly readCurrent = <T>(fn: (tx: Tx) => T): T => this.executeRead(fn);

  executeWrite<T>(fn: (tx: Tx) => T): WriteResult<T> {
    return this.transactions.executeWrite(fn);
  }

  private raft(): Raft {
    assert(this.driver.raft, 'consensus exists');
    return this.driver.raft;
  }

  private buildSnapshots(): SnapshotManager {
    const init = this.init;
    return new SnapshotManager({
      config: init.config,
      disk: init.disk,
      logger: init.logger,
      clock: init.clock,
      store: () => this.replica.store,
      tree: () => this.replica.tree,
      encryptor: (seqno) => this.secrets.framingFor(seqno).encryptor,
      serviceCertificatePem: () => this.service.certificatePem,
      genesisConfiguration: () => this.genesisConfiguration!,
      viewHistory: () => this.driver.raft?.status().viewHistory ?? [],
      commitEvidence: (view, seqno) => this.replica.commitEvidence(view, seqno),
      isPrimary: () => this.isPrimary(),
      holdsPrivateDomain: () => this.lifecycle.allows.privateDomain,
      requestSignature: () => this.signatures.request(),
      ledgerBytesAfter: (seqno) => this.replica.ledger.listChunks().reduce((sum, c) => (c.last > seqno ? sum + c.sizeBytes : sum), 0),
      requestEvidence: () => this.signatures.requestEvidence(),
      snapshotWriter: init.snapshotWriter?.writer ?? inlineSnapshotWriter(init.disk),
      snapshotWriterKind: init.snapshotWriter?.kind ?? 'inline',
    });
  }

  private buildFilesCleanup(): FilesCleanup {
    const init = this.init;
    return new FilesCleanup({
      config: init.config,
      disk: init.disk,
      logger: init.logger,
      clock: init.clock,
      relocateChunk: (name, directory) => this.replica.ledger.relocateCommittedChunk(name, directory),
      yieldControl: () => new Promise((resolve) => init.clock.setTimer(0, resolve)),
    });
  }

  private buildProposer(): Proposer {
    const init = this.init;
    const config = init.config;
    const raft = () => this.raft();
    return new Proposer({
      logger: init.logger,
      replica: this.replica,
      secrets: this.secrets,
      chunkSizeBytes: config.ledger.chunk_size,
      entryBytesMax: init.maxEntryBytes ?? MAX_ENTRY_BYTES,
      createEntryFramer: init.createEntryFramer,
      raft,
      isPrimary: () => this.isPrimary(),
      schedulePump: () => {
        this.commitStages.check();
        this.driver.schedulePump();
      },
      snapshotWantsEntry: (flags) => this.snapshots.wantsEntry(flags),
      snapshotAfterEntry: (entry) => this.snapshots.afterEntry(entry),
    });
  }

  private buildQueries(): OperatorQueries {
    const init = this.init;
    return new OperatorQueries({
      replica: this.replica,
      version: init.version,
      nodeId: () => this.identity.nodeId,
      state: () => this.lifecycle.state,
      raft: () => this.driver.raft,
      joinReportedServiceStatus: () => this.joinReportedServiceStatus,
      serviceCertificatePem: () => this.service.certificatePem,
      recoveryDecision: () => this.recovery.decisionStatus(),
    });
  }

  private buildSignatures(): Signatures {
    const init = this.init;
    const config = init.config;
    const raft = () => this.raft();
    return new Signatures({
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
      onSigned: (seqno) => this.commitStages.signed(seqno),
    });
  }

  private buildTransactions(): Transactions {
    return new Transactions({
      replica: this.replica,
      proposer: this.proposer,
      signatures: this.signatures,
      raft: () => this.driver.raft,
      isPrimary: () => this.isPrimary(),
      stateName: () => this.lifecycle.state,
    });
  }

  private buildReceipts(): Receipts {
    const serviceEndorsements = new ServiceEndorsements();
    this.replica.watchStore((store) => serviceEndorsements.watch(store));
    return new Receipts({
      replica: this.replica,
      service: this.service,
      secrets: this.secrets,
      rebuiltBlocks: new RebuiltBlocks({
        reader: this.entryLeafReader,
        locate: (first, last) => this.replica.locateEntries(first, last),
        cachedMax: rebuiltBlocksCachedMax,
        concurrentMax: blockRebuildsConcurrentMax,
      }),
      serviceEndorsementsFor: (signatureSeqno) => serviceEndorsements.forSignature(signatureSeqno),
      statusOf: (txId) => this.queries.statusOf(txId),
      viewOf: (seqno) => this.queries.viewOf(seqno),
    });
  }

  private buildPendingCleanup(): PendingNodeCleanup {
    const init = this.init;
    return new PendingNodeCleanup({
      clock: init.clock,
      logger: init.logger,
      timeoutMs: init.config.pending_node_timeout,
      executeRead: (fn) => this.executeRead(fn),
      executeWrite: (fn) => this.executeWrite(fn),
    });
  }

  private buildRecovery(): { recovery: Recovery; rekey: Rekey; shareIssuer: ShareIssuer; sealedShareIssuer: SealedShareIssuer } {
    const init = this.init;
    const defer = (fn: () => void) => void init.clock.setTimer(0, fn);
    const common = { logger: init.logger, secrets: this.secrets, randomBytes: init.randomBytes, defer, executeWrite: (fn: (tx: Tx) => void) => this.executeWrite(fn) };
    const issuerHost = { ...common, executeRead: <T>(fn: (tx: Tx) => T) => this.executeRead(fn) };
    const shareIssuer = new ShareIssuer(issuerHost, memberShares(issuerHost));
    const sealedShares = sealedShareIssuer(issuerHost);
    const recovery = new Recovery({
      ...common,
      clock: init.clock,
      replica: this.replica,
      service: this.service,
      lifecycle: this.lifecycle,
      isPrimary: () => this.isPrimary(),
      executeRead: (fn) => this.executeRead(fn),
      yieldControl: () => new Promise((resolve) => init.clock.setTimer(0, resolve)),
      persistState: () => this.persistState(),
      transition: (trigger, allowed) => this.transition(trigger, allowed),
      entryReplayer: init.entryReplayer,
    });
    const rekey = new Rekey({
      ...common,
      isPrimary: () => this.isPrimary(),
      storeVersion: () => this.replica.store.version,
      secretsChanged: () => {
        this.persistState();
        shareIssuer.trigger();
        sealedShares.trigger();
      },
    });
    return { recovery, rekey, shareIssuer, sealedShareIssuer: sealedShares };
  }

  private transition(trigger: LifecycleTrigger, allowed: readonly LifecycleTrigger[]): void {
    this.lifecycle.transition(trigger, allowed);
    this.primaryTasks.update(this.isPrimary() && this.lifecycle.allows.primaryTasks);
    // A flow that made the node part of the network outside a recovery tells the recovery machine.
    if (JOINED_NETWORK_TRIGGERS.includes(trigger)) this.recovery.post({ kind: 'joined-network' });
  }

  /** The store's watchers, on the store and on every store that replaces it. */
  private watchStores(): void {
    this.replica.watchStore((store) => {
      this.peers.markDirty();
      store.onRollback(() => this.peers.markDirty());
      watchGovernanceEffects(store, {
        isPrimary: () => this.isPrimary(),
        nodesChanged: () => this.peers.markDirty(),
        jwtIssuersChanged: () => this.jwtKeyRefresh.trigger(),
        requestSnapshot: () => this.snapshots.request(),
        forceLedgerChunk: () => this.proposer.forceLedgerChunk(),
        owners: [this.shareIssuer, this.sealedShareIssuer, this.recovery, this.rekey],
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
      persistEntries: (frames, truncateAfterSeqno) => {
        this.replica.persist(frames, truncateAfterSeqno);
        this.commitStages.check();
      },
      durableSeqno: () => this.replica.durableSeqno,
      persistHardState: () => this.persistState(),
      send: (to, message) => void this.peers.send(to, FrameKind.Consensus, message),
      advanceCommit: (seqno) => {
        if (!this.replica.advanceCommit(seqno)) return;
        this.certificates.onCommit();
        this.signatures.onCommit(seqno);
        this.commitWaiters.onCommit(seqno);
        this.linearizableReads.onCommit(seqno);
        // Only a primary keeps proposals; a backup need not build the consensus status at each commit.
        if (this.proposer.keepsProposals) this.proposer.dropAcknowledged(this.driver.acknowledgedByEveryPeer());
      },
      onRoleChange: (change) => this.onRoleChange(change),
      settleReads: (confirmed, abandoned) => this.linearizableReads.onSettled(confirmed, abandoned),
      reportSnapshotsNeeded: (ids) => this.reportSnapshotsNeeded(ids),
      isPrimary: () => this.isPrimary(),
      emitSignature: () => this.signatures.emit(),
      recordRetirements: (ids) => this.transactions.recordRetirements(ids),
      afterPump: () => this.peers.refreshIfDirty(this.readCurrent),
      entryAt: (seqno: number): Entry | undefined => {
        if (seqno < 1 || seqno > this.replica.ledger.lastSeqno) return undefined;
        return this.proposer.recent(seqno) ?? this.replica.entryFromLedger(seqno);
      },
      // Only when consensus is created (the persisted log): nothing is proposed yet.
      entriesBetween: (from: number, to: number): Iterable<Entry> => this.replica.entriesFromLedger(from, to),
      stretchBetween: (from: number, to: number) => this.replica.entryStretch(from, to),
    };
  }

  private onRoleChange({ role, view, primaryId }: NonNullable<Ready['roleChange']>): void {
    this.logger.info(`consensus: ${role} in view ${view}${primaryId ? ` (primary ${primaryId.slice(0, 12)})` : ''}`);
    const primary = role === 'Primary';
    if (!primary) this.signatures.cancelTimer();
    else this.proposer.onBecomePrimary();
    this.primaryTasks.update(primary && this.lifecycle.allows.primaryTasks);
    this.recovery.onRoleChange(primary);
  }

  /**
   * Peers that lack entries this node no longer holds (it started from a snapshot after them):
   * replication cannot bring them up to date. Consensus reports a change of this set once; the
   * operator sees it here and in GET /node/consensus (acks[id].needs_snapshot).
   */
  private reportSnapshotsNeeded(ids: readonly string[]): void {
    const status = this.driver.raft?.status();
    const peers = status?.peers ?? [];
    for (const id of ids) {
      const peer = peers.find((p) => p.id === id);
      // The peer's next seqno (its own last one + 1, from its refusal), against where the log
      // starts: not the startup seqno, since a restarted node's log starts where its ledger files
      // do, which may be below or above the startup seqno (src/node/flows/restart.ts).
      this.logger.fail(
        `peer ${id} needs entries from seqno ${peer ? peer.nextSeqno : '?'} on, before this node's first entry ` +
          `(${(status?.startSeqno ?? 0) + 1}, it started from a snapshot): it cannot catch up by replication. ` +
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
      transition: (trigger: LifecycleTrigger, allowed: readonly LifecycleTrigger[]) => this.transition(trigger, allowed),
      recovery: this.recovery,
      setAddresses: (addresses) => {
        this.addresses = addresses;
      },
      subjectAltNames: () => this.subjectAltNames(),
      sealingInputs: () => sealingInputsOf(this.init, this.identity),
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
        this.certificates.start();
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
    const { election_timeout, message_timeout } = this.init.config.consensus;
    this.driver.create({
      selfId: this.identity.nodeId,
      random: new BytesRandom(this.init.randomBytes),
      electionTimeoutMs: election_timeout,
      messageTimeoutMs: message_timeout,
      initial: initialConsensusState(genesis, this.startupSnapshot, restored),
      awaitDurability: this.init.config.ledger.durability === 'Synced',
    });
  }

  /** Writes the node state file (identity, service identity, secrets, hard state); nothing before the node holds them all. */
  persistState(): void {
    this.stateFile.saveFrom({
      identity: this.identity,
      service: this.service,
      secrets: this.secrets,
      genesisConfiguration: this.genesisConfiguration,
      hardState: { view: this.driver.hardView, votedFor: this.driver.hardVotedFor },
      replica: this.replica,
      peers: this.peers.bootstrapRecords(),
      addresses: this.addresses,
    });
  }

  /**
   * The names in the node's certificates: node_certificate.subject_alt_names when configured,
   * otherwise the hosts of the RPC interfaces' published addresses (spec "Authentication" 3), as
   * bound once the interfaces listen, as configured before.
   */
  subjectAltNames(): string[] {
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

  networkInfoFor(endorsedCertificatePem: string): NetworkInfo {
    return {
      service_certificate: this.service.certificatePem,
      service_key: this.service.keyPem,
      ledger_secrets: this.secrets.records() satisfies LedgerSecretRecord[],
      endorsed_certificate: endorsedCertificatePem,
      genesis_configuration: this.genesisConfiguration!,
      peers: this.executeRead(trustedPeersOf),
      service_start_seqno: this.replica.serviceStartSeqno,
    };
  }
}
