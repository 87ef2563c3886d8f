/**
 * Status of a transaction id as GET /app/tx reports it, from the view history (the first seqno
 * of every view) and the node's last and committed seqnos.
 */
import type { TxId } from '../base/ids.js';

export type TxStatus = 'Unknown' | 'Pending' | 'Committed' | 'Invalid';

export interface ViewHistory {
  /** viewStarts[i] = { view, seqno }: the first seqno written in `view`; ascending in both. */
  readonly viewStarts: readonly { readonly view: number; readonly seqno: number }[];
}

/** The view in which `seqno` was written, or undefined when the seqno is before the known history. */
export function viewOfSeqno(history: ViewHistory, seqno: number): number | undefined {
  const starts = history.viewStarts;
  let lo = 0;
  let hi = starts.length - 1;
  let found: number | undefined;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (starts[mid]!.seqno <= seqno) {
      found = starts[mid]!.view;
      lo = mid + 1;
    } else {
      hi = mid - 1;
    }
  }
  return found;
}

export function txStatus(
  txId: TxId,
  state: { readonly currentView: number; readonly lastSeqno: number; readonly commitSeqno: number; readonly history: ViewHistory },
): TxStatus {
  if (txId.seqno === 0) return 'Invalid';
  if (txId.seqno <= state.lastSeqno) {
    const view = viewOfSeqno(state.history, txId.seqno);
    if (view === undefined) return 'Unknown';
    if (view !== txId.view) {
      // A different view holds this seqno: if that is committed, or the asked view is older than
      // the one now holding it, the asked transaction can never commit.
      return txId.view < view || txId.seqno <= state.commitSeqno ? 'Invalid' : 'Unknown';
    }
    return txId.seqno <= state.commitSeqno ? 'Committed' : 'Pending';
  }
  // Beyond our log: unknown, unless its view is older than the current one and a later view already
  // started at or before its seqno (then it was rolled back).
  if (txId.view < state.currentView) {
    const view = viewOfSeqno(state.history, state.lastSeqno);
    if (view !== undefined && view > txId.view) return 'Invalid';
  }
  return 'Unknown';
}
