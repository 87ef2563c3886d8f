/**
 * The consensus driver: owns the Raft core of this node, ticks it, feeds it the consensus frames
 * of peers, and does the work each `Ready` asks for. `handleReady` is the one function that
 * orders the side effects of a step (the order is what makes the protocol safe):
 *
 *  1. forget kept proposals when the log may be rewritten (truncation, role change);
 *  2. roll the replica back to a truncation point below its state;
 *  3. apply the new entries, then persist them (cutting the ledger first): written, and with
 *     durability Synced made durable later by a grouped sync (src/node/grouped-sync.ts);
 *  4. persist the hard state (view, vote) — before any message of this step leaves;
 *  5. send the messages (a primary's appends leave before its own sync ends; consensus holds back
 *     a backup's acknowledgement until the sync covering it has ended: Raft.markDurable, which
 *     pump calls with the replica's durable seqno);
 *  6. advance commit (only to entries persisted here);
 *  7. act on a role change; settle linearizable reads (after commit: a confirmed read runs on
 *     committed state that reaches its seqno); report peers that need a snapshot;
 *  8. (primary) emit a requested signature; record retirements.
 *
 * Everything it touches goes through DriverHost, so a test can record the order (test/node/driver.test.ts).
 */
import { assert } from '../base/assert.js';
import type { Clock, TimerHandle } from '../base/clock.js';
import { errorMessage } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import { createRaft, decodeMessage, encodeMessage, type Entry, type EntryStretch, type Raft, type RaftInitialState, type RandomSource, type Ready } from '../consensus/index.js';
import { appendBatchBytesMax, appendBatchEntriesMax, consensusUncommittedEntriesMax, pumpRoundsMax, tickDurationMs } from './limits.js';

/** The side effects a Ready asks for, in the order handleReady does them. */
export interface DriverHost {
  readonly logger: Logger;
  readonly clock: Clock;
  storeVersion(): number;
  ledgerLastSeqno(): number;
  commitSeqno(): number;
  forgetProposals(): void;
  /** Drops what the framer holds if this node can no longer propose it (before consensus rewrites the store). */
  abandonIfDeposed(): void;
  rollbackTo(seqno: number): void;
  applyReplicated(entry: Entry): void;
  persistEntries(frames: readonly Uint8Array[], truncateAfterSeqno: number | undefined): void;
  /** Entries up to here are durable (awaitDurability: consensus is told at each pump). */
  durableSeqno(): number;
  persistHardState(view: number, votedFor: string | undefined): void;
  send(to: string, message: Uint8Array): void;
  advanceCommit(seqno: number): void;
  onRoleChange(change: NonNullable<Ready['roleChange']>): void;
  /** Linearizable reads consensus confirmed (with the seqno each must reflect) or abandoned. */
  settleReads(confirmed: Ready['readsConfirmed'], abandoned: Ready['readsAbandoned']): void;
  reportSnapshotsNeeded(ids: readonly string[]): void;
  isPrimary(): boolean;
  emitSignature(): void;
  recordRetirements(ids: readonly string[]): void;
  /** After a pump: bring the channels' peer set up to date if the node table changed. */
  afterPump(): void;
  /** Storage of the consensus core: an entry this node holds (a recent proposal, or from the ledger). */
  entryAt(seqno: number): Entry | undefined;
  /** Persisted entries from..to in order, read in batches (the log read at start); entryAt each when absent. */
  entriesBetween?(from: number, to: number): Iterable<Entry>;
  /** Persisted entries from `from` on, summarised by the replay that applied them (EntryStorage.stretchBetween). */
  stretchBetween?(from: number, to: number): EntryStretch | undefined;
}

export interface DriverOptions {
  readonly selfId: string;
  readonly random: RandomSource;
  readonly electionTimeoutMs: number;
  readonly messageTimeoutMs: number;
  readonly initial: RaftInitialState;
  /** Durability Synced: entries count once durableSeqno covers them, not once persisted. */
  readonly awaitDurability: boolean;
}

export class ConsensusDriver {
  private core: Raft | undefined;
  private tickTimer: TimerHandle | undefined;
  private pumpScheduled = false;
  private stopped = false;
  private awaitDurability = false;
  /** The hard state last persisted. */
  hardView = 0;
  hardVotedFor: string | undefined;

  constructor(private readonly host: DriverHost) {}

  /** A start-up flow: the hard state found durable (the node state file) or chosen (a recovery's first view). */
  restoreHardState(view: number, votedFor: string | undefined): void {
    assert(this.core === undefined, 'the hard state is restored before consensus starts');
    this.hardView = view;
    this.hardVotedFor = votedFor;
  }

  get raft(): Raft | undefined {
    return this.core;
  }

  /** Creates the consensus core (once, when the node's log start is known). */
  create(options: DriverOptions): Raft {
    const heartbeatTicks = Math.max(1, Math.round(options.messageTimeoutMs / tickDurationMs));
    const electionTimeoutTicks = Math.max(heartbeatTicks * 2 + 1, Math.round(options.electionTimeoutMs / tickDurationMs));
    this.awaitDurability = options.awaitDurability;
    this.core = createRaft({
      selfId: options.selfId,
      random: options.random,
      storage: {
        entryAt: (seqno) => this.host.entryAt(seqno),
        ...(this.host.entriesBetween ? { entriesBetween: (from: number, to: number) => this.host.entriesBetween!(from, to) } : {}),
        ...(this.host.stretchBetween ? { stretchBetween: (from: number, to: number) => this.host.stretchBetween!(from, to) } : {}),
      },
      electionTimeoutTicks,
      heartbeatTicks,
      maxBatchEntries: appendBatchEntriesMax,
      maxBatchBytes: appendBatchBytesMax,
      maxUncommittedEntries: consensusUncommittedEntriesMax,
      awaitDurability: options.awaitDurability,
      initial: options.initial,
    });
    return this.core;
  }

  /**
   * The highest seqno every peer has acknowledged (infinity without peers, as on a backup):
   * no proposal up to it is sent again (a peer that loses them catches up from the ledger).
   */
  acknowledgedByEveryPeer(): number {
    let acknowledged = Number.POSITIVE_INFINITY;
    for (const peer of this.core?.status().peers ?? []) acknowledged = Math.min(acknowledged, peer.matchSeqno);
    return acknowledged;
  }

  startTicking(): void {
    const tick = () => {
      if (this.stopped) return;
      this.core?.tick();
      this.pump();
      this.tickTimer = this.host.clock.setTimer(tickDurationMs, tick);
    };
    this.tickTimer = this.host.clock.setTimer(tickDurationMs, tick);
  }

  /** A consensus frame from peer `from` (authenticated by the channel). */
  onFrame(from: string, payload: Uint8Array): void {
    if (!this.core || this.stopped) return;
    let message;
    try {
      message = decodeMessage(payload);
    } catch (e) {
      this.host.logger.info(`dropping a malformed consensus message from ${from}: ${errorMessage(e)}`);
      return;
    }
    if (message.from !== from) {
      this.host.logger.info(`dropping a consensus message from ${from} claiming to be from ${message.from}`);
      return;
    }
    this.core.step(message);
    this.schedulePump();
  }

  schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    this.host.clock.defer(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** Does the work the consensus core asks for until it has none left (bounded: each round may make more). */
  pump(): void {
    const raft = this.core;
    if (!raft || this.stopped) return;
    this.host.abandonIfDeposed();
    this.markDurable(raft);
    for (let rounds = 0; raft.hasReady() && rounds < pumpRoundsMax; rounds++) {
      const ready = raft.ready();
      this.handleReady(ready);
      raft.advance(ready);
      this.markDurable(raft);
    }
    this.host.afterPump();
  }

  /** Tells consensus how far this node's entries are durable (only between Readys: it counts persisted entries only). */
  private markDurable(raft: Raft): void {
    if (this.awaitDurability) raft.markDurable(this.host.durableSeqno());
  }

  /** Does what one Ready asks for, in the order the module comment gives. */
  handleReady(ready: Ready): void {
    const host = this.host;
    const truncateAfter = ready.truncateAfterSeqno;
    if (truncateAfter !== undefined || ready.roleChange) host.forgetProposals();
    if (truncateAfter !== undefined && truncateAfter < host.storeVersion()) host.rollbackTo(truncateAfter);
    if (ready.entriesToPersist.length > 0) {
      const frames: Uint8Array[] = [];
      for (const entry of ready.entriesToPersist) {
        if (entry.seqno > host.storeVersion()) host.applyReplicated(entry);
        frames.push(entry.bytes);
      }
      host.persistEntries(frames, truncateAfter);
    } else if (truncateAfter !== undefined && truncateAfter < host.ledgerLastSeqno()) {
      host.persistEntries([], truncateAfter);
    }
    if (ready.hardState) this.persistHardState(ready.hardState);
    for (const message of ready.messages) host.send(message.to, encodeMessage(message));
    if (ready.committedSeqno > host.commitSeqno()) host.advanceCommit(Math.min(ready.committedSeqno, host.ledgerLastSeqno()));
    if (ready.roleChange) host.onRoleChange(ready.roleChange);
    if (ready.readsConfirmed.length > 0 || ready.readsAbandoned.length > 0) host.settleReads(ready.readsConfirmed, ready.readsAbandoned);
    if (ready.snapshotsNeeded.length > 0) host.reportSnapshotsNeeded(ready.snapshotsNeeded);
    if (ready.signatureRequested && host.isPrimary()) host.emitSignature();
    if (ready.retirementsToRecord.length > 0 && host.isPrimary()) host.recordRetirements(ready.retirementsToRecord);
  }

  /** View and vote must be durable before any message of this Ready is sent (a node never votes twice in a view). */
  private persistHardState(hard: NonNullable<Ready['hardState']>): void {
    if (hard.view === this.hardView && hard.votedFor === this.hardVotedFor) return;
    this.hardView = hard.view;
    this.hardVotedFor = hard.votedFor;
    this.host.persistHardState(hard.view, hard.votedFor);
  }

  stop(): void {
    this.stopped = true;
    this.tickTimer?.cancel();
  }
}
