/**
 * Linearizable reads (etcd's ReadIndex), the primary's side. A read asked of the primary gets an
 * id from a counter and, as its *read seqno*, the primary's commit seqno — once that commit is an
 * entry of the primary's own view (before then a new primary's commit may lag what earlier
 * primaries committed; its first commit in its own view covers all of it). Every append the
 * primary sends from then on carries the highest read id issued, and every answer echoes the read
 * id of the append it answers. A read is confirmed once a majority of every active configuration
 * (the primary counting itself) echoed an id at least its own: those answers were sent after the
 * read arrived, in this primary's view, so no newer primary could have committed anything the read
 * seqno misses. A primary that loses its role abandons every read still pending.
 *
 * The ids only grow during a core's life and are answered only within one view by one primary (a
 * node is primary at most once per view), so an echo always refers to this primary's own reads.
 */
import type { NodeId, Seqno } from '../base/index.js';
import { jointMatchSeqno } from './quorum.js';
import type { Configuration, ReadConfirmed } from './types.js';

interface PendingRead {
  readonly readId: number;
  /** Undefined until the primary has committed an entry of its own view. */
  seqno: Seqno | undefined;
}

export class ReadIndex {
  /** The highest read id issued (0: none yet; appends then carry no read id). */
  lastReadId = 0;
  /** A read arrived since the last round of heartbeats: send one now rather than at the next tick. */
  roundPending = false;
  /** Oldest first; ids ascending. */
  private reads: PendingRead[] = [];

  get pendingCount(): number {
    return this.reads.length;
  }

  /** A new read: its seqno is the commit if that commit is of the primary's view, else decided later. */
  request(commitSeqno: Seqno, commitInOwnView: boolean): number {
    const readId = ++this.lastReadId;
    this.reads.push({ readId, seqno: commitInOwnView ? commitSeqno : undefined });
    this.roundPending = true;
    return readId;
  }

  /** The primary's commit reached an entry of its own view: reads waiting for it take that seqno. */
  onCommitInOwnView(commitSeqno: Seqno): void {
    for (const read of this.reads) if (read.seqno === undefined) read.seqno = commitSeqno;
  }

  /**
   * The reads a joint majority has confirmed, oldest first, removed from the pending ones.
   * `ackOf(id)` is the highest read id that peer echoed (the primary itself: lastReadId).
   * `withoutQuorum` is the simulator's known bug: confirm without asking anyone.
   */
  takeConfirmed(configs: readonly Configuration[], ackOf: (id: NodeId) => number, withoutQuorum = false): ReadConfirmed[] {
    if (this.reads.length === 0) return [];
    const confirmedId = withoutQuorum ? this.lastReadId : jointMatchSeqno(configs, ackOf);
    let n = 0;
    while (n < this.reads.length && this.reads[n]!.readId <= confirmedId && this.reads[n]!.seqno !== undefined) n++;
    if (n === 0) return [];
    return this.reads.splice(0, n).map((r) => ({ readId: r.readId, seqno: r.seqno! }));
  }

  /** The primary lost its role: every pending read is abandoned (ids returned, oldest first). */
  abandonAll(): number[] {
    this.roundPending = false;
    return this.reads.splice(0).map((r) => r.readId);
  }
}
