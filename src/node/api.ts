/**
 * The node as the layers above it see it: what the node is given (NodeInit), and the small
 * interfaces the HTTP layer and the application use (transactions, frames, operator queries), so
 * that they depend on what they use and not on the concrete node.
 */
import type { Clock } from '../base/clock.js';
import type { TxId } from '../base/ids.js';
import type { Logger } from '../base/log.js';
import type { NodeConfig } from '../config/index.js';
import type { StoreView, Tx, WriteSet } from '../kv/index.js';
import type { Disk, EntryLeafReader, EntryReplayer, EntryFramerFactory, SnapshotWriter } from '../ledger/index.js';
import type { KeyPair, SignatureVerifier } from '../crypto/index.js';
import type { Receipt, SignatureReceipt } from '../merkle/index.js';
import type { QuoteInfo } from '../attestation/virtual.js';
import type { KeyFetcher, KeyRefreshMetrics } from '../jwt/index.js';
import type { CertificateRenewer } from '../gov/index.js';
import type { JoinRequest, JoinResponse } from './join.js';
import type { NodeLifecycleState } from './lifecycle.js';
import type { CertificateMetrics, ConsensusReport, NetworkReport, NodeStateReport, NodeSummary, ServiceEndorsementsReport, VersionReport } from './reports.js';
import type { TxStatus } from './tx-status.js';
import type { SnapshotRequestOutcome } from './snapshots.js';
import type { SnapshotGenerationMetrics } from './snapshot-generation.js';
import type { WriteOptions, WriteResult } from './write/transactions.js';
import type { CommitStageTimings } from './write/commit-stages.js';

export { COMMIT_STAGES, type CommitStage, type CommitStageTimings } from './write/commit-stages.js';
export type { WriteOptions, WriteResult } from './write/transactions.js';

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
  /** Reads a binary file named in the configuration (the transparent statement of command.join). */
  readonly readBinaryFile?: (path: string) => Uint8Array;
  /** Writes an output file (certificates) atomically. */
  readonly writeTextFile: (path: string, text: string) => void;
  /** Writes a file only this node's user may read, atomically and durably (node state with keys). */
  readonly writeSecretFile: (path: string, text: string) => void;
  /** Virtual attestation: the host data this node reports (stands for its security policy digest). */
  readonly hostData?: string;
  /**
   * Frames the primary's transactions into ledger entries (src/ledger/framing.ts). Default: on
   * the calling thread; node processes pass a worker-thread framer (src/platform/worker-framer.ts).
   */
  readonly createEntryFramer?: EntryFramerFactory;
  /**
   * Re-reads the Merkle leaves of ledger entries for receipts of compacted transactions, off the
   * request thread (src/ledger/entry-leaves.ts). Default: on the calling thread through `disk`
   * (the simulator, tests); node processes pass a worker-thread reader
   * (src/platform/worker-leaf-reader.ts). The node closes it when it stops. A recovery reading
   * the public ledger also hashes the entries' leaves on it (src/node/recovery/public-ledger.ts).
   */
  readonly entryLeafReader?: EntryLeafReader;
  /**
   * Reads and decrypts a previous service's entries off the request thread when a recovery
   * replays its private domain (src/ledger/entry-replay.ts). Default: the recovery replays them
   * on the calling thread (the simulator, tests); node processes pass worker threads
   * (src/platform/worker-entry-replayer.ts). The node closes it when it stops.
   */
  readonly entryReplayer?: EntryReplayer;
  /**
   * Encodes, writes and syncs snapshot files (src/ledger/snapshot-writer.ts). Default: on the
   * calling thread through `disk` (the simulator, tests); node processes pass a worker-thread
   * writer (src/platform/worker-snapshot-writer.ts). The node closes it when it stops.
   */
  readonly snapshotWriter?: { readonly writer: SnapshotWriter; readonly kind: 'worker' | 'inline' };
  /**
   * Largest ledger entry (framed frame) the node records; a larger transaction is refused (413
   * TransactionTooLarge). Default MAX_ENTRY_BYTES, what one node-to-node frame can carry; tests
   * lower it.
   */
  readonly maxEntryBytes?: number;
  /**
   * Where the times of each stage of a committed write go (src/node/write/commit-stages.ts; node
   * processes pass their metrics registry). Default: none, and no write is timed.
   */
  readonly commitStageTimings?: CommitStageTimings;
  /**
   * Verifies the primary's signatures on a backup while their entries sync, with ledger.durability
   * Synced (src/node/signature-checks.ts). Default: none, each is verified on the request thread
   * as it is applied (tests); node processes pass libuv's thread pool
   * (threadPoolSignatureVerifier), the simulator a verification that ends after a seeded delay.
   */
  readonly signatureVerifier?: SignatureVerifier;
  /**
   * The node's key pair, when it is not to make one: the simulator gives its nodes keys whose node
   * ids sort in the order of the nodes, so that a run does not depend on which ids came out.
   */
  readonly identityKeyPair?: KeyPair;
  /**
   * Fetches token issuers' discovery documents and key sets (the primary's key refresh). Default:
   * none, every refresh fails (the simulator); node processes pass src/platform/key-fetcher.ts.
   */
  readonly jwtKeyFetcher?: KeyFetcher;
  /**
   * Virtual mode's per-machine CPU key for sealing (sealing_recovery.virtual_cpu_key_file; node
   * processes pass src/platform/virtual-cpu-key.ts). Default: none, and the node seals nothing.
   */
  readonly virtualCpuKey?: () => Uint8Array;
  /**
   * Starts the recovery decision protocol's transport on the location's address (node processes
   * pass src/platform/decision-transport.ts). Default: none, and a Recover node with
   * sealing_recovery recovers with member shares.
   */
  readonly decisionTransport?: (options: DecisionTransportOptions) => DecisionTransportHandle;
}

export interface DecisionTransportOptions {
  readonly bindAddress: string;
  readonly tls: { readonly keyPem: string; readonly certificatePem: string };
  readonly logger: Logger;
  readonly onEnvelope: (envelope: unknown) => void;
}

/** A running transport of the recovery decision protocol. */
export interface DecisionTransportHandle {
  listen(): Promise<string>;
  /** At most one message of each `kind` in flight per destination. */
  send(address: string, envelope: unknown, kind: string): void;
  close(): Promise<void>;
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

/** Transactions on the node's store, and what a client needs to know about their fate (the application). */
export interface NodeTransactions {
  readonly logger: Logger;
  readonly clock: Clock;
  /** `options.claimsDigest` binds a digest into the transaction's Merkle leaf (its receipt proves it). */
  executeWrite<T>(fn: (tx: Tx) => T, options?: WriteOptions): WriteResult<T>;
  executeRead<T>(fn: (tx: Tx) => T): T;
  /** A read, with the id of the state it read (x-covenant-transaction-id on a read's answer). */
  executeReadAt<T>(fn: (tx: Tx) => T): { readonly result: T; readonly txId: TxId };
  /**
   * The first half of a linearizable read (x-covenant-consistency: linearizable), on the primary:
   * resolves once consensus confirmed this node still leads a majority after the read arrived and
   * its commit reached the read's seqno; readCommitted then reads. Refused with NotPrimary on a
   * backup, ReadNotConfirmed or TooManyPendingReads (retryable) otherwise.
   */
  confirmLinearizableRead(): Promise<void>;
  /** Reads the committed state, with its id (synchronous: nothing commits between the two). */
  readCommitted<T>(fn: (view: StoreView) => T): { readonly result: T; readonly txId: TxId };
  isPrimary(): boolean;
  statusOf(txId: TxId): TxStatus;
  commitTxId(): TxId;
  historicalWrites(txId: TxId): WriteSet | 'pending';
  /**
   * Before a write that is to be answered only once committed (x-covenant-consistency:
   * committed): refuses (retryable) when too many answers already wait for their commit, so that
   * such a write is refused before it is executed rather than after.
   */
  checkCommitWaitRoom(): void;
  /**
   * Resolves once the transaction is Committed; refuses with a retryable error naming it if it was
   * rolled back (TransactionRolledBack) or did not commit in time (CommitWaitTimedOut).
   */
  awaitCommit(txId: TxId): Promise<void>;
}

/** Frames on the node-to-node channels, and where the primary is (request forwarding). */
export interface NodeFrames {
  readonly nodeId: string;
  isPrimary(): boolean;
  primaryId(): string | undefined;
  onFrame(kind: number, handler: (from: string, payload: Uint8Array) => void): void;
  sendFrame(to: string, kind: number, payload: Uint8Array): boolean;
}

/** What the operator frontend (/node) asks of the node. */
export interface NodeOperatorQueries extends NodeTransactions {
  readonly nodeId: string;
  readonly state: NodeLifecycleState;
  readonly selfSignedCertificatePem: string;
  readonly quoteInfo: QuoteInfo | undefined;
  primaryId(): string | undefined;
  stateReport(): NodeStateReport;
  consensusReport(): ConsensusReport;
  networkReport(): NetworkReport;
  listNodes(): NodeSummary[];
  serviceConfiguration(): unknown;
  previousServiceIdentity(): string | undefined;
  /** Every recovery's endorsement of the service identity before it, oldest first (GET /node/service/endorsements). */
  serviceEndorsements(): ServiceEndorsementsReport;
  versionReport(): VersionReport;
  viewHistory(since?: number): string[];
  /** Asynchronous: a receipt may wait for a Merkle block re-read from the ledger files (docs/merkle.md). */
  receipt(txId: TxId): Promise<Receipt | SignatureReceipt | 'pending'>;
  coseReceipt(txId: TxId): Promise<Uint8Array | 'pending'>;
  /** POST /node/join: `clientAddress` is the remote address of the connection (its join rate is bounded). */
  handleJoin(request: JoinRequest, clientPublicKeyDer: Uint8Array | undefined, clientAddress: string | undefined): Promise<JoinResponse>;
  appFrontendOpen(): boolean;
  appFrontendClosedReason(): string;
  /** GET /node/jwt_keys/refresh/metrics: this node's refreshes, per issuer (it refreshes while primary). */
  jwtRefreshMetrics(): KeyRefreshMetrics;
  /** GET /node/metrics: the validity of the certificates this node serves, and the time left. */
  certificateMetrics(): CertificateMetrics;
}

/** What the governance frontend (/gov) asks of the node. */
export interface NodeGovernanceHost extends NodeTransactions {
  /** The Merkle root over every entry so far (members acknowledge a state digest). */
  treeRootHex(): string;
  forceLedgerChunk(): void;
  /** The service key's certificate renewals the constitution's *_certificate_validity actions use. */
  readonly certificateRenewer: CertificateRenewer;
  /** A member's encrypted recovery share of the last issue (404 RecoveryShareNotFound when it holds none). */
  recoveryEncryptedShare(memberId: string): { encrypted_share: string };
  /** A member's decrypted recovery share; `record` runs in the transaction that keeps what it led to. */
  submitRecoveryShare(memberId: string, share: Uint8Array, record: (tx: Tx) => void): Promise<{ message: string; submitted_count: number; recovery_threshold: number; txId: TxId | undefined }>;
}

/** Everything the RPC interfaces of one node serve (src/http/service.ts composes the frontends over it). */
export interface NodeServices extends NodeOperatorQueries, NodeGovernanceHost, NodeFrames {
  /** Whether a user certificate with this id is registered (asked on every user request). */
  isUser(id: string): boolean;
  /** The stored signing-key metadata of a token kid, as raw bytes (asked on every token request; no transaction). */
  jwtSigningKeyRaw(kid: string): Uint8Array | undefined;
  /** POST /node/snapshot:create (coalesced with one already requested; refused within snapshots.min_interval). */
  requestSnapshot(): SnapshotRequestOutcome;
  /**
   * Before a committed snapshot is served: undefined when it verifies against the current service
   * certificate (digest against its evidence, receipt), otherwise why not (logged once per file version).
   */
  servedSnapshotVerdict(path: string, name: string, stamp: { sizeBytes: number; modifiedMs: number }, read: () => Promise<Uint8Array>): Promise<string | undefined>;
  /** GET /node/metrics: the snapshots this node wrote (how many, the last one's size, slices and time). */
  snapshotMetrics(): SnapshotGenerationMetrics;
}
