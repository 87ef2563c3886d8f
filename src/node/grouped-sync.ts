/**
 * Grouped, asynchronous durability of the ledger (ledger.durability Synced): one sync covers every
 * append written before it started, and while it is under way the next group forms; when it
 * ends, one sync starts for everything written meanwhile. Appends never wait for a sync: the
 * driver sends a step's messages at once, and consensus acknowledges (backup) or counts (primary)
 * only entries up to durableSeqno, which moves when a sync ends (Raft.markDurable).
 *
 * A truncation cuts what the sync under way may claim: it covers the entries written before it
 * started, and those after the cut point are no longer the same entries.
 */
import { assert } from '../base/assert.js';
import type { DiskError } from '../ledger/index.js';

export interface GroupedSyncHost {
  /** Starts one sync of every append so far; `done` runs later, once they are durable. */
  startSync(done: (error: DiskError | undefined) => void): void;
  /** durableSeqno moved forward (the driver tells consensus at its next pump). */
  onDurable(seqno: number): void;
  /** A sync failed: the node cannot know what its disk holds and stops (fail-stop). */
  onFailure(error: DiskError): void;
}

export class GroupedSync {
  private durable: number;
  private written: number;
  /** The sync under way: the last seqno it covers (cut by truncations meanwhile). */
  private underWay: { covers: number } | undefined;
  /** Something was written after the sync under way started. */
  private again = false;
  private failed = false;
  /** Syncs started (each covers a group of appends). */
  syncs = 0;

  /** `seqno`: the last entry already durable (what the ledger held when it was opened and synced). */
  constructor(
    private readonly host: GroupedSyncHost,
    seqno: number,
  ) {
    this.durable = seqno;
    this.written = seqno;
  }

  /** Every entry up to here is durable. */
  get durableSeqno(): number {
    return this.durable;
  }

  /** The ledger now ends at `lastSeqno`, cut after `truncatedAfter` first when given. */
  wrote(lastSeqno: number, truncatedAfter: number | undefined): void {
    if (truncatedAfter !== undefined) {
      this.durable = Math.min(this.durable, truncatedAfter);
      if (this.underWay !== undefined) this.underWay.covers = Math.min(this.underWay.covers, truncatedAfter);
    }
    this.written = lastSeqno;
    if (this.underWay !== undefined) this.again = true;
    else this.start();
  }

  /** A start from elsewhere (a snapshot installed, a recovery's ledger settled): all of it synced already. */
  reset(seqno: number): void {
    this.durable = seqno;
    this.written = seqno;
    if (this.underWay !== undefined) this.underWay.covers = Math.min(this.underWay.covers, seqno);
  }

  private start(): void {
    if (this.failed) return;
    const sync = { covers: this.written };
    this.underWay = sync;
    this.again = false;
    this.syncs++;
    this.host.startSync((error) => this.ended(sync, error));
  }

  private ended(sync: { covers: number }, error: DiskError | undefined): void {
    assert(this.underWay === sync, 'syncs end one at a time, in the order they started');
    this.underWay = undefined;
    if (error !== undefined) {
      this.failed = true;
      this.host.onFailure(error);
      return;
    }
    if (sync.covers > this.durable) {
      this.durable = sync.covers;
      this.host.onDurable(this.durable);
    }
    if (this.again) this.start();
  }
}
