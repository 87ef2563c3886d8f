/**
 * One Covenant node: its identity, the store, the ledger, the Merkle history, and the driver of
 * the consensus core. Transactions execute synchronously on the primary (DESIGN decision 2);
 * they are sealed into entries (src/ledger/sealing.ts, possibly on another thread, always in
 * seqno order) and go to the Raft core, which hands them back to be persisted and replicated in
 * batches (persist before send, apply commit after persist), and commit advances to signature
 * transactions held by a majority of every active configuration (DESIGN decision 4).
 *
 * Everything time- or I/O-related comes in through NodeInit (clock, disk, randomness, logger,
 * node-to-node channels, the join client, the entry sealer).
 */
import { isIP } from 'node:net';
import { assert } from '../base/assert.js';
import { fromHex, toHex, utf8 } from '../base/bytes.js';
import { CovenantError, errorMessage } from '../base/errors.js';
import { formatTxId, type TxId } from '../base/ids.js';
import type { Logger } from '../base/log.js';
import type { Clock, TimerHandle } from '../base/clock.js';
import { parseHostPort, type NodeConfig } from '../config/index.js';
import {
  certificateId,
  createEndorsedCertificate,
  createSelfSignedCertificate,
  generateEcKeyPair,
  type KeyPair,
  loadPrivateKey,
  loadPublicKey,
  nodeIdFromPublicKey,
  parseCertificate,
  publicKeyDer,
  publicKeyPem,
  signEcdsa,
  verifyEcdsa,
} from '../crypto/index.js';
import {
  BLOCK_LEAF_COUNT,
  HistoryTree,
  buildReceipt,
  buildSignatureReceipt,
  coseReceiptWithProof,
  signRootCose,
  type Receipt,
  type SignatureReceipt,
} from '../merkle/index.js';
import { AES_GCM_TAG_BYTES, LedgerEncryptor, Store, copyValue, type Codec, type MapReader, type Tx, type WriteSet, decodeWriteSet, decodeWriteSetParts, encodeWriteSet, jsonCodec } from '../kv/index.js';
import {
  type DecodedEntry,
  type Disk,
  EntryFlags,
  EntrySeal,
  type EntrySealer,
  type EntrySealerFactory,
  Ledger,
  type SealJob,
  type SealedEntry,
  decodeEntry,
  entryLeaf,
  hasFlag,
  inlineEntrySealer,
  sealedFrameBytes,
  shouldEndChunk,
  writeSetDigest,
} from '../ledger/index.js';
import {
  createRaft,
  decodeMessage,
  encodeMessage,
  type Configuration,
  type Entry,
  type EntryKind,
  type Raft,
  type RandomSource,
  type Ready,
} from '../consensus/index.js';
import { codeMeasurement, createVirtualQuote, defaultHostData, type QuoteInfo, verifyVirtualQuote } from '../attestation/virtual.js';
import { MAX_ENTRY_BYTES, type NodeChannels } from './channels.js';
import { canTransition, type NodeLifecycleState } from './lifecycle.js';
import { joinResponseServiceStatus, type JoinClient, type JoinRequest, type JoinResponse, type NetworkInfo } from './join.js';
import type { ConsensusReport, NetworkReport, NodeStateReport, NodeSummary, VersionReport } from './reports.js';
import { SINGLETON_KEY, Tables, signatureRecordOf, type MemberInfo, type NodeInfo, type ServiceInfo, type ServiceStatus, type SignatureRecord } from './tables.js';
import { txStatus, viewOfSeqno, type TxStatus } from './tx-status.js';
import { SNAPSHOT_MARKER_TABLE, SnapshotManager, treeOfSnapshot, type StartupSnapshot } from './snapshots.js';
import { FilesCleanup } from './cleanup.js';
import { ProposalWindow } from './proposal-window.js';

export interface NodeInit {
  readonly config: NodeConfig;
  readonly disk: Disk;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly randomBytes: (length: number) => Uint8Array;
  /** Version string of the running code (GET /node/version). */
  readonly version: string;
  /** Reads a text file named in the configuration (certificates, constitution). */
  readonly readTextFile: (path: string) => string;
  /** Writes an output file (certificates) atomically. */
  readonly writeTextFile: (path: string, text: string) => void;
  /** Writes a file only this node's user may read, atomically and durably (node state with keys). */
  readonly writeSecretFile: (path: string, text: string) => void;
  /** Virtual attestation: the host data this node reports (stands for its security policy digest). */
  readonly hostData?: string;
  /**
   * Seals the primary's transactions into ledger entries (src/ledger/sealing.ts). Default: on
   * the calling thread; node processes pass a worker-thread sealer (src/platform/worker-sealer.ts).
   */
  readonly createEntrySealer?: EntrySealerFactory;
  /**
   * Largest ledger entry (sealed frame) the node records; a larger transaction is refused (413
   * TransactionTooLarge). Default MAX_ENTRY_BYTES, what one node-to-node frame can carry; tests
   * lower it.
   */
  readonly maxEntryBytes?: number;
}

/** A transaction on its way from the KV store to consensus through the sealer. */
interface NodeSealJob extends SealJob {
  readonly kind: EntryKind;
  readonly configuration: Configuration | undefined;
  readonly retiredCommitted: string[] | undefined;
  /** Sealing epoch at submission: jobs of an abandoned epoch complete into nothing. */
  readonly epoch: number;
}

/**
 * What a node keeps beside its ledger to restart as the same node: its identity, the service
 * identity and ledger secrets it was given, and the consensus hard state. Virtual mode has no
 * hardware sealing key, so the file is protected only by its permissions (0600).
 */
interface PersistedNodeState {
  format: 1;
  node_id: string;
  private_key: string;
  self_signed_certificate: string;
  node_certificate: string;
  service_certificate: string;
  service_key: string;
  ledger_secrets: { from_seqno: number; secret: string }[];
  genesis_configuration: { seqno: number; nodes: string[] };
  view: number;
  voted_for: string | null;
  /** Seqno of the snapshot the node started from (0: from genesis); its ledger starts after it. */
  startup_seqno?: number;
  /** Where the interfaces were bound: a restart binds the same ports again where the configuration says port 0. */
  bound_addresses?: BoundAddresses;
}

/** The "host:port" each interface was bound to: the node-to-node interface, and RPC interfaces by name. */
export interface BoundAddresses {
  readonly node_to_node: string;
  readonly rpc: Record<string, string>;
}

export const NODE_STATE_FILE = 'node_state.json';

export interface WriteResult<T> {
  readonly result: T;
  /** Undefined when the transaction wrote nothing. */
  readonly txId: TxId | undefined;
}

export interface RpcInterfaceAddress {
  readonly name: string;
  readonly bindAddress: string;
  readonly publishedAddress: string;
  readonly enabledOperatorFeatures: readonly string[];
}

export interface NodeAddresses {
  readonly rpc: readonly RpcInterfaceAddress[];
  readonly nodeToNode: { readonly bindAddress: string; readonly publishedAddress: string };
}

/** Frame kinds on the node-to-node channels. */
export const FrameKind = {
  Consensus: 1,
  ForwardedRequest: 2,
  ForwardedResponse: 3,
} as const;

/** TLS failures that mean the join target's certificate is not acceptable (not transient). */
const TLS_IDENTITY_ERRORS = new Set([
  'ERR_TLS_CERT_ALTNAME_INVALID',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'CERT_SIGNATURE_FAILURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'CERT_UNTRUSTED',
]);

/** Consensus runs on ticks of this length (election and heartbeat timeouts are counted in ticks). */
const TICK_MS = 10;
/** Write-set bytes in the sealing pipeline from which a signature due by its delay waits for the worker (signWhenSealed). */
const SIGNATURE_WAITS_FOR_BYTES = 256 * 1024;
const SIGNATURE_WAIT_POLL_MS = 5;

/**
 * Largest private write set a primary sends to backups in clear beside its entry (Entry.sidecar),
 * so that they apply it without decrypting it: AES-GCM costs a backup a cipher set-up per entry,
 * several times the cost of receiving the same bytes again over the channel. The node-to-node
 * channel is mutually authenticated TLS between nodes that all hold the ledger secret. Larger
 * write sets are decrypted (their cipher set-up is small beside their size, and a batch of them
 * must stay within the frame limit).
 */
const SIDECAR_MAX_BYTES = 64 * 1024;

/** Bytes of recently proposed entries (and their sidecars) a primary keeps for resending (recentProposals). */
const RECENT_PROPOSALS_MAX_BYTES = 16 * 1024 * 1024;

/** What a kept proposal counts against RECENT_PROPOSALS_MAX_BYTES: its frame and its sidecar. */
function proposalBytes(entry: Entry): number {
  return entry.bytes.byteLength + (entry.sidecar?.byteLength ?? 0);
}

const ZERO_DIGEST = new Uint8Array(32);
const json = jsonCodec<any>();
const nodeInfoCodec = jsonCodec<NodeInfo>();

class CryptoRandom implements RandomSource {
  private buffer: Uint8Array = new Uint8Array(0);
  private offset = 0;
  constructor(private readonly randomBytes: (n: number) => Uint8Array) {}
  nextUint32(): number {
    if (this.offset + 4 > this.buffer.length) {
      this.buffer = this.randomBytes(1024);
      this.offset = 0;
    }
    const b = this.buffer;
    const value = (b[this.offset]! | (b[this.offset + 1]! << 8) | (b[this.offset + 2]! << 16) | (b[this.offset + 3]! << 24)) >>> 0;
    this.offset += 4;
    return value;
  }
}

function trustedSet(reader: { map(name: string, codec: Codec<NodeInfo>): MapReader<string, NodeInfo> }): string[] {
  const ids: string[] = [];
  reader.map(Tables.nodesInfo, nodeInfoCodec).forEach((info: NodeInfo, id: string) => {
    if (info.status === 'Trusted') ids.push(id);
  });
  return ids.sort();
}

function configurationOf(writeSet: WriteSet): Configuration | undefined {
  const raw = writeSet.get(Tables.configurations)?.get(SINGLETON_KEY);
  return raw ? (JSON.parse(utf8.decode(raw)) as Configuration) : undefined;
}

function sameNodes(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

export class CovenantNode {
  readonly init: NodeInit;
  readonly logger: Logger;
  private lifecycle: NodeLifecycleState = 'Uninitialized';

  // Identity
  private nodeKeys: KeyPair | undefined;
  nodeId = '';
  selfSignedCertificatePem = '';
  nodeCertificatePem = '';
  serviceCertificatePem = '';
  private servicePrivateKeyPem: string | undefined;
  /** The service's COSE signature over recent committed roots, by signature seqno (COSE receipts). */
  private readonly signedRootCache = new Map<number, { serviceCertificatePem: string; cose: Uint8Array }>();
  quoteInfo: QuoteInfo | undefined;
  readonly measurement: string;
  readonly hostData: string;
  private addresses: NodeAddresses | undefined;

  // State
  // Replaced (once, before consensus starts) when the node starts from a snapshot.
  store = new Store();
  tree = new HistoryTree();
  private ledger!: Ledger;
  /**
   * Seals in line (entries that must reach consensus at once: signatures, reconfigurations), and
   * holds the ledger secret's encryptor and commit-evidence derivation for everything else.
   */
  private entrySeal: EntrySeal | undefined;
  /** Seals the primary's ordinary transactions, possibly on another thread. */
  private sealer: EntrySealer<NodeSealJob> | undefined;
  /** Bumped when the pipeline is abandoned: jobs of an earlier epoch complete into nothing. */
  private sealEpoch = 0;
  /** Jobs of the current epoch in the sealer, their view, and the seqno of the oldest. */
  private sealInFlight = 0;
  private sealView = 0;
  private sealPendingFromSeqno = 0;
  private ledgerSecret: Uint8Array | undefined;
  private raft: Raft | undefined;
  private lastSignedSeqno = 0;
  private commitSeqno = 0;
  private startupSeqno = 0;
  private readonly snapshots: SnapshotManager;
  readonly filesCleanup: FilesCleanup;
  /** The snapshot this node starts from (joining), until consensus is created from it. */
  private startupSnapshot: StartupSnapshot | undefined;
  private genesisConfiguration: { seqno: number; nodes: string[] } | undefined;
  private channels: NodeChannels | undefined;
  private peersDirty = true;
  /** Peers learnt from the join answer, used until the replicated node table names them. */
  private bootstrapPeers: { nodeId: string; address: string }[] = [];
  /** Identity of the signer of each signature we applied, by node id (public key PEM). */
  private readonly signerKeys = new Map<string, string>();

  // Commit pipeline (primary)
  private unsignedCount = 0;
  private chunkBytes = 0;
  private forceChunkEnd = false;
  private pumpScheduled = false;
  private signatureTimer: TimerHandle | undefined;
  private tickTimer: TimerHandle | undefined;
  private frameHandlers = new Map<number, (from: string, payload: Uint8Array) => void>();
  private stopped = false;

  constructor(init: NodeInit) {
    this.init = init;
    this.logger = init.logger;
    this.measurement = codeMeasurement(init.version);
    this.hostData = init.hostData ?? defaultHostData();
    this.transition('Initialized');
    this.snapshots = new SnapshotManager({
      config: init.config,
      disk: init.disk,
      logger: init.logger,
      clock: init.clock,
      store: () => this.store,
      tree: () => this.tree,
      encryptor: () => this.encryptor,
      serviceCertificatePem: () => this.serviceCertificatePem,
      genesisConfiguration: () => this.genesisConfiguration!,
      viewHistory: () => this.raft?.status().viewHistory ?? [],
      commitEvidence: (view, seqno) => this.entrySeal!.commitEvidence(view, seqno),
      isPrimary: () => this.isPrimary(),
      requestSignature: () => this.requestSignature(),
    });
    this.filesCleanup = new FilesCleanup({
      config: init.config,
      disk: init.disk,
      logger: init.logger,
      clock: init.clock,
      relocateChunk: (name, directory) => {
        this.ledger.relocateCommittedChunk(name, directory);
      },
      yieldControl: () => new Promise((resolve) => init.clock.setTimer(0, resolve)),
    });
    this.watchStore();
  }

  private watchStore(): void {
    this.store.onRollback(() => {
      this.peersDirty = true;
    });
    this.store.onMapCommit(Tables.nodesInfo, () => {
      this.peersDirty = true;
    });
    // trigger_snapshot: the primary snapshots at the next signature.
    this.store.onMapCommit(Tables.snapshotRequests, () => {
      if (this.isPrimary()) this.snapshots.request();
    });
  }

  /** POST /node/snapshot:create: a snapshot at the next signature transaction. */
  requestSnapshot(): void {
    this.snapshots.request();
  }

  /** A signature soon, outside the current call (never from inside a KV transaction). */
  private requestSignature(): void {
    this.init.clock.defer(() => {
      if (this.stopped || !this.isPrimary()) return;
      this.emitSignature();
      this.pump();
    });
  }

  get state(): NodeLifecycleState {
    return this.lifecycle;
  }

  /** The service record's bytes last read by appFrontendOpen, and whether they said Open. */
  private serviceRecordSeen: { raw: Uint8Array | undefined; open: boolean } = { raw: undefined, open: false };

  /**
   * Whether the application frontend serves users: members have opened the service
   * (transition_service_to_open; spec "Service opening") and this node is part of the network.
   * Asked on every application request: the service record is parsed again only when written.
   */
  appFrontendOpen(): boolean {
    if (this.lifecycle !== 'PartOfNetwork') return false;
    const raw = this.store.currentRaw(Tables.serviceInfo, SINGLETON_KEY);
    if (raw !== this.serviceRecordSeen.raw) {
      this.serviceRecordSeen = { raw, open: raw !== undefined && (json.decode(raw) as ServiceInfo).status === 'Open' };
    }
    return this.serviceRecordSeen.open;
  }

  /** Whether a user certificate with this id (SHA-256 of its DER, hex) is registered. Asked on every user request: no transaction. */
  isUser(id: string): boolean {
    return this.store.currentRaw(Tables.usersCerts, id) !== undefined;
  }

  /** Why the application frontend does not serve users yet (GET /node/ready/app and the /app routes say it). */
  appFrontendClosedReason(): string {
    return this.lifecycle === 'PartOfNetwork'
      ? 'the service is not open to users yet: members open it with a transition_service_to_open proposal'
      : `this node is ${this.lifecycle}, not part of the network yet`;
  }

  private transition(to: NodeLifecycleState): void {
    assert(canTransition(this.lifecycle, to), `node cannot go from ${this.lifecycle} to ${to}`);
    this.logger.info(`node state ${this.lifecycle} -> ${to}`);
    this.lifecycle = to;
  }

  /** Opens the ledger directory; a Start or Join node refuses a directory that already holds a ledger. */
  private openLedger(): void {
    const { ledger, command } = this.init.config;
    const opened = new Ledger({ disk: this.init.disk, directory: ledger.directory, readOnlyDirectories: ledger.read_only_directories });
    // Only an opened ledger becomes the node's: stop() must not touch one whose open() failed.
    const report = opened.open();
    this.ledger = opened;
    if (report.tornTail) this.logger.fail(`ledger: torn tail cut at ${report.tornTail.file}:${report.tornTail.offsetBytes}`);
    if (this.ledger.lastSeqno > 0) {
      throw new CovenantError(
        'LedgerAlreadyExists',
        `ledger directory "${ledger.directory}" already holds a ledger (up to seqno ${this.ledger.lastSeqno}); ` +
          `command.type ${command.type} needs an empty ledger directory (use Recover to restore a service from an existing ledger)`,
        400,
      );
    }
  }

  /**
   * Beside the node certificate, never in the ledger directory: ledger files are copied around
   * by operators (downloads, recovery), the node state holds secrets.
   */
  private get statePath(): string {
    const certificate = this.init.config.node_certificate_file;
    const slash = certificate.lastIndexOf('/');
    return this.init.disk.join(slash === -1 ? '.' : certificate.slice(0, slash), NODE_STATE_FILE);
  }

  /** Whether this node has state from an earlier run that it can resume (a Join node restarting). */
  hasPersistedState(): boolean {
    return this.init.config.command.type === 'Join' && this.init.disk.exists(this.statePath);
  }

  private loadPersistedState(): PersistedNodeState {
    const text = utf8.decode(this.init.disk.readAll(this.statePath));
    const state = JSON.parse(text) as PersistedNodeState;
    if (state.format !== 1) throw new CovenantError('InvalidNodeState', `${this.statePath}: unknown node state format ${String(state.format)}`, 500);
    return state;
  }

  private hardView = 0;
  private hardVotedFor: string | undefined;

  private persistState(): void {
    if (!this.nodeKeys || !this.ledgerSecret || !this.servicePrivateKeyPem || !this.genesisConfiguration) return;
    const state: PersistedNodeState = {
      format: 1,
      node_id: this.nodeId,
      private_key: this.nodeKeys.privateKeyPem,
      self_signed_certificate: this.selfSignedCertificatePem,
      node_certificate: this.nodeCertificatePem,
      service_certificate: this.serviceCertificatePem,
      service_key: this.servicePrivateKeyPem,
      ledger_secrets: [{ from_seqno: 0, secret: Buffer.from(this.ledgerSecret).toString('base64') }],
      genesis_configuration: this.genesisConfiguration,
      view: this.hardView,
      voted_for: this.hardVotedFor ?? null,
      startup_seqno: this.startupSeqno,
      ...(this.addresses ? { bound_addresses: boundAddressesOf(this.addresses) } : {}),
    };
    this.init.writeSecretFile(this.statePath, JSON.stringify(state));
  }

  /**
   * The addresses this node's interfaces were bound to in its previous run (when it restarts from
   * its persisted state). Peers and clients know the node there until it announces new ones, and
   * announcing needs a primary, which may need this node: a restart binds the same ports again.
   */
  previousBoundAddresses(): BoundAddresses | undefined {
    return this.hasPersistedState() ? this.loadPersistedState().bound_addresses : undefined;
  }

  /** Creates the node's key, self-signed certificate and quote (before its interfaces listen). */
  async prepareIdentity(): Promise<void> {
    if (this.hasPersistedState()) {
      const state = this.loadPersistedState();
      const privateKey = loadPrivateKey(state.private_key);
      const publicKey = loadPublicKey(state.private_key);
      this.nodeKeys = { privateKey, publicKey, privateKeyPem: state.private_key, publicKeyPem: publicKeyPem(publicKey) };
      this.nodeId = nodeIdFromPublicKey(publicKey);
      assert(this.nodeId === state.node_id, 'the persisted node key matches the persisted node id');
      this.selfSignedCertificatePem = state.self_signed_certificate;
      this.quoteInfo = createVirtualQuote(publicKeyDer(publicKey), this.measurement, this.hostData);
      this.logger.info(`node identity ${this.nodeId} restored from ${this.statePath}`);
      return;
    }
    this.nodeKeys = generateEcKeyPair('P-384');
    this.nodeId = nodeIdFromPublicKey(this.nodeKeys.publicKey);
    this.selfSignedCertificatePem = await createSelfSignedCertificate({
      keyPair: this.nodeKeys,
      subjectCommonName: 'Covenant Node',
      subjectAltNames: this.subjectAltNames(),
      validityDays: this.init.config.node_certificate.initial_validity_days,
      isCa: false,
    });
    this.quoteInfo = createVirtualQuote(publicKeyDer(this.nodeKeys.publicKey), this.measurement, this.hostData);
    this.logger.info(`node identity ${this.nodeId} (virtual mode: NO hardware attestation, never for production)`);
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

  get nodePrivateKeyPem(): string {
    assert(this.nodeKeys, 'node identity exists');
    return this.nodeKeys.privateKeyPem;
  }

  attachChannels(channels: NodeChannels): void {
    this.channels = channels;
    channels.onFrame((from: string, kind: number, payload: Uint8Array) => {
      if (this.stopped) return;
      if (kind === FrameKind.Consensus) {
        this.onConsensusFrame(from, payload);
        return;
      }
      const handler = this.frameHandlers.get(kind);
      if (handler) handler(from, payload);
      else this.logger.debug(`dropping node-to-node frame of unknown kind ${kind} from ${from}`);
    });
  }

  /** Registers the handler of one frame kind (request forwarding lives in the HTTP layer). */
  onFrame(kind: number, handler: (from: string, payload: Uint8Array) => void): void {
    this.frameHandlers.set(kind, handler);
  }

  sendFrame(to: string, kind: number, payload: Uint8Array): boolean {
    return this.channels?.send(to, kind, payload) ?? false;
  }

  // ---------------------------------------------------------------- start and join

  /** Starts a new service with this node as its first, primary node (command.type Start). */
  async startNewService(addresses: NodeAddresses): Promise<void> {
    const config = this.init.config;
    this.addresses = addresses;
    this.checkStartInputs();
    this.openLedger();
    assert(this.nodeKeys, 'prepareIdentity() runs before startNewService()');
    this.logger.info('creating the service identity');
    const serviceKeys = generateEcKeyPair('P-384');
    this.servicePrivateKeyPem = serviceKeys.privateKeyPem;
    const validityDays = config.command.start?.initial_service_certificate_validity_days ?? 1;
    this.serviceCertificatePem = await createSelfSignedCertificate({
      keyPair: serviceKeys,
      subjectCommonName: 'Covenant Service',
      validityDays,
      isCa: true,
    });
    this.nodeCertificatePem = await this.endorse(this.nodeKeys.publicKeyPem, this.subjectAltNames());
    this.logger.info('service certificate created and node certificate endorsed');
    this.installLedgerSecret(this.init.randomBytes(32));
    this.genesisConfiguration = { seqno: 0, nodes: [this.nodeId] };

    this.init.writeTextFile(config.command.service_certificate_file, this.serviceCertificatePem);
    this.init.writeTextFile(config.node_certificate_file, this.nodeCertificatePem);

    this.createConsensus();
    // A lone node wins its own election at once.
    this.raft!.campaign();
    this.pump();
    assert(this.isPrimary(), 'the first node is primary after campaigning alone');
    this.transition('PartOfNetwork');
    this.executeWrite((tx) => this.writeGenesis(tx));
    // Sign the genesis at once: the service exists, committed, before the first client arrives.
    this.emitSignature();
    this.pump();
    this.persistState();
    this.startTicking();
    this.logger.info(`service started; node ${this.nodeId} is primary`);
  }

  /**
   * Joins an existing network (command.type Join): sends the join request to the target until
   * the node is trusted, then takes the service identity and secrets and starts replicating.
   */
  async joinNetwork(addresses: NodeAddresses, client: JoinClient, onEndorsed: () => void): Promise<void> {
    const config = this.init.config;
    const join = config.command.join;
    assert(join, 'Join configuration is present');
    this.addresses = addresses;
    if (!this.resumed) {
      this.openLedger();
      // Until the service endorses it, clients reach this node with its self-signed certificate as CA
      // (spec endpoint rule 9): node_certificate_file holds that one, then the endorsed one.
      this.init.writeTextFile(config.node_certificate_file, this.selfSignedCertificatePem);
      this.serviceCertificatePem = this.init.readTextFile(config.command.service_certificate_file);
      this.startupSnapshot = this.snapshots.findStartupSnapshot(this.serviceCertificatePem);
      this.startupSeqno = this.startupSnapshot?.seqno ?? 0;
    }
    assert(this.nodeKeys, 'prepareIdentity() runs before joinNetwork()');
    let request: JoinRequest = {
      public_key: this.nodeKeys.publicKeyPem,
      quote_info: this.quoteInfo!,
      node_data: config.node_data ?? null,
      rpc_interfaces: this.rpcInterfacesRecord(),
      node_to_node_interface: { bind_address: addresses.nodeToNode.bindAddress, published_address: addresses.nodeToNode.publishedAddress },
      startup_seqno: this.startupSeqno,
      subject_alt_names: this.subjectAltNames(),
    };
    let target = join.target_rpc_address;
    let pendingLogged = false;
    for (let attempt = 0; !this.stopped; attempt++) {
      let answer: { status: number; body: unknown; location?: string };
      try {
        answer = await client.postJoin(target, request);
      } catch (e) {
        const code = (e as { code?: string }).code;
        if (code !== undefined && TLS_IDENTITY_ERRORS.has(code)) {
          // Spec "Authentication" 3: the target must present a certificate endorsed by the service
          // certificate that names the target's host. Retrying cannot fix that: stop with the reason.
          throw new CovenantError('JoinTargetNotTrusted', `the join target ${target} is not trusted: ${errorMessage(e)} (${code})`, 400);
        }
        this.logger.info(`join request to ${target} failed: ${errorMessage(e)}; retrying in ${join.retry_timeout}ms`);
        await this.sleep(join.retry_timeout);
        continue;
      }
      if (answer.status >= 300 && answer.status < 400 && answer.location) {
        const url = new URL(answer.location);
        target = url.host;
        this.logger.info(`join redirected to ${target}`);
        continue;
      }
      if (answer.status !== 200) {
        const error = (answer.body as { error?: { code?: string; message?: string } } | undefined)?.error;
        if (error?.code === 'StartupSeqnoIsOld' && join.fetch_recent_snapshot && client.fetchSnapshot && !this.resumed) {
          // Spec "Join from a snapshot" 3: fetch a recent snapshot from the peer, then join again.
          const fetched = await this.fetchStartupSnapshot(client, target);
          if (fetched) request = { ...request, startup_seqno: this.startupSeqno };
          else await this.sleep(join.retry_timeout);
          continue;
        }
        if (answer.status === 503) {
          // The service is between primaries (or the target is busy): not a refusal, ask again.
          this.logger.info(`join request to ${target} not served now (${error?.code ?? 503}); retrying in ${join.retry_timeout}ms`);
          await this.sleep(join.retry_timeout);
          continue;
        }
        throw new CovenantError(error?.code ?? 'JoinFailed', `join refused by ${target} (${answer.status}): ${error?.message ?? 'no reason given'}`, 400);
      }
      const response = answer.body as JoinResponse;
      this.joinReportedServiceStatus = joinResponseServiceStatus(response) ?? this.joinReportedServiceStatus;
      if (response.node_status === 'Pending' || !response.network_info) {
        if (!pendingLogged && !this.resumed) {
          this.transition('Pending');
          this.logger.info(`node ${this.nodeId} is Pending: waiting for members to trust it (polling every ${join.retry_timeout}ms)`);
          pendingLogged = true;
        }
        await this.sleep(join.retry_timeout);
        continue;
      }
      if (this.resumed) {
        this.logger.info(`node ${this.nodeId} announced its addresses to the network again`);
        return;
      }
      this.adoptNetworkInfo(response.network_info);
      onEndorsed();
      if (this.startupSnapshot) this.installStartupSnapshot(this.startupSnapshot);
      this.createConsensus();
      this.persistState();
      this.transition('PartOfNetwork');
      this.startTicking();
      this.pump();
      this.logger.info(`node ${this.nodeId} joined the network after ${attempt + 1} join request(s)`);
      return;
    }
  }

  private resumed = false;
  /** The service status in the last join response, reported until the service record is replicated. */
  private joinReportedServiceStatus: ServiceStatus | undefined;

  /** Downloads a snapshot newer than startup_seqno from `target` and verifies it; false on any failure. */
  private async fetchStartupSnapshot(client: JoinClient, target: string): Promise<boolean> {
    let fetched: { name: string; bytes: Uint8Array } | undefined;
    try {
      fetched = await client.fetchSnapshot!(target, this.startupSeqno);
    } catch (e) {
      this.logger.info(`fetching a snapshot from ${target} failed: ${errorMessage(e)}`);
      return false;
    }
    if (fetched === undefined) {
      this.logger.info(`${target} has no committed snapshot newer than ${this.startupSeqno}`);
      return false;
    }
    try {
      this.startupSnapshot = this.snapshots.adoptFetchedSnapshot(fetched.name, fetched.bytes, this.serviceCertificatePem);
    } catch (e) {
      this.logger.fail(`snapshot ${fetched.name} fetched from ${target} is invalid: ${errorMessage(e)}`);
      return false;
    }
    this.startupSeqno = this.startupSnapshot.seqno;
    this.logger.info(`fetched snapshot ${fetched.name} from ${target}; joining from seqno ${this.startupSeqno}`);
    return true;
  }

  /** Loads the store and the Merkle tree from the startup snapshot; the ledger continues after it. */
  /** Loads the store and the Merkle tree from a snapshot; a fresh joiner also starts its ledger after it. */
  private installStartupSnapshot(snapshot: StartupSnapshot, startLedger = true): void {
    const started = this.init.clock.monotonicMs();
    this.store = Store.fromSnapshot(snapshot.parts.kv, this.encryptor);
    this.watchStore();
    this.peersDirty = true;
    this.tree = treeOfSnapshot(snapshot.parts.meta, this.store);
    if (startLedger) this.ledger.startAt(snapshot.seqno);
    this.commitSeqno = snapshot.seqno;
    this.lastSignedSeqno = snapshot.seqno;
    this.logger.info(`store and Merkle tree loaded from ${snapshot.name} in ${Math.round(this.init.clock.monotonicMs() - started)}ms`);
  }

  /**
   * Restarts a node from its ledger directory and persisted state (command.type Join with a
   * ledger left by an earlier run of the same node): replays the ledger into the store and the
   * Merkle tree, restores consensus from the ledger and the hard state, and announces its new
   * addresses to the network with a join request; the primary then catches it up.
   */
  async resumeFromLedger(addresses: NodeAddresses, client: JoinClient, onEndorsed: () => void): Promise<void> {
    const state = this.loadPersistedState();
    this.addresses = addresses;
    const { ledger } = this.init.config;
    const opened = new Ledger({ disk: this.init.disk, directory: ledger.directory, readOnlyDirectories: ledger.read_only_directories });
    // Only an opened ledger becomes the node's: stop() must not touch one whose open() failed.
    const report = opened.open();
    this.ledger = opened;
    if (report.tornTail) this.logger.fail(`ledger: torn tail cut at ${report.tornTail.file}:${report.tornTail.offsetBytes}`);
    this.serviceCertificatePem = state.service_certificate;
    this.servicePrivateKeyPem = state.service_key;
    this.nodeCertificatePem = state.node_certificate;
    this.genesisConfiguration = state.genesis_configuration;
    this.installLedgerSecret(new Uint8Array(Buffer.from(state.ledger_secrets[0]!.secret, 'base64')));
    this.hardView = state.view;
    this.hardVotedFor = state.voted_for ?? undefined;
    // Record where this run is bound (the same ports unless they were taken).
    this.persistState();
    onEndorsed();
    const last = this.ledger.lastSeqno;
    const started = this.init.clock.monotonicMs();
    let from = 0;
    if ((state.startup_seqno ?? 0) > 0) {
      // The ledger of a node that joined from a snapshot starts after it: start from a snapshot again.
      const snapshot = this.snapshots.findStartupSnapshot(this.serviceCertificatePem);
      if (!snapshot || snapshot.seqno < state.startup_seqno! || snapshot.seqno > last) {
        throw new CovenantError(
          'StartupSnapshotMissing',
          `this node started from the snapshot at seqno ${state.startup_seqno}: a valid committed snapshot between it and the ledger's last seqno ${last} must be in snapshots.directory`,
          500,
        );
      }
      this.startupSnapshot = snapshot;
      this.startupSeqno = state.startup_seqno!;
      this.installStartupSnapshot(snapshot, false);
      from = snapshot.seqno;
    }
    for (let seqno = from + 1; seqno <= last; seqno++) this.replayEntry(this.ledger.getEntry(seqno));
    this.commitSeqno = Math.max(this.ledger.committedSeqno, from);
    this.store.compact(this.commitSeqno);
    this.logger.info(`replayed ${last - from} ledger entries in ${Math.round(this.init.clock.monotonicMs() - started)}ms (committed up to ${this.commitSeqno})`);
    this.createConsensus({ lastSeqno: last, view: Math.max(state.view, this.ledger.lastView), votedFor: this.hardVotedFor, commitSeqno: this.commitSeqno });
    this.resumed = true;
    this.transition('PartOfNetwork');
    this.startTicking();
    this.pump();
    await this.joinNetwork(addresses, client, () => undefined);
  }

  /** Applies one entry of the node's own ledger at restart (entries were checked when first written). */
  private replayEntry(frame: Uint8Array): void {
    this.applyEntry(decodeEntry(frame));
    if (this.store.version > this.store.committedVersion + 50_000) this.store.compact(Math.min(this.ledger.committedSeqno, this.store.version));
  }

  private adoptNetworkInfo(info: NetworkInfo): void {
    this.serviceCertificatePem = info.service_certificate;
    this.servicePrivateKeyPem = info.service_key;
    this.nodeCertificatePem = info.endorsed_certificate;
    this.genesisConfiguration = info.genesis_configuration;
    this.bootstrapPeers = info.peers.filter((p) => p.node_id !== this.nodeId).map((p) => ({ nodeId: p.node_id, address: p.address }));
    this.peersDirty = true;
    const first = info.ledger_secrets[0];
    assert(first, 'a ledger secret comes with the network information');
    this.installLedgerSecret(new Uint8Array(Buffer.from(first.secret, 'base64')));
    this.init.writeTextFile(this.init.config.node_certificate_file, this.nodeCertificatePem);
  }

  private installLedgerSecret(secret: Uint8Array): void {
    this.ledgerSecret = secret;
    this.entrySeal = new EntrySeal(secret);
    this.sealer?.close();
    this.sealer = (this.init.createEntrySealer ?? inlineEntrySealer)<NodeSealJob>(secret, (job, sealed) => this.onSealed(job, sealed));
  }

  /** The ledger secret's encryptor (once the secret is installed). */
  private get encryptor(): LedgerEncryptor {
    assert(this.entrySeal, 'the ledger secret is installed');
    return this.entrySeal.encryptor;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.init.clock.setTimer(ms, resolve));
  }

  private async endorse(publicKey: string, subjectAltNames: string[]): Promise<string> {
    assert(this.servicePrivateKeyPem, 'the service key is held before endorsing');
    return createEndorsedCertificate({
      subjectPublicKey: loadPublicKey(publicKey),
      subjectCommonName: 'Covenant Node',
      subjectAltNames,
      issuerCertificatePem: this.serviceCertificatePem,
      issuerPrivateKey: loadPrivateKey(this.servicePrivateKeyPem),
      validityDays: this.init.config.node_certificate.initial_validity_days,
    });
  }

  /**
   * Handles a join request on the primary (POST /node/join). `clientPublicKeyDer` is the key of
   * the TLS client certificate: the joiner proves it holds the key it asks to be recorded with.
   */
  async handleJoin(request: JoinRequest, clientPublicKeyDer: Uint8Array | undefined): Promise<JoinResponse> {
    if (!this.isPrimary()) throw new CovenantError('NotPrimary', 'join requests are handled by the primary', 503);
    let publicKey: ReturnType<typeof loadPublicKey>;
    try {
      publicKey = loadPublicKey(request.public_key);
    } catch {
      throw new CovenantError('InvalidNodeKey', 'public_key is not a PEM public key', 400);
    }
    const der = publicKeyDer(publicKey);
    if (!clientPublicKeyDer || Buffer.compare(Buffer.from(der), Buffer.from(clientPublicKeyDer)) !== 0) {
      throw new CovenantError('InvalidAuthenticationInfo', 'the TLS client certificate of a join request must carry the public key being joined', 401);
    }
    const verdict = verifyVirtualQuote(request.quote_info as QuoteInfo, der);
    if (!verdict.ok) {
      this.logger.info(`join refused: ${verdict.reason}`);
      throw new CovenantError('InvalidQuote', `quote verification failed: ${verdict.reason}`, 403);
    }
    const trustedMeasurement = this.executeRead((tx) => {
      const measurements = tx.map(Tables.virtualMeasurements, json);
      // A service whose genesis predates the table trusts the code the primary runs.
      return measurements.has(verdict.quote.measurement) || (measurements.size === 0 && verdict.quote.measurement === this.measurement);
    });
    if (!trustedMeasurement) {
      this.logger.info(`join refused: measurement ${verdict.quote.measurement} is not trusted`);
      throw new CovenantError('UntrustedMeasurement', `measurement ${verdict.quote.measurement} is not trusted by the service (add_virtual_measurement)`, 403);
    }
    const trustedHostData = this.executeRead((tx) => tx.map(Tables.hostData, json).has(verdict.quote.host_data));
    if (!trustedHostData) {
      this.logger.info(`join refused: host data ${verdict.quote.host_data} is not trusted`);
      throw new CovenantError('UntrustedHostData', `host data ${verdict.quote.host_data} is not trusted by the service (add_snp_host_data)`, 403);
    }
    const nodeId = nodeIdFromPublicKey(publicKey);
    const existing = this.executeRead((tx) => tx.map(Tables.nodesInfo, json).get(nodeId) as NodeInfo | undefined);
    this.pendingLastSeenMs.set(nodeId, this.init.clock.nowMs());
    // This node holds no entries before its own startup snapshot: a new node must start at or after it.
    if (existing === undefined && request.startup_seqno < this.startupSeqno) {
      throw new CovenantError(
        'StartupSeqnoIsOld',
        `the joining node starts at seqno ${request.startup_seqno}, older than this node's startup snapshot at ${this.startupSeqno}: join with a recent snapshot`,
        400,
      );
    }
    if (existing?.status === 'Retired') throw new CovenantError('NodeRetired', `node ${nodeId} is retired and cannot join again`, 403);
    const opening = this.serviceInfo()?.status !== 'Open';
    const willBeTrusted = existing?.status === 'Trusted' || (existing === undefined && opening);
    let endorsed = this.executeRead((tx) => tx.map(Tables.nodesEndorsedCertificates, json).get(nodeId) as string | undefined);
    if (willBeTrusted && !endorsed) endorsed = await this.endorse(request.public_key, request.subject_alt_names);
    if (!this.isPrimary()) throw new CovenantError('NotPrimary', 'this node stopped being primary while handling the join', 503);
    this.executeWrite((tx) => {
      const nodes = tx.map(Tables.nodesInfo, json);
      const current = nodes.get(nodeId) as NodeInfo | undefined;
      if (current && !sameAddresses(current, request)) {
        // A node restarted from its ledger with new addresses (node-to-node or RPC): record where it is now.
        nodes.put(nodeId, { ...current, rpc_interfaces: request.rpc_interfaces, node_to_node_interface: request.node_to_node_interface });
        this.logger.info(`node ${nodeId} rejoined from ${request.node_to_node_interface.published_address}`);
      }
      if (!current) {
        const info: NodeInfo = {
          status: willBeTrusted ? 'Trusted' : 'Pending',
          public_key: request.public_key,
          node_data: request.node_data ?? null,
          rpc_interfaces: request.rpc_interfaces,
          node_to_node_interface: request.node_to_node_interface,
          quote_info: request.quote_info as QuoteInfo,
          retired_committed: false,
        };
        nodes.put(nodeId, info);
        this.logger.info(`node ${nodeId} joins as ${info.status}`);
      }
      if (willBeTrusted && endorsed && !tx.map(Tables.nodesEndorsedCertificates, json).has(nodeId)) {
        tx.map(Tables.nodesEndorsedCertificates, json).put(nodeId, endorsed);
      }
    });
    const serviceStatus = this.serviceInfo()?.status;
    const status = serviceStatus !== undefined ? { service_status: serviceStatus } : {};
    if (!willBeTrusted) return { node_id: nodeId, node_status: 'Pending', ...status };
    return {
      node_id: nodeId,
      node_status: 'Trusted',
      ...status,
      network_info: {
        service_certificate: this.serviceCertificatePem,
        service_key: this.servicePrivateKeyPem!,
        ledger_secrets: [{ from_seqno: 0, secret: Buffer.from(this.ledgerSecret!).toString('base64') }],
        endorsed_certificate: endorsed!,
        genesis_configuration: this.genesisConfiguration!,
        peers: this.trustedPeers(),
      },
    };
  }

  private writeGenesis(tx: Tx): void {
    const config = this.init.config;
    const start = config.command.start;
    assert(start, 'Start configuration is present');
    const service: ServiceInfo = {
      status: 'Opening',
      cert: this.serviceCertificatePem,
      recovery_count: 0,
      service_data: config.service_data ?? null,
      current_service_create_txid: `${this.raft!.status().view}.${this.store.version + 1}`,
    };
    tx.map(Tables.serviceInfo, json).put(SINGLETON_KEY, service);
    tx.map(Tables.serviceConfig, json).put(SINGLETON_KEY, {
      recovery_threshold: start.service_configuration?.recovery_threshold ?? 1,
      maximum_node_certificate_validity_days: start.service_configuration?.maximum_node_certificate_validity_days ?? 365,
    });
    const nodeInfo: NodeInfo = {
      status: 'Trusted',
      public_key: this.nodeKeys!.publicKeyPem,
      node_data: config.node_data ?? null,
      rpc_interfaces: this.rpcInterfacesRecord(),
      node_to_node_interface: {
        bind_address: this.addresses!.nodeToNode.bindAddress,
        published_address: this.addresses!.nodeToNode.publishedAddress,
      },
      quote_info: this.quoteInfo!,
      retired_committed: false,
    };
    tx.map(Tables.nodesInfo, json).put(this.nodeId, nodeInfo);
    tx.map(Tables.nodesEndorsedCertificates, json).put(this.nodeId, this.nodeCertificatePem);
    tx.map(Tables.hostData, json).put(this.hostData, { measurement: this.measurement });
    tx.map(Tables.virtualMeasurements, json).put(this.measurement, {});
    for (const member of start.members) {
      const pem = this.init.readTextFile(member.certificate_file);
      const id = certificateId(pem);
      tx.map(Tables.membersCerts, json).put(id, pem);
      const info: MemberInfo = { status: 'Accepted', member_data: this.readJsonFile(member.data_json_file) };
      tx.map(Tables.membersInfo, json).put(id, info);
      if (member.encryption_public_key_file) {
        tx.map(Tables.membersEncryptionPublicKeys, json).put(id, this.init.readTextFile(member.encryption_public_key_file));
      }
    }
    for (const user of start.users ?? []) {
      const pem = this.init.readTextFile(user.certificate_file);
      const id = certificateId(pem);
      tx.map(Tables.usersCerts, json).put(id, pem);
      tx.map(Tables.usersInfo, json).put(id, { user_data: this.readJsonFile(user.data_json_file) });
    }
    const constitution = this.startConstitution();
    if (constitution.length > 0) tx.map(Tables.constitution, json).put(SINGLETON_KEY, constitution);
  }

  /**
   * Reads every file the genesis transaction needs before anything is written, so that a missing
   * or unreadable certificate stops the node with the key named and leaves no output files.
   */
  checkStartInputs(): void {
    const start = this.init.config.command.start;
    assert(start, 'Start configuration is present');
    // Each file is read and parsed as genesis will use it: a bad one is found before anything is written.
    const files: [string, string | undefined, (text: string) => void][] = [];
    const asJson = (text: string) => void JSON.parse(text);
    const asCertificate = (text: string) => void certificateId(text);
    const asPublicKey = (text: string) => void loadPublicKey(text);
    const asText = () => undefined;
    start.members.forEach((m, i) => {
      files.push([`command.start.members[${i}].certificate_file`, m.certificate_file, asCertificate]);
      files.push([`command.start.members[${i}].encryption_public_key_file`, m.encryption_public_key_file, asPublicKey]);
      files.push([`command.start.members[${i}].data_json_file`, m.data_json_file, asJson]);
    });
    (start.users ?? []).forEach((u, i) => {
      files.push([`command.start.users[${i}].certificate_file`, u.certificate_file, asCertificate]);
      files.push([`command.start.users[${i}].data_json_file`, u.data_json_file, asJson]);
    });
    (start.constitution_files ?? []).forEach((f, i) => files.push([`command.start.constitution_files[${i}]`, f, asText]));
    for (const [key, path, check] of files) {
      if (path === undefined) continue;
      try {
        check(this.init.readTextFile(path));
      } catch (e) {
        throw new CovenantError('InvalidConfiguration', `"${key}": cannot use ${path}: ${errorMessage(e)}`, 400);
      }
    }
  }

  /** The constitution genesis records: the command.start.constitution_files, in order, as one module. */
  startConstitution(): string {
    return (this.init.config.command.start?.constitution_files ?? []).map((f) => this.init.readTextFile(f)).join('\n');
  }

  private readJsonFile(path: string | undefined): unknown {
    if (path === undefined) return null;
    return JSON.parse(this.init.readTextFile(path)) as unknown;
  }

  private rpcInterfacesRecord(): NodeInfo['rpc_interfaces'] {
    const out: NodeInfo['rpc_interfaces'] = {};
    for (const a of this.addresses?.rpc ?? []) {
      out[a.name] = { bind_address: a.bindAddress, published_address: a.publishedAddress, enabled_operator_features: [...a.enabledOperatorFeatures] };
    }
    return out;
  }

  // ---------------------------------------------------------------- consensus driver

  private createConsensus(restored?: { lastSeqno: number; view: number; votedFor: string | undefined; commitSeqno: number }): void {
    const { election_timeout, message_timeout } = this.init.config.consensus;
    const heartbeatTicks = Math.max(1, Math.round(message_timeout / TICK_MS));
    const electionTimeoutTicks = Math.max(heartbeatTicks * 2 + 1, Math.round(election_timeout / TICK_MS));
    assert(this.genesisConfiguration, 'the genesis configuration is known before consensus starts');
    this.raft = createRaft({
      selfId: this.nodeId,
      random: new CryptoRandom(this.init.randomBytes),
      storage: { entryAt: (seqno) => this.entryFromLedger(seqno) },
      electionTimeoutTicks,
      heartbeatTicks,
      maxBatchEntries: 1000,
      maxBatchBytes: 4 * 1024 * 1024,
      maxUncommittedEntries: 50_000,
      initial: restored
        ? {
            ...this.consensusStart(),
            lastSeqno: restored.lastSeqno,
            view: restored.view,
            commitSeqno: restored.commitSeqno,
            ...(restored.votedFor !== undefined ? { votedFor: restored.votedFor } : {}),
          }
        : this.startupSnapshot
          ? {
              configs: this.startupSnapshot.parts.meta.configurations.map((c) => ({ seqno: c.seqno, nodes: [...c.nodes] })),
              startSeqno: this.startupSnapshot.seqno,
              startView: this.startupSnapshot.parts.meta.view,
              viewHistory: [...this.startupSnapshot.parts.meta.view_history],
              lastSeqno: this.startupSnapshot.seqno,
              view: this.startupSnapshot.parts.meta.view,
              commitSeqno: this.startupSnapshot.seqno,
            }
          : { configs: [this.genesisConfiguration], startSeqno: 0, lastSeqno: 0 },
    });
  }

  /** Where this node's consensus log starts: genesis, or the snapshot it started from. */
  private consensusStart(): { configs: Configuration[]; startSeqno: number; startView?: number; viewHistory?: number[] } {
    const snapshot = this.startupSnapshot;
    if (!snapshot) return { configs: [this.genesisConfiguration!], startSeqno: 0 };
    return {
      configs: snapshot.parts.meta.configurations.map((c) => ({ seqno: c.seqno, nodes: [...c.nodes] })),
      startSeqno: snapshot.seqno,
      startView: snapshot.parts.meta.view,
      viewHistory: [...snapshot.parts.meta.view_history],
    };
  }

  /**
   * Entries this node proposed as primary and some peer has not acknowledged yet, newest last,
   * up to RECENT_PROPOSALS_MAX_BYTES: when consensus sends one to a peer after it was persisted
   * (a full pipeline, a peer that joined meanwhile), it asks for it again through
   * entryFromLedger, and gets it from here with its sidecar (the private write set in clear, so
   * that the backup need not decrypt it) and without a read of the ledger. Pruned at each
   * commit; cleared when anything after the commit may be rewritten (a truncation, a rollback, a
   * change of role).
   */
  private readonly recentProposals = new ProposalWindow<Entry>(RECENT_PROPOSALS_MAX_BYTES, proposalBytes);

  private rememberProposal(entry: Entry): void {
    this.recentProposals.push(entry);
  }

  private forgetProposals(): void {
    this.recentProposals.clear();
  }

  /** Rebuilds a consensus entry from the ledger (for append batches the core no longer holds), or gives back a recent proposal. */
  private entryFromLedger(seqno: number): Entry | undefined {
    if (seqno < 1 || seqno > this.ledger.lastSeqno) return undefined;
    const proposed = this.recentProposals.get(seqno);
    if (proposed !== undefined) return proposed;
    const bytes = this.ledger.getEntry(seqno);
    const decoded = decodeEntry(bytes);
    if (hasFlag(decoded.flags, EntryFlags.SIGNATURE)) return { view: decoded.view, seqno, kind: 'signature', bytes };
    if (!hasFlag(decoded.flags, EntryFlags.RECONFIGURATION)) return { view: decoded.view, seqno, kind: 'normal', bytes };
    const configuration = configurationOf(decodeWriteSet(decoded.publicBytes));
    assert(configuration, `reconfiguration entry ${seqno} records its configuration`);
    return { view: decoded.view, seqno, kind: 'reconfiguration', configuration, bytes };
  }

  /** When each Pending node last sent a join request (primary only, in memory). */
  private readonly pendingLastSeenMs = new Map<string, number>();
  private pendingCleanupTimer: TimerHandle | undefined;

  /**
   * pending_node_timeout: the primary removes Pending nodes that sent no join request for longer
   * than the timeout, checking at least once a minute. A node seen before a failover gets a fresh
   * grace period on the new primary (it did not see its requests).
   */
  private startPendingCleanup(): void {
    const timeoutMs = this.init.config.pending_node_timeout;
    if (timeoutMs <= 0) return;
    const intervalMs = Math.max(1, Math.min(60_000, timeoutMs));
    const check = () => {
      if (this.stopped) return;
      this.pendingCleanupTimer = this.init.clock.setTimer(intervalMs, check);
      if (!this.isPrimary()) {
        this.pendingLastSeenMs.clear();
        return;
      }
      const now = this.init.clock.nowMs();
      const expired: string[] = [];
      this.executeRead((tx) =>
        tx.map(Tables.nodesInfo, json).forEach((info: NodeInfo, id: string) => {
          if (info.status !== 'Pending') return;
          const seen = this.pendingLastSeenMs.get(id);
          if (seen === undefined) this.pendingLastSeenMs.set(id, now);
          else if (now - seen > timeoutMs) expired.push(id);
        }),
      );
      if (expired.length === 0) return;
      try {
        this.executeWrite((tx) => {
          for (const id of expired) {
            tx.map(Tables.nodesInfo, json).remove(id);
            tx.map(Tables.nodesEndorsedCertificates, json).remove(id);
          }
        });
        for (const id of expired) {
          this.pendingLastSeenMs.delete(id);
          this.logger.info(`removed Pending node ${id}: no join request for more than ${timeoutMs}ms (pending_node_timeout)`);
        }
      } catch (e) {
        this.logger.fail(`could not remove silent Pending nodes: ${errorMessage(e)}`);
      }
    };
    this.pendingCleanupTimer = this.init.clock.setTimer(intervalMs, check);
  }

  private startTicking(): void {
    this.startPendingCleanup();
    this.snapshots.start();
    this.filesCleanup.start();
    const tick = () => {
      if (this.stopped) return;
      this.raft?.tick();
      this.pump();
      this.tickTimer = this.init.clock.setTimer(TICK_MS, tick);
    };
    this.tickTimer = this.init.clock.setTimer(TICK_MS, tick);
  }

  private onConsensusFrame(from: string, payload: Uint8Array): void {
    if (!this.raft) return;
    let message;
    try {
      message = decodeMessage(payload);
    } catch (e) {
      this.logger.info(`dropping a malformed consensus message from ${from}: ${errorMessage(e)}`);
      return;
    }
    if (message.from !== from) {
      this.logger.info(`dropping a consensus message from ${from} claiming to be from ${message.from}`);
      return;
    }
    this.raft.step(message);
    this.schedulePump();
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    this.init.clock.defer(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Does the work the consensus core asks for until it has none left. */
  private pump(): void {
    const raft = this.raft;
    if (!raft || this.stopped) return;
    // Before consensus rewrites the store (a new primary's entries), drop what this node can no
    // longer propose.
    if (this.sealInFlight > 0 && !this.canProposeInView(this.sealView)) this.abandonSealing();
    for (let rounds = 0; raft.hasReady() && rounds < 1000; rounds++) {
      const ready = raft.ready();
      this.handleReady(ready);
      raft.advance(ready);
    }
    if (this.peersDirty) this.refreshPeers();
  }

  private handleReady(ready: Ready): void {
    if (ready.truncateAfterSeqno !== undefined || ready.roleChange) this.forgetProposals();
    if (ready.truncateAfterSeqno !== undefined && ready.truncateAfterSeqno < this.store.version) {
      this.rollbackTo(ready.truncateAfterSeqno);
    }
    if (ready.entriesToPersist.length > 0) {
      const frames: Uint8Array[] = [];
      for (const entry of ready.entriesToPersist) {
        if (entry.seqno > this.store.version) this.applyReplicated(entry);
        frames.push(entry.bytes);
      }
      if (ready.truncateAfterSeqno !== undefined && ready.truncateAfterSeqno < this.ledger.lastSeqno) this.ledger.truncate(ready.truncateAfterSeqno);
      // Each frame was made by this node's sealer, or decoded (crc included) to be applied above.
      this.ledger.append(frames, { crcChecked: true });
    } else if (ready.truncateAfterSeqno !== undefined && ready.truncateAfterSeqno < this.ledger.lastSeqno) {
      this.ledger.truncate(ready.truncateAfterSeqno);
    }
    if (ready.hardState) this.persistHardState(ready);
    for (const message of ready.messages) {
      if (!this.channels) continue;
      this.channels.send(message.to, FrameKind.Consensus, encodeMessage(message));
    }
    if (ready.committedSeqno > this.commitSeqno) this.advanceCommit(Math.min(ready.committedSeqno, this.ledger.lastSeqno));
    if (ready.roleChange) {
      const { role, view, primaryId } = ready.roleChange;
      this.logger.info(`consensus: ${role} in view ${view}${primaryId ? ` (primary ${primaryId.slice(0, 12)})` : ''}`);
      const isPrimary = role === 'Primary';
      if (!isPrimary) this.cancelSignatureTimer();
      // A new primary decides chunk ends from now on: count from the chunk being written.
      else this.chunkBytes = this.ledger.writeChunkSizeBytes;
    }
    if (ready.snapshotsNeeded.length > 0) this.reportSnapshotsNeeded(ready.snapshotsNeeded);
    if (ready.signatureRequested && this.isPrimary()) this.emitSignature();
    if (ready.retirementsToRecord.length > 0 && this.isPrimary()) this.recordRetirements(ready.retirementsToRecord);
  }

  /**
   * Peers that lack entries this node no longer holds (it started from a snapshot after them):
   * replication cannot bring them up to date. Consensus reports a change of this set once; the
   * operator sees it here and in GET /node/consensus (acks[id].needs_snapshot).
   */
  private reportSnapshotsNeeded(ids: readonly string[]): void {
    const peers = this.raft?.status().peers ?? [];
    for (const id of ids) {
      const peer = peers.find((p) => p.id === id);
      this.logger.fail(
        `peer ${id} needs entries from seqno ${peer ? peer.matchSeqno + 1 : '?'} on, before this node's first entry ` +
          `(${this.startupSeqno + 1}, it started from a snapshot): it cannot catch up by replication. ` +
          'Stop it and join it again from a recent snapshot (command.type Join), or remove it from the network.',
      );
    }
  }

  /** View and vote must be durable before any message of this Ready is sent (a node never votes twice in a view). */
  private persistHardState(ready: Ready): void {
    const hard = ready.hardState!;
    if (hard.view === this.hardView && hard.votedFor === this.hardVotedFor) return;
    this.hardView = hard.view;
    this.hardVotedFor = hard.votedFor;
    this.persistState();
  }

  /** Rolls the store, the Merkle tree and the pipeline back to `seqno` (an unsigned suffix dropped by a view change). */
  private rollbackTo(seqno: number): void {
    this.forgetProposals();
    assert(seqno >= this.commitSeqno, `never roll back below commit (${seqno} < ${this.commitSeqno})`);
    this.logger.info(`rolling back uncommitted entries after seqno ${seqno} (had ${this.store.version})`);
    this.store.rollback(seqno);
    this.tree.truncate(seqno);
    this.snapshots.onRollback(seqno);
    this.lastSignedSeqno = Math.min(this.lastSignedSeqno, seqno);
    this.unsignedCount = 0;
  }

  /** Replicated private write sets applied from the primary's copy in clear, and decrypted (GET /node/consensus). */
  private appliedInClear = 0;
  private appliedDecrypted = 0;

  /** Applies an entry received from the primary: checks signatures, applies the write sets (decrypting them unless the primary sent them in clear). */
  private applyReplicated(entry: Entry): void {
    assert(entry.seqno === this.store.version + 1, `replicated entries apply in order (${entry.seqno} after ${this.store.version})`);
    const decoded = decodeEntry(entry.bytes);
    assert(decoded.seqno === entry.seqno && decoded.view === entry.view, 'entry frame matches its consensus metadata');
    // Checked against the tree before the entry's own leaf joins it.
    if (hasFlag(decoded.flags, EntryFlags.SIGNATURE)) this.checkSignature(decoded.publicBytes, decoded.seqno);
    const sidecar = entry.sidecar;
    // The primary's private write set in clear, as it sealed it: a copy, so that the values the
    // store keeps do not hold the whole received message (copyValue: the sidecar is a Buffer, whose
    // slice() would be a view of it). Anything else is decrypted.
    const plain = sidecar !== undefined && sidecar.byteLength + AES_GCM_TAG_BYTES === decoded.privateBytes.byteLength ? copyValue(sidecar) : undefined;
    if (plain !== undefined) this.appliedInClear++;
    else if (decoded.privateBytes.byteLength > 0) this.appliedDecrypted++;
    this.applyEntry(decoded, plain);
    this.snapshots.afterEntry(decoded);
  }

  /** Applies a ledger entry written by a primary (replicated, or replayed at restart) to the store and the tree. */
  private applyEntry(decoded: DecodedEntry, privatePlain?: Uint8Array): void {
    this.store.applyWriteSet(decoded.seqno, decoded.publicBytes, privatePlain ?? this.privatePlainOf(decoded));
    this.tree.append(entryLeaf(decoded));
    if (hasFlag(decoded.flags, EntryFlags.SIGNATURE)) this.lastSignedSeqno = decoded.seqno;
  }

  /** The private write set of an entry, decrypted (empty when the transaction wrote no private map). */
  private privatePlainOf(entry: DecodedEntry): Uint8Array {
    return entry.privateBytes.length > 0 ? this.encryptor.decryptPrivate(entry.view, entry.seqno, entry.privateBytes) : new Uint8Array(0);
  }

  /** A backup checks each signature transaction against its own Merkle tree before accepting it. */
  private checkSignature(publicBytes: Uint8Array, seqno: number): void {
    const record = signatureRecordOf({ publicBytes, seqno });
    const root = this.tree.root();
    if (record.root !== toHex(root)) {
      this.logger.fatal(`signature at seqno ${seqno} signs root ${record.root}, but this node's tree root is ${toHex(root)}`);
      assert(false, `Merkle root of signature ${seqno} matches the local tree`);
    }
    const key = publicKeyPem(loadPublicKey(record.cert));
    if (!verifyEcdsa(key, root, Buffer.from(record.sig, 'base64'), 'der')) {
      this.logger.fatal(`signature at seqno ${seqno} by ${record.node} does not verify`);
      assert(false, `signature ${seqno} verifies`);
    }
    this.signerKeys.set(record.node, key);
  }

  private refreshPeers(): void {
    this.peersDirty = false;
    if (!this.channels) return;
    const peers: { nodeId: string; address: string }[] = [];
    this.executeRead((tx) =>
      tx.map(Tables.nodesInfo, json).forEach((info: NodeInfo, id: string) => {
        if (id !== this.nodeId && info.node_to_node_interface && info.status !== 'Pending') {
          peers.push({ nodeId: id, address: info.node_to_node_interface.published_address });
        }
      }),
    );
    // Until replication brings the node table, a joiner knows the network from its join answer.
    for (const p of this.bootstrapPeers) if (!peers.some((q) => q.nodeId === p.nodeId)) peers.push(p);
    this.channels.setPeers(peers);
  }

  private trustedPeers(): { node_id: string; address: string }[] {
    const out: { node_id: string; address: string }[] = [];
    this.executeRead((tx) =>
      tx.map(Tables.nodesInfo, json).forEach((info: NodeInfo, id: string) => {
        if (info.status === 'Trusted' && info.node_to_node_interface) out.push({ node_id: id, address: info.node_to_node_interface.published_address });
      }),
    );
    return out;
  }

  private recordRetirements(nodeIds: readonly string[]): void {
    const tx = this.store.beginTx();
    const nodes = tx.map(Tables.nodesInfo, json);
    for (const id of nodeIds) {
      const info = nodes.get(id) as NodeInfo | undefined;
      if (info) nodes.put(id, { ...info, retired_committed: true });
    }
    const committed = tx.commit();
    if (!committed) return;
    this.proposeCommitted(committed.version, committed.writeSet, 0, [...nodeIds]);
    this.unsignedCount++;
    this.afterWrite();
  }

  // ---------------------------------------------------------------- transactions

  /**
   * Executes `fn` as one KV transaction, synchronously (no await between first read and commit).
   * If fn throws, nothing is written. Returns the transaction id when something was written.
   */
  executeWrite<T>(fn: (tx: Tx) => T): WriteResult<T> {
    this.assertWritable();
    const tx = this.store.beginTx();
    const result = fn(tx);
    if (tx.wroteTo(Tables.nodesInfo)) this.recordConfigurationChange(tx);
    const committed = tx.commit();
    if (committed === undefined) return { result, txId: undefined };
    const txId = this.proposeCommitted(committed.version, committed.writeSet, 0, undefined);
    this.unsignedCount++;
    // A membership change commits only through a signature; until it does, elections need the
    // old configurations too. Sign at once so that the new configuration takes over quickly.
    if (committed.writeSet.has(Tables.configurations)) this.emitSignature();
    else this.afterWrite();
    return { result, txId };
  }

  /**
   * A transaction that changes the set of trusted nodes is a reconfiguration (one-transaction
   * reconfiguration): it records the new configuration so that the entry carries it on any node,
   * and from the ledger alone.
   */
  private recordConfigurationChange(tx: Tx): void {
    const nodes = trustedSet(tx);
    const active = this.raft?.status().configs.at(-1)?.nodes ?? [];
    if (sameNodes(nodes, [...active].sort())) return;
    const configuration: Configuration = { seqno: this.store.version + 1, nodes };
    tx.map(Tables.configurations, json).put(SINGLETON_KEY, configuration);
  }

  /** Runs a read-only function over the current state. */
  executeRead<T>(fn: (tx: Tx) => T): T {
    const tx = this.store.beginTx();
    return fn(tx);
  }

  private assertWritable(): void {
    if (!this.isPrimary()) {
      throw new CovenantError('NotPrimary', `node is ${this.lifecycle} and not the primary: writes go to the primary`, 503);
    }
  }

  /**
   * Hands a transaction committed locally in the store to consensus: sealed into its entry
   * (encrypted, framed, hashed) by the sealer, then proposed and added to the Merkle tree, in
   * seqno order. Ordinary transactions go through the sealer's pipeline; anything else first
   * waits for the pipeline to empty and is sealed in line, so that signatures sign every earlier
   * entry and reconfigurations take effect at once. If consensus refuses a transaction (no longer
   * primary, too many pending entries), the store is rolled back so nothing half-written remains.
   */
  private proposeCommitted(seqno: number, writeSet: WriteSet, flags: number, retiredCommitted: string[] | undefined, claimsDigest: Uint8Array = ZERO_DIGEST): TxId {
    const raft = this.raft!;
    const sealer = this.sealer!;
    const { view, retiring } = raft.summary();
    let entryFlags = flags;
    const configuration = configurationOf(writeSet);
    if (configuration) {
      assert(configuration.seqno === seqno, 'a configuration takes effect at its own entry');
      entryFlags |= EntryFlags.RECONFIGURATION;
    }
    const kind: EntryKind = (flags & EntryFlags.SIGNATURE) !== 0 ? 'signature' : configuration ? 'reconfiguration' : 'normal';
    // A primary whose removal is in its log refuses all but signatures once the removal commits
    // (it hands over). A transaction waiting in the pipeline at that moment could not be proposed,
    // and its seqno would go to the next signature of the same view: from the removal on, every
    // transaction is sealed in line, so a refusal reaches its own client.
    const pipelined = kind === 'normal' && retiredCommitted === undefined && !retiring;
    if (!pipelined) {
      sealer.drain();
      if (this.store.version < seqno) {
        // Draining found that this node is no longer primary, and dropped this transaction too.
        throw new CovenantError('NotPrimary', 'this node stopped being primary: the transaction was not recorded', 503);
      }
    }
    const encoded = encodeWriteSet(writeSet);
    const entryBytes = sealedFrameBytes(encoded.publicBytes.byteLength, encoded.privateBytes.byteLength);
    try {
      raft.checkProposal(kind, this.sealInFlight);
      const maxEntryBytes = this.init.maxEntryBytes ?? MAX_ENTRY_BYTES;
      if (entryBytes > maxEntryBytes) {
        // Recorded, it could never be replicated (nor caught up from the ledger): commit would stop.
        throw new CovenantError(
          'TransactionTooLarge',
          `the transaction's ledger entry would take ${entryBytes} bytes, more than the ${maxEntryBytes} a node can replicate: nothing was written`,
          413,
        );
      }
    } catch (e) {
      this.store.rollback(seqno - 1);
      throw e;
    }
    if (kind === 'signature') {
      const end = shouldEndChunk({
        chunkBytesSoFar: this.chunkBytes,
        chunkSizeBytes: this.init.config.ledger.chunk_size,
        isSignature: true,
        forced: this.forceChunkEnd,
      });
      if (end) entryFlags |= EntryFlags.CHUNK_END;
    }
    // The size is known before sealing, so chunk ends are decided in seqno order.
    if ((entryFlags & EntryFlags.CHUNK_END) !== 0) {
      this.chunkBytes = 0;
      this.forceChunkEnd = false;
    } else {
      this.chunkBytes += entryBytes;
    }
    const job: NodeSealJob = {
      view,
      seqno,
      flags: entryFlags,
      claimsDigest,
      publicBytes: encoded.publicBytes,
      privatePlain: encoded.privateBytes,
      kind,
      configuration,
      retiredCommitted,
      epoch: this.sealEpoch,
    };
    if (pipelined) {
      if (this.sealInFlight === 0) {
        this.sealPendingFromSeqno = seqno;
        this.sealView = view;
      }
      this.sealInFlight++;
      sealer.submit(job);
    } else {
      this.proposeSealed(job, this.entrySeal!.seal(job));
    }
    return { view, seqno };
  }

  /** A job out of the sealer: proposed if this node still can, else the pipeline is abandoned. */
  private onSealed(job: NodeSealJob, sealed: SealedEntry): void {
    if (job.epoch !== this.sealEpoch || this.stopped) return;
    // Jobs complete in seqno order: this one is the oldest in flight (sealPendingFromSeqno).
    if (!this.canProposeInView(job.view)) {
      this.abandonSealing();
      return;
    }
    this.sealInFlight--;
    this.sealPendingFromSeqno = job.seqno + 1;
    try {
      this.proposeSealed(job, sealed);
    } catch (e) {
      // Still primary in the job's view, yet refused: the next entry would take this seqno in this
      // view, under a transaction id a client already holds. checkProposal at execution, and
      // sealing in line while retiring, leave consensus no reason to refuse.
      assert(false, () => `consensus refused pipelined transaction ${job.view}.${job.seqno}: ${errorMessage(e)}`);
    }
  }

  private proposeSealed(job: NodeSealJob, sealed: SealedEntry): void {
    const { view, seqno, kind, configuration, retiredCommitted } = job;
    const plain = job.privatePlain;
    // One object of one shape per entry (absent fields undefined): spreading optional fields in
    // made three objects per entry and gave the kept one a shape built field by field.
    const entry: Entry = {
      view,
      seqno,
      kind,
      bytes: sealed.bytes,
      configuration,
      retiredCommitted,
      // Backups apply the private write set from here instead of decrypting it (applyReplicated).
      sidecar: plain.byteLength > 0 && plain.byteLength <= SIDECAR_MAX_BYTES ? plain : undefined,
    };
    try {
      this.raft!.propose(entry);
    } catch (e) {
      this.store.rollback(seqno - 1);
      throw e;
    }
    this.rememberProposal(entry);
    this.tree.append(sealed.leaf);
    if (this.snapshots.wantsEntry(job.flags)) this.snapshots.afterEntry(decodeEntry(sealed.bytes));
    this.schedulePump();
  }

  private canProposeInView(view: number): boolean {
    return this.isPrimary() && this.raft!.summary().view === view;
  }

  /**
   * This node can no longer propose what is in the sealer (it lost its primacy): those
   * transactions leave the store, and their completions are ignored. Their clients hold
   * transaction ids of a view that has ended; GET /app/tx reports them Invalid.
   */
  private abandonSealing(): void {
    const fromSeqno = this.sealPendingFromSeqno;
    this.sealEpoch++;
    this.sealInFlight = 0;
    if (this.store.version >= fromSeqno) {
      this.logger.info(`dropping transactions ${fromSeqno}..${this.store.version} not yet in consensus: no longer primary in view ${this.sealView}`);
      this.store.rollback(fromSeqno - 1);
    }
    this.sealPendingFromSeqno = this.store.version + 1;
  }

  private afterWrite(): void {
    const { tx_count, delay } = this.init.config.ledger_signatures;
    if (this.unsignedCount >= tx_count) {
      this.emitSignature();
    } else if (this.signatureTimer === undefined) {
      this.signatureTimer = this.init.clock.setTimer(delay, () => {
        this.signatureTimer = undefined;
        this.signWhenSealed(this.init.clock.nowMs() + this.init.config.consensus.election_timeout / 2);
      });
    }
  }

  /**
   * The signature the delay calls for. A signature drains the sealing pipeline first, blocking the
   * request thread while the worker seals what is in it: with a large write set there (tens of
   * megabytes take it hundreds of milliseconds), the signature waits for the worker instead,
   * polling, for at most `waitUntilMs` (half an election timeout), so that commit is delayed by
   * that much at worst and never starved by a stream of large writes.
   */
  private signWhenSealed(waitUntilMs: number): void {
    if (this.unsignedCount === 0 || !this.isPrimary()) return;
    if ((this.sealer?.pendingBytes ?? 0) >= SIGNATURE_WAITS_FOR_BYTES && this.init.clock.nowMs() < waitUntilMs) {
      this.signatureTimer = this.init.clock.setTimer(SIGNATURE_WAIT_POLL_MS, () => {
        this.signatureTimer = undefined;
        this.signWhenSealed(waitUntilMs);
      });
      return;
    }
    this.emitSignature();
    this.pump();
  }

  private cancelSignatureTimer(): void {
    if (this.signatureTimer) {
      this.signatureTimer.cancel();
      this.signatureTimer = undefined;
    }
  }

  /** Requests that the next signature ends the current ledger chunk (trigger_ledger_chunk). */
  forceLedgerChunk(): void {
    this.forceChunkEnd = true;
  }

  /** A signature transaction: the Merkle root over every entry before it, signed with the node key. */
  private emitSignature(): void {
    assert(this.nodeKeys, 'node identity exists');
    this.cancelSignatureTimer();
    const raft = this.raft!;
    // The root must cover every earlier transaction: let the pipeline empty into consensus.
    this.sealer!.drain();
    if (!this.isPrimary()) return;
    const status = raft.status();
    const root = this.tree.root();
    const seqno = this.store.version + 1;
    const record: SignatureRecord = {
      view: status.view,
      seqno,
      root: toHex(root),
      sig: Buffer.from(signEcdsa(this.nodeKeys.privateKey, root, 'der')).toString('base64'),
      node: this.nodeId,
      commit_seqno: this.commitSeqno,
      commit_view: this.viewOf(this.commitSeqno),
      cert: this.nodeCertificatePem,
    };
    const tx = this.store.beginTx();
    tx.map(Tables.signatures, json).put(SINGLETON_KEY, record);
    // A snapshot point travels in the signature itself, which ends its chunk (ledger invariants 3, 4).
    const snapshot = this.snapshots.dueAt(seqno);
    if (snapshot) {
      tx.map(SNAPSHOT_MARKER_TABLE, json).put(SINGLETON_KEY, seqno);
      this.forceChunkEnd = true;
    }
    const committed = tx.commit();
    assert(committed && committed.version === seqno, 'signature transaction takes the next seqno');
    this.proposeCommitted(seqno, committed.writeSet, EntryFlags.SIGNATURE, undefined);
    this.unsignedCount = 0;
    this.lastSignedSeqno = seqno;
    if (snapshot) this.writeSnapshotEvidence(seqno);
  }

  /** The transaction after a snapshot signature: the snapshot's digest, also as claims digest. */
  private writeSnapshotEvidence(seqno: number): void {
    const evidence = this.snapshots.evidenceFor(seqno);
    if (evidence === undefined) return;
    const tx = this.store.beginTx();
    tx.map(Tables.snapshotEvidence, json).put(SINGLETON_KEY, evidence.record);
    const committed = tx.commit();
    assert(committed && committed.version === seqno + 1, 'snapshot evidence directly follows its signature');
    this.proposeCommitted(committed.version, committed.writeSet, EntryFlags.SNAPSHOT_EVIDENCE, undefined, evidence.digest);
    this.unsignedCount++;
    // Signed by the next signature, started from a fresh call so a snapshot can never recurse.
    this.init.clock.defer(() => {
      if (!this.stopped && this.isPrimary() && this.unsignedCount > 0) this.afterWrite();
    });
  }

  private advanceCommit(seqno: number): void {
    if (seqno <= this.commitSeqno) return;
    this.commitSeqno = seqno;
    this.ledger.commit(seqno);
    this.snapshots.onCommit(seqno);
    this.store.compact(seqno);
    this.tree.compactBefore(Math.max(0, seqno - 1));
    if (this.recentProposals.size > 0) this.dropAcknowledgedProposals();
  }

  /** Forgets the proposals every peer has acknowledged: none will be sent again (a peer that loses them catches up from the ledger). */
  private dropAcknowledgedProposals(): void {
    let acknowledged = Number.POSITIVE_INFINITY;
    for (const peer of this.raft?.status().peers ?? []) acknowledged = Math.min(acknowledged, peer.matchSeqno);
    this.recentProposals.dropThrough(acknowledged);
  }

  // ---------------------------------------------------------------- reports

  private viewStarts(): { view: number; seqno: number }[] {
    const history = this.raft?.status().viewHistory ?? [];
    return history.map((seqno, i) => ({ view: i + 1, seqno }));
  }

  private viewOf(seqno: number): number {
    return viewOfSeqno({ viewStarts: this.viewStarts() }, seqno) ?? 0;
  }

  commitTxId(): TxId {
    return { view: this.viewOf(this.commitSeqno), seqno: this.commitSeqno };
  }

  viewHistory(since = 0): string[] {
    return this.viewStarts()
      .filter((s) => s.view >= since)
      .map((s) => `${s.view}.${s.seqno}`);
  }

  /**
   * A receipt for a committed transaction (GET /node/receipt): the latest committed signature
   * (commit always lands on one, and any later signed root covers the transaction), with the
   * inclusion proof of its leaf in that root, from memory or rebuilt from the ledger files when
   * the tree has compacted that part. A signature transaction gets its signature receipt (the
   * root it signed, no proof) as soon as it is committed: no later root may ever come to cover
   * it. 'pending' while the transaction is not committed.
   */
  receipt(txId: TxId): Receipt | SignatureReceipt | 'pending' {
    const entry = this.committedEntry(txId);
    if (entry === 'pending') return entry;
    if (hasFlag(entry.flags, EntryFlags.SIGNATURE)) {
      const record = signatureRecordOf(entry);
      return buildSignatureReceipt({
        signature: Buffer.from(record.sig, 'base64'),
        nodeCertificatePem: record.cert,
        nodeId: record.node,
        signedRoot: fromHex(record.root),
      });
    }
    const parts = this.receiptParts(entry);
    return buildReceipt({
      leafComponents: parts.leafComponents,
      proof: parts.proof,
      signature: Buffer.from(parts.record.sig, 'base64'),
      nodeCertificatePem: parts.record.cert,
      nodeId: parts.record.node,
      signedRoot: fromHex(parts.record.root),
    });
  }

  /**
   * The COSE receipt of a committed transaction (GET /node/receipt/cose): the service key signs
   * the same committed root once (cached per signature), and each receipt adds its own proof.
   * A signature transaction has no COSE receipt (it signs roots; its JSON receipt says which).
   */
  coseReceipt(txId: TxId): Uint8Array | 'pending' {
    const entry = this.committedEntry(txId);
    if (entry === 'pending') return entry;
    if (hasFlag(entry.flags, EntryFlags.SIGNATURE)) {
      throw new CovenantError(
        'ReceiptUnavailable',
        `transaction ${formatTxId(txId)} is a signature transaction: a COSE receipt proves a transaction under a signed root, and ` +
          `this transaction is the signature of one. GET /node/receipt?transaction_id=${formatTxId(txId)} answers its signature receipt`,
        404,
      );
    }
    const parts = this.receiptParts(entry);
    if (!this.servicePrivateKeyPem || !this.serviceCertificatePem) {
      throw new CovenantError('ServiceKeyUnavailable', 'this node does not hold the service key yet; ask a trusted node', 503);
    }
    let signedRoot = this.signedRootCache.get(parts.signatureSeqno);
    if (signedRoot === undefined || signedRoot.serviceCertificatePem !== this.serviceCertificatePem) {
      const cose = signRootCose({
        servicePrivateKey: loadPrivateKey(this.servicePrivateKeyPem),
        servicePublicKey: parseCertificate(this.serviceCertificatePem).publicKey,
        root: fromHex(parts.record.root),
        signatureTxId: formatTxId({ view: this.viewOf(parts.signatureSeqno), seqno: parts.signatureSeqno }),
      });
      // Receipts are asked for recent transactions: a few signed roots cover them.
      signedRoot = { serviceCertificatePem: this.serviceCertificatePem, cose };
      if (this.signedRootCache.size >= 16) this.signedRootCache.delete(this.signedRootCache.keys().next().value!);
      this.signedRootCache.set(parts.signatureSeqno, signedRoot);
    }
    return coseReceiptWithProof(signedRoot.cose, parts.leafComponents, parts.proof);
  }

  /** The ledger entry of a committed transaction; 'pending' until it commits, TransactionInvalid if it never will. */
  private committedEntry(txId: TxId): DecodedEntry | 'pending' {
    const status = this.statusOf(txId);
    if (status === 'Invalid') throw transactionInvalid(txId);
    if (status !== 'Committed') return 'pending';
    return this.readEntryFrame(txId.seqno);
  }

  /** The latest committed signature and the inclusion proof of a committed non-signature entry under its root. */
  private receiptParts(entry: DecodedEntry) {
    // Commit lands on signatures only, so a committed entry that is not one precedes the latest.
    const signatureSeqno = this.commitSeqno;
    assert(entry.seqno < signatureSeqno, () => `committed entry ${entry.seqno} precedes commit ${signatureSeqno}, a signature`);
    const signature = this.readEntryFrame(signatureSeqno);
    assert(hasFlag(signature.flags, EntryFlags.SIGNATURE), `commit ${signatureSeqno} lands on a signature`);
    const record = signatureRecordOf(signature);
    const proof = this.tree.inclusionProof(entry.seqno - 1, signatureSeqno - 1, (block) => this.leavesOfBlock(block));
    const leafComponents = {
      writeSetDigest: writeSetDigest(entry),
      commitEvidence: this.entrySeal!.commitEvidence(entry.view, entry.seqno),
      claimsDigest: entry.claimsDigest,
    };
    return { signatureSeqno, record, proof, leafComponents };
  }

  /**
   * The writes of a committed transaction, read back from this node's ledger files (historical
   * queries): both domains, the private one decrypted. 'pending' until this node knows it
   * committed; TransactionInvalid if it never will be; HistoricalDataUnavailable when the
   * files do not hold it (the node started from a later snapshot).
   */
  historicalWrites(txId: TxId): WriteSet | 'pending' {
    const status = this.statusOf(txId);
    if (status === 'Invalid') throw transactionInvalid(txId);
    if (status !== 'Committed') return 'pending';
    if (!this.entrySeal) {
      throw new CovenantError('LedgerSecretUnavailable', 'this node does not hold the ledger secret yet: private writes cannot be read', 503);
    }
    const entry = this.readEntryFrame(txId.seqno);
    assert(entry.view === txId.view, () => `committed transaction ${formatTxId(txId)} is the ledger entry at its seqno (view ${entry.view})`);
    return decodeWriteSetParts(entry.publicBytes, this.privatePlainOf(entry));
  }

  private readEntryFrame(seqno: number): ReturnType<typeof decodeEntry> {
    try {
      return decodeEntry(this.ledger.getEntry(seqno));
    } catch (e) {
      if ((e as { code?: string }).code === 'LedgerEntryNotFound') {
        throw new CovenantError('HistoricalDataUnavailable', `seqno ${seqno} is not in this node's ledger files`, 404);
      }
      throw e;
    }
  }

  /** The Merkle leaves of one compacted block (1024 seqnos), re-read from the ledger files. */
  private leavesOfBlock(block: number): Uint8Array[] {
    const leaves: Uint8Array[] = [];
    for (let s = block * BLOCK_LEAF_COUNT + 1; s <= (block + 1) * BLOCK_LEAF_COUNT; s++) {
      const entry = this.readEntryFrame(s);
      leaves.push(entryLeaf(entry));
    }
    return leaves;
  }

  statusOf(txId: TxId): TxStatus {
    const status = this.raft?.status();
    return txStatus(txId, {
      currentView: status?.view ?? 0,
      lastSeqno: this.store.version,
      commitSeqno: this.commitSeqno,
      history: { viewStarts: this.viewStarts() },
    });
  }

  stateReport(): NodeStateReport {
    return { node_id: this.nodeId, state: this.lifecycle, last_signed_seqno: this.lastSignedSeqno, startup_seqno: this.startupSeqno };
  }

  isPrimary(): boolean {
    return this.raft?.summary().role === 'Primary';
  }

  primaryId(): string | undefined {
    return this.raft?.summary().primaryId;
  }

  consensusReport(): ConsensusReport {
    const status = this.raft?.status();
    const addressOf = new Map<string, string>();
    this.executeRead((tx) =>
      tx.map(Tables.nodesInfo, json).forEach((info: NodeInfo, id: string) => {
        addressOf.set(id, info.node_to_node_interface?.published_address ?? '');
      }),
    );
    const configs = (status?.configs ?? []).map((c) => {
      const nodes: Record<string, { address: string }> = {};
      for (const id of c.nodes) nodes[id] = { address: addressOf.get(id) ?? '' };
      return { seqno: c.seqno, nodes };
    });
    const acks: Record<string, { seqno: number; needs_snapshot: boolean }> = {};
    for (const peer of status?.peers ?? []) acks[peer.id] = { seqno: peer.matchSeqno, needs_snapshot: peer.needsSnapshot };
    const role = status?.role;
    return {
      current_view: status?.view ?? 0,
      primary_id: status?.primaryId,
      role: role === 'Primary' ? 'Primary' : role === 'Backup' ? 'Backup' : role ? 'Candidate' : 'None',
      commit_seqno: this.commitSeqno,
      last_seqno: this.store.version,
      configs,
      acks,
      private_write_sets_applied: { in_clear: this.appliedInClear, decrypted: this.appliedDecrypted },
    };
  }

  serviceInfo(): ServiceInfo | undefined {
    return this.executeRead((tx) => tx.map(Tables.serviceInfo, json).get(SINGLETON_KEY) as ServiceInfo | undefined);
  }

  networkReport(): NetworkReport {
    const info = this.serviceInfo();
    return {
      service_status: info?.status ?? this.joinReportedServiceStatus ?? 'Opening',
      service_certificate: info?.cert ?? this.serviceCertificatePem,
      recovery_count: info?.recovery_count ?? 0,
      service_data: info?.service_data ?? null,
      current_view: this.raft?.status().view ?? 0,
      primary_id: this.primaryId(),
      current_service_create_txid: info?.current_service_create_txid,
    };
  }

  listNodes(): NodeSummary[] {
    const primary = this.primaryId();
    return this.executeRead((tx) => {
      const out: NodeSummary[] = [];
      tx.map(Tables.nodesInfo, json).forEach((info: NodeInfo, id: string) => {
        out.push({
          node_id: id,
          status: info.status,
          primary: id === primary,
          rpc_interfaces: info.rpc_interfaces,
          node_data: info.node_data,
          last_written: 0,
          ...(info.retired_committed !== undefined ? { retired_committed: info.retired_committed } : {}),
        });
      });
      return out;
    });
  }

  serviceConfiguration(): unknown {
    return this.executeRead((tx) => tx.map(Tables.serviceConfig, json).get(SINGLETON_KEY));
  }

  previousServiceIdentity(): string | undefined {
    return this.executeRead((tx) => tx.map(Tables.previousServiceIdentity, json).get(SINGLETON_KEY) as string | undefined);
  }

  versionReport(): VersionReport {
    return { version: this.init.version, unsafe: true, quote_format: 'Insecure_Virtual', runtime: `node ${process.versions.node}` };
  }

  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.cancelSignatureTimer();
    this.tickTimer?.cancel();
    this.pendingCleanupTimer?.cancel();
    this.sealer?.close();
    this.snapshots.stop();
    this.filesCleanup.stop();
    if (this.ledger) {
      this.ledger.sync();
      this.ledger.close();
    }
    this.lifecycle = 'Stopped';
  }
}

/** A transaction id that will never be committed: rolled back, or never assigned (seqno 0, a view that never held it). */
function transactionInvalid(txId: TxId): CovenantError {
  return new CovenantError('TransactionInvalid', `transaction ${formatTxId(txId)} is Invalid: it will never be committed (it was rolled back, or no such transaction was ever assigned)`, 404);
}

function boundAddressesOf(addresses: NodeAddresses): BoundAddresses {
  const rpc: Record<string, string> = {};
  for (const a of addresses.rpc) rpc[a.name] = a.bindAddress;
  return { node_to_node: addresses.nodeToNode.bindAddress, rpc };
}

/** Whether a node's record already holds the addresses its join request announces. */
function sameAddresses(current: NodeInfo, request: Pick<NodeInfo, 'rpc_interfaces' | 'node_to_node_interface'>): boolean {
  if (current.node_to_node_interface?.published_address !== request.node_to_node_interface?.published_address) return false;
  const published = (interfaces: NodeInfo['rpc_interfaces']) =>
    JSON.stringify(Object.entries(interfaces ?? {}).map(([name, i]) => [name, i.published_address, i.bind_address]).sort());
  return published(current.rpc_interfaces) === published(request.rpc_interfaces);
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
