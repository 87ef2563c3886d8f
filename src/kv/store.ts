/**
 * The versioned key-value store. The state is persistent (map name → key → value bytes: state.ts,
 * each map a B+ tree in map-state.ts), so every version is a value that shares structure with its neighbours:
 * reading at the committed version costs nothing, a snapshot reads a stable state, and rollback
 * after a view change is a pointer swap (docs/architecture.md, decision 5) plus, at most, a short replay.
 *
 * Versions above the committed one are retained as their writes, with the whole state kept
 * only at every CHECKPOINT_INTERVAL-th version (StoreOptions.checkpointInterval): a state per
 * version would keep every version's new map nodes alive until consensus commits them (a tenth
 * of a second or more), which is most of what the garbage collector has to copy on a busy
 * primary. A state between checkpoints is rebuilt from the nearest one below by applying at most
 * CHECKPOINT_INTERVAL - 1 retained write sets (rollback, compaction, historical reads: all rare
 * next to commits).
 *
 * Transactions run synchronously (docs/architecture.md, decision 2): a Tx reads the state it began at and
 * buffers its writes; apply() applies them as the next version in one step. Nothing is written
 * until then, so a handler that throws simply drops its Tx.
 */
import { assert, type Seqno, type View } from '../base/index.js';
import { bytesCodec, stringKeyCodec, type Codec, type KeyCodec } from './codecs.js';
import { transactionConflict, uncommittedHistoryFull, versionNotRetained } from './errors.js';
import { isPublicMapName } from './key-order.js';
import { decodeWriteSetParts, type Write, type WriteSet } from './write-set.js';
import { decodeSnapshot, encodeSnapshot, type SnapshotMaps } from './snapshot.js';
import type { LedgerEncryptor } from './encryption.js';
import { checkMapName, MapReaderImpl, sortedKeys, TX_WRITE, TX_WRITES, TxMapImpl, type MapReader, type TxMap } from './map-handles.js';
import type { TableDef } from './table.js';
import { SnapshotPacker } from './snapshot-slices.js';
import { applyToState, EMPTY_MAP, EMPTY_STATE, flatten, foldFlats, sortedMap, type FlatWrites, type KvState } from './state.js';

export type { MapReader, TxMap } from './map-handles.js';

const EMPTY_FLAT: readonly never[] = [];

/** Every this many versions the whole state is retained; others are rebuilt from their writes. */
export const CHECKPOINT_INTERVAL = 64;

/** Versions kept above the committed one before local applications are refused (see StoreOptions). */
export const DEFAULT_UNCOMMITTED_VERSIONS_MAX = 100_000;

export interface StoreOptions {
  /**
   * Bound on versions held above committedVersion. A primary that runs this far ahead of
   * consensus gets UncommittedHistoryFull from tx.apply() until commit catches up.
   */
  uncommittedVersionsMax?: number;
  /** Every this many versions the whole state is retained (default CHECKPOINT_INTERVAL; tests use small ones). */
  checkpointInterval?: number;
}

export interface AppliedTx {
  /** The seqno the transaction was applied as. */
  readonly version: Seqno;
  /** Its writes in canonical order; encode with encodeWriteSet. */
  readonly writeSet: WriteSet;
}

export type AppliedListener = (version: Seqno, writes: WriteSet) => void;
export type MapAppliedListener = (version: Seqno, writes: ReadonlyMap<string, Write>) => void;
export type RollbackListener = (version: Seqno) => void;

// Module-private access between Tx and Store (TX_WRITES and TX_WRITE: see map-handles.ts).
const STORE_APPLY = Symbol("apply");
const VIEW_STATE = Symbol('state');
/** Builds a store from a whole state (snapshot-loading.ts); not part of the package's face. */
export const RESTORE_STATE = Symbol('restore');

/** A read-only view of the store at one version. */
export class StoreView {
  readonly version: Seqno;
  readonly #state: KvState;

  /** @internal built by Store.readAt */
  constructor(version: Seqno, state: KvState) {
    this.version = version;
    this.#state = state;
  }

  map<V>(name: string, valueCodec: Codec<V>): MapReader<string, V>;
  map<K, V>(name: string, keyCodec: KeyCodec<K>, valueCodec: Codec<V>): MapReader<K, V>;
  map(name: string, a: KeyCodec<unknown> | Codec<unknown>, b?: Codec<unknown>): MapReader<unknown, unknown> {
    const [keyCodec, valueCodec] = b === undefined ? [stringKeyCodec, a as Codec<unknown>] : [a as KeyCodec<unknown>, b];
    return new MapReaderImpl(name, this.#state.get(name) ?? EMPTY_MAP, keyCodec, valueCodec);
  }

  /** The map of a declared table (src/kv/table.ts), read with its codec and value type. */
  table<V>(def: TableDef<V>): MapReader<string, V> {
    return this.map(def.name, def.codec);
  }

  get [VIEW_STATE](): KvState {
    return this.#state;
  }

  /** Names of the maps that hold at least one key, in UTF-8 byte order. */
  mapNames(): string[] {
    return sortedKeys(this.#state.keys());
  }
}

/** A transaction: reads at the version it began at plus its own writes; see Store.beginTx. */
export class Tx {
  /** The store version this transaction reads. */
  readonly startVersion: Seqno;
  readonly #store: Store;
  readonly #base: KvState;
  readonly #generation: number;
  #writes: Map<string, Map<string, Write>> | undefined;
  #finished = false;

  /** @internal built by Store.beginTx */
  constructor(store: Store, base: KvState, startVersion: Seqno, generation: number) {
    this.#store = store;
    this.#base = base;
    this.startVersion = startVersion;
    this.#generation = generation;
  }

  map<V>(name: string, valueCodec: Codec<V>): TxMap<string, V>;
  map<K, V>(name: string, keyCodec: KeyCodec<K>, valueCodec: Codec<V>): TxMap<K, V>;
  map(name: string, a: KeyCodec<unknown> | Codec<unknown>, b?: Codec<unknown>): TxMap<unknown, unknown> {
    checkMapName(name);
    const [keyCodec, valueCodec] = b === undefined ? [stringKeyCodec, a as Codec<unknown>] : [a as KeyCodec<unknown>, b];
    return new TxMapImpl(this, name, this.#base.get(name) ?? EMPTY_MAP, keyCodec, valueCodec);
  }

  /** The map of a declared table (src/kv/table.ts), read and written with its codec and value type. */
  table<V>(def: TableDef<V>): TxMap<string, V> {
    return this.map(def.name, def.codec);
  }

  /** Raw byte access, for code that moves values between maps or nodes without decoding them. */
  rawMap(name: string): TxMap<string, Uint8Array> {
    return this.map(name, stringKeyCodec, bytesCodec);
  }

  /** Whether the transaction has written anything (put or remove). */
  get hasWrites(): boolean {
    return this.#writes !== undefined;
  }

  /** Whether the transaction has written to the named map (hooks such as reconfiguration use it). */
  wroteTo(name: string): boolean {
    return this.#writes?.has(name) ?? false;
  }

  get [TX_WRITES](): Map<string, Map<string, Write>> | undefined {
    return this.#writes;
  }

  [TX_WRITE](name: string, key: string, value: Write): void {
    assert(!this.#finished, 'write to a transaction that has already been applied');
    this.#writes ??= new Map();
    let writes = this.#writes.get(name);
    if (writes === undefined) {
      writes = new Map();
      this.#writes.set(name, writes);
    }
    writes.set(key, value);
  }

  /**
   * Applies the writes as version store.version + 1 and returns it with the write set, or returns
   * undefined (consuming no version) when the transaction wrote nothing. Throws
   * TransactionConflict if the store moved since beginTx: the caller interleaved transactions.
   */
  apply(): AppliedTx | undefined {
    assert(!this.#finished, 'transaction applied twice');
    this.#finished = true;
    if (this.#writes === undefined) return undefined;
    return this.#store[STORE_APPLY](this.#writes, this.#generation, this.startVersion);
  }
}

/** The key-value store of one node. */
export class Store {
  /** The state at committedVersion. */
  #committed: KvState = EMPTY_STATE;
  /** The state at version - #unfolded: see #folded. */
  #current: KvState = EMPTY_STATE;
  /** The newest versions whose writes (in #log) are not in #current yet; fewer than checkpointInterval. */
  #unfolded = 0;
  /** #log[#logStart + (v - committedVersion - 1)] holds the writes of retained version v. */
  #log: FlatWrites[] = [];
  #logStart = 0;
  /** States of retained versions, ascending: every CHECKPOINT_INTERVAL-th, and adoptions. */
  #checkpoints: { readonly version: Seqno; readonly state: KvState }[] = [];
  #version: Seqno = 0;
  #committedVersion: Seqno = 0;
  /** Changes on every applied transaction, applied write set and rollback: a Tx from another generation conflicts. */
  #generation = 0;
  readonly #uncommittedVersionsMax: number;
  readonly #checkpointInterval: number;
  #appliedListeners: readonly AppliedListener[] = [];
  #mapListeners = new Map<string, readonly MapAppliedListener[]>();
  #rollbackListeners: readonly RollbackListener[] = [];
  #mapCommittedListeners = new Map<string, readonly MapAppliedListener[]>();
  /**
   * Writes of watched maps (onMapCommitted) by versions above committedVersion, in version order:
   * as many as the versions awaiting consensus commit times the watched maps they wrote.
   */
  #awaitingCommit: { readonly version: Seqno; readonly name: string; readonly writes: ReadonlyMap<string, Write> }[] = [];

  constructor(options: StoreOptions = {}) {
    this.#uncommittedVersionsMax = options.uncommittedVersionsMax ?? DEFAULT_UNCOMMITTED_VERSIONS_MAX;
    assert(Number.isSafeInteger(this.#uncommittedVersionsMax) && this.#uncommittedVersionsMax > 0, 'uncommittedVersionsMax must be positive');
    this.#checkpointInterval = options.checkpointInterval ?? CHECKPOINT_INTERVAL;
    assert(Number.isSafeInteger(this.#checkpointInterval) && this.#checkpointInterval > 0, 'checkpointInterval must be positive');
  }

  /** Seqno of the last applied transaction (0, or the snapshot's seqno, before any). */
  get version(): Seqno {
    return this.#version;
  }

  /** The highest version known committed by consensus; history below it is dropped. */
  get committedVersion(): Seqno {
    return this.#committedVersion;
  }

  beginTx(): Tx {
    return new Tx(this, this.#folded(), this.#version, this.#generation);
  }

  /** A read-only view at a retained version (committedVersion ≤ version ≤ this.version). */
  readAt(version: Seqno): StoreView {
    return new StoreView(version, this.#stateAt(version));
  }

  /**
   * The stored bytes of one key at the current version, without a transaction. The same object
   * comes back until that key is written again, so callers may cache what they derive from it.
   */
  currentRaw(map: string, key: string): Uint8Array | undefined {
    return this.#folded().get(map)?.get(key);
  }

  /** A read-only view at the current version. */
  current(): StoreView {
    return new StoreView(this.#version, this.#folded());
  }

  [STORE_APPLY](txWrites: Map<string, Map<string, Write>>, generation: number, startVersion: Seqno): AppliedTx {
    if (generation !== this.#generation) {
      throw transactionConflict(`transaction began at version ${startVersion} but the store moved on (now at ${this.#version})`);
    }
    if (this.#version - this.#committedVersion >= this.#uncommittedVersionsMax) {
      throw uncommittedHistoryFull(`${this.#version - this.#committedVersion} versions are awaiting consensus commit`);
    }
    // The transaction is finished: its own maps become the write set (sorted where they are not).
    const writeSet = sortedMap(txWrites);
    for (const [name, writes] of writeSet) {
      const sorted = sortedMap(writes);
      if (sorted !== writes) writeSet.set(name, sorted);
    }
    const version = this.#version + 1;
    this.#advance(version, writeSet);
    return { version, writeSet };
  }

  /**
   * Applies a transaction replicated from the primary or replayed from the ledger. `publicBytes`
   * and `privatePlainBytes` are the two encoded parts (the latter decrypted, a buffer the caller
   * hands over: the state keeps views of it); leave the private part undefined to apply the
   * public domain only (recovery replays it first).
   * Throws MalformedWriteSet (and changes nothing) when the bytes do not decode.
   */
  applyWriteSet(version: Seqno, publicBytes: Uint8Array, privatePlainBytes?: Uint8Array): WriteSet {
    assert(version === this.#version + 1, () => `write set for version ${version} applied at version ${this.#version}`);
    const writes = decodeWriteSetParts(publicBytes, privatePlainBytes);
    this.#advance(version, writes);
    return writes;
  }

  /** Applies already-decoded writes as the next version (e.g. the primary's own WriteSet in tests or tools). */
  applyWrites(version: Seqno, writes: WriteSet): void {
    assert(version === this.#version + 1, () => `writes for version ${version} applied at version ${this.#version}`);
    this.#advance(version, writes);
  }

  #advance(version: Seqno, writes: WriteSet): void {
    // The state itself is brought up to date when something reads it (#folded), or at the next
    // checkpoint: a backup applying a stream of replicated transactions that nobody reads between
    // them folds each run of them into the state at once, path-copying each changed map once.
    this.#log.push(flatten(writes));
    this.#unfolded++;
    if (version % this.#checkpointInterval === 0) this.#checkpoints.push({ version, state: this.#folded() });
    this.#version = version;
    this.#generation++;
    for (const listener of this.#appliedListeners) listener(version, writes);
    if (this.#mapListeners.size > 0) {
      for (const [name, mapWrites] of writes) {
        const listeners = this.#mapListeners.get(name);
        if (listeners !== undefined) for (const listener of listeners) listener(version, mapWrites);
      }
    }
    if (this.#mapCommittedListeners.size > 0) {
      for (const [name, mapWrites] of writes) {
        if (this.#mapCommittedListeners.has(name)) this.#awaitingCommit.push({ version, name, writes: mapWrites });
      }
    }
  }

  /**
   * Discards every version above `version` (after a view change). Refuses, by assertion, to go
   * below committedVersion: committed transactions are never undone.
   */
  rollback(version: Seqno): void {
    assert(Number.isSafeInteger(version), `bad rollback version ${version}`);
    assert(version >= this.#committedVersion, () => `rollback to ${version} below committed version ${this.#committedVersion}`);
    assert(version <= this.#version, () => `rollback to ${version} above current version ${this.#version}`);
    if (version === this.#version) return;
    this.#current = this.#stateAt(version);
    this.#unfolded = 0;
    this.#log.length = this.#logStart + (version - this.#committedVersion);
    while (this.#checkpoints.length > 0 && this.#checkpoints.at(-1)!.version > version) this.#checkpoints.pop();
    this.#version = version;
    this.#generation++;
    while (this.#awaitingCommit.length > 0 && this.#awaitingCommit.at(-1)!.version > version) this.#awaitingCommit.pop();
    for (const listener of this.#rollbackListeners) listener(version);
  }

  /** Records that consensus committed up to `committedVersion` and drops the history below it. */
  compact(committedVersion: Seqno): void {
    assert(Number.isSafeInteger(committedVersion), `bad committed version ${committedVersion}`);
    assert(committedVersion <= this.#version, () => `committed version ${committedVersion} above current version ${this.#version}`);
    if (committedVersion <= this.#committedVersion) return;
    // The writes of unfolded versions may be among those dropped below.
    this.#folded();
    this.#committed = this.#stateAt(committedVersion);
    const from = this.#logStart;
    this.#logStart += committedVersion - this.#committedVersion;
    this.#committedVersion = committedVersion;
    let dropped = 0;
    while (dropped < this.#checkpoints.length && this.#checkpoints[dropped]!.version <= committedVersion) dropped++;
    if (dropped > 0) this.#checkpoints.splice(0, dropped);
    // Release the dropped writes now, and shrink the log in bulk so compaction stays O(1) amortised.
    for (let i = from; i < this.#logStart; i++) this.#log[i] = EMPTY_FLAT;
    if (this.#logStart >= 1024 && this.#logStart * 2 >= this.#log.length) {
      this.#log = this.#log.slice(this.#logStart);
      this.#logStart = 0;
    }
    if (this.#awaitingCommit.length > 0) this.#notifyCommitted(committedVersion);
  }

  #notifyCommitted(committedVersion: Seqno): void {
    let count = 0;
    while (count < this.#awaitingCommit.length && this.#awaitingCommit[count]!.version <= committedVersion) count++;
    if (count === 0) return;
    const committed = this.#awaitingCommit.splice(0, count);
    for (const { version, name, writes } of committed) {
      for (const listener of this.#mapCommittedListeners.get(name) ?? []) listener(version, writes);
    }
  }

  /**
   * Recovery: replaces the private maps of the committed state with those of `source`, a store that
   * replayed both domains of every entry up to exactly this store's committed version (the previous
   * service's and any the recovered service committed since), and rebuilds every version above it
   * from its writes: they keep their private writes on top, and a rollback to any of them keeps the
   * private maps. No version is consumed; open transactions conflict.
   */
  installPrivateMaps(source: StoreView): void {
    assert(source.version === this.#committedVersion, () => `private maps of version ${source.version} installed at committed version ${this.#committedVersion}`);
    let committed = this.#committed;
    for (const name of committed.keys()) if (!isPublicMapName(name)) committed = committed.delete(name);
    for (const [name, map] of source[VIEW_STATE]) if (!isPublicMapName(name)) committed = committed.set(name, map);
    this.#committed = committed;
    this.#checkpoints.length = 0;
    this.#current = foldFlats(committed, this.#log, this.#logStart, this.#logStart + (this.#version - this.#committedVersion));
    this.#unfolded = 0;
    this.#generation++;
  }

  /** Called after every applied transaction and applied write set (local application, not consensus commit); listeners must not apply transactions. Returns an unsubscribe. */
  onApplied(listener: AppliedListener): () => void {
    this.#appliedListeners = [...this.#appliedListeners, listener];
    return () => {
      this.#appliedListeners = this.#appliedListeners.filter((l) => l !== listener);
    };
  }

  /** Called after an applied transaction or write set that wrote to map `name`, with that map's writes. */
  onMapApplied(name: string, listener: MapAppliedListener): () => void {
    this.#mapListeners.set(name, [...(this.#mapListeners.get(name) ?? []), listener]);
    return () => {
      const remaining = (this.#mapListeners.get(name) ?? []).filter((l) => l !== listener);
      if (remaining.length === 0) this.#mapListeners.delete(name);
      else this.#mapListeners.set(name, remaining);
    };
  }

  /**
   * Called once consensus has committed a version that wrote to map `name` (when compact passes
   * it), with that map's writes, in version order; a version rolled back before it commits is never
   * reported. For what must not be undone by a view change. Versions applied before the listener
   * was added are not reported. Listeners must not apply transactions. Returns an unsubscribe.
   */
  onMapCommitted(name: string, listener: MapAppliedListener): () => void {
    this.#mapCommittedListeners.set(name, [...(this.#mapCommittedListeners.get(name) ?? []), listener]);
    return () => {
      const remaining = (this.#mapCommittedListeners.get(name) ?? []).filter((l) => l !== listener);
      if (remaining.length === 0) this.#mapCommittedListeners.delete(name);
      else this.#mapCommittedListeners.set(name, remaining);
    };
  }

  /** Called after a rollback with the version the store went back to. */
  onRollback(listener: RollbackListener): () => void {
    this.#rollbackListeners = [...this.#rollbackListeners, listener];
    return () => {
      this.#rollbackListeners = this.#rollbackListeners.filter((l) => l !== listener);
    };
  }

  /**
   * The whole state at `version` (default: current) as snapshot bytes: public maps in clear,
   * private maps encrypted. Equal states give byte-identical snapshots on every node.
   */
  serializeSnapshot(encryptor: LedgerEncryptor, view: View, version: Seqno = this.#version): Uint8Array {
    const state = version === this.#version ? this.#folded() : this.#stateAt(version);
    const publicMaps: [string, [string, Uint8Array][]][] = [];
    const privateMaps: [string, [string, Uint8Array][]][] = [];
    for (const name of sortedKeys(state.keys())) {
      // In key order already: a map is a tree sorted by compareUtf8.
      const entries = state.get(name)!.entriesArray();
      (isPublicMapName(name) ? publicMaps : privateMaps).push([name, entries]);
    }
    return encodeSnapshot({ version, view, publicMaps, privateMaps }, encryptor);
  }

  /**
   * A packer of the whole state at `version` (default: current), to be stepped in slices while the
   * store moves on: the bytes it leads to (encodePackedSnapshot) are those of serializeSnapshot at
   * that version, whatever is committed or rolled back meanwhile (the state is persistent).
   */
  snapshotPacker(view: View, version: Seqno = this.#version): SnapshotPacker {
    const state = version === this.#version ? this.#folded() : this.#stateAt(version);
    return new SnapshotPacker(state, version, view);
  }

  /**
   * A store at the snapshot's version, with that version committed. Without an encryptor only the
   * public maps are loaded (recovery reads the public domain before the ledger secret is known).
   * Throws MalformedSnapshot or LedgerDecryptionFailed.
   */
  static fromSnapshot(bytes: Uint8Array, encryptor?: LedgerEncryptor, options: StoreOptions = {}): Store {
    const snapshot: SnapshotMaps = decodeSnapshot(bytes, encryptor);
    let state = applyToState(EMPTY_STATE, snapshot.publicMaps);
    if (snapshot.privateMaps !== undefined) state = applyToState(state, snapshot.privateMaps);
    return Store[RESTORE_STATE](snapshot.version, state, options);
  }

  /** A store at `version`, committed, whose state is `state`. */
  static [RESTORE_STATE](version: Seqno, state: KvState, options: StoreOptions): Store {
    const store = new Store(options);
    store.#committed = state;
    store.#current = state;
    store.#version = version;
    store.#committedVersion = version;
    return store;
  }

  /** The state at the current version: #current with the writes of the unfolded versions applied. */
  #folded(): KvState {
    const count = this.#unfolded;
    if (count > 0) {
      const end = this.#log.length;
      this.#current = foldFlats(this.#current, this.#log, end - count, end);
      this.#unfolded = 0;
    }
    return this.#current;
  }

  #stateAt(version: Seqno): KvState {
    if (!Number.isSafeInteger(version) || version < this.#committedVersion || version > this.#version) {
      throw versionNotRetained(`version ${version} is outside the retained range ${this.#committedVersion}..${this.#version}`);
    }
    if (version === this.#version) return this.#folded();
    // The nearest retained state at or below `version`, then the writes of the versions after it.
    let state = this.#committed;
    let from = this.#committedVersion;
    let lo = 0;
    let hi = this.#checkpoints.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#checkpoints[mid]!.version <= version) lo = mid + 1;
      else hi = mid;
    }
    if (lo > 0) ({ version: from, state } = this.#checkpoints[lo - 1]!);
    const start = this.#logStart - this.#committedVersion;
    return foldFlats(state, this.#log, start + from, start + version);
  }
}
