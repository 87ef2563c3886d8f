/**
 * The layout of one chunk file: an 8-byte file header followed by entry frames back to back.
 *
 *   off size field
 *   0   4    magic "CVLG"
 *   4   2    chunk format version = 1
 *   6   2    reserved = 0
 *   8   ..   entry frames (see entry.ts), seqnos contiguous
 *
 * The header is constant, so two nodes that write the same frames and cut at the same entry
 * produce byte-identical files.
 */
import { assert, type Seqno, type View } from '../base/index.js';
import { checkEntry, EntryFlags, hasFlag } from './entry.js';
import { LedgerError } from './errors.js';

export const CHUNK_MAGIC = 'CVLG';
export const CHUNK_FORMAT_VERSION = 1;
export const CHUNK_HEADER_BYTES = 8;

const HEADER = new Uint8Array([0x43, 0x56, 0x4c, 0x47, CHUNK_FORMAT_VERSION, 0, 0, 0]);

/** The file header every chunk file starts with (a shared constant: do not mutate). */
export function chunkFileHeader(): Uint8Array {
  return HEADER;
}

/**
 * Offsets of the frames of one chunk: entry `first + i` occupies [offset(i), offset(i + 1)).
 * Eight bytes per entry, so the index of a whole chunk is small next to the chunk itself.
 */
export class ChunkIndex {
  readonly first: Seqno;
  #count = 0;
  /** offsets[i] is where entry first+i starts; offsets[count] is the end of the last frame. */
  #offsets: Float64Array;

  constructor(first: Seqno, capacity = 64) {
    this.first = first;
    this.#offsets = new Float64Array(Math.max(2, capacity + 1));
    this.#offsets[0] = CHUNK_HEADER_BYTES;
  }

  get count(): number {
    return this.#count;
  }

  /** Last seqno held, or first - 1 when empty. */
  get last(): Seqno {
    return this.first + this.#count - 1;
  }

  /** End of the last frame: the length the file should have. */
  get endBytes(): number {
    return this.#offsets[this.#count]!;
  }

  push(frameSizeBytes: number): void {
    if (this.#count + 1 >= this.#offsets.length) {
      const grown = new Float64Array(this.#offsets.length * 2);
      grown.set(this.#offsets);
      this.#offsets = grown;
    }
    this.#offsets[this.#count + 1] = this.#offsets[this.#count]! + frameSizeBytes;
    this.#count++;
  }

  /**
   * Every `stride`-th offset, and the end: enough to find any entry with one short read, at
   * 1/stride of the memory of the full index.
   */
  sparse(stride: number): Float64Array {
    const out = new Float64Array(Math.ceil(this.#count / stride) + 1);
    for (let j = 0; j * stride < this.#count; j++) out[j] = this.#offsets[j * stride]!;
    out[out.length - 1] = this.endBytes;
    return out;
  }

  has(seqno: Seqno): boolean {
    return seqno >= this.first && seqno <= this.last;
  }

  /** Byte offset where `seqno` starts; `last + 1` gives the end of the last frame. */
  offsetOf(seqno: Seqno): number {
    assert(seqno >= this.first && seqno <= this.last + 1, () => `seqno ${seqno} outside chunk ${this.first}..${this.last}`);
    return this.#offsets[seqno - this.first]!;
  }

  /** Keeps the entries up to `seqno` (first - 1 keeps none). */
  truncateAfter(seqno: Seqno): void {
    assert(seqno >= this.first - 1 && seqno <= this.last, () => `truncate to ${seqno} outside chunk ${this.first}..${this.last}`);
    this.#count = seqno - this.first + 1;
  }
}

/** Frame-level damage found while scanning: what a torn write looks like. */
export interface ChunkDamage {
  offsetBytes: number;
  reason: 'TruncatedLedgerEntry' | 'MalformedLedgerEntry';
  message: string;
}

export interface ChunkScan {
  /** Undefined when the file holds no complete frame. */
  index: ChunkIndex | undefined;
  lastView: View;
  lastFlags: number;
  /** Length of the good prefix of the file (header and whole valid frames). */
  validBytes: number;
  damage: ChunkDamage | undefined;
}

function corrupted(file: string, offsetBytes: number, message: string): LedgerError {
  return new LedgerError('LedgerCorrupted', `${file} at offset ${offsetBytes}: ${message}`, { file, offsetBytes });
}

/**
 * Reads a whole chunk file's bytes. Frame-level damage (a cut or crc-failing frame, a cut
 * header) stops the scan and is returned as `damage`: the caller decides whether it is a torn
 * tail or corruption. Damage that no torn write can produce (a wrong magic, crc-valid frames
 * that do not follow each other) throws LedgerCorrupted with the file and offset.
 */
export function scanChunk(bytes: Uint8Array, file: string, verifyCrc = true): ChunkScan {
  const empty = (damage: ChunkDamage | undefined, validBytes: number): ChunkScan => ({
    index: undefined,
    lastView: 0,
    lastFlags: 0,
    validBytes,
    damage,
  });
  const headerSeen = Math.min(bytes.byteLength, CHUNK_HEADER_BYTES);
  for (let i = 0; i < headerSeen; i++) {
    if (bytes[i] !== HEADER[i]) throw corrupted(file, i, `not a chunk file header (expected magic ${CHUNK_MAGIC}, version ${CHUNK_FORMAT_VERSION})`);
  }
  if (bytes.byteLength < CHUNK_HEADER_BYTES) {
    return empty({ offsetBytes: 0, reason: 'TruncatedLedgerEntry', message: 'file header cut short' }, 0);
  }

  let index: ChunkIndex | undefined;
  let lastView = 0;
  let lastFlags = 0;
  let offset = CHUNK_HEADER_BYTES;
  while (offset < bytes.byteLength) {
    let entry;
    try {
      entry = checkEntry(bytes, offset, verifyCrc);
    } catch (e) {
      if (!(e instanceof LedgerError)) throw e;
      const reason = e.code === 'TruncatedLedgerEntry' ? 'TruncatedLedgerEntry' : 'MalformedLedgerEntry';
      const problem = (e.details?.['problem'] as string | undefined) ?? e.message;
      return { index, lastView, lastFlags, validBytes: offset, damage: { offsetBytes: offset, reason, message: problem } };
    }
    if (index === undefined) {
      index = new ChunkIndex(entry.seqno, Math.ceil(bytes.byteLength / 256));
    } else {
      if (entry.seqno !== index.last + 1) throw corrupted(file, offset, `seqno ${entry.seqno} follows ${index.last}`);
      if (entry.view < lastView) throw corrupted(file, offset, `view ${entry.view} goes back from ${lastView}`);
      if (hasFlag(lastFlags, EntryFlags.CHUNK_END)) throw corrupted(file, offset, `entry ${entry.seqno} follows a CHUNK_END entry`);
    }
    if (hasFlag(entry.flags, EntryFlags.CHUNK_END) && !hasFlag(entry.flags, EntryFlags.SIGNATURE)) {
      throw corrupted(file, offset, `entry ${entry.seqno} has CHUNK_END but is not a signature`);
    }
    index.push(entry.frameSizeBytes);
    lastView = entry.view;
    lastFlags = entry.flags;
    offset += entry.frameSizeBytes;
  }
  return index === undefined ? empty(undefined, offset) : { index, lastView, lastFlags, validBytes: offset, damage: undefined };
}
