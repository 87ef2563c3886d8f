/**
 * Reading a previous service's ledger at the start of a disaster recovery (spec "Disaster recovery
 * procedure", node state ReadingPublicLedger): the public domain of every entry after `fromSeqno`
 * (0, or the snapshot the store was loaded from) is applied to the replica's store and Merkle
 * tree, every signature transaction checked against the tree on the way. Reading stops at the end
 * of the ledger, or at the first entry that cannot be read or whose signature does not verify
 * (torn, tampered); the node then keeps what the last good signature covers and says where it
 * stopped (file and offset).
 *
 * The read yields between batches (so GET /node/state answers while it reads, with the
 * last_signed_seqno so far) and logs its progress (entries and bytes read, rate) every few seconds.
 */
import { errorMessage } from '../../base/errors.js';
import type { Clock } from '../../base/clock.js';
import type { Logger } from '../../base/log.js';
import { decodeEntry, EntryFlags, hasFlag, type DecodedEntry, type EntryLeafReader } from '../../ledger/index.js';
import type { Replica } from '../replica.js';
import { recoveryReadBatchBytesMax, recoveryReadBatchEntriesMax, recoveryProgressIntervalMs } from '../limits.js';

export interface LedgerReadHost {
  readonly replica: Replica;
  readonly logger: Logger;
  readonly clock: Clock;
  /**
   * Computes the entries' Merkle leaves off this thread while it reads (the node's worker reader);
   * without it they are computed on this thread.
   */
  readonly leafReader?: EntryLeafReader | undefined;
  /** Lets the event loop run (other requests, timers) between batches. */
  yieldControl(): Promise<void>;
}

/** Where and why reading stopped before the end of the ledger. */
export interface ReadStop {
  readonly seqno: number;
  /** "file:offset" of the entry, as far as the ledger files tell. */
  readonly where: string;
  readonly reason: string;
}

export interface PublicLedgerRead {
  readonly lastSignedSeqno: number;
  /** The view of the last signature entry. */
  readonly lastSignedView: number;
  readonly entriesRead: number;
  readonly bytesRead: number;
  readonly stopped: ReadStop | undefined;
}

/** "N entries in S s, R entries/s": how a recovery's log sums up each of its phases. */
export function phaseSummary(entries: number, ms: number): string {
  const seconds = Math.max(1e-3, ms / 1000);
  return `${entries} entries in ${seconds.toFixed(2)} s, ${Math.round(entries / seconds)} entries/s`;
}

/** Logs the progress of a long read every recoveryProgressIntervalMs. */
export class ReadProgress {
  private readonly startedMs: number;
  private lastLogMs: number;
  entries = 0;
  bytes = 0;

  constructor(
    private readonly what: string,
    private readonly total: number,
    private readonly logger: Logger,
    private readonly clock: Clock,
  ) {
    this.startedMs = clock.monotonicMs();
    this.lastLogMs = this.startedMs;
  }

  add(entries: number, bytes: number, seqno: number): void {
    this.entries += entries;
    this.bytes += bytes;
    const now = this.clock.monotonicMs();
    if (now - this.lastLogMs < recoveryProgressIntervalMs) return;
    this.lastLogMs = now;
    this.logger.info(`${this.what}: ${this.summary()}, up to seqno ${seqno} of ${this.total}`);
  }

  summary(): string {
    const seconds = Math.max(1e-3, (this.clock.monotonicMs() - this.startedMs) / 1000);
    const mib = (this.bytes / (1024 * 1024)).toFixed(1);
    return `${this.entries} entries (${mib} MiB) in ${seconds.toFixed(1)} s, ${Math.round(this.entries / seconds)} entries/s`;
  }
}

/** One entry of a read: decoded (and checked, crc included), or why it cannot be read. */
export interface ReadEntry {
  readonly seqno: number;
  readonly entry?: DecodedEntry;
  readonly error?: string;
}

/**
 * Reads entries `from`..`to` in batches, decoded once; a batch that cannot be read is read entry
 * by entry to find the bad one, and reading stops after it.
 */
export function* ledgerEntries(replica: Replica, from: number, to: number): Generator<ReadEntry[]> {
  let seqno = from;
  while (seqno <= to) {
    const upTo = Math.min(to, seqno + recoveryReadBatchEntriesMax - 1);
    let entries: DecodedEntry[];
    try {
      entries = replica.ledger.getDecodedEntries(seqno, upTo, recoveryReadBatchBytesMax);
    } catch {
      try {
        entries = [decodeEntry(replica.ledger.getEntry(seqno))];
      } catch (e) {
        yield [{ seqno, error: errorMessage(e) }];
        return;
      }
    }
    yield entries.map((entry, i) => ({ seqno: seqno + i, entry }));
    seqno += entries.length;
  }
}

/** "file:offset" of the entry at `seqno` (the start of its chunk's frame span as the ledger locates it). */
export function locationOf(replica: Replica, seqno: number): string {
  try {
    const span = replica.ledger.locateEntries(seqno, seqno).spans[0];
    return span ? `${span.file}:${span.startBytes}` : `seqno ${seqno}`;
  } catch {
    return `seqno ${seqno}`;
  }
}

/** A signature entry read and applied, whose ECDSA verification runs meanwhile. */
interface PendingSignature {
  readonly seqno: number;
  readonly view: number;
  /** Its problem, or undefined once it verifies. */
  readonly verdict: Promise<string | undefined>;
}

export async function readPublicLedger(host: LedgerReadHost, from: { readonly seqno: number; readonly view: number }): Promise<PublicLedgerRead> {
  const fromSeqno = from.seqno;
  const { replica, logger } = host;
  const last = replica.ledger.lastSeqno;
  const progress = new ReadProgress('reading the public ledger', last, logger, host.clock);
  logger.info(`reading the public domain of the ledger: entries ${fromSeqno + 1}..${last}`);
  const leaves = host.leafReader !== undefined && last > fromSeqno ? new LeafPrefetch(host.leafReader, replica, fromSeqno + 1, last) : undefined;
  let lastSignedSeqno = fromSeqno;
  let lastSignedView = from.view;
  let stopped: ReadStop | undefined;
  // Signatures are verified on the thread pool while the read goes on. The verdicts are taken in
  // order, a batch later: each one that verifies is the last good signature so far (the store is
  // compacted there); the first that does not stops the read at it, and what was applied after
  // it is dropped with the rest of the unsigned tail (Replica.settleRecoveredPublic).
  const pending: PendingSignature[] = [];
  const settle = async (count: number): Promise<ReadStop | undefined> => {
    for (const signature of pending.splice(0, count)) {
      const problem = await signature.verdict;
      if (problem !== undefined) {
        pending.length = 0;
        return { seqno: signature.seqno, where: locationOf(replica, signature.seqno), reason: problem };
      }
      lastSignedSeqno = signature.seqno;
      lastSignedView = signature.view;
      replica.markSigned(signature.seqno);
      replica.store.compact(signature.seqno);
    }
    return undefined;
  };
  outer: for (const batch of ledgerEntries(replica, fromSeqno + 1, last)) {
    const earlier = pending.length;
    const leafOf = leaves === undefined ? undefined : await leaves.leavesFor(batch[0]!.seqno, batch.at(-1)!.seqno);
    let bytes = 0;
    for (const item of batch) {
      const decoded = item.entry;
      if (decoded === undefined) {
        stopped = { seqno: item.seqno, where: locationOf(replica, item.seqno), reason: `entry ${item.seqno} cannot be read: ${item.error}` };
        break outer;
      }
      if (hasFlag(decoded.flags, EntryFlags.SIGNATURE)) {
        // Checked against the tree before the entry's own leaf joins it.
        const verdict = replica.signatureProblemAsync(decoded.publicBytes, decoded.seqno);
        if (typeof verdict === 'string') {
          stopped = { seqno: item.seqno, where: locationOf(replica, item.seqno), reason: verdict };
          break outer;
        }
        pending.push({ seqno: decoded.seqno, view: decoded.view, verdict });
      }
      replica.applyRecoveredPublic(decoded, leafOf?.(decoded.seqno));
      bytes += decoded.frameSizeBytes;
    }
    progress.add(batch.length, bytes, batch.at(-1)!.seqno);
    const bad = await settle(earlier);
    if (bad !== undefined) {
      stopped = bad;
      break;
    }
    await host.yieldControl();
  }
  // A signature still being verified precedes any later stop: the first that fails is where the read stopped.
  const bad = await settle(pending.length);
  if (bad !== undefined) stopped = bad;
  if (stopped !== undefined) {
    logger.fail(`reading the ledger stopped at ${stopped.where}: ${stopped.reason}; keeping entries up to the last good signature, seqno ${lastSignedSeqno}`);
  }
  logger.info(`public ledger read: ${progress.summary()}; last signed seqno ${lastSignedSeqno}`);
  return { lastSignedSeqno, lastSignedView, entriesRead: progress.entries, bytesRead: progress.bytes, stopped };
}

/** Leaves requested at once, and how many such ranges are requested ahead of the one being read. */
const LEAF_RANGE_ENTRIES = recoveryReadBatchEntriesMax;
const LEAF_RANGES_AHEAD = 2;

/**
 * The Merkle leaves of the entries being read, computed ahead on the node's entry leaf reader (a
 * worker thread, which reads and hashes the entries from the files itself) while this thread
 * applies the entries before them: ranges of LEAF_RANGE_ENTRIES seqnos from the first read, a few
 * requested ahead. The leaves of a range the reader cannot give (an entry it cannot read) are
 * computed on this thread, which then finds and reports the bad entry itself.
 */
class LeafPrefetch {
  private readonly ranges = new Map<number, Promise<Uint8Array | undefined>>();
  private requested = 0;

  constructor(
    private readonly reader: EntryLeafReader,
    private readonly replica: Replica,
    private readonly first: number,
    private readonly last: number,
  ) {}

  /** The leaf of each entry of first..last (undefined: compute it here), once they are in. */
  async leavesFor(first: number, last: number): Promise<(seqno: number) => Uint8Array | undefined> {
    const from = this.rangeOf(first);
    const to = this.rangeOf(last);
    this.request(to + LEAF_RANGES_AHEAD);
    const got = new Map<number, Uint8Array | undefined>();
    for (let range = from; range <= to; range++) got.set(range, await this.ranges.get(range));
    for (const range of this.ranges.keys()) if (range <= to) this.ranges.delete(range);
    return (seqno) => {
      const range = this.rangeOf(seqno);
      const packed = got.get(range);
      if (packed === undefined) return undefined;
      const at = (seqno - this.first - range * LEAF_RANGE_ENTRIES) * 32;
      return packed.subarray(at, at + 32);
    };
  }

  private rangeOf(seqno: number): number {
    return Math.floor((seqno - this.first) / LEAF_RANGE_ENTRIES);
  }

  private request(upTo: number): void {
    for (; this.requested <= upTo; this.requested++) {
      const first = this.first + this.requested * LEAF_RANGE_ENTRIES;
      if (first > this.last) return;
      const last = Math.min(this.last, first + LEAF_RANGE_ENTRIES - 1);
      let leaves: Promise<Uint8Array | undefined>;
      try {
        leaves = this.reader.leavesOf(this.replica.ledger.locateEntries(first, last)).catch(() => undefined);
      } catch {
        leaves = Promise.resolve(undefined);
      }
      this.ranges.set(this.requested, leaves);
    }
  }
}
