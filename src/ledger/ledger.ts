/**
 * Chunk files of one node's ledger (see docs/ledger.md).
 *
 * Entries are appended to the chunk being written, `ledger_<first>`. An entry whose header has
 * CHUNK_END (set by the primary, on signatures only) ends its chunk: the file is renamed
 * `ledger_<first>-<last>`, and once the commit seqno reaches its last entry it is renamed
 * `ledger_<first>-<last>.committed` and never changes again. Because the cut points travel in
 * the entries and the file header is constant, every node that writes the same entries writes
 * byte-identical chunk files.
 *
 * Memory stays bounded whatever the ledger size: a chunk's entries are located through an
 * offset index (8 bytes per entry) built by scanning the file on first use, and only a bounded
 * number of those indexes are cached; the frames themselves are read from disk on demand.
 */
import { assert, type Seqno, type View } from '../base/index.js';
import { ChunkIndex, chunkFileHeader, scanChunk } from './chunk-file.js';
import { formatChunkName, type ChunkName } from './chunk-name.js';
import { ChunkReader, type Chunk, type WriteChunk } from './chunk-reader.js';
import { syncChunksAsync, syncChunksNow } from './chunk-syncs.js';
import type { EntryLeavesRequest } from './entry-leaves.js';
import type { Disk, DiskError } from './disk.js';
import { EntryFlags, hasFlag, peekFrameView, type DecodedEntry } from './entry.js';
import { LedgerError } from './errors.js';
import { checkAppendBatch, checkPendingScan, listChunkFiles, tornTailOf } from './ledger-files.js';
import { listingOf, locateRange, readDecodedRange, type ChunkLocator } from './ledger-reads.js';
import {
  DEFAULT_INDEX_CACHE_ENTRIES_MAX,
  type ChunkListing,
  type LedgerOpenOptions,
  type LedgerOpenReport,
  type LedgerOptions,
} from './ledger-types.js';

export class Ledger {
  readonly #disk: Disk;
  readonly #directory: string;
  readonly #readOnlyDirectories: readonly string[];
  readonly #reader: ChunkReader;
  #recoveryMode: boolean;

  #opened = false;
  /** Every chunk this ledger can read, in seqno order. */
  #chunks: Chunk[] = [];
  #write: WriteChunk | undefined;
  #lastSeqno: Seqno = 0;
  #lastView: View = 0;
  #lastFlags = 0;
  #committedSeqno: Seqno = 0;
  #directoryDirty = false;
  /** This ledger's chunks as the range reads see them (ledger-reads.ts). */
  readonly #locator: ChunkLocator;

  constructor(options: LedgerOptions) {
    this.#disk = options.disk;
    this.#directory = options.directory;
    this.#readOnlyDirectories = options.readOnlyDirectories ?? [];
    this.#recoveryMode = options.recoverySuffix ?? false;
    this.#reader = new ChunkReader(options.disk, options.indexCacheEntriesMax ?? DEFAULT_INDEX_CACHE_ENTRIES_MAX);
    const currentWrite = () => this.#write;
    this.#locator = {
      reader: this.#reader,
      get write() {
        return currentWrite();
      },
      holding: (seqno) => this.#chunkHolding(seqno),
      lastOf: (chunk) => this.#lastOf(chunk),
      sizeBytesOf: (path) => this.#disk.sizeBytes(path),
    };
  }

  get lastSeqno(): Seqno {
    return this.#lastSeqno;
  }

  /** View of the last entry (0 when the last seqno came from startAt or the ledger is empty). */
  get lastView(): View {
    return this.#lastView;
  }

  /** Highest seqno known committed: from commit(), startAt(), or the committed files at open. */
  get committedSeqno(): Seqno {
    return this.#committedSeqno;
  }

  /** Lowest seqno such that every entry from it to lastSeqno is held (lastSeqno + 1 if none). */
  get firstSeqno(): Seqno {
    let first = this.#lastSeqno + 1;
    for (let i = this.#chunks.length - 1; i >= 0; i--) {
      const chunk = this.#chunks[i]!;
      if (this.#lastOf(chunk) !== first - 1) break;
      first = chunk.first;
    }
    return first;
  }

  /** Entries indexed by the cached chunk indexes (bounded by indexCacheEntriesMax). */
  get cachedIndexEntries(): number {
    return this.#reader.cachedEntries;
  }

  get recoveryMode(): boolean {
    return this.#recoveryMode;
  }

  /** Bytes in the chunk being written so far (file header included), for shouldEndChunk. */
  get writeChunkSizeBytes(): number {
    return this.#write?.index.endBytes ?? 0;
  }

  open(options: LedgerOpenOptions = {}): LedgerOpenReport {
    assert(!this.#opened, 'ledger opened twice');
    const disk = this.#disk;
    disk.ensureDirectory(this.#directory);
    const report: LedgerOpenReport = {
      firstSeqno: 0,
      lastSeqno: 0,
      committedSeqno: 0,
      discardedRecoveryFiles: [],
      tornTail: undefined,
      completedChunks: [],
    };

    const { committed, pending } = listChunkFiles(disk, this.#directory, this.#readOnlyDirectories, report);
    if (report.discardedRecoveryFiles.length > 0) this.#directoryDirty = true;
    const lastCommitted = committed.at(-1);

    this.#chunks = committed;
    this.#recoverTail(pending, report);

    const lastChunk = this.#chunks.at(-1);
    const firstPending = this.#chunks.find((c) => !c.committed);
    this.#committedSeqno = firstPending !== undefined ? firstPending.first - 1 : (lastCommitted?.last ?? 0);
    if (lastChunk !== undefined && lastChunk.committed) {
      // The ledger ends on a completed chunk: its last entry gives the view and flags.
      const index = this.#reader.indexOf(lastChunk, this.#write);
      const last = this.#reader.readEntry(lastChunk, index, index.last);
      this.#lastSeqno = last.seqno;
      this.#lastView = last.view;
      this.#lastFlags = last.flags;
    }
    if (options.verifyCommittedChunks) for (const chunk of committed) this.#reader.verify(chunk);
    this.#opened = true;

    report.firstSeqno = this.firstSeqno;
    report.lastSeqno = this.#lastSeqno;
    report.committedSeqno = this.#committedSeqno;
    return report;
  }

  /**
   * Appends a batch of encoded entries (as encodeEntry made them). The whole batch is checked
   * before anything is written: each frame must decode, seqnos must continue lastSeqno and views
   * never go back. A disk failure part-way leaves the entries written before it in place (the
   * failing write is rolled back), so lastSeqno tells what the ledger holds.
   *
   * `crcChecked`: the caller checked every frame's crc already (a backup decodes each replicated
   * entry before applying it) or made the frames itself (a primary's sealer); the frames are then
   * checked whole except for the crc, which costs as much as the rest of the check together.
   */
  append(frames: readonly Uint8Array[], options: { readonly crcChecked?: boolean } = {}): void {
    this.#checkOpen();
    const flagsOf = checkAppendBatch(frames, this.#lastSeqno, this.#lastView, options.crcChecked !== true);

    // A recovering node never appends to a chunk of the ledger it recovers from.
    if (this.#recoveryMode && this.#write !== undefined && !this.#write.chunk.recovery) this.#completeWriteChunk();

    let parts: Uint8Array[] = [];
    let partsFirst = 0;
    const flush = (upTo: number) => {
      if (parts.length === 0) return;
      this.#writeParts(parts, frames, partsFirst, upTo, flagsOf);
      parts = [];
    };
    for (let i = 0; i < frames.length; i++) {
      if (this.#write === undefined) {
        this.#startWriteChunk(this.#lastSeqno + 1);
        parts.push(chunkFileHeader());
        partsFirst = i;
      } else if (parts.length === 0) {
        partsFirst = i;
      }
      parts.push(frames[i]!);
      if (hasFlag(flagsOf[i]!, EntryFlags.CHUNK_END)) {
        flush(i + 1);
        this.#completeWriteChunk();
      }
    }
    flush(frames.length);
  }

  /** Writes frames [from, to) of the batch to the chunk being written; parts may lead with the header. */
  #writeParts(parts: Uint8Array[], frames: readonly Uint8Array[], from: number, to: number, flagsOf: Uint8Array): void {
    const write = this.#write!;
    const sizeBefore = write.index.count === 0 ? 0 : write.index.endBytes;
    try {
      write.file.append(parts);
    } catch (e) {
      this.#rollBackWrite(write, sizeBefore);
      throw e;
    }
    for (let i = from; i < to; i++) {
      const frame = frames[i]!;
      write.index.push(frame.byteLength);
      this.#lastFlags = flagsOf[i]!;
    }
    this.#lastSeqno = write.index.last;
    // The view of the batch's last written frame; frames were checked in order above.
    this.#lastView = peekFrameView(frames[to - 1]!);
  }

  #rollBackWrite(write: WriteChunk, sizeBefore: number): void {
    const path = this.#pathOf(write.chunk);
    if (sizeBefore === 0) {
      // The file was created for this write: it holds nothing worth keeping.
      write.file.close();
      this.#disk.remove(path);
      this.#chunks.pop();
      this.#write = undefined;
    } else {
      // Reopen so the handle's idea of the file end matches the truncated file.
      write.file.close();
      this.#disk.truncate(path, sizeBefore);
      write.file = this.#disk.openForAppend(path);
      write.chunk.file = write.file;
    }
  }

  /** Makes every appended entry and every file rename durable (fdatasync). */
  sync(): void {
    this.#checkOpen();
    syncChunksNow(this.#chunks, this.#write?.chunk);
    this.#syncDirectory();
  }

  /**
   * sync() off the event loop (chunk-syncs.ts): `done` runs once every entry appended before this
   * call is durable (or with the first failure). Directory changes (a new or renamed chunk: rare)
   * are made durable at once.
   */
  syncAsync(done: (error: DiskError | undefined) => void): void {
    this.#checkOpen();
    this.#syncDirectory();
    syncChunksAsync(this.#chunks, () => this.#write?.chunk, done);
  }

  #syncDirectory(): void {
    if (this.#directoryDirty) {
      this.#disk.syncDirectory(this.#directory);
      this.#directoryDirty = false;
    }
  }

  /**
   * Records that everything up to `seqno` is committed, and renames each completed chunk whose
   * last entry is at or below it to `.committed`, after making its bytes durable. Idempotent;
   * a seqno at or below the current commit is a no-op.
   */
  commit(seqno: Seqno): void {
    this.#checkOpen();
    assert(seqno <= this.#lastSeqno, () => `commit ${seqno} beyond the last entry ${this.#lastSeqno}`);
    if (seqno <= this.#committedSeqno) return;
    this.#committedSeqno = seqno;
    for (const chunk of this.#chunks) {
      if (chunk.committed) continue;
      if (chunk.last === undefined || chunk.last > seqno) break;
      if (chunk.file !== undefined) {
        chunk.file.sync();
        chunk.file.close();
        chunk.file = undefined;
      }
      this.#rename(chunk, { first: chunk.first, last: chunk.last, committed: true, recovery: chunk.recovery });
      chunk.committed = true;
    }
  }

  /**
   * Drops every entry after `afterSeqno` (a Raft log truncation). Never below the commit: that
   * would lose committed entries, so it is an invariant violation.
   */
  truncate(afterSeqno: Seqno): void {
    this.#checkOpen();
    assert(afterSeqno >= this.#committedSeqno, () => `truncate to ${afterSeqno} below the commit ${this.#committedSeqno}`);
    if (afterSeqno >= this.#lastSeqno) return;
    while (this.#chunks.length > 0 && this.#chunks.at(-1)!.first > afterSeqno) this.#removeLastChunk();
    const chunk = this.#chunks.at(-1);
    if (chunk !== undefined && this.#lastOf(chunk) > afterSeqno) {
      assert(!chunk.committed, 'truncating a committed chunk');
      const index = this.#reader.indexOf(chunk, this.#write);
      const endBytes = index.offsetOf(afterSeqno + 1);
      chunk.file?.close();
      chunk.file = undefined;
      this.#reader.dropCachedIndex(chunk);
      chunk.sparse = undefined;
      this.#write = undefined;
      this.#disk.truncate(this.#pathOf(chunk), endBytes);
      index.truncateAfter(afterSeqno);
      if (chunk.last !== undefined) this.#rename(chunk, { first: chunk.first, last: undefined, committed: false, recovery: chunk.recovery });
      chunk.last = undefined;
      chunk.sizeBytes = undefined;
      const file = this.#disk.openForAppend(this.#pathOf(chunk));
      chunk.file = file;
      this.#write = { chunk, file, index };
    }
    this.#lastSeqno = afterSeqno;
    const last = this.#chunks.at(-1);
    if (last !== undefined && this.#lastOf(last) === afterSeqno) {
      const entry = this.#reader.readEntry(last, this.#reader.indexOf(last, this.#write), afterSeqno);
      this.#lastView = entry.view;
      this.#lastFlags = entry.flags;
    } else {
      this.#lastView = 0;
      this.#lastFlags = 0;
    }
  }

  /**
   * Disaster recovery: drops the entries after `afterSeqno` although a previous service committed
   * them (an unsigned or unreadable tail of its ledger: nothing after the last good signature can
   * be recovered). Its chunks in ledger.directory are cut or removed like uncommitted ones (the
   * operator keeps a copy of the old files); chunks of read-only directories are only forgotten.
   */
  discardForRecovery(afterSeqno: Seqno): void {
    this.#checkOpen();
    assert(this.#recoveryMode, 'committed entries are discarded only by a recovery');
    for (let i = this.#chunks.length - 1; i >= 0; i--) {
      const chunk = this.#chunks[i]!;
      if (this.#lastOf(chunk) <= afterSeqno) break;
      if (!chunk.committed) continue;
      if (chunk.directory !== this.#directory) {
        assert(chunk.first > afterSeqno, () => `read-only chunk ${chunk.name} holds the last recovered entry ${afterSeqno}: copy it into ledger.directory`);
        this.#chunks.splice(i, 1);
        continue;
      }
      this.#rename(chunk, { first: chunk.first, last: chunk.last, committed: false, recovery: chunk.recovery });
      chunk.committed = false;
    }
    this.#committedSeqno = Math.min(this.#committedSeqno, afterSeqno);
    if (afterSeqno < this.#lastSeqno) this.truncate(afterSeqno);
  }

  /**
   * Resumes after a snapshot at `snapshotSeqno`: the next entry appended is snapshotSeqno + 1
   * and starts a new chunk (a snapshot coincides with a chunk end, spec invariant 4). Only for a
   * ledger holding nothing after the snapshot; non-committed chunks (entries before the
   * snapshot that may be on an abandoned branch) are removed, committed ones stay readable.
   */
  startAt(snapshotSeqno: Seqno): void {
    this.#checkOpen();
    assert(Number.isSafeInteger(snapshotSeqno) && snapshotSeqno >= 0, 'snapshot seqno must be a non-negative integer');
    assert(snapshotSeqno >= this.#lastSeqno, () => `startAt ${snapshotSeqno} below the last entry ${this.#lastSeqno}: replay the ledger instead`);
    if (snapshotSeqno === this.#lastSeqno) {
      this.#committedSeqno = Math.max(this.#committedSeqno, snapshotSeqno);
      if (this.#write !== undefined) this.#completeWriteChunk();
      return;
    }
    while (this.#chunks.length > 0 && !this.#chunks.at(-1)!.committed) this.#removeLastChunk();
    this.#lastSeqno = snapshotSeqno;
    this.#committedSeqno = snapshotSeqno;
    this.#lastView = 0;
    this.#lastFlags = 0;
  }

  /** Renames the `.recovery` files to their normal names, lowest first, once recovery is done. */
  completeRecovery(): void {
    this.#checkOpen();
    assert(this.#recoveryMode, 'completeRecovery outside recovery');
    this.sync();
    for (const chunk of this.#chunks) {
      if (!chunk.recovery) continue;
      this.#rename(chunk, { first: chunk.first, last: chunk.last, committed: chunk.committed, recovery: false });
      chunk.recovery = false;
    }
    this.#recoveryMode = false;
    this.sync();
  }

  /** The frame of entry `seqno`, read from disk and checked. */
  getEntry(seqno: Seqno): Uint8Array {
    this.#checkOpen();
    const chunk = this.#chunkHolding(seqno);
    const dense = this.#reader.cachedIndexOf(chunk, this.#write);
    if (dense === undefined && chunk.sparse !== undefined) return this.#reader.readViaSparse(chunk, chunk.sparse, seqno).frameBytes;
    return this.#reader.readEntry(chunk, dense ?? this.#reader.indexOf(chunk, this.#write), seqno).frameBytes;
  }

  /**
   * Frames of entries `from`..`to` inclusive, read with one read per chunk. With `maxBytes`,
   * stops before the frame that would exceed it (but always returns at least one frame).
   */
  getEntries(from: Seqno, to: Seqno, maxBytes = Number.POSITIVE_INFINITY): Uint8Array[] {
    return this.getDecodedEntries(from, to, maxBytes).map((entry) => entry.frameBytes);
  }

  /**
   * The entries `from`..`to` as getEntries reads them, decoded (views of the bytes read, no
   * copies): for a caller that decodes every frame anyway (a recovery reading the ledger).
   */
  getDecodedEntries(from: Seqno, to: Seqno, maxBytes = Number.POSITIVE_INFINITY): DecodedEntry[] {
    this.#checkOpen();
    assert(from <= to, () => `empty range ${from}..${to}`);
    return readDecodedRange(this.#locator, from, to, maxBytes);
  }

  /**
   * Where entries `from`..`to` are, one span per chunk (entrySpanOf), without reading them: for
   * leavesOfEntries, which reads them elsewhere. Never scans a file.
   */
  locateEntries(from: Seqno, to: Seqno): EntryLeavesRequest {
    this.#checkOpen();
    assert(from >= 1 && from <= to, () => `empty range ${from}..${to}`);
    return locateRange(this.#locator, from, to);
  }

  listChunks(): ChunkListing[] {
    this.#checkOpen();
    return this.#chunks.map((chunk) => this.#listing(chunk));
  }

  /** The committed chunk holding `seqno`, if this node has it (what GET /node/ledger_chunk serves). */
  findCommittedChunk(seqno: Seqno): ChunkListing | undefined {
    this.#checkOpen();
    const chunk = this.#findChunk(seqno);
    return chunk !== undefined && chunk.committed ? this.#listing(chunk) : undefined;
  }

  /**
   * Reads committed chunk `name` from `directory` from now on: retention deletes a chunk from
   * the ledger directory only once an identical copy is in a read-only directory, and the
   * entries must stay readable (lagging peers, receipts). Returns false when no such committed
   * chunk is held.
   */
  relocateCommittedChunk(name: string, directory: string): boolean {
    this.#checkOpen();
    const chunk = this.#chunks.find((c) => c.name === name && c.committed);
    if (chunk === undefined) return false;
    chunk.file?.close();
    chunk.file = undefined;
    chunk.directory = directory;
    return true;
  }

  /** Closes open files after making them durable. */
  close(): void {
    if (!this.#opened) return;
    this.sync();
    this.#write?.file.close();
    if (this.#write !== undefined) this.#write.chunk.file = undefined;
    this.#write = undefined;
    this.#opened = false;
  }

  // ---- internals ----

  #checkOpen(): void {
    assert(this.#opened, 'ledger not open');
  }

  #pathOf(chunk: Chunk): string {
    return this.#reader.pathOf(chunk);
  }

  #lastOf(chunk: Chunk): Seqno {
    if (chunk.last !== undefined) return chunk.last;
    assert(this.#write?.chunk === chunk, 'only the chunk being written has no last seqno');
    return this.#write.index.last;
  }

  #listing(chunk: Chunk): ChunkListing {
    return listingOf(this.#locator, chunk);
  }

  /**
   * Scans the non-committed chunks. The first frame-level damage is a torn write: the file is
   * cut back to its last whole entry and every later non-committed file removed. Damage that a
   * torn write cannot produce throws.
   */
  #recoverTail(pending: Chunk[], report: LedgerOpenReport): void {
    const disk = this.#disk;
    for (let i = 0; i < pending.length; i++) {
      const chunk = pending[i]!;
      const path = this.#pathOf(chunk);
      const bytes = disk.readAll(path);
      const scan = scanChunk(bytes, chunk.name);
      chunk.verified = true;
      const index = scan.index;
      const { lastHeld, endsChunk, torn } = checkPendingScan(chunk, scan);
      if (torn) {
        const droppedFiles = pending.slice(i + 1).map((later) => {
          disk.remove(this.#pathOf(later));
          return later.name;
        });
        report.tornTail = tornTailOf(chunk.name, scan, bytes.byteLength, droppedFiles, lastHeld);
        if (scan.validBytes < bytes.byteLength) disk.truncate(path, scan.validBytes);
        this.#directoryDirty = true;
      }
      if (index === undefined) {
        // Created but never got a whole entry.
        disk.remove(path);
        this.#directoryDirty = true;
        break;
      }

      this.#chunks.push(chunk);
      this.#lastSeqno = index.last;
      this.#lastView = scan.lastView;
      this.#lastFlags = scan.lastFlags;
      if (chunk.last !== undefined && !torn) {
        this.#reader.cacheIndex(chunk, index);
        // Completed by an earlier run, perhaps unsynced: open until a sync makes it durable, as in
        // this run (no durable seqno or `.committed` rename runs ahead of its bytes).
        chunk.file = disk.openForAppend(path);
        continue;
      }
      if (chunk.last !== undefined) this.#rename(chunk, { first: chunk.first, last: undefined, committed: false, recovery: false });
      chunk.last = undefined;
      const file = disk.openForAppend(this.#pathOf(chunk));
      chunk.file = file;
      this.#write = { chunk, file, index };
      if (endsChunk) {
        // The node stopped between writing the CHUNK_END entry and renaming the file.
        this.#completeWriteChunk();
        report.completedChunks.push(chunk.name);
      }
      if (torn) break;
    }
  }

  #startWriteChunk(first: Seqno): void {
    assert(this.#write === undefined, 'a chunk is already being written');
    const chunk: Chunk = {
      directory: this.#directory,
      name: formatChunkName({ first, last: undefined, committed: false, recovery: this.#recoveryMode }),
      first,
      last: undefined,
      committed: false,
      recovery: this.#recoveryMode,
      file: undefined,
      sizeBytes: undefined,
      verified: true,
      sparse: undefined,
    };
    const file = this.#disk.createFile(this.#pathOf(chunk));
    chunk.file = file;
    this.#chunks.push(chunk);
    this.#write = { chunk, file, index: new ChunkIndex(first, 1024) };
    this.#directoryDirty = true;
  }

  #completeWriteChunk(): void {
    const write = this.#write!;
    const { chunk, index } = write;
    assert(index.count > 0, 'completing an empty chunk');
    // Spec invariant 1: a completed chunk ends on a signature (open() refuses any other).
    assert(hasFlag(this.#lastFlags, EntryFlags.SIGNATURE), () => `chunk ${chunk.name} would end on ${index.last}, not a signature`);
    this.#rename(chunk, { first: chunk.first, last: index.last, committed: false, recovery: chunk.recovery });
    chunk.last = index.last;
    chunk.sizeBytes = index.endBytes;
    this.#write = undefined;
    // The file stays open until the next sync makes it durable; its index joins the cache.
    this.#reader.cacheIndex(chunk, index);
  }

  #rename(chunk: Chunk, to: ChunkName): void {
    const name = formatChunkName(to);
    if (name === chunk.name) return;
    this.#disk.rename(this.#pathOf(chunk), this.#disk.join(chunk.directory, name));
    chunk.name = name;
    this.#directoryDirty = true;
  }

  #removeLastChunk(): void {
    const chunk = this.#chunks.pop()!;
    assert(!chunk.committed, () => `removing committed chunk ${chunk.name}`);
    chunk.file?.close();
    chunk.file = undefined;
    if (this.#write?.chunk === chunk) this.#write = undefined;
    this.#reader.dropCachedIndex(chunk);
    this.#disk.remove(this.#pathOf(chunk));
    this.#directoryDirty = true;
  }

  #findChunk(seqno: Seqno): Chunk | undefined {
    let lo = 0;
    let hi = this.#chunks.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const chunk = this.#chunks[mid]!;
      if (seqno < chunk.first) hi = mid - 1;
      else if (seqno > this.#lastOf(chunk)) lo = mid + 1;
      else return chunk;
    }
    return undefined;
  }

  #chunkHolding(seqno: Seqno): Chunk {
    const chunk = this.#findChunk(seqno);
    if (chunk === undefined) throw new LedgerError('LedgerEntryNotFound', `no ledger entry ${seqno} on this node`, { seqno });
    return chunk;
  }
}
