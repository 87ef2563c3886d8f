/**
 * Leaves of compacted Merkle blocks re-read from the ledger files for receipts: a bounded LRU of
 * blocks already re-read, the re-reads under way (a second receipt in the same block waits for the
 * same re-read), and a bound on re-reads at once. A re-read runs on the injected EntryLeafReader,
 * off the request thread; beyond the bound a receipt is refused at once (503 ReceiptRebuildsBusy,
 * Retry-After) rather than queued.
 *
 * Leaves of a compacted block never change (the block is committed); the tree still checks them
 * against the block hash it kept for every proof.
 */
import { isCovenantError } from '../../base/errors.js';
import { BLOCK_LEAF_COUNT } from '../../merkle/index.js';
import type { EntryLeafReader, EntryLeavesRequest } from '../../ledger/index.js';
import { retryLater } from '../errors.js';
import { blockRebuildsBusyRetryAfterSeconds } from '../limits.js';

const LEAF_BYTES = 32;

export interface RebuiltBlocksInit {
  readonly reader: EntryLeafReader;
  /** Where the block's entries are in the ledger files now (they may move: renames, retention). */
  readonly locate: (firstSeqno: number, lastSeqno: number) => EntryLeavesRequest;
  readonly cachedMax: number;
  readonly concurrentMax: number;
}

export class RebuiltBlocks {
  /** Packed leaves of recently used blocks, oldest first (a Map keeps insertion order). */
  private readonly cached = new Map<number, Uint8Array>();
  private readonly running = new Map<number, Promise<Uint8Array>>();
  /** Re-reads started (cache misses), for tests and reports. */
  rebuilds = 0;

  constructor(private readonly init: RebuiltBlocksInit) {}

  get cachedCount(): number {
    return this.cached.size;
  }

  get runningCount(): number {
    return this.running.size;
  }

  /** The leaves of block `blockIndex` if cached (marked recently used). */
  cachedLeaves(blockIndex: number): readonly Uint8Array[] | undefined {
    const packed = this.cached.get(blockIndex);
    if (packed === undefined) return undefined;
    this.cached.delete(blockIndex);
    this.cached.set(blockIndex, packed);
    return unpack(packed);
  }

  /** The leaves of block `blockIndex`: cached, the re-read under way, or a new re-read if one is allowed. */
  leaves(blockIndex: number): readonly Uint8Array[] | Promise<readonly Uint8Array[]> {
    const cached = this.cachedLeaves(blockIndex);
    if (cached !== undefined) return cached;
    let running = this.running.get(blockIndex);
    if (running === undefined) {
      if (this.running.size >= this.init.concurrentMax) {
        throw retryLater(
          'ReceiptRebuildsBusy',
          `this receipt needs Merkle block ${blockIndex} re-read from the ledger files, and ${this.running.size} re-reads are under way ` +
            `(at most ${this.init.concurrentMax} at once): retry in ${blockRebuildsBusyRetryAfterSeconds} s`,
          blockRebuildsBusyRetryAfterSeconds * 1000,
        );
      }
      running = this.reread(blockIndex);
      this.running.set(blockIndex, running);
      // Whatever the outcome, the slot is free again (a failed re-read is retried by the next receipt).
      const release = () => this.running.delete(blockIndex);
      running.then(release, release);
    }
    return running.then(unpack);
  }

  private async reread(blockIndex: number): Promise<Uint8Array> {
    this.rebuilds++;
    const first = blockIndex * BLOCK_LEAF_COUNT + 1;
    const last = first + BLOCK_LEAF_COUNT - 1;
    let packed: Uint8Array;
    try {
      packed = await this.init.reader.leavesOf(this.init.locate(first, last));
    } catch (e) {
      // A chunk file renamed (completed, committed) or relocated (retention) between locating and
      // reading: locate again, once.
      if (!isCovenantError(e) || e.code !== 'DiskIoFailed') throw e;
      packed = await this.init.reader.leavesOf(this.init.locate(first, last));
    }
    this.cached.set(blockIndex, packed);
    while (this.cached.size > this.init.cachedMax) this.cached.delete(this.cached.keys().next().value!);
    return packed;
  }
}

function unpack(packed: Uint8Array): Uint8Array[] {
  const leaves: Uint8Array[] = [];
  for (let i = 0; i < packed.byteLength; i += LEAF_BYTES) leaves.push(packed.subarray(i, i + LEAF_BYTES));
  return leaves;
}
