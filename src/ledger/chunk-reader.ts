/**
 * The chunks of a ledger as the reader sees them: the offset indexes that locate entries in
 * their files, a bounded LRU cache of those indexes, and checked reads of entries from disk.
 */
import { assert, type Seqno } from '../base/index.js';
import { CHUNK_HEADER_BYTES, scanChunk, type ChunkIndex } from './chunk-file.js';
import type { ChunkName } from './chunk-name.js';
import type { Disk, DiskFile } from './disk.js';
import { decodeEntry, ENTRY_OVERHEAD_BYTES, EntryFlags, hasFlag, peekFrameSizeBytes, type DecodedEntry } from './entry.js';
import { asFileCorruption, LedgerError } from './errors.js';
import type { EntrySpan } from './entry-leaves.js';

/**
 * A chunk whose full index is evicted keeps every 64th offset (1/64 of the memory), so a
 * random read of it costs one read of at most 64 frames instead of a scan of the whole file.
 */
export const SPARSE_INDEX_STRIDE = 64;

export interface Chunk {
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

export interface WriteChunk {
  chunk: Chunk;
  /** The same handle as chunk.file. */
  file: DiskFile;
  index: ChunkIndex;
}

export function chunkFromName(directory: string, name: string, parsed: ChunkName): Chunk {
  return { directory, name, first: parsed.first, last: parsed.last, committed: parsed.committed, recovery: parsed.recovery, file: undefined, sizeBytes: undefined, verified: false, sparse: undefined };
}

export class ChunkReader {
  /** LRU of indexes of chunks other than the one being written (Map keeps insertion order). */
  private readonly indexCache = new Map<Chunk, ChunkIndex>();
  /** Entries indexed by the cached indexes. */
  cachedEntries = 0;

  constructor(
    private readonly disk: Disk,
    private readonly indexCacheEntriesMax: number,
  ) {
    assert(indexCacheEntriesMax >= 1, 'indexCacheEntriesMax must be positive');
  }

  pathOf(chunk: Chunk): string {
    return this.disk.join(chunk.directory, chunk.name);
  }

  /** The index of a chunk if held (the one being written, or a cached one, marked recently used). */
  cachedIndexOf(chunk: Chunk, write: WriteChunk | undefined): ChunkIndex | undefined {
    if (write?.chunk === chunk) return write.index;
    const cached = this.indexCache.get(chunk);
    if (cached !== undefined) {
      this.indexCache.delete(chunk);
      this.indexCache.set(chunk, cached);
    }
    return cached;
  }

  /** The index of a chunk, scanning (and checking) the file when no index is held. */
  indexOf(chunk: Chunk, write: WriteChunk | undefined): ChunkIndex {
    const cached = this.cachedIndexOf(chunk, write);
    if (cached !== undefined) return cached;
    const index = this.verify(chunk);
    this.cacheIndex(chunk, index);
    return index;
  }

  /** Scans a completed chunk whole; any damage in it is corruption, reported with file and offset. */
  verify(chunk: Chunk): ChunkIndex {
    const bytes = this.disk.readAll(this.pathOf(chunk));
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

  cacheIndex(chunk: Chunk, index: ChunkIndex): void {
    this.dropCachedIndex(chunk);
    this.indexCache.set(chunk, index);
    this.cachedEntries += index.count;
    for (const [oldest, oldIndex] of this.indexCache) {
      if (this.cachedEntries <= this.indexCacheEntriesMax || oldest === chunk) break;
      oldest.sparse ??= oldIndex.sparse(SPARSE_INDEX_STRIDE);
      this.indexCache.delete(oldest);
      this.cachedEntries -= oldIndex.count;
    }
  }

  dropCachedIndex(chunk: Chunk): void {
    const index = this.indexCache.get(chunk);
    if (index === undefined) return;
    this.indexCache.delete(chunk);
    this.cachedEntries -= index.count;
  }

  read(chunk: Chunk, positionBytes: number, lengthBytes: number): Uint8Array {
    const bytes = this.disk.read(this.pathOf(chunk), positionBytes, lengthBytes);
    if (bytes.byteLength !== lengthBytes) {
      throw new LedgerError('LedgerCorrupted', `${chunk.name} at offset ${positionBytes + bytes.byteLength}: file ends early`, {
        file: chunk.name,
        offsetBytes: positionBytes + bytes.byteLength,
      });
    }
    return bytes;
  }

  /** Reads the stretch of at most SPARSE_INDEX_STRIDE frames holding `seqno` and walks to it. */
  readViaSparse(chunk: Chunk, sparse: Float64Array, seqno: Seqno): DecodedEntry {
    const j = Math.floor((seqno - chunk.first) / SPARSE_INDEX_STRIDE);
    const start = sparse[j]!;
    const bytes = this.read(chunk, start, sparse[j + 1]! - start);
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
    return this.decodeAt(chunk, bytes, offset, start, seqno);
  }

  readEntry(chunk: Chunk, index: ChunkIndex, seqno: Seqno): DecodedEntry {
    const start = index.offsetOf(seqno);
    const bytes = this.read(chunk, start, index.offsetOf(seqno + 1) - start);
    return this.decodeAt(chunk, bytes, 0, start, seqno);
  }

  decodeAt(chunk: Chunk, bytes: Uint8Array, offset: number, fileOffset: number, seqno: Seqno): DecodedEntry {
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

/**
 * Where entries `from`..`upTo` of `chunk` lie in its file, without reading it: exact with its
 * index, between the nearest offsets of its sparse index, else the whole file after its header.
 */
export function entrySpanOf(chunk: Chunk, path: string, from: Seqno, upTo: Seqno, dense: ChunkIndex | undefined, sizeBytes: () => number): EntrySpan {
  if (dense !== undefined) return { path, file: chunk.name, startBytes: dense.offsetOf(from), endBytes: dense.offsetOf(upTo + 1) };
  const sparse = chunk.sparse;
  if (sparse !== undefined) {
    const startIndex = Math.floor((from - chunk.first) / SPARSE_INDEX_STRIDE);
    const endIndex = Math.min(Math.ceil((upTo + 1 - chunk.first) / SPARSE_INDEX_STRIDE), sparse.length - 1);
    return { path, file: chunk.name, startBytes: sparse[startIndex]!, endBytes: sparse[endIndex]! };
  }
  return { path, file: chunk.name, startBytes: CHUNK_HEADER_BYTES, endBytes: chunk.sizeBytes ?? sizeBytes() };
}
