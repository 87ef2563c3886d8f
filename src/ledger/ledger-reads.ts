/**
 * Reads across the chunks of a ledger (Ledger.getDecodedEntries, Ledger.locateEntries and
 * Ledger.listChunks): one read per chunk, one span per chunk without reading, a chunk's listing.
 */
import { type Seqno } from '../base/index.js';
import { entrySpanOf, type Chunk, type ChunkReader, type WriteChunk } from './chunk-reader.js';
import type { EntryLeavesRequest, EntrySpan } from './entry-leaves.js';
import type { DecodedEntry } from './entry.js';
import type { ChunkListing } from './ledger-types.js';

/** What a range read needs of the ledger: its reader, the chunk being written, and where a seqno is. */
export interface ChunkLocator {
  readonly reader: ChunkReader;
  readonly write: WriteChunk | undefined;
  /** The chunk holding `seqno`; throws LedgerEntryNotFound when none does. */
  holding(seqno: Seqno): Chunk;
  lastOf(chunk: Chunk): Seqno;
  sizeBytesOf(path: string): number;
}

/**
 * The entries `from`..`to` (from <= to), decoded from one read per chunk; with `maxBytes`, stops
 * before the frame that would exceed it (but always returns at least one frame).
 */
export function readDecodedRange(ledger: ChunkLocator, from: Seqno, to: Seqno, maxBytes: number): DecodedEntry[] {
  const { reader, write } = ledger;
  const out: DecodedEntry[] = [];
  let totalBytes = 0;
  let seqno = from;
  while (seqno <= to) {
    const chunk = ledger.holding(seqno);
    const index = reader.indexOf(chunk, write);
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
    const bytes = reader.read(chunk, start, index.offsetOf(end) - start);
    let offset = 0;
    for (let s = seqno; s < end; s++) {
      const entry = reader.decodeAt(chunk, bytes, offset, start, s);
      out.push(entry);
      offset += entry.frameSizeBytes;
    }
    if (end <= chunkTo) break;
    seqno = end;
  }
  return out;
}

/** Where entries `from`..`to` are, one span per chunk (entrySpanOf), without reading or scanning a file. */
export function locateRange(ledger: ChunkLocator, from: Seqno, to: Seqno): EntryLeavesRequest {
  const spans: EntrySpan[] = [];
  let seqno = from;
  while (seqno <= to) {
    const chunk = ledger.holding(seqno);
    const upTo = Math.min(to, ledger.lastOf(chunk));
    const path = ledger.reader.pathOf(chunk);
    spans.push(entrySpanOf(chunk, path, seqno, upTo, ledger.reader.cachedIndexOf(chunk, ledger.write), () => ledger.sizeBytesOf(path)));
    seqno = upTo + 1;
  }
  return { firstSeqno: from, lastSeqno: to, spans };
}

/** What Ledger.listChunks says of a chunk (its size from the write index, the chunk, or the disk). */
export function listingOf(ledger: ChunkLocator, chunk: Chunk): ChunkListing {
  const path = ledger.reader.pathOf(chunk);
  let sizeBytes: number;
  if (ledger.write?.chunk === chunk) sizeBytes = ledger.write.index.endBytes;
  else sizeBytes = chunk.sizeBytes ??= ledger.sizeBytesOf(path);
  return {
    name: chunk.name,
    first: chunk.first,
    last: ledger.lastOf(chunk),
    committed: chunk.committed,
    complete: chunk.last !== undefined,
    recovery: chunk.recovery,
    path,
    sizeBytes,
  };
}
