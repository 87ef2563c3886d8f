/** The public face of the Raft state machine: its options, initial state and interface. */
import { assert, type NodeId, type Seqno, type View } from '../base/index.js';
import type { Configuration, Entry, EntryKind, EntryStorage, KnownBug, Message, RaftStatus, RaftSummary, RandomSource, Ready } from './types.js';

export interface RaftOptions {
  /** A backup that hears nothing from a primary for a random time in [this, 2 × this) stands for election; also the CheckQuorum period. */
  readonly electionTimeoutTicks: number;
  /** The primary sends heartbeats (and retransmits) this often. Below electionTimeoutTicks. */
  readonly heartbeatTicks: number;
  /** An append batch holds at most this many entries... */
  readonly maxBatchEntries: number;
  /** ...and at most this many entry bytes (a single larger entry still goes alone). */
  readonly maxBatchBytes: number;
  /** Beyond this many uncommitted entries the primary refuses new work (signatures excepted). */
  readonly maxUncommittedEntries: number;
  /** Unacknowledged append batches in flight per peer. Default 4. */
  readonly maxInflightBatches?: number;
  /** Outgoing messages held between two Ready; beyond this, messages are dropped. Default 65536. */
  readonly maxOutboxMessages?: number;
  /**
   * False (default): entries count as held once their Ready is advanced (persisted). True: the
   * caller makes them durable later, off the step (a grouped, asynchronous sync) and says so with
   * markDurable; a backup acknowledges, and a primary counts its own copy, only what is durable.
   */
  readonly awaitDurability?: boolean;
}

/** Where this node's log starts and what it had persisted (all optional fields default to genesis). */
export interface RaftInitialState {
  /** The log starts after this seqno: a snapshot's (a signature), or 0. */
  readonly startSeqno?: Seqno;
  /** The view of the entry at startSeqno. */
  readonly startView?: View;
  /** viewHistory[v - 1] = first seqno of view v, for views up to startView. */
  readonly viewHistory?: readonly Seqno[];
  /** The configurations active at startSeqno. */
  readonly configs: readonly Configuration[];
  /** Entries startSeqno+1..lastSeqno are readable from storage. Default: startSeqno. */
  readonly lastSeqno?: Seqno;
  /** Persisted hard state (see HardState). */
  readonly view?: View;
  readonly votedFor?: NodeId;
  readonly commitSeqno?: Seqno;
}

export interface RaftInit extends RaftOptions {
  readonly selfId: NodeId;
  readonly random: RandomSource;
  readonly storage: EntryStorage;
  readonly initial: RaftInitialState;
  /** Simulator only: deliberately wrong behaviours that its checkers must catch. */
  readonly bugs?: readonly KnownBug[];
}

export interface Raft {
  /** Advances logical time by one tick. */
  tick(): void;
  /** Handles a message from a peer. Messages not addressed to this node are ignored. */
  step(message: Message): void;
  /**
   * Appends an entry on the primary. The entry must carry the next txid: view = status().view and
   * seqno = status().lastSeqno + 1. Throws NotPrimary or TooManyPendingTransactions (CovenantError).
   */
  propose(entry: Entry): void;
  /**
   * Throws what propose would throw (NotPrimary, TooManyPendingTransactions) for an entry of
   * `kind` proposed after `queuedEntries` more entries that are on their way to propose.
   */
  checkProposal(kind: EntryKind, queuedEntries: number): void;
  /**
   * Primary only: starts a linearizable read (ReadIndex) and returns its id. The id comes back in
   * a later Ready's readsConfirmed, with the seqno the read must reflect, once a majority of every
   * active configuration acknowledged this primary after the read arrived — or in readsAbandoned
   * if this node stops being primary first. Throws NotPrimary on any other node.
   */
  requestRead(): number;
  /** Starts an election now (through PreVote), as if the election timeout had expired. */
  campaign(): void;
  hasReady(): boolean;
  /** The work to do now; call advance(ready) once done, before the next ready(). */
  ready(): Ready;
  advance(ready: Ready): void;
  /**
   * With awaitDurability: every entry up to `seqno` persisted by an advanced Ready is now durable
   * (the caller caps it at any truncation made after its sync began). A backup sends the
   * acknowledgement it held back; a primary counts its own copy.
   */
  markDurable(seqno: Seqno): void;
  status(): RaftStatus;
  /** The cheap subset of status(). */
  summary(): RaftSummary;
  /** An entry of this node's log (persisted or not), or undefined outside it. */
  entry(seqno: Seqno): Entry | undefined;
}

const DEFAULT_MAX_INFLIGHT_BATCHES = 4;
const DEFAULT_MAX_OUTBOX_MESSAGES = 65_536;

/** The options checked, with their defaults filled in. */
export interface ResolvedRaftOptions extends Required<RaftOptions> {
  /** Heartbeats without an acknowledgement before batches in flight count as lost: a quarter of an election timeout, and at least two. */
  readonly heartbeatsBeforeRetransmit: number;
}

export function resolveRaftOptions(init: RaftOptions): ResolvedRaftOptions {
  checkPositiveInteger(init.electionTimeoutTicks, 'electionTimeoutTicks');
  checkPositiveInteger(init.heartbeatTicks, 'heartbeatTicks');
  checkPositiveInteger(init.maxBatchEntries, 'maxBatchEntries');
  checkPositiveInteger(init.maxBatchBytes, 'maxBatchBytes');
  checkPositiveInteger(init.maxUncommittedEntries, 'maxUncommittedEntries');
  assert(init.heartbeatTicks < init.electionTimeoutTicks, 'heartbeats are more frequent than election timeouts');
  const maxInflightBatches = init.maxInflightBatches ?? DEFAULT_MAX_INFLIGHT_BATCHES;
  const maxOutboxMessages = init.maxOutboxMessages ?? DEFAULT_MAX_OUTBOX_MESSAGES;
  checkPositiveInteger(maxInflightBatches, 'maxInflightBatches');
  checkPositiveInteger(maxOutboxMessages, 'maxOutboxMessages');
  return {
    electionTimeoutTicks: init.electionTimeoutTicks,
    heartbeatTicks: init.heartbeatTicks,
    maxBatchEntries: init.maxBatchEntries,
    maxBatchBytes: init.maxBatchBytes,
    maxUncommittedEntries: init.maxUncommittedEntries,
    maxInflightBatches,
    maxOutboxMessages,
    awaitDurability: init.awaitDurability ?? false,
    heartbeatsBeforeRetransmit: Math.max(2, Math.ceil(init.electionTimeoutTicks / 4 / init.heartbeatTicks)),
  };
}

function checkPositiveInteger(value: number, name: string): void {
  assert(Number.isSafeInteger(value) && value > 0, () => `${name} is a positive integer (got ${value})`);
}
