/**
 * Where a node's consensus starts (the core's RaftInitialState): from genesis, from the snapshot it
 * started from, or from what a start-up flow restored (its ledger and node state after a restart,
 * the recovered ledger after a recovery). The driver creates the core from it.
 */
import type { Configuration, RaftInitialState } from '../consensus/index.js';
import type { StartupSnapshot } from './snapshots.js';

/** Where a node's consensus log starts when it restarts from its own ledger (or a recovery read it). */
export interface RestoredConsensus {
  readonly lastSeqno: number;
  readonly view: number;
  readonly votedFor: string | undefined;
  readonly commitSeqno: number;
  /** The configuration to start from instead of the startup snapshot's (a recovery starts a new one). */
  readonly configs?: { seqno: number; nodes: string[] }[];
}

export function initialConsensusState(genesis: Configuration, snapshot: StartupSnapshot | undefined, restored: RestoredConsensus | undefined): RaftInitialState {
  const start = snapshot
    ? {
        configs: restored?.configs ?? snapshot.parts.meta.configurations.map((c) => ({ seqno: c.seqno, nodes: [...c.nodes] })),
        startSeqno: snapshot.seqno,
        startView: snapshot.parts.meta.view,
        viewHistory: [...snapshot.parts.meta.view_history],
      }
    : { configs: [genesis], startSeqno: 0 };
  if (restored) {
    return { ...start, lastSeqno: restored.lastSeqno, view: restored.view, commitSeqno: restored.commitSeqno, ...(restored.votedFor !== undefined ? { votedFor: restored.votedFor } : {}) };
  }
  if (snapshot) return { ...start, lastSeqno: snapshot.seqno, view: snapshot.parts.meta.view, commitSeqno: snapshot.seqno };
  return { ...start, lastSeqno: 0 };
}
