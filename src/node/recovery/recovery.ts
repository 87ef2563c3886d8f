/**
 * The recovering service's side of a disaster recovery, after the Recover flow read the public
 * ledger (src/node/flows/recover.ts): collecting the members' recovery shares on the primary,
 * then, on every node, reading the private domain of the previous service's entries and opening
 * the service (spec "Disaster recovery procedure" 4; docs/recovery.md).
 *
 * - Shares: members read their encrypted share (`encryptedShare`) and submit it decrypted
 *   (`submitShare`). The primary collects them in a ShareCollection (src/recovery) built from the
 *   recorded issue of shares and the previous-secret records of the ledger; each accepted share is
 *   stored encrypted (Tables.submittedShares), so a new primary rebuilds the collection from the
 *   store. At the threshold, the recovered chain of ledger secrets is written, encrypted under a
 *   key every trusted node derives from the service key (Tables.recoveredLedgerSecrets).
 * - Private domain: every node that applies that record installs the previous secrets in front of
 *   its chain and reads the private domain of the previous service's entries from its own ledger
 *   (from its startup snapshot when it has one) into a side store, which then replays what the
 *   node committed meanwhile (a joiner of a service that already opened applies new private writes)
 *   and hands its private maps to the store at the committed version, under any writes above it:
 *   PartOfPublicNetwork → ReadingPrivateLedger → PartOfNetwork.
 * - Open: the primary, once it has read its private domain, opens the service (status Open,
 *   recovery_count + 1), records the previous service's latest secret under this service's first
 *   one (so the next recovery's chain reaches back through it) and drops the recovered chain's
 *   record. The recovery node renames its `.recovery` ledger files once the Open is committed.
 */
import { assert } from '../../base/assert.js';
import { utf8 } from '../../base/bytes.js';
import type { Clock } from '../../base/clock.js';
import type { TxId } from '../../base/ids.js';
import { errorMessage } from '../../base/errors.js';
import type { Logger } from '../../base/log.js';
import { copyValue, SnapshotLoader, Store, type TableDef, type Tx } from '../../kv/index.js';
import type { EntryLeavesRequest, EntryReplayer, ReplayedEntries } from '../../ledger/index.js';
import {
  type ChainSecret,
  type RandomBytes,
  type RecordedSharing,
  ShareCollection,
  type StoredSubmittedShare,
  decryptSubmittedShare,
  encryptSubmittedShare,
  notWaitingForShares,
  RecoveryError,
  sealPreviousSecret,
  submittedShareStorageKey,
} from '../../recovery/index.js';
import { nodeError } from '../errors.js';
import type { LedgerSecrets } from '../identity/ledger-secrets.js';
import type { ServiceIdentity } from '../identity/service-identity.js';
import type { Lifecycle, LifecycleTrigger } from '../lifecycle.js';
import { FLOW_TRIGGERS } from '../lifecycle.js';
import { recoveryReadBatchBytesMax, recoveryReadBatchEntriesMax } from '../limits.js';
import type { Replica } from '../replica.js';
import { loadSnapshotInSlices } from '../snapshot-loading.js';
import type { StartupSnapshot } from '../snapshots.js';
import { SINGLETON_KEY, TableDefs, Tables, type OpenKindRecord, type RecoveredSecretsRecord } from '../tables.js';
import { ledgerEntries, phaseSummary, ReadProgress, type ReadEntry } from './public-ledger.js';
import type { DecisionDriver } from './decision-driver.js';

/** The row name under which the recovered chain is encrypted (member ids are hex digests: no clash). */
const RECOVERED_CHAIN_ROW = ':recovered_ledger_secrets';

/** The recovery edges the private phase takes, on a recovery node or a node that joined the recovering service. */
const PRIVATE_PHASE_TRIGGERS: readonly LifecycleTrigger[] = FLOW_TRIGGERS.recover;

export interface RecoveryHost {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly replica: Replica;
  readonly secrets: LedgerSecrets;
  readonly service: ServiceIdentity;
  readonly lifecycle: Lifecycle;
  readonly randomBytes: RandomBytes;
  isPrimary(): boolean;
  executeRead<T>(fn: (tx: Tx) => T): T;
  executeWrite(fn: (tx: Tx) => void): { readonly txId?: TxId | undefined };
  /** Runs `fn` soon, outside the current call (store listeners must not write). */
  defer(fn: () => void): void;
  yieldControl(): Promise<void>;
  persistState(): void;
  /** Takes a lifecycle edge (and updates what the new state allows). */
  transition(trigger: LifecycleTrigger, allowed: readonly LifecycleTrigger[]): void;
  /** Reads and decrypts the previous service's entries off this thread (NodeInit.entryReplayer); without it, on this thread. */
  readonly entryReplayer?: EntryReplayer | undefined;
}

/** The answer to a submitted share. */
export interface ShareSubmission {
  readonly message: string;
  readonly submitted_count: number;
  readonly recovery_threshold: number;
  /** The transaction that kept the share (not part of the JSON answer: the x-covenant-transaction-id header). */
  readonly txId: TxId | undefined;
}

export class Recovery {
  private collection: Promise<ShareCollection> | undefined;
  private privatePhase: Promise<void> | undefined;
  /** The snapshot the recovery node read the public ledger from: the private domain is read from it too. */
  startupSnapshot: StartupSnapshot | undefined;

  /** The recovery decision protocol this node runs (sealing-based recovery), if any. */
  private decision: DecisionDriver | undefined;

  constructor(private readonly host: RecoveryHost) {}

  attachDecision(driver: DecisionDriver): void {
    this.decision = driver;
  }

  /** The decision protocol's phase and what it waits for, while one runs (GET /node/state). */
  decisionStatus(): string | undefined {
    return this.decision?.status();
  }

  close(): void {
    void this.decision?.close();
  }

  /** Wires the store's listeners (on the store and any store that replaces it). */
  watch(store: Store): void {
    store.onMapApplied(Tables.serviceInfo, () => this.onServiceRecord());
    // The rename must not be undone: only once consensus commits this service's Open.
    store.onMapCommitted(Tables.serviceInfo, (version) => {
      if (version >= this.host.replica.serviceStartSeqno) this.host.defer(() => this.completeRecoveryIfOpenCommitted());
    });
    store.onMapApplied(Tables.recoveredLedgerSecrets, (version, writes) => {
      const raw = writes.get(SINGLETON_KEY);
      if (raw === undefined || raw === null) return;
      // A record an earlier recovery wrote (a joiner of a second recovery replicates it with the
      // old entries) is under that service's key: only this service's record starts the phase.
      if (version < this.host.replica.serviceStartSeqno) return;
      const record = TableDefs.recoveredLedgerSecrets.codec.decode(raw);
      this.host.defer(() => this.startPrivatePhase(record));
    });
  }

  /**
   * A primary change: the collection is rebuilt from the store by whichever node is primary, and a
   * new primary that has read its private domain opens the service if the last one did not.
   */
  onRoleChange(primary: boolean): void {
    this.dropCollection();
    if (primary) this.host.defer(() => this.openIfReady());
  }

  // ---------------------------------------------------------------- shares

  /** A member's encrypted share of the last issue (GET /gov/recovery/encrypted-shares/{member_id}). */
  encryptedShare(memberId: string): { encrypted_share: string } {
    const record = this.host.executeRead((tx) => tx.table(TableDefs.recoveryShares).get(SINGLETON_KEY));
    const share = record?.encrypted_shares[memberId];
    if (share === undefined) throw nodeError('RecoveryShareNotFound', `member ${memberId} holds no recovery share`);
    return { encrypted_share: share };
  }

  /**
   * A member's decrypted share (POST /gov/recovery/members/{member_id}:recover). `record` runs in
   * the transaction that keeps the outcome (the governance layer's replay check and history);
   * a refused share changes nothing.
   */
  async submitShare(memberId: string, share: Uint8Array, record: (tx: Tx) => void): Promise<ShareSubmission> {
    this.checkWaiting();
    const collection = await this.openCollection();
    const outcome = await collection.submit(memberId, share);
    let txId: TxId | undefined;
    try {
      txId = this.host.executeWrite((tx) => {
        // The collection checked the share against the store as it was read; the transaction that
        // records it checks again what may have changed meanwhile.
        this.checkWaiting(tx);
        if (tx.table(TableDefs.submittedShares).has(memberId)) throw new RecoveryError('ShareAlreadySubmitted', `member ${memberId} has already submitted a share`, { memberId });
        record(tx);
        if (outcome.status === 'Accepted') {
          tx.table(TableDefs.submittedShares).put(memberId, Buffer.from(outcome.storedShare).toString('base64'));
          return;
        }
        tx.table(TableDefs.recoveredLedgerSecrets).put(SINGLETON_KEY, this.recoveredRecordOf(outcome.ledgerSecrets));
        clearMap(tx, TableDefs.submittedShares);
      }).txId;
    } catch (e) {
      // The collection holds a share the store does not: rebuilt from the store next time.
      this.dropCollection();
      throw e;
    }
    if (outcome.status === 'Recovered') {
      this.dropCollection();
      this.host.logger.info(`recovery shares: ${outcome.submittedCount} of ${outcome.threshold} submitted; the ledger secrets are recovered`);
      return { message: 'the ledger secrets are recovered; the service opens once the private ledger is read', submitted_count: outcome.submittedCount, recovery_threshold: outcome.threshold, txId };
    }
    const more = outcome.threshold - outcome.submittedCount;
    this.host.logger.info(`recovery shares: ${outcome.submittedCount} of ${outcome.threshold} submitted`);
    return { message: `${outcome.submittedCount} recovery share(s) of ${outcome.threshold} submitted; ${more} more needed`, submitted_count: outcome.submittedCount, recovery_threshold: outcome.threshold, txId };
  }

  /** The recovered chain for every node of the service, encrypted under the storage key. */
  private recoveredRecordOf(chain: readonly ChainSecret[]): RecoveredSecretsRecord {
    const storageKey = submittedShareStorageKey(this.host.service.keyPem);
    const plain = JSON.stringify(chain.map((s) => ({ from_seqno: s.fromSeqno, secret: Buffer.from(s.secret).toString('base64') })));
    const encrypted = encryptSubmittedShare(storageKey, RECOVERED_CHAIN_ROW, utf8.encode(plain), this.host.randomBytes);
    return { encrypted_chain: Buffer.from(encrypted).toString('base64'), last_recovered_seqno: this.host.replica.serviceStartSeqno - 1 };
  }

  /**
   * Sealing-based recovery: the recovery decision protocol chose this node, which unsealed the
   * chain of ledger secrets itself. It opens the service with no member vote or share: the
   * service waits for nothing, the recovered chain is recorded as at the share threshold, and
   * open_kind says how the protocol decided; every node then reads its private domain and the
   * primary opens the service.
   */
  openWithUnsealedSecrets(chain: readonly ChainSecret[], openKind: OpenKindRecord): TxId | undefined {
    return this.host.executeWrite((tx) => {
      const infoMap = tx.table(TableDefs.serviceInfo);
      const info = infoMap.get(SINGLETON_KEY);
      assert(info?.status === 'Recovering', 'a service opened by the recovery decision protocol is recovering');
      infoMap.put(SINGLETON_KEY, { ...info, status: 'WaitingForRecoveryShares' });
      tx.table(TableDefs.recoveredLedgerSecrets).put(SINGLETON_KEY, this.recoveredRecordOf(chain));
      tx.table(TableDefs.recoveryDecisionOpenKind).put(SINGLETON_KEY, openKind);
    }).txId;
  }

  private checkWaiting(tx?: Tx): void {
    if (!this.host.isPrimary()) throw nodeError('NotPrimary', 'recovery shares are submitted to the primary');
    const read = (t: Tx) => t.table(TableDefs.serviceInfo).get(SINGLETON_KEY);
    const info = tx !== undefined ? read(tx) : this.host.executeRead(read);
    if (info?.status !== 'WaitingForRecoveryShares') {
      throw notWaitingForShares(`the service is ${info?.status ?? 'not created'}, not waiting for recovery shares (members vote transition_service_to_open first)`);
    }
  }

  private openCollection(): Promise<ShareCollection> {
    if (this.collection === undefined) {
      const building = this.buildCollection();
      this.collection = building;
      building.catch(() => {
        if (this.collection === building) this.collection = undefined;
      });
    }
    return this.collection;
  }

  private async buildCollection(): Promise<ShareCollection> {
    const { sharing, stored } = this.host.executeRead((tx) => {
      const record = tx.table(TableDefs.recoveryShares).get(SINGLETON_KEY);
      if (record === undefined) throw notWaitingForShares('the recovered ledger records no recovery shares: it cannot be recovered with member shares');
      const previousSecretRecords: Uint8Array[] = [];
      tx.table(TableDefs.previousLedgerSecrets).forEach((b64) => void previousSecretRecords.push(fromBase64(b64)));
      const submitted: StoredSubmittedShare[] = [];
      tx.table(TableDefs.submittedShares).forEach((b64, memberId) => void submitted.push({ memberId, storedShare: fromBase64(b64) }));
      const recorded: RecordedSharing = {
        recoveryMemberIds: Object.keys(record.encrypted_shares),
        threshold: record.threshold,
        sharingId: new Uint8Array(Buffer.from(record.sharing_id, 'hex')),
        wrappedLatestSecret: fromBase64(record.wrapped_latest_secret),
        previousSecretRecords,
      };
      return { sharing: recorded, stored: submitted };
    });
    const storageKey = submittedShareStorageKey(this.host.service.keyPem);
    return ShareCollection.fromStore(sharing, storageKey, stored, this.host.randomBytes);
  }

  private dropCollection(): void {
    const collection = this.collection;
    this.collection = undefined;
    void collection?.then((c) => c.close()).catch(() => undefined);
  }

  private onServiceRecord(): void {
    const info = this.host.replica.store.currentRaw(Tables.serviceInfo, SINGLETON_KEY);
    if (info === undefined) return;
    if (TableDefs.serviceInfo.codec.decode(info).status !== 'WaitingForRecoveryShares') this.dropCollection();
  }

  /**
   * The recovery node renames its `.recovery` ledger files once this service's Open is committed
   * (a view change may undo an Open only applied), and once it has read its private domain: not
   * while the previous service's records are read (they say Open too).
   */
  private completeRecoveryIfOpenCommitted(): void {
    const { replica, lifecycle } = this.host;
    const { ledger, store } = replica;
    if (!ledger.recoveryMode || lifecycle.state !== 'PartOfNetwork' || store.committedVersion < replica.serviceStartSeqno) return;
    const info = store.readAt(store.committedVersion).table(TableDefs.serviceInfo).get(SINGLETON_KEY);
    if (info?.status !== 'Open') return;
    ledger.completeRecovery();
    this.host.persistState();
    this.host.logger.info('recovery complete: the .recovery ledger files are renamed');
  }

  // ---------------------------------------------------------------- the private domain

  private startPrivatePhase(record: RecoveredSecretsRecord): void {
    if (this.privatePhase !== undefined || this.host.lifecycle.state !== 'PartOfPublicNetwork') return;
    this.privatePhase = this.readPrivateDomain(record).catch((e: unknown) => {
      this.host.logger.fatal(`reading the private ledger failed: ${errorMessage(e)}`);
      throw e;
    });
  }

  private async readPrivateDomain(record: RecoveredSecretsRecord): Promise<void> {
    const { host } = this;
    host.transition('shares-reassembled', PRIVATE_PHASE_TRIGGERS);
    const startedMs = host.clock.monotonicMs();
    const chain = this.chainOf(record);
    const firstHeld = host.secrets.linkFor(0).fromSeqno;
    host.secrets.installOlder(chain.filter((s) => s.fromSeqno < firstHeld));
    host.persistState();
    const privateStore = await this.replayPrivate(record.last_recovered_seqno);
    if (!(await this.catchUpAndInstall(privateStore))) {
      this.host.logger.info(`the private phase ends unfinished: the node is ${host.lifecycle.state}`);
      return;
    }
    host.transition('private-ledger-restored', PRIVATE_PHASE_TRIGGERS);
    const entries = record.last_recovered_seqno - (this.startupSnapshot?.seqno ?? 0);
    this.host.logger.info(
      `the private domain of the previous service is restored; private phase: ${phaseSummary(entries, host.clock.monotonicMs() - startedMs)}, from ReadingPrivateLedger to PartOfNetwork`,
    );
    if (host.isPrimary()) host.defer(() => this.openIfReady());
    // The Open may have committed while this node read its private domain.
    host.defer(() => this.completeRecoveryIfOpenCommitted());
  }

  /** The recovered chain of ledger secrets, oldest first, from its record. */
  private chainOf(record: RecoveredSecretsRecord): ChainSecret[] {
    const storageKey = submittedShareStorageKey(this.host.service.keyPem);
    const plain = decryptSubmittedShare(storageKey, RECOVERED_CHAIN_ROW, fromBase64(record.encrypted_chain));
    return (JSON.parse(utf8.decode(plain)) as { from_seqno: number; secret: string }[]).map((s) => ({ fromSeqno: s.from_seqno, secret: fromBase64(s.secret) }));
  }

  /** The previous service's entries, public and private domains, into a store of their own. */
  private async replayPrivate(lastSeqno: number): Promise<Store> {
    const { logger, clock } = this.host;
    const snapshot = this.startupSnapshot;
    const from = snapshot !== undefined ? snapshot.seqno : 0;
    // Nothing reads this store's older versions: each batch is folded into its state at once and
    // compacted, so that no write set outlives its batch (few survive a young collection).
    const options = { checkpointInterval: recoveryReadBatchEntriesMax };
    // Loaded over many turns (snapshot-loading.ts): the node keeps serving its part of the recovered service meanwhile.
    const loader = snapshot !== undefined ? new SnapshotLoader(snapshot.parts.kv, this.host.secrets.framingFor(snapshot.seqno).encryptor, options) : undefined;
    const store = loader !== undefined ? await loadSnapshotInSlices(clock, loader) : new Store(options);
    assert(store !== undefined, 'a load that is never stopped gives a store');
    logger.info(`reading the private domain of the ledger: entries ${from + 1}..${lastSeqno}`);
    const progress = new ReadProgress('reading the private ledger', lastSeqno, logger, clock);
    const replayer = this.host.entryReplayer;
    if (replayer === undefined || lastSeqno <= from) await this.replayHere(store, from + 1, lastSeqno, progress);
    else await this.replayOnThreads(replayer, store, from + 1, lastSeqno, progress);
    assert(store.version === lastSeqno, `the private domain is read up to seqno ${lastSeqno} (read ${store.version})`);
    store.compact(store.version);
    logger.info(`private ledger read: ${progress.summary()}`);
    return store;
  }

  /**
   * The store applied entries of the recovered service while the previous service's were read
   * (a joiner of a service that already opened applies its new private writes too): `replayed`
   * replays them as well, up to the store's committed version (never rolled back), and the store
   * then takes its private maps there, in the same turn, under the writes of any versions above.
   * False if the node left ReadingPrivateLedger meanwhile (it stopped).
   */
  private async catchUpAndInstall(replayed: Store): Promise<boolean> {
    const { replica, logger, clock } = this.host;
    const progress = new ReadProgress('catching up with the recovered service', Math.max(replayed.version, replica.store.committedVersion), logger, clock);
    for (;;) {
      if (this.host.lifecycle.state !== 'ReadingPrivateLedger') return false;
      const committed = replica.store.committedVersion;
      if (committed < replayed.version) {
        // The previous service's last entry is not yet committed here: wait for consensus.
        await new Promise<void>((resolve) => clock.setTimer(CATCH_UP_WAIT_MS, resolve));
        continue;
      }
      if (committed - replayed.version > recoveryReadBatchEntriesMax) {
        await this.replayHere(replayed, replayed.version + 1, committed, progress);
        continue;
      }
      // Few enough to replay in this turn: nothing commits or rolls back meanwhile.
      for (const batch of ledgerEntries(replica, replayed.version + 1, committed)) this.applyBatch(replayed, batch);
      replica.store.installPrivateMaps(replayed.current());
      return true;
    }
  }

  /** Entries first..last, read and decrypted on this thread, into `store`. */
  private async replayHere(store: Store, first: number, last: number, progress: ReadProgress): Promise<void> {
    const { replica } = this.host;
    for (const batch of ledgerEntries(replica, first, last)) {
      const bytes = this.applyBatch(store, batch);
      progress.add(batch.length, bytes, batch.at(-1)!.seqno);
      await this.host.yieldControl();
    }
  }

  /** One batch of entries read from the ledger, applied to `store` in both domains; returns their frames' bytes. */
  private applyBatch(store: Store, batch: readonly ReadEntry[]): number {
    const { replica } = this.host;
    let bytes = 0;
    for (const item of batch) {
      const decoded = item.entry;
      if (decoded === undefined) throw nodeError('LedgerEntryUnreadable', `entry ${item.seqno} cannot be read: ${item.error}`);
      store.applyWriteSet(decoded.seqno, decoded.publicBytes, replica.privatePlainOf(decoded));
      bytes += decoded.frameSizeBytes;
    }
    store.compact(store.version);
    return bytes;
  }

  /**
   * The same, read and decrypted on the entry replayer's threads a few ranges ahead of the range
   * this thread applies (decrypting is most of the work). A range they cannot replay is replayed
   * here, which reports the entry that stops it as replayHere does.
   */
  private async replayOnThreads(replayer: EntryReplayer, store: Store, first: number, last: number, progress: ReadProgress): Promise<void> {
    const { replica } = this.host;
    const secrets = this.host.secrets.records().map((r) => ({ fromSeqno: r.from_seqno, secret: fromBase64(r.secret) }));
    const inFlight: { first: number; last: number; replayed: Promise<ReplayedEntries | undefined> }[] = [];
    let next = first;
    const requestAhead = (): void => {
      while (inFlight.length < REPLAY_RANGES_AHEAD && next <= last) {
        const range = replayRange(replica, next, last);
        next = range.last + 1;
        const replayed = range.request === undefined ? Promise.resolve(undefined) : replayer.replayOf({ ...range.request, secrets }).catch(() => undefined);
        inFlight.push({ first: range.first, last: range.last, replayed });
      }
    };
    try {
      requestAhead();
      for (let range = inFlight.shift(); range !== undefined; range = inFlight.shift()) {
        requestAhead();
        const replayed = await range.replayed;
        if (replayed === undefined) {
          await this.replayHere(store, range.first, range.last, progress);
          continue;
        }
        const { packed, bounds } = replayed;
        for (let seqno = range.first, i = 0; seqno <= range.last; seqno++, i += 2) {
          // The private values the store keeps are views of a copy of their own, not of the whole range.
          store.applyWriteSet(seqno, packed.subarray(bounds[i]!, bounds[i + 1]!), copyValue(packed.subarray(bounds[i + 1]!, bounds[i + 2]!)));
        }
        store.compact(store.version);
        progress.add(range.last - range.first + 1, replayed.frameBytes, range.last);
        await this.host.yieldControl();
      }
    } finally {
      replayer.release();
    }
  }

  /** The primary opens the recovered service, once it has read its own private domain. */
  private openIfReady(): void {
    const { host } = this;
    if (!host.isPrimary() || host.lifecycle.state !== 'PartOfNetwork') return;
    const record = host.executeRead((tx) => tx.table(TableDefs.recoveredLedgerSecrets).get(SINGLETON_KEY));
    if (record === undefined) return;
    const first = host.secrets.linkFor(host.replica.serviceStartSeqno);
    try {
      const previousLatest = this.chainOf(record).at(-1)!;
      host.executeWrite((tx) => {
        const infoMap = tx.table(TableDefs.serviceInfo);
        const info = infoMap.get(SINGLETON_KEY);
        assert(info !== undefined, 'a recovering service has its service record');
        if (info.status !== 'WaitingForRecoveryShares') return;
        infoMap.put(SINGLETON_KEY, { ...info, status: 'Open', recovery_count: info.recovery_count + 1 });
        const sealed = sealPreviousSecret({ fromSeqno: first.fromSeqno, secret: first.secret }, previousLatest, host.randomBytes);
        tx.table(TableDefs.previousLedgerSecrets).put(String(previousLatest.fromSeqno), Buffer.from(sealed).toString('base64'));
        tx.table(TableDefs.recoveredLedgerSecrets).remove(SINGLETON_KEY);
      });
      host.logger.info('the recovered service is open');
    } catch (e) {
      host.logger.fail(`opening the recovered service failed: ${errorMessage(e)}; it is retried when this node is primary again`);
    }
  }
}

/** How long the private phase waits for the previous service's last entry to commit here. */
const CATCH_UP_WAIT_MS = 50;

/** Ranges the entry replayer's threads replay at once (in turn), ahead of the one applied. */
const REPLAY_RANGES_AHEAD = 4;

/**
 * The next range of entries to replay from `first`: at most recoveryReadBatchEntriesMax entries
 * whose frames take at most about recoveryReadBatchBytesMax, as finely as the ledger locates
 * them without reading (request undefined: it cannot locate them, the range is replayed here).
 */
function replayRange(replica: Replica, first: number, last: number): { first: number; last: number; request: EntryLeavesRequest | undefined } {
  let upTo = Math.min(last, first + recoveryReadBatchEntriesMax - 1);
  let request: EntryLeavesRequest;
  try {
    request = replica.ledger.locateEntries(first, upTo);
    while (upTo > first && spanBytes(request) > recoveryReadBatchBytesMax) {
      const half = first + Math.floor((upTo - first) / 2);
      const smaller = replica.ledger.locateEntries(first, half);
      if (spanBytes(smaller) >= spanBytes(request)) break;
      upTo = half;
      request = smaller;
    }
  } catch {
    return { first, last: upTo, request: undefined };
  }
  return { first, last: upTo, request };
}

function spanBytes(request: EntryLeavesRequest): number {
  let bytes = 0;
  for (const span of request.spans) bytes += span.endBytes - span.startBytes;
  return bytes;
}

function clearMap<V>(tx: Tx, table: TableDef<V>): void {
  const map = tx.table(table);
  const keys: string[] = [];
  map.forEach((_, key) => void keys.push(key));
  for (const key of keys) map.remove(key);
}

function fromBase64(b64: string): Uint8Array {
  return new Uint8Array(Buffer.from(b64, 'base64'));
}
