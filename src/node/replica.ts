/**
 * The node's replica of the service state: the store, the Merkle history tree and the ledger,
 * with the seqnos that say how far each has come (commit, last signature, startup snapshot). It
 * is the one owner of these: entries reach it in seqno order (proposed here, replicated from the
 * primary, or replayed from the node's own ledger), and it applies, rolls back, commits and
 * installs snapshots. It knows nothing of consensus: the driver (src/node/driver.ts) tells it what
 * to do and in which order.
 */
import { assert, InvariantError } from '../base/assert.js';
import { toHex } from '../base/bytes.js';
import type { Logger } from '../base/log.js';
import type { Clock } from '../base/clock.js';
import type { KeyObject } from 'node:crypto';
import { loadPublicKey, verifyEcdsa, verifyEcdsaAsync, type SignatureVerifier } from '../crypto/index.js';
import { HistoryTree } from '../merkle/index.js';
import { AES_GCM_TAG_BYTES, SnapshotLoader, Store, copyValue, decodeWriteSet, loadSnapshotAtOnce, type LedgerEncryptor } from '../kv/index.js';
import { loadSnapshotInSlices } from './snapshot-loading.js';
import { type DecodedEntry, type Disk, type EntryLeavesRequest, EntryFlags, Ledger, checkEntry, decodeEntry, entryLeaf, hasFlag, isLedgerError } from '../ledger/index.js';
import type { Configuration, Entry, EntryStretch } from '../consensus/index.js';
import { nodeError } from './errors.js';
import type { LedgerSecrets } from './identity/ledger-secrets.js';
import { recoveryReadBatchBytesMax, recoveryReadBatchEntriesMax, replayUncommittedVersionsMax, snapshotLoadAtOnceBytesMax } from './limits.js';
import { treeOfSnapshot, type StartupSnapshot } from './snapshots.js';
import { configurationOf, signatureRecordOf } from './tables.js';
import { GroupedSync } from './grouped-sync.js';
import { RecoveredEntries } from './recovered-entries.js';
import { SignatureChecks, type SignatureToVerify } from './signature-checks.js';

/** What follows the replica's state: the snapshot manager (src/node/snapshots.ts) and the store's watchers. */
export interface ReplicaObserver {
  afterEntry(entry: DecodedEntry): void;
  onRollback(seqno: number): void;
  onCommit(seqno: number): void;
}

export interface ReplicaInit {
  readonly disk: Disk;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly ledgerDirectory: string;
  readonly readOnlyLedgerDirectories: readonly string[];
  readonly secrets: LedgerSecrets;
  /** ledger.durability: Synced makes every persisted batch durable before it counts (see persist). */
  readonly durability: 'Synced' | 'Replicated';
  /**
   * With durability Synced: replicated signatures are verified by it while their entries sync
   * (src/node/signature-checks.ts). Without: on the request thread, as each is applied.
   */
  readonly signatureVerifier?: SignatureVerifier;
}

export class Replica {
  // The replica is the one writer of its state: others read it through the getters below and
  // change it through the named operations (startFrom, startServiceAt, markSigned, rollbackTo,
  // dropUnproposed, advanceCommit, ...).
  #store = new Store();
  #tree = new HistoryTree();
  private opened: Ledger | undefined;
  #commitSeqno = 0;
  #lastSignedSeqno = 0;
  #startupSeqno = 0;
  #serviceStartSeqno = 0;
  #appliedInClear = 0;
  #appliedDecrypted = 0;
  #signaturesVerifiedWhenApplied = 0;
  private observer: ReplicaObserver | undefined;
  /** Recorded by applyRecoveredPublic, taken by the first entriesFromLedger (consensus creation). */
  private recoveredEntries: RecoveredEntries | undefined;
  /** Recorded by replayEntries (restart), taken likewise: consensus then reads no ledger file again. */
  private replayedEntries: RecoveredEntries | undefined;
  private readonly storeWatchers: ((store: Store) => void)[] = [];
  /** Synced durability: the ledger's grouped, asynchronous sync (from the first persist on). */
  private groupedSync: GroupedSync | undefined;
  private durableListener: (() => void) | undefined;
  /** Replicated signatures being verified (durability Synced with a verifier). */
  private readonly signatureChecks: SignatureChecks | undefined;

  constructor(private readonly init: ReplicaInit) {
    const verifier = init.signatureVerifier;
    if (verifier !== undefined && init.durability === 'Synced') {
      this.signatureChecks = new SignatureChecks({
        verifier,
        onVerified: () => this.durableListener?.(),
        onFailed: (problem) => this.stopOnSignature(problem),
      });
    }
  }

  /** Replaced (once, before consensus starts) when the node starts from a snapshot: see watchStore. */
  get store(): Store {
    return this.#store;
  }

  get tree(): HistoryTree {
    return this.#tree;
  }

  get commitSeqno(): number {
    return this.#commitSeqno;
  }

  get lastSignedSeqno(): number {
    return this.#lastSignedSeqno;
  }

  /** The snapshot this node's ledger starts after (0: it holds every entry from the first). */
  get startupSeqno(): number {
    return this.#startupSeqno;
  }

  /**
   * The first seqno of the current service: after a disaster recovery, the entries before it are
   * the previous service's (0 for a service never recovered).
   */
  get serviceStartSeqno(): number {
    return this.#serviceStartSeqno;
  }

  /** Replicated private write sets applied from the primary's copy in clear, and decrypted (GET /node/consensus). */
  get appliedInClear(): number {
    return this.#appliedInClear;
  }

  get appliedDecrypted(): number {
    return this.#appliedDecrypted;
  }

  /** A start-up flow: this node's ledger starts after the snapshot at `snapshotSeqno` (0: from the first entry). */
  startFrom(snapshotSeqno: number): void {
    assert(Number.isSafeInteger(snapshotSeqno) && snapshotSeqno >= 0, () => `startup seqno ${snapshotSeqno}`);
    this.#startupSeqno = snapshotSeqno;
  }

  /** A start-up flow: the current service starts at `seqno` (a recovery's first entry; 0 for a service never recovered). */
  startServiceAt(seqno: number): void {
    assert(Number.isSafeInteger(seqno) && seqno >= 0, () => `service start seqno ${seqno}`);
    this.#serviceStartSeqno = seqno;
  }

  /** A signature at `seqno` was emitted by this primary, or verified by a recovery reading the ledger. */
  markSigned(seqno: number): void {
    assert(seqno <= this.#store.version, () => `signature ${seqno} above the store's version ${this.#store.version}`);
    this.#lastSignedSeqno = seqno;
  }

  /**
   * Drops transactions applied to the store after `seqno` that were never proposed (consensus
   * refused them, or a deposed primary abandons what it was framing): the tree holds none of them.
   */
  dropUnproposed(seqno: number): void {
    assert(seqno >= this.#commitSeqno && this.#tree.size <= seqno, () => `unproposed transactions after ${seqno} (tree ${this.#tree.size}, commit ${this.#commitSeqno})`);
    this.#store.rollback(seqno);
  }

  observe(observer: ReplicaObserver): void {
    this.observer = observer;
  }

  /** Runs `watch` on the store now and on every store that replaces it (a snapshot install). */
  watchStore(watch: (store: Store) => void): void {
    this.storeWatchers.push(watch);
    watch(this.store);
  }

  /** Whether the ledger is open in recovery mode (new files carry `.recovery`). */
  get recoveryInProgress(): boolean {
    return this.opened?.recoveryMode ?? false;
  }

  get ledger(): Ledger {
    assert(this.opened, 'the ledger is open');
    return this.opened;
  }

  /**
   * Opens the ledger directory (cutting a torn tail); with `requireEmpty`, refuses one that already
   * holds a ledger. With `recovery`, new ledger files carry the `.recovery` suffix until
   * completeRecovery (a disaster recovery in progress).
   */
  openLedger(requireEmpty: { commandType: string } | undefined, options: { recovery?: boolean } = {}): void {
    const opened = new Ledger({
      disk: this.init.disk,
      directory: this.init.ledgerDirectory,
      readOnlyDirectories: this.init.readOnlyLedgerDirectories,
      ...(options.recovery ? { recoverySuffix: true } : {}),
    });
    // Only an opened ledger becomes the node's: stop() must not touch one whose open() failed.
    const report = opened.open();
    this.opened = opened;
    if (report.tornTail) this.init.logger.fail(`ledger: torn tail cut at ${report.tornTail.file}:${report.tornTail.offsetBytes}`);
    if (report.discardedRecoveryFiles.length > 0) this.init.logger.info(`ledger: discarded the files of an unfinished recovery: ${report.discardedRecoveryFiles.join(', ')}`);
    if (requireEmpty && opened.lastSeqno > 0) {
      throw nodeError(
        'LedgerAlreadyExists',
        `ledger directory "${this.init.ledgerDirectory}" already holds a ledger (up to seqno ${opened.lastSeqno}); ` +
          `command.type ${requireEmpty.commandType} needs an empty ledger directory (use Recover to restore a service from an existing ledger)`,
      );
    }
  }

  /**
   * The store of a snapshot. A recovering node holds no secret of the snapshot's service yet and
   * loads its public maps only. A snapshot small enough to load within one slice is loaded at once
   * (in this turn: a flow continues without yielding); a larger one over many turns
   * (snapshot-loading.ts), undefined when the node stopped meanwhile. Use as
   * `replica.snapshotStoreAtOnce(s) ?? (await replica.snapshotStoreInSlices(s, stopped))`.
   */
  snapshotStoreAtOnce(snapshot: StartupSnapshot): Store | undefined {
    if (snapshot.parts.kv.byteLength > snapshotLoadAtOnceBytesMax) return undefined;
    return loadSnapshotAtOnce(snapshot.parts.kv, this.snapshotEncryptor(snapshot.seqno));
  }

  async snapshotStoreInSlices(snapshot: StartupSnapshot, stopped: () => boolean): Promise<Store | undefined> {
    const started = this.init.clock.monotonicMs();
    const loader = new SnapshotLoader(snapshot.parts.kv, this.snapshotEncryptor(snapshot.seqno));
    const store = await loadSnapshotInSlices(this.init.clock, loader, stopped);
    if (store !== undefined) this.init.logger.info(`store of ${snapshot.name} loaded in ${Math.round(this.init.clock.monotonicMs() - started)}ms over ${loader.slices} turns of the event loop`);
    return store;
  }

  private snapshotEncryptor(seqno: number): LedgerEncryptor | undefined {
    const secrets = this.init.secrets;
    return secrets.covers(seqno) ? secrets.framingFor(seqno).encryptor : undefined;
  }

  /** Takes the store loaded from a snapshot and the Merkle tree it carries; a fresh joiner also starts its ledger after it. */
  installSnapshot(snapshot: StartupSnapshot, store: Store, startLedger: boolean): void {
    assert(store.version === snapshot.seqno, 'the store is the snapshot\'s');
    const started = this.init.clock.monotonicMs();
    this.#store = store;
    for (const watch of this.storeWatchers) watch(this.store);
    this.#tree = treeOfSnapshot(snapshot.parts.meta, this.store);
    if (startLedger) {
      this.ledger.startAt(snapshot.seqno);
      // The ledger now starts after the snapshot, which is durable in its own file.
      this.groupedSync?.reset(snapshot.seqno);
    }
    this.#commitSeqno = snapshot.seqno;
    this.#lastSignedSeqno = snapshot.seqno;
    this.init.logger.info(`store and Merkle tree installed from ${snapshot.name} in ${Math.round(this.init.clock.monotonicMs() - started)}ms`);
  }

  /**
   * Replays the node's own ledger after `fromSeqno` at restart, in one call (entries were checked
   * when first written). A node replays in slices instead (restart-slices.ts: replayEntries a
   * bounded number at a time, then finishReplay), to the same store, tree and commit.
   */
  replay(fromSeqno: number): void {
    const started = this.init.clock.monotonicMs();
    this.replayEntries(fromSeqno + 1, this.ledger.lastSeqno);
    this.finishReplay(fromSeqno, started);
  }

  /** Applies the ledger's entries `firstSeqno`..`lastSeqno` (the next ones to replay), compacting as it goes. */
  replayEntries(firstSeqno: number, lastSeqno: number): void {
    assert(firstSeqno === this.store.version + 1 && lastSeqno <= this.ledger.lastSeqno, () => `replaying ${firstSeqno}..${lastSeqno} after ${this.store.version}`);
    for (let seqno = firstSeqno; seqno <= lastSeqno; seqno++) {
      const decoded = decodeEntry(this.ledger.getEntry(seqno));
      this.applyEntry(decoded);
      this.replayedEntries ??= new RecoveredEntries(seqno);
      this.replayedEntries.add(seqno, decoded.view, hasFlag(decoded.flags, EntryFlags.SIGNATURE), this.configurationIn(decoded));
      if (this.store.version > this.store.committedVersion + replayUncommittedVersionsMax) {
        this.store.compact(Math.min(this.ledger.committedSeqno, this.store.version));
      }
    }
  }

  /**
   * Compacts the replayed versions up to the ledger's commit: a sliced replay does so after each
   * slice, so that no turn folds more than a slice's versions (replayEntries alone folds
   * replayUncommittedVersionsMax at a time). The state is the same either way.
   */
  compactReplayed(): void {
    const to = Math.min(this.ledger.committedSeqno, this.store.version);
    if (to > this.store.committedVersion) this.store.compact(to);
  }

  /** Once every entry after `fromSeqno` is replayed: the commit is the ledger's, and the store compacted to it. */
  finishReplay(fromSeqno: number, startedMs: number, turns = 1): void {
    const last = this.ledger.lastSeqno;
    assert(this.store.version === last, () => `replayed up to ${this.store.version} of ${last}`);
    this.#commitSeqno = Math.max(this.ledger.committedSeqno, fromSeqno);
    this.store.compact(this.commitSeqno);
    this.init.logger.info(
      `replayed ${last - fromSeqno} ledger entries in ${Math.round(this.init.clock.monotonicMs() - startedMs)}ms over ${turns} turn(s) of the event loop (committed up to ${this.commitSeqno})`,
    );
  }

  /** Applies an entry received from the primary: checks signatures, applies the write sets (decrypting them unless the primary sent them in clear). */
  applyReplicated(entry: Entry): void {
    assert(entry.seqno === this.store.version + 1, `replicated entries apply in order (${entry.seqno} after ${this.store.version})`);
    const decoded = decodeEntry(entry.bytes);
    assert(decoded.seqno === entry.seqno && decoded.view === entry.view, 'entry frame matches its consensus metadata');
    // Checked against the tree before the entry's own leaf joins it.
    if (hasFlag(decoded.flags, EntryFlags.SIGNATURE)) this.checkSignature(decoded.publicBytes, decoded.seqno);
    const sidecar = entry.sidecar;
    // The primary's private write set in clear, as it framed it: a copy, so that the values the
    // store keeps do not hold the whole received message (copyValue: the sidecar is a Buffer, whose
    // slice() would be a view of it). Anything else is decrypted.
    const plain = sidecar !== undefined && sidecar.byteLength + AES_GCM_TAG_BYTES === decoded.privateBytes.byteLength ? copyValue(sidecar) : undefined;
    if (plain !== undefined) this.#appliedInClear++;
    else if (decoded.privateBytes.byteLength > 0) this.#appliedDecrypted++;
    this.applyEntry(decoded, plain);
    // A previous service's entries (a joiner after a recovery replicates them) hold that service's
    // snapshot points and evidence, not this service's: their commit evidence derives from secrets
    // this node may not hold, and its store lacks their private domain.
    if (decoded.seqno >= this.serviceStartSeqno) this.observer?.afterEntry(decoded);
  }

  /** Applies a ledger entry written by a primary (replicated, or replayed at restart) to the store and the tree. */
  private applyEntry(decoded: DecodedEntry, privatePlain?: Uint8Array): void {
    // A node of a recovering service holds no secret of the previous service's entries yet: it
    // applies their public domain only (the private one is read once members recover the secrets).
    const plain = privatePlain ?? (this.init.secrets.covers(decoded.seqno) ? this.privatePlainOf(decoded) : undefined);
    this.store.applyWriteSet(decoded.seqno, decoded.publicBytes, plain);
    this.tree.append(entryLeaf(decoded));
    if (hasFlag(decoded.flags, EntryFlags.SIGNATURE)) this.#lastSignedSeqno = decoded.seqno;
  }

  /** The private write set of an entry, decrypted with the secret of its seqno (empty when it wrote no private map). */
  privatePlainOf(entry: DecodedEntry): Uint8Array {
    if (entry.privateBytes.length === 0) return new Uint8Array(0);
    return this.init.secrets.framingFor(entry.seqno).encryptor.decryptPrivate(entry.view, entry.seqno, entry.privateBytes);
  }

  /** The commit evidence of a transaction, from the secret of its seqno. */
  commitEvidence(view: number, seqno: number): string {
    return this.init.secrets.framingFor(seqno).commitEvidence(view, seqno);
  }

  /**
   * A backup checks each signature transaction against its own Merkle tree before it acknowledges
   * it: the record and its root now, the ECDSA signature now or while the entry syncs (signatureChecks).
   */
  private checkSignature(publicBytes: Uint8Array, seqno: number): void {
    const check = this.signatureToVerify(publicBytes, seqno);
    if (typeof check !== 'string' && this.signatureChecks?.hasRoom()) return this.signatureChecks.start(seqno, check);
    const problem = typeof check === 'string' ? check : this.verifyNow(check);
    if (problem !== undefined) this.stopOnSignature(problem);
    this.#signaturesVerifiedWhenApplied++;
  }

  private stopOnSignature(problem: string): never {
    this.init.logger.fatal(problem);
    throw new InvariantError(`a replicated signature verifies against the local tree: ${problem}`);
  }

  /** Why the signature transaction at `seqno` does not sign this node's tree as it is now (undefined: it does). */
  signatureProblem(publicBytes: Uint8Array, seqno: number): string | undefined {
    const check = this.signatureToVerify(publicBytes, seqno);
    return typeof check === 'string' ? check : this.verifyNow(check);
  }

  private verifyNow(check: SignatureToVerify): string | undefined {
    try {
      return verifyEcdsa(check.key, check.root, check.signature, 'der') ? undefined : check.failed;
    } catch (e) {
      return `${check.uncheckable}: ${(e as Error).message}`;
    }
  }

  /**
   * signatureProblem with the ECDSA verification on libuv's thread pool: the record is read and its
   * root compared with the tree now (a string: the problem found), the signature checked meanwhile
   * (the promise: its problem, or undefined when it verifies). A recovery reads on while it runs.
   */
  signatureProblemAsync(publicBytes: Uint8Array, seqno: number): string | Promise<string | undefined> {
    const check = this.signatureToVerify(publicBytes, seqno);
    if (typeof check === 'string') return check;
    return verifyEcdsaAsync(check.key, check.root, check.signature, 'der').then(
      (ok) => (ok ? undefined : check.failed),
      (e: unknown) => `${check.uncheckable}: ${(e as Error).message}`,
    );
  }

  /** The checks of signatureProblem short of the ECDSA verification: a problem already, or what to verify. */
  private signatureToVerify(publicBytes: Uint8Array, seqno: number): string | SignatureToVerify {
    let record;
    try {
      record = signatureRecordOf({ publicBytes, seqno });
    } catch (e) {
      return `signature entry ${seqno} has no readable signature record: ${(e as Error).message}`;
    }
    const root = this.tree.root();
    if (record.root !== toHex(root)) return `signature at seqno ${seqno} signs root ${record.root}, but this node's tree root is ${toHex(root)}`;
    const uncheckable = `signature at seqno ${seqno} by ${record.node} cannot be checked`;
    let key: KeyObject;
    try {
      key = loadPublicKey(record.cert);
    } catch (e) {
      return `${uncheckable}: ${(e as Error).message}`;
    }
    return { key, root, signature: Buffer.from(record.sig, 'base64'), failed: `signature at seqno ${seqno} by ${record.node} does not verify`, uncheckable };
  }

  /**
   * Recovery: applies the public domain of an entry of a previous service's ledger (read from this
   * node's ledger files) to the store and the tree, with its Merkle leaf when the caller has it
   * already (computed off this thread). The caller checks a signature entry first
   * (signatureProblemAsync) and moves lastSignedSeqno once it verifies.
   */
  applyRecoveredPublic(decoded: DecodedEntry, leaf?: Uint8Array): void {
    this.store.applyWriteSet(decoded.seqno, decoded.publicBytes);
    this.tree.append(leaf ?? entryLeaf(decoded));
    this.recoveredEntries ??= new RecoveredEntries(decoded.seqno);
    this.recoveredEntries.add(decoded.seqno, decoded.view, hasFlag(decoded.flags, EntryFlags.SIGNATURE));
  }

  /**
   * Recovery: drops what was read after the last signature (store, tree and ledger files), and
   * holds everything up to it as committed: a recovered service starts from its previous one's
   * last signed entry.
   */
  settleRecoveredPublic(lastSignedSeqno: number): void {
    if (this.store.version > lastSignedSeqno) {
      this.init.logger.info(`dropping the unsigned entries ${lastSignedSeqno + 1}..${this.store.version} read after the last signature`);
      this.store.rollback(lastSignedSeqno);
      this.tree.truncate(lastSignedSeqno);
    }
    if (this.ledger.lastSeqno > lastSignedSeqno) this.ledger.discardForRecovery(lastSignedSeqno);
    this.recoveredEntries?.truncateAfter(lastSignedSeqno);
    this.store.compact(lastSignedSeqno);
    this.#commitSeqno = lastSignedSeqno;
    this.#lastSignedSeqno = lastSignedSeqno;
  }

  /**
   * Writes frames after the last entry, cutting the ledger after `truncateAfterSeqno` first when
   * asked. The bytes are written (page cache) before this returns; with durability Synced they
   * become durable later, grouped (src/node/grouped-sync.ts): one fdatasync off the event loop
   * covers every persist since the one before, and durableSeqno follows. Consensus acknowledges
   * (backup) and counts (primary) only what is durable, so a transaction reported committed is on
   * the disks of a majority, not only in their page caches, and survives a power loss of every node.
   */
  persist(frames: readonly Uint8Array[], truncateAfterSeqno: number | undefined): void {
    const cut = truncateAfterSeqno !== undefined && truncateAfterSeqno < this.ledger.lastSeqno;
    if (this.init.durability === 'Synced') this.groupedSync ??= this.createGroupedSync();
    if (cut) this.ledger.truncate(truncateAfterSeqno);
    // Each frame was made by this node's framer, or decoded (crc included) to be applied.
    if (frames.length > 0) this.ledger.append(frames, { crcChecked: true });
    if (cut || frames.length > 0) this.groupedSync?.wrote(this.ledger.lastSeqno, cut ? truncateAfterSeqno : undefined);
  }

  /**
   * Every ledger entry up to here survives a power loss (Replicated durability: every entry
   * written) and, for consensus to count it, every replicated signature up to here is verified.
   */
  get durableSeqno(): number {
    if (this.init.durability === 'Synced') this.groupedSync ??= this.createGroupedSync();
    const synced = this.groupedSync?.durableSeqno ?? this.ledger.lastSeqno;
    return this.signatureChecks === undefined ? synced : Math.min(synced, this.signatureChecks.limit);
  }

  /** Replicated signatures verified while their entries synced, and on the request thread as applied (GET /node/consensus). */
  get signaturesVerified(): { readonly whileSyncing: number; readonly whenApplied: number } {
    return { whileSyncing: this.signatureChecks?.verified ?? 0, whenApplied: this.#signaturesVerifiedWhenApplied };
  }

  /** Syncs started by persist (each covers every entry written since the one before). */
  get ledgerSyncs(): number {
    return this.groupedSync?.syncs ?? 0;
  }

  /** `listener` runs whenever durableSeqno moves forward (after the sync, never within persist). */
  whenDurable(listener: () => void): void {
    this.durableListener = listener;
  }

  private createGroupedSync(): GroupedSync {
    // What the ledger holds before the first persist was read from its files, where a process that
    // ended before its sync may have left it in the page cache only: one sync, once, makes it durable.
    this.ledger.sync();
    return new GroupedSync(
      {
        startSync: (done) => this.ledger.syncAsync(done),
        onDurable: () => this.durableListener?.(),
        onFailure: (error) => {
          this.init.logger.fatal(`ledger sync failed, stopping: ${error.message}`);
          throw error;
        },
      },
      this.ledger.lastSeqno,
    );
  }

  /** Rolls the store and the Merkle tree back to `seqno` (an unsigned suffix dropped by a view change, or a refused proposal). */
  rollbackTo(seqno: number): void {
    assert(seqno >= this.commitSeqno, `never roll back below commit (${seqno} < ${this.commitSeqno})`);
    this.init.logger.info(`rolling back uncommitted entries after seqno ${seqno} (had ${this.store.version})`);
    this.store.rollback(seqno);
    this.tree.truncate(seqno);
    this.signatureChecks?.dropAfter(seqno);
    this.observer?.onRollback(seqno);
    this.#lastSignedSeqno = Math.min(this.lastSignedSeqno, seqno);
  }

  /** Commit reached `seqno` (a signature held by a majority). */
  advanceCommit(seqno: number): boolean {
    if (seqno <= this.commitSeqno) return false;
    this.#commitSeqno = seqno;
    this.ledger.commit(seqno);
    this.observer?.onCommit(seqno);
    this.store.compact(seqno);
    this.tree.compactBefore(Math.max(0, seqno - 1));
    return true;
  }

  /** A decoded entry of this node's ledger; HistoricalDataUnavailable when its files do not hold it. */
  readEntryFrame(seqno: number): DecodedEntry {
    try {
      return decodeEntry(this.ledger.getEntry(seqno));
    } catch (e) {
      if (isLedgerError(e, 'LedgerEntryNotFound')) throw nodeError('HistoricalDataUnavailable', `seqno ${seqno} is not in this node's ledger files`);
      throw e;
    }
  }

  /**
   * Where entries `first`..`last` are in the ledger files, for a re-read of their Merkle leaves
   * off the request thread (nothing is read here); HistoricalDataUnavailable when the files do
   * not hold them.
   */
  locateEntries(first: number, last: number): EntryLeavesRequest {
    try {
      return this.ledger.locateEntries(first, last);
    } catch (e) {
      if (isLedgerError(e, 'LedgerEntryNotFound')) throw nodeError('HistoricalDataUnavailable', `seqnos ${first}..${last} are not all in this node's ledger files`);
      throw e;
    }
  }

  /** Rebuilds a consensus entry from the ledger (for append batches the core no longer holds). */
  entryFromLedger(seqno: number): Entry | undefined {
    if (seqno < 1 || seqno > this.ledger.lastSeqno) return undefined;
    return this.entryOfFrame(seqno, this.ledger.getEntry(seqno));
  }

  /**
   * What consensus needs of entries `from`..`to` that a recovery just read or a restart replayed,
   * summarised (RecoveredEntries.stretch), or undefined when neither recorded them from `from` on.
   * Taken once, like entriesFromLedger's: consensus asks when it is created.
   */
  entryStretch(from: number, to: number): EntryStretch | undefined {
    const recorded = this.recoveredEntries ?? this.replayedEntries;
    if (recorded === undefined || recorded.first !== from || recorded.last < from) return undefined;
    this.recoveredEntries = undefined;
    this.replayedEntries = undefined;
    return recorded.stretch(from, Math.min(to, recorded.last));
  }

  /**
   * Entries `from`..`to` as entryFromLedger gives them, read in batches (one read per chunk and
   * batch instead of one per entry): consensus reads the whole persisted log when it is created.
   */
  *entriesFromLedger(from: number, to: number): Generator<Entry> {
    let seqno = from;
    // The entries a recovery has just read, or a restart replayed, are not read again (RecoveredEntries).
    const recovered = this.recoveredEntries ?? this.replayedEntries;
    this.recoveredEntries = undefined;
    this.replayedEntries = undefined;
    if (recovered !== undefined && recovered.first === from && recovered.last >= from) {
      const upTo = Math.min(to, recovered.last);
      yield* recovered.entries(from, upTo);
      seqno = upTo + 1;
    }
    while (seqno <= to) {
      const frames = this.ledger.getEntries(seqno, Math.min(to, seqno + recoveryReadBatchEntriesMax - 1), recoveryReadBatchBytesMax);
      for (const frame of frames) yield this.entryOfFrame(seqno++, frame);
    }
  }

  /** The consensus entry of a frame the ledger read and checked (crc included). */
  private entryOfFrame(seqno: number, bytes: Uint8Array): Entry {
    const { view, flags } = checkEntry(bytes, 0, false);
    if (hasFlag(flags, EntryFlags.SIGNATURE)) return { view, seqno, kind: 'signature', bytes };
    if (!hasFlag(flags, EntryFlags.RECONFIGURATION)) return { view, seqno, kind: 'normal', bytes };
    // A previous service's configurations (before a recovery) are not this service's.
    if (seqno < this.serviceStartSeqno) return { view, seqno, kind: 'normal', bytes };
    const configuration = this.configurationIn(decodeEntry(bytes))!;
    return { view, seqno, kind: 'reconfiguration', configuration, bytes };
  }

  /** The configuration a reconfiguration entry of this service records (undefined for any other entry). */
  private configurationIn(decoded: DecodedEntry): Configuration | undefined {
    if (hasFlag(decoded.flags, EntryFlags.SIGNATURE) || !hasFlag(decoded.flags, EntryFlags.RECONFIGURATION) || decoded.seqno < this.serviceStartSeqno) return undefined;
    const configuration = configurationOf(decodeWriteSet(decoded.publicBytes));
    assert(configuration, `reconfiguration entry ${decoded.seqno} records its configuration`);
    return configuration;
  }

  /** Makes what was written durable and closes the ledger (node stop). */
  close(): void {
    if (!this.opened) return;
    this.opened.sync();
    this.opened.close();
  }
}
