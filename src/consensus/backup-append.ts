/**
 * The backup's side of replication: checking an append batch and applying it to the log. The
 * role bookkeeping (who the primary is, the election timer) stays with the state machine.
 */
import { assert, type Seqno, type View } from '../base/index.js';
import type { RaftLog } from './log.js';
import type { AppendEntries, AppendResponse } from './types.js';

/** What to answer the primary, and how far the batch lets this backup commit. */
export interface AppendOutcome {
  readonly success: boolean;
  /** On success, the last seqno known to match the primary's log; on failure, where it should retry. */
  readonly lastSeqno: Seqno;
  /** A signature the primary's commit now reaches in this log, beyond commitSeqno; undefined otherwise. */
  readonly commitSeqno: Seqno | undefined;
}

/** Applies an append batch of the current view to the log (a backup whose commit is commitSeqno). */
export function acceptAppend(log: RaftLog, commitSeqno: Seqno, m: AppendEntries): AppendOutcome {
  let prevSeqno = m.prevSeqno;
  let prevView: View | undefined = m.prevView;
  let entries = m.entries;
  if (prevSeqno < commitSeqno) {
    // Entries up to our commit are committed, hence identical in every primary's log.
    const skip = Math.min(commitSeqno - prevSeqno, entries.length);
    entries = entries.slice(skip);
    prevSeqno += skip;
    prevView = log.viewAt(prevSeqno);
    if (prevSeqno < commitSeqno) {
      // Nothing new, and our committed prefix matches any current primary's log: say so, so
      // that a primary that knows nothing of us yet skips straight past it.
      return { success: true, lastSeqno: commitSeqno, commitSeqno: undefined };
    }
  }
  if (log.viewAt(prevSeqno) !== prevView) {
    return { success: false, lastSeqno: rejectHint(log, commitSeqno, prevSeqno), commitSeqno: undefined };
  }
  for (const e of entries) {
    const existing = log.viewAt(e.seqno);
    if (existing === e.view) continue;
    if (existing !== undefined) {
      assert(e.seqno > commitSeqno, () => `entry ${e.seqno} at or below commit ${commitSeqno} is never rolled back`);
      log.truncateAfter(e.seqno - 1);
    }
    log.append(e);
  }
  const lastNewSeqno = prevSeqno + entries.length;
  const committable = log.signatureAtOrBelow(Math.min(m.commitSeqno, lastNewSeqno));
  return { success: true, lastSeqno: lastNewSeqno, commitSeqno: committable !== undefined && committable > commitSeqno ? committable : undefined };
}

/** Where the primary should retry after a mismatch at prevSeqno: before the conflicting view, never below commit. */
function rejectHint(log: RaftLog, commitSeqno: Seqno, prevSeqno: Seqno): Seqno {
  if (prevSeqno > log.lastSeqno) return log.lastSeqno;
  const conflictView = log.viewAt(prevSeqno)!;
  const viewStart = log.viewStartSeqno(conflictView) ?? prevSeqno;
  return Math.max(commitSeqno, Math.min(prevSeqno - 1, viewStart - 1));
}

/** Entries follow prevSeqno contiguously, with views that never decrease and never pass the message's view. */
export function appendIsWellFormed(m: AppendEntries): boolean {
  let seqno = m.prevSeqno;
  let view = m.prevView;
  if (view > m.view) return false;
  for (const e of m.entries) {
    if (e.seqno !== seqno + 1 || e.view < view || e.view > m.view) return false;
    if ((e.kind === 'reconfiguration') !== (e.configuration !== undefined)) return false;
    if (e.configuration !== undefined && e.configuration.seqno !== e.seqno) return false;
    seqno = e.seqno;
    view = e.view;
  }
  return true;
}

/**
 * A backup that awaits durability (RaftOptions.awaitDurability) acknowledges only entries on its
 * disk: a successful answer beyond the durable seqno waits here (the newest one: answers are
 * cumulative) and leaves, cut down to what is durable, as syncs complete. An answer carrying a
 * read id goes at once, cut down the same way, so that reads never wait for a disk.
 */
export class HeldAcknowledgement {
  private held: AppendResponse | undefined;

  /** The answer to send now (undefined: held back until markDurable). */
  offer(response: AppendResponse, durableSeqno: Seqno): AppendResponse | undefined {
    if (!response.success || response.lastSeqno <= durableSeqno) return response;
    if (this.held === undefined || this.held.view !== response.view || this.held.to !== response.to || response.lastSeqno >= this.held.lastSeqno) {
      this.held = response;
    }
    // The log matches the primary's up to lastSeqno, hence up to the durable seqno below it.
    return response.readId !== undefined ? { ...response, lastSeqno: durableSeqno } : undefined;
  }

  /** What may leave now that entries up to durableSeqno are durable, with the backup's commit as of now. */
  release(durableSeqno: Seqno, commitSeqno: Seqno, view: View): AppendResponse | undefined {
    const held = this.held;
    if (held === undefined) return undefined;
    if (held.view !== view) {
      this.held = undefined;
      return undefined;
    }
    if (held.lastSeqno <= durableSeqno) this.held = undefined;
    const { readId: _readId, ...answer } = held;
    return { ...answer, lastSeqno: Math.min(held.lastSeqno, durableSeqno), commitSeqno };
  }

  /** A new view or role: the held answer is for a primary that is no longer. */
  drop(): void {
    this.held = undefined;
  }
}
