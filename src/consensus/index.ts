/** The consensus core: a pure Raft state machine. See docs/consensus.md for the contract. */
export { createRaft } from './raft.js';
export type { Raft, RaftInit, RaftInitialState, RaftOptions } from './raft.js';
export { encodeMessage, decodeMessage } from './codec.js';
export { ConsensusMessageError, notPrimary, tooManyPendingTransactions } from './errors.js';
export { hasMajority, hasJointMajority, voteOutcome, majorityMatchSeqno, jointMatchSeqno, nodesOf } from './quorum.js';
export type { VoteOutcome } from './quorum.js';
export * from './types.js';
