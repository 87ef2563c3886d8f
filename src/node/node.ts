/**
 * One Covenant node: its identity, the store, the ledger, the Merkle history and the commit
 * pipeline. Transactions execute synchronously on the primary (DESIGN decision 2); their entries
 * are appended to the ledger in batches once the current burst of synchronous work is done, and
 * commit advances to signature transactions (DESIGN decision 4).
 *
 * Everything time- or I/O-related comes in through NodeInit (clock, disk, randomness, logger).
 */
import { assert } from '../base/assert.js';
import { concatBytes, toHex, utf8 } from '../base/bytes.js';
import { CovenantError } from '../base/errors.js';
import { formatTxId, type TxId } from '../base/ids.js';
import type { Logger } from '../base/log.js';
import type { NodeConfig } from '../config/index.js';
import {
  certificateId,
  createEndorsedCertificate,
  createSelfSignedCertificate,
  generateEcKeyPair,
  type KeyPair,
  nodeIdFromPublicKey,
  publicKeyDer,
  sha256,
  signEcdsa,
} from '../crypto/index.js';
import { HistoryTree, createCommitEvidenceDeriver, formatCommitEvidence, leafDigest } from '../merkle/index.js';
import { LedgerEncryptor, Store, type Tx, encodeWriteSet, jsonCodec } from '../kv/index.js';
import { type Disk, EntryFlags, Ledger, decodeEntry, encodeEntry, shouldEndChunk, writeSetDigest } from '../ledger/index.js';
import { codeMeasurement, createVirtualQuote, defaultHostData, type QuoteInfo } from '../attestation/virtual.js';
import type { Clock, TimerHandle } from '../base/clock.js';
import { canTransition, type NodeLifecycleState } from './lifecycle.js';
import type { ConsensusReport, NetworkReport, NodeStateReport, NodeSummary, VersionReport } from './reports.js';
import { SINGLETON_KEY, Tables, type MemberInfo, type NodeInfo, type ServiceInfo, type SignatureRecord } from './tables.js';
import { txStatus, type TxStatus } from './tx-status.js';

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
}

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

const ZERO_DIGEST = new Uint8Array(32);
const json = jsonCodec<any>();

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
  private serviceKeys: KeyPair | undefined;
  quoteInfo: QuoteInfo | undefined;
  readonly measurement: string;
  readonly hostData: string;

  // State
  readonly store = new Store();
  readonly tree = new HistoryTree();
  private ledger!: Ledger;
  private encryptor: LedgerEncryptor | undefined;
  private ledgerSecret: Uint8Array | undefined;
  private commitEvidenceNonce: ((view: number, seqno: number) => Uint8Array) | undefined;
  private view = 1;
  private readonly viewStarts: { view: number; seqno: number }[] = [];
  private lastSignedSeqno = 0;
  private commitSeqno = 0;
  private startupSeqno = 0;
  private rpcAddresses: RpcInterfaceAddress[] = [];

  // Commit pipeline
  private pendingEntries: Uint8Array[] = [];
  private unsignedCount = 0;
  private chunkBytes = 0;
  private forceChunkEnd = false;
  private flushScheduled = false;
  private signatureTimer: TimerHandle | undefined;
  private readonly commitWaiters: { seqno: number; resolve: () => void }[] = [];
  private readonly commitListeners: ((seqno: number) => void)[] = [];

  constructor(init: NodeInit) {
    this.init = init;
    this.logger = init.logger;
    this.measurement = codeMeasurement(init.version);
    this.hostData = defaultHostData();
    this.transition('Initialized');
  }

  get state(): NodeLifecycleState {
    return this.lifecycle;
  }

  private transition(to: NodeLifecycleState): void {
    assert(canTransition(this.lifecycle, to), `node cannot go from ${this.lifecycle} to ${to}`);
    this.logger.info(`node state ${this.lifecycle} -> ${to}`);
    this.lifecycle = to;
  }

  /** Opens the ledger directory; a Start node refuses a directory that already holds a ledger. */
  private openLedger(): void {
    const { ledger } = this.init.config;
    this.ledger = new Ledger({ disk: this.init.disk, directory: ledger.directory, readOnlyDirectories: ledger.read_only_directories });
    this.ledger.open();
  }

  /** Starts a new service with this node as its first, primary node (command.type Start). */
  async startNewService(addresses: readonly RpcInterfaceAddress[]): Promise<void> {
    const config = this.init.config;
    this.rpcAddresses = [...addresses];
    this.openLedger();
    if (this.ledger.lastSeqno > 0) {
      throw new CovenantError(
        'LedgerAlreadyExists',
        `ledger directory "${config.ledger.directory}" already holds a ledger (up to seqno ${this.ledger.lastSeqno}); ` +
          'command.type Start needs an empty ledger directory (use Recover to restore a service from an existing ledger)',
        400,
      );
    }
    assert(this.nodeKeys, 'prepareIdentity() runs before startNewService()');
    const serviceKeys = generateEcKeyPair('P-384');
    this.serviceKeys = serviceKeys;
    const validityDays = config.command.start?.initial_service_certificate_validity_days ?? 1;
    this.serviceCertificatePem = await createSelfSignedCertificate({
      keyPair: serviceKeys,
      subjectCommonName: 'Covenant Service',
      validityDays,
      isCa: true,
    });
    this.nodeCertificatePem = await this.endorseNodeCertificate();
    this.ledgerSecret = this.init.randomBytes(32);
    this.encryptor = new LedgerEncryptor(this.ledgerSecret);
    this.commitEvidenceNonce = createCommitEvidenceDeriver(this.ledgerSecret);
    this.viewStarts.push({ view: this.view, seqno: 1 });

    this.init.writeTextFile(config.command.service_certificate_file, this.serviceCertificatePem);
    this.init.writeTextFile(config.node_certificate_file, this.nodeCertificatePem);

    this.executeWrite((tx) => this.writeGenesis(tx));
    this.emitSignature();
    this.transition('PartOfNetwork');
    this.flush();
    this.logger.info(`service started; node ${this.nodeId} is primary at ${formatTxId(this.commitTxId())}`);
  }

  /** Creates the node's key, self-signed certificate and quote (before its RPC interfaces listen). */
  async prepareIdentity(): Promise<void> {
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

  private subjectAltNames(): string[] {
    return [...this.init.config.node_certificate.subject_alt_names];
  }

  private async endorseNodeCertificate(): Promise<string> {
    assert(this.serviceKeys && this.nodeKeys, 'keys exist before endorsement');
    return createEndorsedCertificate({
      subjectPublicKey: this.nodeKeys.publicKey,
      subjectCommonName: 'Covenant Node',
      subjectAltNames: this.subjectAltNames(),
      issuerCertificatePem: this.serviceCertificatePem,
      issuerPrivateKey: this.serviceKeys.privateKey,
      validityDays: this.init.config.node_certificate.initial_validity_days,
    });
  }

  get nodePrivateKeyPem(): string {
    assert(this.nodeKeys, 'node identity exists');
    return this.nodeKeys.privateKeyPem;
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
      current_service_create_txid: `${this.view}.1`,
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
      quote_info: this.quoteInfo!,
      retired_committed: false,
    };
    tx.map(Tables.nodesInfo, json).put(this.nodeId, nodeInfo);
    tx.map(Tables.nodesEndorsedCertificates, json).put(this.nodeId, this.nodeCertificatePem);
    tx.map(Tables.hostData, json).put(this.hostData, { measurement: this.measurement });
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
    const constitution = (start.constitution_files ?? []).map((f) => this.init.readTextFile(f)).join('\n');
    if (constitution.length > 0) tx.map(Tables.constitution, json).put(SINGLETON_KEY, constitution);
  }

  private readJsonFile(path: string | undefined): unknown {
    if (path === undefined) return null;
    return JSON.parse(this.init.readTextFile(path)) as unknown;
  }

  private rpcInterfacesRecord(): NodeInfo['rpc_interfaces'] {
    const out: NodeInfo['rpc_interfaces'] = {};
    for (const a of this.rpcAddresses) {
      out[a.name] = { bind_address: a.bindAddress, published_address: a.publishedAddress, enabled_operator_features: [...a.enabledOperatorFeatures] };
    }
    return out;
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
    const committed = tx.commit();
    if (committed === undefined) return { result, txId: undefined };
    const txId = this.appendTransaction(committed.version, committed.writeSet, 0);
    this.unsignedCount++;
    this.afterWrite();
    return { result, txId };
  }

  /** Runs a read-only function over the current state. */
  executeRead<T>(fn: (tx: Tx) => T): T {
    const tx = this.store.beginTx();
    return fn(tx);
  }

  private assertWritable(): void {
    if (this.lifecycle !== 'PartOfNetwork' && this.lifecycle !== 'Initialized') {
      throw new CovenantError('NodeNotReady', `node is ${this.lifecycle} and cannot execute writes`, 503);
    }
  }

  /** Serialises, encrypts and frames a committed-locally transaction, and feeds the Merkle tree. */
  private appendTransaction(seqno: number, writeSet: Parameters<typeof encodeWriteSet>[0], flags: number): TxId {
    const view = this.view;
    const encoded = encodeWriteSet(writeSet);
    const encryptor = this.encryptor;
    assert(encryptor, 'a ledger secret exists before transactions');
    const privateBytes = encoded.privateBytes.length > 0 ? encryptor.encryptPrivate(view, seqno, encoded.privateBytes) : new Uint8Array(0);
    const commitEvidence = formatCommitEvidence(view, seqno, this.commitEvidenceNonce!(view, seqno));
    const commitEvidenceDigest = sha256(utf8.encode(commitEvidence));
    let entryFlags = flags;
    if ((flags & EntryFlags.SIGNATURE) !== 0) {
      const end = shouldEndChunk({
        chunkBytesSoFar: this.chunkBytes,
        chunkSizeBytes: this.init.config.ledger.chunk_size,
        isSignature: true,
        forced: this.forceChunkEnd,
      });
      if (end) entryFlags |= EntryFlags.CHUNK_END;
    }
    const entry = encodeEntry({
      view,
      seqno,
      flags: entryFlags,
      claimsDigest: ZERO_DIGEST,
      commitEvidenceDigest,
      publicBytes: encoded.publicBytes,
      privateBytes,
    });
    if ((entryFlags & EntryFlags.CHUNK_END) !== 0) {
      this.chunkBytes = 0;
      this.forceChunkEnd = false;
    } else {
      this.chunkBytes += entry.byteLength;
    }
    this.tree.append(leafDigest(sha256(concatBytes([encoded.publicBytes, privateBytes])), commitEvidenceDigest, ZERO_DIGEST));
    this.pendingEntries.push(entry);
    return { view, seqno };
  }

  private afterWrite(): void {
    const { tx_count, delay } = this.init.config.ledger_signatures;
    if (this.unsignedCount >= tx_count) {
      this.emitSignature();
    } else if (this.signatureTimer === undefined) {
      this.signatureTimer = this.init.clock.setTimer(delay, () => {
        this.signatureTimer = undefined;
        if (this.unsignedCount > 0 && this.lifecycle === 'PartOfNetwork') {
          this.emitSignature();
          this.scheduleFlush();
        }
      });
    }
    this.scheduleFlush();
  }

  /** Requests that the next signature ends the current ledger chunk (trigger_ledger_chunk). */
  forceLedgerChunk(): void {
    this.forceChunkEnd = true;
  }

  /** A signature transaction: the Merkle root over every entry so far, signed with the node key. */
  private emitSignature(): void {
    assert(this.nodeKeys, 'node identity exists');
    if (this.signatureTimer) {
      this.signatureTimer.cancel();
      this.signatureTimer = undefined;
    }
    const root = this.tree.root();
    const seqno = this.store.version + 1;
    const record: SignatureRecord = {
      view: this.view,
      seqno,
      root: toHex(root),
      sig: Buffer.from(signEcdsa(this.nodeKeys.privateKey, root, 'der')).toString('base64'),
      node: this.nodeId,
      commit_seqno: this.commitSeqno,
      commit_view: this.view,
      cert: this.nodeCertificatePem,
    };
    const tx = this.store.beginTx();
    tx.map(Tables.signatures, json).put(SINGLETON_KEY, record);
    const committed = tx.commit();
    assert(committed && committed.version === seqno, 'signature transaction takes the next seqno');
    this.appendTransaction(seqno, committed.writeSet, EntryFlags.SIGNATURE);
    this.unsignedCount = 0;
    this.lastSignedSeqno = seqno;
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    this.init.clock.defer(() => {
      this.flushScheduled = false;
      this.flush();
    });
  }

  /** Appends pending entries to the ledger, then (single node) commits up to the last signature. */
  private flush(): void {
    if (this.pendingEntries.length > 0) {
      const batch = this.pendingEntries;
      this.pendingEntries = [];
      this.ledger.append(batch);
    }
    if (this.lastSignedSeqno > this.commitSeqno && this.ledger.lastSeqno >= this.lastSignedSeqno) {
      this.advanceCommit(this.lastSignedSeqno);
    }
  }

  private advanceCommit(seqno: number): void {
    assert(seqno >= this.commitSeqno, 'commit never goes back');
    this.commitSeqno = seqno;
    this.ledger.commit(seqno);
    this.store.compact(seqno);
    this.tree.compactBefore(Math.max(0, seqno - 1));
    while (this.commitWaiters.length > 0 && this.commitWaiters[0]!.seqno <= seqno) this.commitWaiters.shift()!.resolve();
    for (const listener of this.commitListeners) listener(seqno);
  }

  /** Resolves once `seqno` is committed. */
  waitForCommit(seqno: number): Promise<void> {
    if (seqno <= this.commitSeqno) return Promise.resolve();
    return new Promise((resolve) => {
      // Waiters arrive in seqno order on the primary; keep the queue sorted regardless.
      let i = this.commitWaiters.length;
      while (i > 0 && this.commitWaiters[i - 1]!.seqno > seqno) i--;
      this.commitWaiters.splice(i, 0, { seqno, resolve });
    });
  }

  onCommit(listener: (seqno: number) => void): void {
    this.commitListeners.push(listener);
  }

  // ---------------------------------------------------------------- reports

  commitTxId(): TxId {
    return { view: this.viewOf(this.commitSeqno), seqno: this.commitSeqno };
  }

  private viewOf(seqno: number): number {
    let view = this.viewStarts[0]?.view ?? 0;
    for (const s of this.viewStarts) if (s.seqno <= seqno) view = s.view;
    return view;
  }

  viewHistory(since = 0): string[] {
    return this.viewStarts.filter((s) => s.view >= since).map((s) => `${s.view}.${s.seqno}`);
  }

  statusOf(txId: TxId): TxStatus {
    return txStatus(txId, {
      currentView: this.view,
      lastSeqno: this.store.version,
      commitSeqno: this.commitSeqno,
      history: { viewStarts: this.viewStarts },
    });
  }

  stateReport(): NodeStateReport {
    return { node_id: this.nodeId, state: this.lifecycle, last_signed_seqno: this.lastSignedSeqno, startup_seqno: this.startupSeqno };
  }

  isPrimary(): boolean {
    return this.lifecycle === 'PartOfNetwork';
  }

  consensusReport(): ConsensusReport {
    const nodes: Record<string, { address: string }> = {};
    nodes[this.nodeId] = { address: this.init.config.node_to_node_interface.published_address };
    return {
      current_view: this.view,
      primary_id: this.isPrimary() ? this.nodeId : undefined,
      role: this.isPrimary() ? 'Primary' : 'None',
      commit_seqno: this.commitSeqno,
      last_seqno: this.store.version,
      configs: [{ seqno: 1, nodes }],
      acks: {},
    };
  }

  serviceInfo(): ServiceInfo | undefined {
    return this.executeRead((tx) => tx.map(Tables.serviceInfo, json).get(SINGLETON_KEY) as ServiceInfo | undefined);
  }

  networkReport(): NetworkReport {
    const info = this.serviceInfo();
    return {
      service_status: info?.status ?? 'Opening',
      service_certificate: info?.cert ?? this.serviceCertificatePem,
      recovery_count: info?.recovery_count ?? 0,
      service_data: info?.service_data ?? null,
      current_view: this.view,
      primary_id: this.isPrimary() ? this.nodeId : undefined,
      current_service_create_txid: info?.current_service_create_txid,
    };
  }

  listNodes(): NodeSummary[] {
    return this.executeRead((tx) => {
      const out: NodeSummary[] = [];
      tx.map(Tables.nodesInfo, json).forEach((info: NodeInfo, id: string) => {
        out.push({
          node_id: id,
          status: info.status,
          primary: id === this.nodeId && this.isPrimary(),
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

  /** The ledger entry bytes of a seqno (for receipts and historical queries). */
  ledgerEntry(seqno: number): ReturnType<typeof decodeEntry> {
    return decodeEntry(this.ledger.getEntry(seqno));
  }

  writeSetDigestOf(seqno: number): Uint8Array {
    return writeSetDigest(this.ledgerEntry(seqno));
  }

  stop(): void {
    if (this.signatureTimer) this.signatureTimer.cancel();
    if (this.pendingEntries.length > 0) this.flush();
    if (this.ledger) this.ledger.sync();
    this.lifecycle = 'Stopped';
  }
}
