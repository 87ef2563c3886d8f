/** The ledger's options, what it reports, and the primary's chunking policy. */
import type { Seqno } from '../base/index.js';
import type { ChunkDamage } from './chunk-file.js';
import type { Disk } from './disk.js';

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
 * Primary-side chunking policy: a chunk ends only on a signature (spec invariant 1), once the
 * chunk reached its target size or when a new chunk was asked for (trigger_ledger_chunk, or a
 * snapshot, which must coincide with a chunk end).
 */
export function shouldEndChunk(p: { chunkBytesSoFar: number; chunkSizeBytes: number; isSignature: boolean; forced: boolean }): boolean {
  return p.isSignature && (p.forced || p.chunkBytesSoFar >= p.chunkSizeBytes);
}
