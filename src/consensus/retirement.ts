/** Where a node stands in its retirement, and which retirements await their record, as a log and a commit say. */
import type { NodeId, Seqno } from '../base/index.js';
import type { RaftLog } from './log.js';
import type { RetirementStage } from './types.js';

export function retirementStageOf(log: RaftLog, id: NodeId, commitSeqno: Seqno): RetirementStage | undefined {
  const removedAt = log.removedAtSeqno(id);
  if (removedAt === undefined) return undefined;
  const recordedAt = log.recordedAtSeqno(id);
  if (recordedAt !== undefined && recordedAt <= commitSeqno) return 'RetiredCommitted';
  if (removedAt <= commitSeqno) return 'Completed';
  if (log.lastSignatureSeqno > removedAt) return 'Signed';
  return 'Ordered';
}

/** Nodes whose retirement is committed but not yet recorded in this log, sorted. */
export function unrecordedRetirements(log: RaftLog, commitSeqno: Seqno): NodeId[] {
  const ids: NodeId[] = [];
  for (const [id, removedAt] of log.removals()) {
    if (removedAt <= commitSeqno && log.recordedAtSeqno(id) === undefined) ids.push(id);
  }
  return ids.sort();
}
