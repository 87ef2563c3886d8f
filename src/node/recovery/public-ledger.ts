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
import { decodeEntry, EntryFlags, hasFlag, type DecodedEntry } from '../../ledger/index.js';
import type { Replica } from '../replica.js';
import { recoveryReadBatchBytesMax, recoveryReadBatchEntriesMax, recoveryProgressIntervalMs } from '../limits.js';

export interface LedgerReadHost {
  readonly replica: Replica;
  readonly logger: Logger;
  readonly clock: Clock;
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

/** Reads frames `from`..`to` in batches; a batch that cannot be read is read entry by entry to find the bad one. */
export function* ledgerFrames(replica: Replica, from: number, to: number): Generator<{ seqno: number; frame?: Uint8Array; error?: string }[]> {
  let seqno = from;
  while (seqno <= to) {
    const upTo = Math.min(to, seqno + recoveryReadBatchEntriesMax - 1);
    let frames: Uint8Array[];
    try {
      frames = replica.ledger.getEntries(seqno, upTo, recoveryReadBatchBytesMax);
    } catch {
      try {
        frames = [replica.ledger.getEntry(seqno)];
      } catch (e) {
        yield [{ seqno, error: errorMessage(e) }];
        return;
      }
    }
    yield frames.map((frame, i) => ({ seqno: seqno + i, frame }));
    seqno += frames.length;
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

export async function readPublicLedger(host: LedgerReadHost, from: { readonly seqno: number; readonly view: number }): Promise<PublicLedgerRead> {
  const fromSeqno = from.seqno;
  const { replica, logger } = host;
  const last = replica.ledger.lastSeqno;
  const progress = new ReadProgress('reading the public ledger', last, logger, host.clock);
  logger.info(`reading the public domain of the ledger: entries ${fromSeqno + 1}..${last}`);
  let lastSignedSeqno = fromSeqno;
  let lastSignedView = from.view;
  let stopped: ReadStop | undefined;
  outer: for (const batch of ledgerFrames(replica, fromSeqno + 1, last)) {
    let bytes = 0;
    for (const item of batch) {
      let decoded: DecodedEntry;
      try {
        if (item.error !== undefined) throw new Error(item.error);
        decoded = decodeEntry(item.frame!);
      } catch (e) {
        stopped = { seqno: item.seqno, where: locationOf(replica, item.seqno), reason: `entry ${item.seqno} cannot be read: ${errorMessage(e)}` };
        break outer;
      }
      const problem = replica.applyRecoveredPublic(decoded);
      if (problem !== undefined) {
        stopped = { seqno: item.seqno, where: locationOf(replica, item.seqno), reason: problem };
        break outer;
      }
      bytes += item.frame!.byteLength;
      if (hasFlag(decoded.flags, EntryFlags.SIGNATURE)) {
        lastSignedSeqno = decoded.seqno;
        lastSignedView = decoded.view;
        replica.store.compact(decoded.seqno);
      }
    }
    progress.add(batch.length, bytes, batch.at(-1)!.seqno);
    await host.yieldControl();
  }
  if (stopped !== undefined) {
    logger.fail(`reading the ledger stopped at ${stopped.where}: ${stopped.reason}; keeping entries up to the last good signature, seqno ${lastSignedSeqno}`);
  }
  logger.info(`public ledger read: ${progress.summary()}; last signed seqno ${lastSignedSeqno}`);
  return { lastSignedSeqno, lastSignedView, entriesRead: progress.entries, bytesRead: progress.bytes, stopped };
}
