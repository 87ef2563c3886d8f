/** Who may stand for election, what a vote request says, and whether a voter finds the candidate up to date. */
import type { NodeId, View } from '../base/index.js';
import type { RaftLog } from './log.js';
import { nodesOf } from './quorum.js';
import type { Configuration, RequestVote, RetirementStage } from './types.js';

/**
 * Any member of an active configuration may stand, retiring ones included: otherwise an
 * uncommitted configuration whose new members lag could leave no one able to win both
 * majorities. So may a node whose retirement is Completed but not yet recorded: it may hold
 * the only copy of the freshest signed log (a retiring primary cut off before it could hand
 * over), without which no remaining node could win its vote. Such a primary only hands over.
 */
export function mayStand(selfId: NodeId, stage: RetirementStage | undefined, configs: readonly Configuration[]): boolean {
  if (stage === 'RetiredCommitted') return false;
  if (stage === 'Completed') return true;
  return configs.some((c) => c.nodes.includes(selfId));
}

/** A request to every other node of the active configurations, carrying the candidate's last signature. */
export function voteRequests(selfId: NodeId, log: RaftLog, configs: readonly Configuration[], view: View, preVote: boolean, force: boolean): RequestVote[] {
  const lastSignatureSeqno = log.lastSignatureSeqno;
  const lastSignatureView = log.viewAt(lastSignatureSeqno)!;
  const requests: RequestVote[] = [];
  for (const id of nodesOf(configs)) {
    if (id === selfId) continue;
    requests.push({ type: 'request-vote', from: selfId, to: id, view, preVote, force, lastSignatureView, lastSignatureSeqno });
  }
  return requests;
}

/** Votes compare the candidate's last signature entry with the voter's, view first. */
export function candidateIsUpToDate(log: RaftLog, m: RequestVote): boolean {
  const mySignatureSeqno = log.lastSignatureSeqno;
  const mySignatureView = log.viewAt(mySignatureSeqno)!;
  return m.lastSignatureView > mySignatureView || (m.lastSignatureView === mySignatureView && m.lastSignatureSeqno >= mySignatureSeqno);
}
