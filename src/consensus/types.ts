/**
 * The data shapes of the consensus core. Glossary: a Raft term is a *view*, a Raft log index is
 * a *seqno* (from 1). Every shape here is plain data: the node layer persists entries and
 * serialises messages (see codec.ts) without knowing anything else about the core.
 */
import type { NodeId, Seqno, View } from '../base/index.js';

export type EntryKind = 'signature' | 'normal' | 'reconfiguration';

/** A set of trusted nodes, in force from the entry at `seqno` (0 for the genesis configuration). */
export interface Configuration {
  readonly seqno: Seqno;
  readonly nodes: readonly NodeId[];
}

/**
 * One ledger entry. The bytes are opaque to consensus; the metadata is what consensus needs.
 * Only signature entries are committable.
 */
export interface Entry {
  readonly view: View;
  readonly seqno: Seqno;
  readonly kind: EntryKind;
  /** Present exactly when kind is 'reconfiguration'; its seqno equals the entry's seqno. */
  readonly configuration?: Configuration;
  /**
   * Nodes whose retirement this entry records as committed (the `retired_committed` write the
   * primary's node layer makes when asked through Ready.retirementsToRecord). When such an entry
   * commits, those nodes reach the RetiredCommitted stage and stop taking part.
   */
  readonly retiredCommitted?: readonly NodeId[];
  readonly bytes: Uint8Array;
  /**
   * Bytes the node layer sends to peers with the entry and never persists (a primary attaches the
   * entry's private write set in clear: see CovenantNode.proposeFramed). Consensus carries it as
   * it carries the entry; entries read back from storage have none.
   */
  readonly sidecar?: Uint8Array;
}

/** Read-only access to what the node layer has persisted (entries handed over in Ready). */
export interface EntryStorage {
  entryAt(seqno: Seqno): Entry | undefined;
  /**
   * Entries `from`..`to` in order, for a long stretch read at once (the persisted log at start);
   * when absent, the log asks entryAt for each. Their `bytes` may be left empty: the log keeps
   * none of them.
   */
  entriesBetween?(from: Seqno, to: Seqno): Iterable<Entry>;
  /**
   * What the log needs of the entries from `from` on (at most to `to`), without visiting them one
   * by one: the persisted log at start, when the caller has it summarised already (a restart's
   * replay, a recovery's read). Undefined when it has not; the log reads what the stretch does not
   * cover through entriesBetween or entryAt.
   */
  stretchBetween?(from: Seqno, to: Seqno): EntryStretch | undefined;
}

/**
 * Persisted entries from..to summarised (EntryStorage.stretchBetween): the log built from it is the
 * log built by appending each entry (tested), at a cost that grows with views, signatures and
 * reconfigurations rather than entries.
 */
export interface EntryStretch {
  /** The last entry it covers. */
  readonly to: Seqno;
  /** Runs of one view, ascending: viewRuns[2i] is the first seqno of a run of entries of view viewRuns[2i + 1]; the first run starts at `from`. */
  readonly viewRuns: readonly number[];
  /** The signature entries, ascending. */
  readonly signatureSeqnos: readonly Seqno[];
  /** The configurations of the reconfiguration entries, ascending (each at its entry's seqno). */
  readonly configurations: readonly Configuration[];
}

/** Seeded randomness, injected: the core never uses ambient randomness. */
export type { RandomSource } from '../base/random.js';

export type Role = 'Primary' | 'Backup' | 'PreCandidate' | 'Candidate';

/**
 * Stages of a node removed from the configuration, in order:
 * Ordered (a reconfiguration without it is in the log), Signed (a signature follows it),
 * Completed (that reconfiguration is committed), RetiredCommitted (the record of its retirement
 * is committed: it stops taking part and may be shut down).
 */
export type RetirementStage = 'Ordered' | 'Signed' | 'Completed' | 'RetiredCommitted';
export const RETIREMENT_STAGES: readonly RetirementStage[] = ['Ordered', 'Signed', 'Completed', 'RetiredCommitted'];

/** What must survive a restart. Persist it (with the entries of the same Ready) before sending. */
export interface HardState {
  readonly view: View;
  readonly votedFor: NodeId | undefined;
  readonly commitSeqno: Seqno;
}

interface MessageBase {
  readonly from: NodeId;
  readonly to: NodeId;
  /** The sender's view (for a pre-vote request: the view it would stand in). */
  readonly view: View;
}

/** Replication and heartbeat (no entries) from the primary. */
export interface AppendEntries extends MessageBase {
  readonly type: 'append';
  readonly prevSeqno: Seqno;
  readonly prevView: View;
  readonly commitSeqno: Seqno;
  readonly entries: readonly Entry[];
  /**
   * The highest linearizable read id the primary has issued (absent or 0: none). The answer echoes
   * it: the backup acknowledged this primary's view after those reads arrived (read-index.ts).
   */
  readonly readId?: number;
}

export interface AppendResponse extends MessageBase {
  readonly type: 'append-response';
  readonly success: boolean;
  /** On success: the seqno up to which the log now matches the primary's. On rejection: a hint, the seqno to retry after. */
  readonly lastSeqno: Seqno;
  /** The responder's commit seqno: tells the primary when a retired node has learnt of its retirement. */
  readonly commitSeqno: Seqno;
  /** The read id of the append this answers (absent or 0: it carried none). */
  readonly readId?: number;
}

export interface RequestVote extends MessageBase {
  readonly type: 'request-vote';
  readonly preVote: boolean;
  /** Set when a retiring primary nudged the candidate: voters then ignore their primary lease. */
  readonly force: boolean;
  readonly lastSignatureView: View;
  readonly lastSignatureSeqno: Seqno;
}

export interface VoteResponse extends MessageBase {
  readonly type: 'vote-response';
  readonly preVote: boolean;
  readonly granted: boolean;
}

/** A retiring primary asks the most up-to-date peer to stand for election now. */
export interface ProposeVote extends MessageBase {
  readonly type: 'propose-vote';
}

export type Message = AppendEntries | AppendResponse | RequestVote | VoteResponse | ProposeVote;
export type MessageType = Message['type'];

/** Replication progress of one peer, as the primary sees it. */
export interface PeerStatus {
  readonly id: NodeId;
  /** Highest seqno known to match the primary's log on that peer (acknowledged after persisting). */
  readonly matchSeqno: Seqno;
  /** Next seqno to send. */
  readonly nextSeqno: Seqno;
  /** The peer lags behind the start of this node's log: only a snapshot can catch it up. */
  readonly needsSnapshot: boolean;
  /** The peer's commit seqno, as of its last acknowledgement. */
  readonly commitSeqno: Seqno;
  /** Heard from within the current check-quorum period. */
  readonly recentlyActive: boolean;
}

/** State exposed for the operator API (GET /node/consensus, /node/commit). */
export interface RaftStatus {
  readonly id: NodeId;
  readonly view: View;
  readonly primaryId: NodeId | undefined;
  readonly role: Role;
  readonly commitSeqno: Seqno;
  readonly lastSeqno: Seqno;
  readonly lastView: View;
  readonly lastSignatureSeqno: Seqno;
  /** Seqno of the snapshot the log starts after (0 when it starts at genesis). */
  readonly startSeqno: Seqno;
  /** The active configurations, oldest first: the last committed one and every later one. */
  readonly configs: readonly Configuration[];
  /** Only on the primary. */
  readonly peers: readonly PeerStatus[];
  /** viewHistory[v - 1] is the first seqno of view v (or of the next view holding entries). */
  readonly viewHistory: readonly Seqno[];
  readonly retirementStage: RetirementStage | undefined;
  /** Messages dropped because the outgoing queue was full (the protocol tolerates loss). */
  readonly droppedMessages: number;
}

/** The few fields a caller checks on every request, without the allocations of status(). */
export interface RaftSummary {
  readonly view: View;
  readonly role: Role;
  readonly primaryId: NodeId | undefined;
  readonly commitSeqno: Seqno;
  readonly lastSeqno: Seqno;
  readonly lastSignatureSeqno: Seqno;
  /**
   * This node's removal is in its log. A primary then hands over once the removal commits, and
   * from that moment refuses every entry but signatures.
   */
  readonly retiring: boolean;
}

export interface RoleChange {
  readonly role: Role;
  readonly view: View;
  readonly primaryId: NodeId | undefined;
}

/** A linearizable read the primary confirmed: it must reflect every entry up to `seqno` (committed). */
export interface ReadConfirmed {
  readonly readId: number;
  readonly seqno: Seqno;
}

/**
 * The work the caller must do, in order: truncate, persist entries and hard state, then send the
 * messages, then apply up to committedSeqno, then call advance(ready).
 */
export interface Ready {
  /** Drop every persisted entry above this seqno (before writing entriesToPersist). */
  readonly truncateAfterSeqno: Seqno | undefined;
  readonly entriesToPersist: readonly Entry[];
  /** Present when it changed since the last Ready. */
  readonly hardState: HardState | undefined;
  readonly messages: readonly Message[];
  /** Everything up to here is committed; apply it once this Ready is persisted. */
  readonly committedSeqno: Seqno;
  readonly roleChange: RoleChange | undefined;
  /** Primary only: append a signature entry now (a new primary must sign before anything commits). */
  readonly signatureRequested: boolean;
  /** Primary only: append an entry whose `retiredCommitted` lists these nodes. */
  readonly retirementsToRecord: readonly NodeId[];
  /** Primary only: peers that need a snapshot because this node no longer has the entries they lack. */
  readonly snapshotsNeeded: readonly NodeId[];
  /** Changed since the last Ready (undefined otherwise). */
  readonly retirementStage: RetirementStage | undefined;
  /** Reads (Raft.requestRead) confirmed since the last Ready: answer each once applied up to its seqno. */
  readonly readsConfirmed: readonly ReadConfirmed[];
  /** Reads abandoned since the last Ready (this node stopped being primary): refuse them, the client retries. */
  readonly readsAbandoned: readonly number[];
}

/** Deliberately wrong behaviours, used only by the simulator to show that its checkers catch them. */
export type KnownBug = 'commit-without-quorum' | 'vote-twice-in-view' | 'ignore-config-joint-majority' | 'commit-unsigned' | 'read-without-quorum';
export const KNOWN_BUGS: readonly KnownBug[] = [
  'commit-without-quorum',
  'vote-twice-in-view',
  'ignore-config-joint-majority',
  'commit-unsigned',
  'read-without-quorum',
];
