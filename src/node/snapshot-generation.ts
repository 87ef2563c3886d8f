/**
 * Writing one snapshot without holding the event loop (docs/snapshots.md, "Generation"): the store's
 * state at the snapshot point is persistent, so it is packed in slices of snapshotSliceEntriesMax
 * entries, one per turn (the clock's defer: other work, consensus messages included, runs between
 * slices), and then handed to the SnapshotWriter, which encodes, encrypts, hashes, writes and syncs
 * it (on a worker thread in a node process). The bytes are those of a one-turn snapshot.
 */
import { assert } from '../base/assert.js';
import { toBase64 } from '../base/bytes.js';
import { errorMessage } from '../base/errors.js';
import { BLOCK_LEAF_COUNT, type HistoryTree } from '../merkle/index.js';
import type { Clock } from '../base/clock.js';
import type { SnapshotPacker } from '../kv/index.js';
import type { SnapshotMeta, SnapshotWriter, SnapshotWriteResult } from '../ledger/index.js';
import { snapshotSliceCheckEntries, snapshotSliceEntriesMax, snapshotSliceMs, snapshotWritePieceBytes } from './limits.js';

/** What GET /node/metrics reports of this node's snapshot generation. */
export interface SnapshotGenerationMetrics {
  /** Snapshots this node wrote since it started. */
  written: number;
  /** Generations under way (packing or being written). */
  in_progress: number;
  /** Where the file is encoded and written: "worker" (another thread) or "inline". */
  writer: 'worker' | 'inline';
  /** The last snapshot written. */
  last:
    | {
        seqno: number;
        size_bytes: number;
        /** Turns of the event loop the packing was spread over. */
        slices: number;
        entries_per_slice_max: number;
        /** From the snapshot point to the file synced (monotonic clock). */
        generation_ms: number;
      }
    | undefined;
}

export interface GenerationRequest {
  readonly seqno: number;
  readonly packer: SnapshotPacker;
  readonly secret: Uint8Array;
  readonly meta: SnapshotMeta;
  readonly path: string;
}

/** A generation under way: cancel() stops the packing; a job already with the writer still ends (its outcome is then ignored by the caller). */
export interface GenerationHandle {
  cancel(): void;
}

export class SnapshotGenerator {
  readonly #clock: Clock;
  readonly #writer: SnapshotWriter;
  readonly #metrics: SnapshotGenerationMetrics;

  constructor(clock: Clock, writer: SnapshotWriter, where: 'worker' | 'inline') {
    this.#clock = clock;
    this.#writer = writer;
    this.#metrics = { written: 0, in_progress: 0, writer: where, last: undefined };
  }

  metrics(): SnapshotGenerationMetrics {
    return { ...this.#metrics, last: this.#metrics.last && { ...this.#metrics.last } };
  }

  /** Packs and writes; `done` gets the result or the error, once, unless cancelled while packing. */
  start(request: GenerationRequest, done: (outcome: SnapshotWriteResult | Error) => void): GenerationHandle {
    const startedMs = this.#clock.monotonicMs();
    let cancelled = false;
    this.#metrics.in_progress++;
    const finish = (outcome: SnapshotWriteResult | Error): void => {
      this.#metrics.in_progress--;
      if (!(outcome instanceof Error)) {
        this.#metrics.written++;
        this.#metrics.last = {
          seqno: request.seqno,
          size_bytes: outcome.sizeBytes,
          slices: request.packer.slices,
          entries_per_slice_max: snapshotSliceEntriesMax,
          generation_ms: Math.round(this.#clock.monotonicMs() - startedMs),
        };
      }
      done(outcome);
    };
    const slice = (): void => {
      if (cancelled) {
        this.#metrics.in_progress--;
        return;
      }
      if (!this.#packSlice(request.packer)) {
        this.#clock.defer(slice);
        return;
      }
      const job = { packed: request.packer.result(), secret: request.secret, meta: request.meta, path: request.path, pieceBytes: snapshotWritePieceBytes };
      this.#writer.write(job).then(finish, (e: unknown) => finish(e instanceof Error ? e : new Error(errorMessage(e))));
    };
    // The first slice too waits for a turn of its own: the snapshot point is applied in the middle of other work.
    this.#clock.defer(slice);
    return {
      cancel: () => {
        cancelled = true;
      },
    };
  }

  /** One turn's worth of packing (limits.ts, snapshotSliceMs); true once all is packed. */
  #packSlice(packer: SnapshotPacker): boolean {
    const startMs = this.#clock.monotonicMs();
    packer.beginSlice();
    for (let packed = 0; packed < snapshotSliceEntriesMax; packed += snapshotSliceCheckEntries) {
      if (packer.pack(snapshotSliceCheckEntries)) return true;
      if (this.#clock.monotonicMs() - startMs >= snapshotSliceMs) return false;
    }
    return false;
  }

  close(): void {
    this.#writer.close();
  }
}

/**
 * The Merkle tree a snapshot at `seqno` carries. Every node must write the same tree, whatever it
 * compacted: all whole blocks below the one holding leaf seqno - 2 are compacted (so the root the
 * signature at seqno signed, over seqno - 1 leaves, stays computable), the leaves above are listed.
 */
export function canonicalTreeOf(tree: HistoryTree, seqno: number): SnapshotMeta['tree'] {
  assert(tree.size === seqno, `the tree holds ${tree.size} leaves at snapshot ${seqno}`);
  const compactionPoint = seqno === 0 ? 0 : Math.floor((seqno - 1) / BLOCK_LEAF_COUNT) * BLOCK_LEAF_COUNT;
  assert(compactionPoint >= tree.compactionPoint, 'the tree was not compacted past the snapshot');
  const blocks = compactionPoint / BLOCK_LEAF_COUNT;
  const blockHashes = new Uint8Array(blocks * 32);
  for (let b = 0; b < blocks; b++) blockHashes.set(tree.blockHash(b), b * 32);
  const leaves = new Uint8Array((seqno - compactionPoint) * 32);
  for (let i = compactionPoint; i < seqno; i++) leaves.set(tree.leaf(i), (i - compactionPoint) * 32);
  return { size: seqno, compaction_point: compactionPoint, block_hashes: toBase64(blockHashes), leaves: toBase64(leaves) };
}
