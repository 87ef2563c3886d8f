/**
 * The Merkle leaves of a run of ledger entries, re-read from the chunk files (a receipt of a
 * transaction whose Merkle block the tree has compacted needs its block's 1024 leaves again).
 *
 * Ledger.locateEntries says where the entries are (without reading them); leavesOfEntries reads
 * and checks the frames and hashes each into its leaf, streaming through the files in windows so
 * that memory stays bounded by a window and one frame whatever the entries' sizes. It takes a
 * synchronous read function: the node runs it off its request thread (a worker on the real
 * files, src/platform/worker-leaf-reader.ts) through the EntryLeafReader interface, and the
 * simulator and tests run the inline reader below on their in-memory disk.
 */
import { assert } from '../base/index.js';
import type { Disk } from './disk.js';
import { checkEntry, decodeEntry, ENTRY_HEADER_BYTES, peekFrameSizeBytes, type DecodedEntry } from './entry.js';
import { asFileCorruption, LedgerError } from './errors.js';
import { entryLeaf } from './framing.js';

/** A stretch of one chunk file holding some of the entries asked for, from a frame boundary. */
export interface EntrySpan {
  readonly path: string;
  /** The chunk's file name, for errors. */
  readonly file: string;
  /** Where a frame starts at or before the first wanted entry of this file. */
  readonly startBytes: number;
  /** Where the frame after the last wanted entry of this file starts (or the file ends). */
  readonly endBytes: number;
}

/** The entries `firstSeqno`..`lastSeqno` and the spans of the files holding them, in order. */
export interface EntryLeavesRequest {
  readonly firstSeqno: number;
  readonly lastSeqno: number;
  readonly spans: readonly EntrySpan[];
}

/** Reads up to `lengthBytes` at `positionBytes` of a file (fewer at its end). */
export type ReadFileRange = (path: string, positionBytes: number, lengthBytes: number) => Uint8Array;

/** Reads Merkle leaves of ledger entries away from the caller's thread. */
export interface EntryLeafReader {
  /** The leaves of the entries asked for, 32 bytes each, packed in seqno order. */
  leavesOf(request: EntryLeavesRequest): Promise<Uint8Array>;
  /** Ends any thread or file the reader holds; later calls fail. */
  close(): void;
}

/** Bytes read at once: large enough for few reads, small enough to bound the memory of one walk. */
export const ENTRY_LEAVES_READ_WINDOW_BYTES = 1024 * 1024;

const LEAF_BYTES = 32;

/**
 * Reads the frames of the request's entries through `read`, checks each (crc, seqno in order)
 * and returns their leaves packed. LedgerCorrupted names the file and offset of what is wrong.
 */
export function leavesOfEntries(request: EntryLeavesRequest, read: ReadFileRange): Uint8Array {
  const { firstSeqno, lastSeqno } = request;
  const leaves = new Uint8Array((lastSeqno - firstSeqno + 1) * LEAF_BYTES);
  walkEntries(request, read, (entry) => leaves.set(entryLeaf(entry), (entry.seqno - firstSeqno) * LEAF_BYTES));
  return leaves;
}

/**
 * Reads the frames of the request's entries through `read`, checks each (crc, seqno in order)
 * and hands it, decoded (views of the bytes read: copy what must outlive the call), to `visit`
 * in seqno order. LedgerCorrupted names the file and offset of what is wrong.
 */
export function walkEntries(request: EntryLeavesRequest, read: ReadFileRange, visit: (entry: DecodedEntry) => void): void {
  const { firstSeqno, lastSeqno } = request;
  assert(Number.isSafeInteger(firstSeqno) && firstSeqno >= 1 && lastSeqno >= firstSeqno, () => `entries ${firstSeqno}..${lastSeqno}`);
  let next = firstSeqno;
  for (const span of request.spans) {
    if (next > lastSeqno) break;
    let window: Uint8Array = new Uint8Array(0);
    let windowStart = span.startBytes;
    // The bytes [at, at + length) of the span, read into the window when it does not hold them.
    const bytesAt = (at: number, length: number): { bytes: Uint8Array; offset: number } => {
      if (at < windowStart || at + length > windowStart + window.byteLength) {
        const want = Math.min(Math.max(length, ENTRY_LEAVES_READ_WINDOW_BYTES), span.endBytes - at);
        windowStart = at;
        window = read(span.path, at, want);
        if (window.byteLength < length) {
          throw new LedgerError('LedgerCorrupted', `${span.file} at offset ${at + window.byteLength}: file ends early`, {
            file: span.file,
            offsetBytes: at + window.byteLength,
          });
        }
      }
      return { bytes: window, offset: at - windowStart };
    };
    let at = span.startBytes;
    while (at < span.endBytes && next <= lastSeqno) {
      const head = bytesAt(at, Math.min(ENTRY_HEADER_BYTES, span.endBytes - at));
      let header;
      let wanted: DecodedEntry | undefined;
      try {
        // The length field first, then the whole frame: checkEntry needs it all.
        const sizeBytes = peekFrameSizeBytes(head.bytes, head.offset);
        const whole = bytesAt(at, Math.min(sizeBytes, span.endBytes - at));
        header = checkEntry(whole.bytes, whole.offset, false);
        if (header.seqno >= firstSeqno) {
          const entry = decodeEntry(whole.bytes, whole.offset);
          if (entry.seqno !== next) {
            throw new LedgerError('LedgerCorrupted', `${span.file} at offset ${at}: holds seqno ${entry.seqno}, expected ${next}`, {
              file: span.file,
              offsetBytes: at,
            });
          }
          next++;
          wanted = entry;
        }
      } catch (e) {
        if (!(e instanceof LedgerError) || e.code === 'LedgerCorrupted') throw e;
        throw asFileCorruption(e, span.file, at);
      }
      if (wanted !== undefined) visit(wanted);
      at += header.frameSizeBytes;
    }
  }
  if (next <= lastSeqno) {
    throw new LedgerError('LedgerEntryNotFound', `entries ${next}..${lastSeqno} are not in the ledger files read`, { seqno: next });
  }
}

/**
 * Reads on the calling thread through the ledger's Disk, answering asynchronously: for the
 * simulator (one thread, in-memory disks) and tests. A node process uses the worker reader.
 */
export function inlineEntryLeafReader(disk: Disk): EntryLeafReader {
  let closed = false;
  return {
    leavesOf: async (request) => {
      assert(!closed, 'the entry leaf reader is closed');
      return leavesOfEntries(request, (path, position, length) => disk.read(path, position, length));
    },
    close: () => {
      closed = true;
    },
  };
}
