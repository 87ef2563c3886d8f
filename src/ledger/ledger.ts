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
import { ChunkIndex, chunkFileHeader, CHUNK_HEADER_BYTES, scanChunk, type ChunkDamage } from './chunk-file.js';
import { formatChunkName, isChunkFileName, parseChunkName, RECOVERY_SUFFIX, type ChunkName } from './chunk-name.js';
import type { Disk, DiskFile } from './disk.js';
import { checkEntry, decodeEntry, ENTRY_OVERHEAD_BYTES, EntryFlags, hasFlag, peekFrameSizeBytes, type DecodedEntry } from './entry.js';
import { asFileCorruption, LedgerError } from './errors.js';

export interface LedgerOptions {
  disk: Disk;
  /** Where chunks are written. */
  directory: string;
  /** Extra places holding committed chunks (moved there by operators); read only. */
  readOnlyDirectories?: readonly string[];
  /** Disaster recovery in progress: new files carry `.recovery` until completeRecovery(). */
  recoverySuffix?: boolean;
  /** Bound on the entries of all cached chunk indexes (the chunk being written is not counted). */
  indexCacheEntriesMax?: number;
}

export interface LedgerOpenOptions {
  /**
   * Scan every committed chunk at open and fail on any damage. Off by default: committed chunks
   * are checked whenever they are first read, and a full scan at every start costs a read of
   * the whole ledger.
   */
  verifyCommittedChunks?: boolean;
}

/** What open() found and repaired. The node logs it; a dropped tail deserves a warning. */
export interface LedgerOpenReport {
  firstSeqno: Seqno;
  lastSeqno: Seqno;
  committedSeqno: Seqno;
  /** Leftover files of an unfinished recovery, removed as the spec requires. */
  discardedRecoveryFiles: string[];
  /** A torn tail cut off the non-committed chunks, if one was found. */
  tornTail: TornTail | undefined;
  /** Chunks whose last entry had CHUNK_END but were not yet renamed when the node stopped. */
  completedChunks: string[];
}

export interface TornTail {
  file: string;
  offsetBytes: number;
  reason: ChunkDamage['reason'] | 'ShorterThanName';
  /** Bytes cut from `file`. */
  droppedBytes: number;
  /** Later non-committed files removed because they followed the tear. */
  droppedFiles: string[];
  /** Seqno of the last entry kept. */
  keptLastSeqno: Seqno;
}

export interface ChunkListing {
  name: string;
  first: Seqno;
  /** For the chunk being written, its current last entry. */
  last: Seqno;
  committed: boolean;
  /** True when the chunk ended on a CHUNK_END entry (or was committed). */
  complete: boolean;
  recovery: boolean;
  path: string;
  sizeBytes: number;
}

export const DEFAULT_INDEX_CACHE_ENTRIES_MAX = 1 << 20;
/**
 * A chunk whose full index is evicted keeps every 64th offset (1/64 of the memory), so a
 * random read of it costs one read of at most 64 frames instead of a scan of the whole file.
 */
const SPARSE_INDEX_STRIDE = 64;

/**
 * Primary-side chunking policy: a chunk ends only on a signature (spec invariant 1), once the
 * chunk reached its target size or when a new chunk was asked for (trigger_ledger_chunk, or a
 * snapshot, which must coincide with a chunk end).
 */
export function shouldEndChunk(p: { chunkBytesSoFar: number; chunkSizeBytes: number; isSignature: boolean; forced: boolean }): boolean {
  return p.isSignature && (p.forced || p.chunkBytesSoFar >= p.chunkSizeBytes);
}

interface Chunk {
  directory: string;
  name: string;
  first: Seqno;
  /** Last seqno as named; undefined for the chunk being written (its index says). */
  last: Seqno | undefined;
  committed: boolean;
  recovery: boolean;
  /** Open while the chunk is written to, and after that until the next sync makes it durable. */
  file: DiskFile | undefined;
  sizeBytes: number | undefined;
  /** The whole file passed a crc check once: rebuilding its index after eviction skips the crc. */
  verified: boolean;
  /** Kept when the full index is evicted (see SPARSE_INDEX_STRIDE). */
  sparse: Float64Array | undefined;
}

interface WriteChunk {
  chunk: Chunk;
  /** The same handle as chunk.file. */
  file: DiskFile;
  index: ChunkIndex;
}

export class Ledger {
  readonly #disk: Disk;
  readonly #directory: string;
  readonly #readOnlyDirectories: readonly string[];
  readonly #indexCacheEntriesMax: number;
  #recoveryMode: boolean;

  #opened = false;
  /** Every chunk this ledger can read, in seqno order. */
  #chunks: Chunk[] = [];
  #write: WriteChunk | undefined;
  /** LRU of indexes of chunks other than the one being written (Map keeps insertion order). */
  #indexCache = new Map<Chunk, ChunkIndex>();
  #indexCacheEntries = 0;
  #lastSeqno: Seqno = 0;
  #lastView: View = 0;
  #lastFlags = 0;
  #committedSeqno: Seqno = 0;
  #directoryDirty = false;

  constructor(options: LedgerOptions) {
    this.#disk = options.disk;
    this.#directory = options.directory;
    this.#readOnlyDirectories = options.readOnlyDirectories ?? [];
    this.#recoveryMode = options.recoverySuffix ?? false;
    this.#indexCacheEntriesMax = options.indexCacheEntriesMax ?? DEFAULT_INDEX_CACHE_ENTRIES_MAX;
    assert(this.#indexCacheEntriesMax >= 1, 'indexCacheEntriesMax must be positive');
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
    return this.#indexCacheEntries;
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

    const committedByName = new Map<string, Chunk>();
    const pending: Chunk[] = [];
    for (const name of disk.listDirectory(this.#directory).sort()) {
      if (!isChunkFileName(name)) continue;
      if (name.endsWith(RECOVERY_SUFFIX)) {
        disk.remove(disk.join(this.#directory, name));
        report.discardedRecoveryFiles.push(name);
        this.#directoryDirty = true;
        continue;
      }
      const chunk = this.#chunkFromName(this.#directory, name, parseChunkName(name));
      if (chunk.committed) committedByName.set(name, chunk);
      else pending.push(chunk);
    }
    for (const directory of this.#readOnlyDirectories) {
      if (!disk.exists(directory)) continue;
      for (const name of disk.listDirectory(directory).sort()) {
        if (!isChunkFileName(name) || name.endsWith(RECOVERY_SUFFIX)) continue;
        const parsed = parseChunkName(name);
        // Operators move only committed chunks to read-only directories; anything else there is not ours.
        if (!parsed.committed || committedByName.has(name)) continue;
        committedByName.set(name, this.#chunkFromName(directory, name, parsed));
      }
    }

    const committed = [...committedByName.values()].sort((a, b) => a.first - b.first);
    for (let i = 1; i < committed.length; i++) {
      const before = committed[i - 1]!;
      const after = committed[i]!;
      if (after.first <= before.last!) {
        throw new LedgerError('LedgerFilesInconsistent', `committed chunks ${before.name} and ${after.name} overlap`, {
          file: after.name,
        });
      }
    }
    pending.sort((a, b) => a.first - b.first);
    const lastCommitted = committed.at(-1);
    this.#checkPendingNames(pending, lastCommitted);

    this.#chunks = committed;
    this.#recoverTail(pending, report);

    const lastChunk = this.#chunks.at(-1);
    const firstPending = this.#chunks.find((c) => !c.committed);
    this.#committedSeqno = firstPending !== undefined ? firstPending.first - 1 : (lastCommitted?.last ?? 0);
    if (lastChunk !== undefined && lastChunk.committed) {
      // The ledger ends on a completed chunk: its last entry gives the view and flags.
      const index = this.#indexOf(lastChunk);
      const last = this.#readEntry(lastChunk, index, index.last);
      this.#lastSeqno = last.seqno;
      this.#lastView = last.view;
      this.#lastFlags = last.flags;
    }
    if (options.verifyCommittedChunks) for (const chunk of committed) this.#verify(chunk);
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
    const flagsOf = new Uint8Array(frames.length);
    let expected = this.#lastSeqno + 1;
    let view = this.#lastView;
    for (let i = 0; i < frames.length; i++) {
      const frame = frames[i]!;
      const entry = checkEntry(frame, 0, options.crcChecked !== true);
      if (entry.frameSizeBytes !== frame.byteLength) {
        throw new LedgerError('MalformedLedgerEntry', `appended frame has ${frame.byteLength - entry.frameSizeBytes} trailing bytes`, {
          seqno: entry.seqno,
        });
      }
      if (entry.seqno !== expected || entry.view < view) {
        throw new LedgerError(
          'LedgerEntryOutOfOrder',
          `appended entry ${entry.view}.${entry.seqno} does not follow ${view}.${expected - 1}`,
          { seqno: entry.seqno, expectedSeqno: expected },
        );
      }
      if (hasFlag(entry.flags, EntryFlags.CHUNK_END) && !hasFlag(entry.flags, EntryFlags.SIGNATURE)) {
        throw new LedgerError('MalformedLedgerEntry', `entry ${entry.seqno} has CHUNK_END but is not a signature`, { seqno: entry.seqno });
      }
      flagsOf[i] = entry.flags;
      view = entry.view;
      expected++;
    }

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
    this.#lastView = decodeViewOf(frames[to - 1]!);
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
    for (const chunk of this.#chunks) {
      if (chunk.file === undefined) continue;
      chunk.file.sync();
      if (chunk !== this.#write?.chunk) {
        chunk.file.close();
        chunk.file = undefined;
      }
    }
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
      const index = this.#indexOf(chunk);
      const endBytes = index.offsetOf(afterSeqno + 1);
      chunk.file?.close();
      chunk.file = undefined;
      this.#dropCachedIndex(chunk);
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
      const entry = this.#readEntry(last, this.#indexOf(last), afterSeqno);
      this.#lastView = entry.view;
      this.#lastFlags = entry.flags;
    } else {
      this.#lastView = 0;
      this.#lastFlags = 0;
    }
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
    const dense = this.#cachedIndexOf(chunk);
    if (dense === undefined && chunk.sparse !== undefined) return this.#readViaSparse(chunk, chunk.sparse, seqno).frameBytes;
    return this.#readEntry(chunk, dense ?? this.#indexOf(chunk), seqno).frameBytes;
  }

  /**
   * Frames of entries `from`..`to` inclusive, read with one read per chunk. With `maxBytes`,
   * stops before the frame that would exceed it (but always returns at least one frame).
   */
  getEntries(from: Seqno, to: Seqno, maxBytes = Number.POSITIVE_INFINITY): Uint8Array[] {
    this.#checkOpen();
    assert(from <= to, () => `empty range ${from}..${to}`);
    const out: Uint8Array[] = [];
    let totalBytes = 0;
    let seqno = from;
    while (seqno <= to) {
      const chunk = this.#chunkHolding(seqno);
      const index = this.#indexOf(chunk);
      const chunkTo = Math.min(to, index.last);
      let end = seqno;
      while (end <= chunkTo) {
        const size = index.offsetOf(end + 1) - index.offsetOf(end);
        if (out.length + (end - seqno) > 0 && totalBytes + size > maxBytes) break;
        totalBytes += size;
        end++;
      }
      if (end === seqno) break;
      const start = index.offsetOf(seqno);
      const bytes = this.#read(chunk, start, index.offsetOf(end) - start);
      let offset = 0;
      for (let s = seqno; s < end; s++) {
        const entry = this.#decodeAt(chunk, bytes, offset, start, s);
        out.push(entry.frameBytes);
        offset += entry.frameSizeBytes;
      }
      if (end <= chunkTo) break;
      seqno = end;
    }
    return out;
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

  #chunkFromName(directory: string, name: string, parsed: ChunkName): Chunk {
    return { directory, name, first: parsed.first, last: parsed.last, committed: parsed.committed, recovery: parsed.recovery, file: undefined, sizeBytes: undefined, verified: false, sparse: undefined };
  }

  #pathOf(chunk: Chunk): string {
    return this.#disk.join(chunk.directory, chunk.name);
  }

  #lastOf(chunk: Chunk): Seqno {
    if (chunk.last !== undefined) return chunk.last;
    assert(this.#write?.chunk === chunk, 'only the chunk being written has no last seqno');
    return this.#write.index.last;
  }

  #listing(chunk: Chunk): ChunkListing {
    const path = this.#pathOf(chunk);
    let sizeBytes: number;
    if (this.#write?.chunk === chunk) sizeBytes = this.#write.index.endBytes;
    else sizeBytes = chunk.sizeBytes ??= this.#disk.sizeBytes(path);
    return {
      name: chunk.name,
      first: chunk.first,
      last: this.#lastOf(chunk),
      committed: chunk.committed,
      complete: chunk.last !== undefined,
      recovery: chunk.recovery,
      path,
      sizeBytes,
    };
  }

  #checkPendingNames(pending: Chunk[], lastCommitted: Chunk | undefined): void {
    for (let i = 0; i < pending.length; i++) {
      const chunk = pending[i]!;
      if (i === 0) {
        if (lastCommitted !== undefined && chunk.first <= lastCommitted.last!) {
          throw new LedgerError('LedgerFilesInconsistent', `${chunk.name} overlaps committed ${lastCommitted.name}`, { file: chunk.name });
        }
        continue;
      }
      const before = pending[i - 1]!;
      if (before.last === undefined) {
        throw new LedgerError('LedgerFilesInconsistent', `${before.name} is being written but ${chunk.name} follows it`, { file: before.name });
      }
      if (chunk.first !== before.last + 1) {
        throw new LedgerError('LedgerFilesInconsistent', `${chunk.name} does not continue ${before.name}`, { file: chunk.name });
      }
    }
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
      if (index !== undefined && index.first !== chunk.first) {
        throw new LedgerError('LedgerCorrupted', `${chunk.name} at offset ${CHUNK_HEADER_BYTES}: starts with seqno ${index.first}`, {
          file: chunk.name,
          offsetBytes: CHUNK_HEADER_BYTES,
        });
      }
      const lastHeld = index?.last ?? chunk.first - 1;
      if (chunk.last !== undefined && lastHeld > chunk.last) {
        throw new LedgerError('LedgerCorrupted', `${chunk.name} holds entries up to ${lastHeld}`, { file: chunk.name, offsetBytes: index!.offsetOf(chunk.last + 1) });
      }
      const endsChunk = hasFlag(scan.lastFlags, EntryFlags.CHUNK_END);
      const torn = scan.damage !== undefined || (chunk.last !== undefined && lastHeld < chunk.last);
      if (!torn && chunk.last !== undefined && !hasFlag(scan.lastFlags, EntryFlags.SIGNATURE)) {
        throw new LedgerError('LedgerCorrupted', `${chunk.name} does not end on a signature`, { file: chunk.name, offsetBytes: index!.offsetOf(chunk.last) });
      }
      // Bytes after a whole CHUNK_END entry that ends the chunk as named (an append whose data never
      // reached the disk, say) lose nothing when cut: that is a torn tail too. A CHUNK_END anywhere
      // else in a torn chunk cannot come from our writer.
      if (torn && chunk.last !== undefined && endsChunk && lastHeld !== chunk.last) {
        throw new LedgerError('LedgerCorrupted', `${chunk.name} has a CHUNK_END entry at ${lastHeld}`, { file: chunk.name, offsetBytes: index!.offsetOf(lastHeld) });
      }

      if (torn) {
        const droppedFiles: string[] = [];
        for (const later of pending.slice(i + 1)) {
          disk.remove(this.#pathOf(later));
          droppedFiles.push(later.name);
        }
        report.tornTail = {
          file: chunk.name,
          offsetBytes: scan.validBytes,
          reason: scan.damage?.reason ?? 'ShorterThanName',
          droppedBytes: bytes.byteLength - scan.validBytes,
          droppedFiles,
          keptLastSeqno: lastHeld,
        };
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
        this.#cacheIndex(chunk, index);
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
    this.#cacheIndex(chunk, index);
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
    this.#dropCachedIndex(chunk);
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

  #cachedIndexOf(chunk: Chunk): ChunkIndex | undefined {
    if (this.#write?.chunk === chunk) return this.#write.index;
    const cached = this.#indexCache.get(chunk);
    if (cached !== undefined) {
      this.#indexCache.delete(chunk);
      this.#indexCache.set(chunk, cached);
    }
    return cached;
  }

  #indexOf(chunk: Chunk): ChunkIndex {
    const cached = this.#cachedIndexOf(chunk);
    if (cached !== undefined) return cached;
    const index = this.#verify(chunk);
    this.#cacheIndex(chunk, index);
    return index;
  }

  /** Scans a completed chunk whole; any damage in it is corruption, reported with file and offset. */
  #verify(chunk: Chunk): ChunkIndex {
    const bytes = this.#disk.readAll(this.#pathOf(chunk));
    const scan = scanChunk(bytes, chunk.name, !chunk.verified);
    const fail = (offsetBytes: number, message: string) =>
      new LedgerError('LedgerCorrupted', `${chunk.name} at offset ${offsetBytes}: ${message}`, { file: chunk.name, offsetBytes });
    if (scan.damage !== undefined) throw fail(scan.damage.offsetBytes, scan.damage.message);
    const index = scan.index;
    if (index === undefined) throw fail(CHUNK_HEADER_BYTES, 'no entries');
    if (index.first !== chunk.first) throw fail(CHUNK_HEADER_BYTES, `starts with seqno ${index.first}`);
    if (index.last !== chunk.last) throw fail(index.endBytes, `ends with seqno ${index.last}`);
    if (!hasFlag(scan.lastFlags, EntryFlags.SIGNATURE)) throw fail(index.offsetOf(index.last), 'does not end on a signature');
    chunk.sizeBytes = bytes.byteLength;
    chunk.verified = true;
    return index;
  }

  #cacheIndex(chunk: Chunk, index: ChunkIndex): void {
    this.#dropCachedIndex(chunk);
    this.#indexCache.set(chunk, index);
    this.#indexCacheEntries += index.count;
    for (const [oldest, oldIndex] of this.#indexCache) {
      if (this.#indexCacheEntries <= this.#indexCacheEntriesMax || oldest === chunk) break;
      oldest.sparse ??= oldIndex.sparse(SPARSE_INDEX_STRIDE);
      this.#indexCache.delete(oldest);
      this.#indexCacheEntries -= oldIndex.count;
    }
  }

  #dropCachedIndex(chunk: Chunk): void {
    const index = this.#indexCache.get(chunk);
    if (index === undefined) return;
    this.#indexCache.delete(chunk);
    this.#indexCacheEntries -= index.count;
  }

  #read(chunk: Chunk, positionBytes: number, lengthBytes: number): Uint8Array {
    const bytes = this.#disk.read(this.#pathOf(chunk), positionBytes, lengthBytes);
    if (bytes.byteLength !== lengthBytes) {
      throw new LedgerError('LedgerCorrupted', `${chunk.name} at offset ${positionBytes + bytes.byteLength}: file ends early`, {
        file: chunk.name,
        offsetBytes: positionBytes + bytes.byteLength,
      });
    }
    return bytes;
  }

  /** Reads the stretch of at most SPARSE_INDEX_STRIDE frames holding `seqno` and walks to it. */
  #readViaSparse(chunk: Chunk, sparse: Float64Array, seqno: Seqno): DecodedEntry {
    const j = Math.floor((seqno - chunk.first) / SPARSE_INDEX_STRIDE);
    const start = sparse[j]!;
    const bytes = this.#read(chunk, start, sparse[j + 1]! - start);
    let offset = 0;
    for (let k = j * SPARSE_INDEX_STRIDE; k < seqno - chunk.first; k++) {
      let size: number;
      try {
        size = peekFrameSizeBytes(bytes, offset);
      } catch (e) {
        if (!(e instanceof LedgerError)) throw e;
        throw asFileCorruption(e, chunk.name, start + offset);
      }
      if (size < ENTRY_OVERHEAD_BYTES || offset + size > bytes.byteLength) {
        throw new LedgerError('LedgerCorrupted', `${chunk.name} at offset ${start + offset}: frame length ${size} does not fit`, {
          file: chunk.name,
          offsetBytes: start + offset,
        });
      }
      offset += size;
    }
    return this.#decodeAt(chunk, bytes, offset, start, seqno);
  }

  #readEntry(chunk: Chunk, index: ChunkIndex, seqno: Seqno): DecodedEntry {
    const start = index.offsetOf(seqno);
    const bytes = this.#read(chunk, start, index.offsetOf(seqno + 1) - start);
    return this.#decodeAt(chunk, bytes, 0, start, seqno);
  }

  #decodeAt(chunk: Chunk, bytes: Uint8Array, offset: number, fileOffset: number, seqno: Seqno): DecodedEntry {
    let entry: DecodedEntry;
    try {
      entry = decodeEntry(bytes, offset);
    } catch (e) {
      if (!(e instanceof LedgerError)) throw e;
      throw asFileCorruption(e, chunk.name, fileOffset + offset);
    }
    if (entry.seqno !== seqno) {
      throw new LedgerError('LedgerCorrupted', `${chunk.name} at offset ${fileOffset + offset}: holds seqno ${entry.seqno}, expected ${seqno}`, {
        file: chunk.name,
        offsetBytes: fileOffset + offset,
      });
    }
    return entry;
  }
}

/** View of an already-validated frame. */
function decodeViewOf(frame: Uint8Array): View {
  const dv = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  return dv.getUint32(12, true) * 0x1_0000_0000 + dv.getUint32(8, true);
}
