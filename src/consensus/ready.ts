/**
 * The outputs of the Raft state machine not yet handed out, and what the last Ready reported: a
 * Ready carries only what changed since the one before, so that the node layer acts once on each
 * change. Building the entries' part of a Ready stays with the log.
 */
import type { NodeId, Seqno, View } from '../base/index.js';
import type { Entry, Message, ReadConfirmed, Ready, RetirementStage, Role } from './types.js';

/** The state machine's state as a Ready reports it; the derived parts are computed only when asked. */
export interface ReportedState {
  readonly view: View;
  readonly votedFor: NodeId | undefined;
  readonly commitSeqno: Seqno;
  readonly role: Role;
  readonly primaryId: NodeId | undefined;
  retirementStage(): RetirementStage | undefined;
  /** Asked of a primary only. */
  retirementsToRecord(): NodeId[];
  /** Asked of a primary only. */
  snapshotsNeeded(): NodeId[];
}

/** What the log hands out for a Ready. */
export interface LogHandOut {
  readonly truncateAfterSeqno: Seqno | undefined;
  readonly entries: readonly Entry[];
}

const NO_READS: readonly ReadConfirmed[] = Object.freeze([]);
const NO_READ_IDS: readonly number[] = Object.freeze([]);

export class PendingReady {
  hardStateChanged = false;
  roleChanged = false;
  signatureRequestUnreported = false;
  droppedMessages = 0;
  readsConfirmed: ReadConfirmed[] = [];
  readsAbandoned: number[] = [];
  private outbox: Message[] = [];
  private reportedCommitSeqno: Seqno;
  private reportedRetirementsKey = '';
  private reportedSnapshotsKey = '';
  private reportedStage: RetirementStage | undefined;

  constructor(
    private readonly maxOutboxMessages: number,
    commitSeqno: Seqno,
    stage: RetirementStage | undefined,
  ) {
    this.reportedCommitSeqno = commitSeqno;
    this.reportedStage = stage;
  }

  send(message: Message): void {
    if (this.outbox.length >= this.maxOutboxMessages) {
      this.droppedMessages++;
      return;
    }
    this.outbox.push(message);
  }

  /** Report the retirement records still missing again, even if unchanged (the node layer may not have written them). */
  forgetReportedRetirements(): void {
    this.reportedRetirementsKey = '';
  }

  /** A new primary reports the retirements to record and the snapshots needed afresh. */
  forgetPrimaryReports(): void {
    this.reportedRetirementsKey = '';
    this.reportedSnapshotsKey = '';
  }

  /** Whether a Ready would carry anything, apart from the log's work. */
  hasNews(state: ReportedState): boolean {
    if (this.outbox.length > 0 || this.hardStateChanged || this.roleChanged) return true;
    if (this.readsConfirmed.length > 0 || this.readsAbandoned.length > 0) return true;
    if (this.signatureRequestUnreported && state.role === 'Primary') return true;
    if (state.commitSeqno !== this.reportedCommitSeqno) return true;
    if (state.retirementStage() !== this.reportedStage) return true;
    if (state.role === 'Primary') {
      if (keyOf(state.retirementsToRecord()) !== this.reportedRetirementsKey) return true;
      if (keyOf(state.snapshotsNeeded()) !== this.reportedSnapshotsKey) return true;
    }
    return false;
  }

  /** Hands out everything pending as a Ready, and remembers what it reported. */
  take(log: LogHandOut, state: ReportedState): Ready {
    const { view, votedFor, commitSeqno, role, primaryId } = state;
    const hardState = this.hardStateChanged ? { view, votedFor, commitSeqno } : undefined;
    this.hardStateChanged = false;
    const messages = this.outbox;
    this.outbox = [];
    const roleChange = this.roleChanged ? { role, view, primaryId } : undefined;
    this.roleChanged = false;
    const signatureRequested = role === 'Primary' && this.signatureRequestUnreported;
    this.signatureRequestUnreported = false;
    let retirementsToRecord: NodeId[] = [];
    let snapshotsNeeded: NodeId[] = [];
    if (role === 'Primary') {
      const retirements = state.retirementsToRecord();
      if (keyOf(retirements) !== this.reportedRetirementsKey) retirementsToRecord = retirements;
      this.reportedRetirementsKey = keyOf(retirements);
      const snapshots = state.snapshotsNeeded();
      if (keyOf(snapshots) !== this.reportedSnapshotsKey) snapshotsNeeded = snapshots;
      this.reportedSnapshotsKey = keyOf(snapshots);
    }
    const stage = state.retirementStage();
    const retirementStage = stage !== this.reportedStage ? stage : undefined;
    this.reportedStage = stage;
    this.reportedCommitSeqno = commitSeqno;
    // Most Readys carry no read: they share one empty list instead of allocating two each.
    const readsConfirmed = this.readsConfirmed.length === 0 ? NO_READS : this.readsConfirmed;
    const readsAbandoned = this.readsAbandoned.length === 0 ? NO_READ_IDS : this.readsAbandoned;
    if (readsConfirmed !== NO_READS) this.readsConfirmed = [];
    if (readsAbandoned !== NO_READ_IDS) this.readsAbandoned = [];
    return {
      truncateAfterSeqno: log.truncateAfterSeqno,
      entriesToPersist: log.entries,
      hardState,
      messages,
      committedSeqno: commitSeqno,
      roleChange,
      signatureRequested,
      retirementsToRecord,
      snapshotsNeeded,
      retirementStage,
      readsConfirmed,
      readsAbandoned,
    };
  }
}

function keyOf(ids: readonly NodeId[]): string {
  return ids.join(',');
}
