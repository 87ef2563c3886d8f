/**
 * The Raft state machine (view = term, seqno = index), in the manner of etcd's raft: no I/O,
 * no clock, no ambient randomness. The caller feeds it ticks, received messages and local
 * proposals, and drains its work with ready()/advance(): persist, then send, then apply.
 *
 * Covenant's rules on top of textbook Raft (see docs/consensus.md):
 * - only signature entries are committable, and only in the primary's own view;
 * - a new primary rolls back to its last signature and asks for a new signature at once;
 *   a node that learns of a new view drops its unsigned suffix;
 * - votes compare the candidate's last *signature* entry;
 * - one-entry reconfiguration, in force as soon as appended; every configuration from the last
 *   committed one onwards is active and each needs its own majority;
 * - PreVote, CheckQuorum and a primary lease;
 * - retirement stages, and a retiring primary that hands over to its most up-to-date peer.
 */
import { assert, type NodeId, type Seqno, type View } from '../base/index.js';
import { HeldAcknowledgement, acceptAppend, appendIsWellFormed } from './backup-append.js';
import { notPrimary, tooManyPendingTransactions } from './errors.js';
import { RaftLog } from './log.js';
import { acknowledge, mostUpToDate, peerStatuses, peersNeedingSnapshot, rewind, type Progress } from './progress.js';
import { voteOutcome } from './quorum.js';
import { resolveRaftOptions, type Raft, type RaftInit, type ResolvedRaftOptions } from './raft-types.js';
import { PendingReady, type ReportedState } from './ready.js';
import { checkQuorum, commitTarget, fillPipeline, heartbeat, readRound, sendAppend, sendHeartbeat, syncPeers, type PrimaryState } from './primary-replication.js';
import { ReadIndex } from './read-index.js';
import { candidateIsUpToDate, mayStand, voteRequests } from './elections.js';
import { retirementStageOf, unrecordedRetirements } from './retirement.js';
import { judgeView } from './view-change.js';
import type {
  AppendEntries,
  AppendResponse,
  Configuration,
  Entry,
  EntryKind,
  KnownBug,
  Message,
  ProposeVote,
  RaftStatus,
  RaftSummary,
  RandomSource,
  Ready,
  RequestVote,
  RetirementStage,
  Role,
  VoteResponse,
} from './types.js';

export type { Raft, RaftInit, RaftInitialState, RaftOptions } from './raft-types.js';

export function createRaft(init: RaftInit): Raft {
  return new RaftMachine(init);
}

class RaftMachine implements Raft {
  private readonly selfId: NodeId;
  private readonly random: RandomSource;
  private readonly options: ResolvedRaftOptions;
  private readonly bugs: ReadonlySet<KnownBug>;
  private readonly log: RaftLog;

  // Hard state.
  private view: View;
  private votedFor: NodeId | undefined;
  private commitSeqno: Seqno;

  // Soft state.
  private role: Role = 'Backup';
  private primaryId: NodeId | undefined;
  private electionElapsedTicks = 0;
  private heartbeatElapsedTicks = 0;
  private randomizedElectionTimeoutTicks = 0;
  private votes = new Map<NodeId, boolean>();
  private progress = new Map<NodeId, Progress>();
  private broadcastPending = false;
  /** This primary's retirement is committed: no new entries; hand over once a successor has caught up. */
  private handingOver = false;

  /** Linearizable reads waiting for a majority's acknowledgement (primary only). */
  private readonly reads = new ReadIndex();
  /** Backup, awaiting durability: the acknowledgement waiting for a sync. */
  private readonly heldAck = new HeldAcknowledgement();

  /** Outputs not yet handed out. */
  private readonly pending: PendingReady;

  constructor(init: RaftInit) {
    this.options = resolveRaftOptions(init);
    this.selfId = init.selfId;
    this.random = init.random;
    this.bugs = new Set(init.bugs ?? []);

    const initial = init.initial;
    const startSeqno = initial.startSeqno ?? 0;
    this.log = new RaftLog(
      { seqno: startSeqno, view: initial.startView ?? 0, viewHistory: initial.viewHistory ?? [], configs: initial.configs },
      init.storage,
      initial.lastSeqno ?? startSeqno,
    );
    this.view = initial.view ?? this.log.lastView;
    assert(this.view >= this.log.lastView, 'the persisted view is at least the view of the last entry');
    this.votedFor = initial.votedFor;
    this.commitSeqno = Math.max(initial.commitSeqno ?? startSeqno, startSeqno);
    assert(this.commitSeqno <= this.log.lastSeqno, 'the persisted commit is within the persisted log');
    this.log.compact(this.commitSeqno);
    // Entries read back from storage may be in a page cache only (a process ended before its sync):
    // beyond the committed prefix, they count once the caller says they are durable.
    if (this.options.awaitDurability) this.log.awaitDurabilityFrom(this.commitSeqno);
    this.pending = new PendingReady(this.options.maxOutboxMessages, this.commitSeqno, this.retirementStage());
    this.resetElectionTimeout();
  }

  // ---- Inputs -------------------------------------------------------------------------------

  tick(): void {
    if (this.isRetired()) return;
    this.electionElapsedTicks = Math.min(this.electionElapsedTicks + 1, Number.MAX_SAFE_INTEGER);
    if (this.role === 'Primary') {
      this.heartbeatElapsedTicks++;
      if (this.electionElapsedTicks >= this.options.electionTimeoutTicks) {
        this.electionElapsedTicks = 0;
        // Ask again, once per period, for retirement records the node layer has not yet written.
        this.pending.forgetReportedRetirements();
        if (!checkQuorum(this.primaryState(), this.quorumConfigs())) {
          // CheckQuorum: a primary cut off from a majority steps down, so that clients look elsewhere.
          this.becomeBackup(this.view, undefined);
          return;
        }
      }
      if (this.heartbeatElapsedTicks >= this.options.heartbeatTicks) {
        this.heartbeatElapsedTicks = 0;
        heartbeat(this.primaryState());
        if (this.handingOver) this.tryHandOver();
      }
      return;
    }
    if (this.electionElapsedTicks >= this.randomizedElectionTimeoutTicks && this.canCampaign()) this.startPreVote();
  }

  step(message: Message): void {
    if (this.isRetired()) return;
    if (message.to !== this.selfId || message.from === this.selfId) return;
    if (message.type === 'append' && !appendIsWellFormed(message)) return;

    const verdict = judgeView(message, {
      selfId: this.selfId,
      view: this.view,
      lastSeqno: this.log.lastSeqno,
      commitSeqno: this.commitSeqno,
      inLease: this.inLease(),
    });
    if (verdict.action === 'drop') {
      if (verdict.reply !== undefined) this.pending.send(verdict.reply);
      return;
    }
    if (verdict.action === 'adopt') this.becomeBackup(message.view, verdict.primaryId);

    switch (message.type) {
      case 'append':
        this.handleAppend(message);
        break;
      case 'append-response':
        this.handleAppendResponse(message);
        break;
      case 'request-vote':
        this.handleRequestVote(message);
        break;
      case 'vote-response':
        this.handleVoteResponse(message);
        break;
      case 'propose-vote':
        this.handleProposeVote(message);
        break;
    }
  }

  checkProposal(kind: EntryKind, queuedEntries: number): void {
    if (this.role !== 'Primary') throw notPrimary(this.primaryId);
    // A retiring primary signs what it has (so that a successor can catch up to it), nothing more.
    if (this.handingOver && kind !== 'signature') throw notPrimary(undefined);
    const uncommitted = this.log.lastSeqno + queuedEntries - this.commitSeqno;
    // Signatures are exempt: refusing them would stop commit, and with it the way out.
    if (kind !== 'signature' && uncommitted >= this.options.maxUncommittedEntries) {
      throw tooManyPendingTransactions(uncommitted, this.options.maxUncommittedEntries);
    }
  }

  propose(entry: Entry): void {
    this.checkProposal(entry.kind, 0);
    assert(entry.view === this.view, () => `a proposal carries the current view ${this.view} (got ${entry.view})`);
    assert(entry.seqno === this.log.lastSeqno + 1, () => `a proposal carries the next seqno ${this.log.lastSeqno + 1} (got ${entry.seqno})`);
    if (entry.kind === 'reconfiguration') {
      const c = entry.configuration;
      assert(c !== undefined && c.seqno === entry.seqno, 'a reconfiguration carries its configuration, in force at its own seqno');
      assert(c.nodes.length > 0 && new Set(c.nodes).size === c.nodes.length, 'a configuration has distinct nodes');
    } else {
      assert(entry.configuration === undefined, 'only reconfigurations carry a configuration');
    }
    this.log.append(entry);
    if (entry.kind === 'signature') this.pending.signatureRequestUnreported = false;
    if (entry.kind === 'reconfiguration') this.syncProgress();
    this.broadcastPending = true;
  }

  requestRead(): number {
    if (this.role !== 'Primary') throw notPrimary(this.primaryId);
    // The known bug confirms at once at whatever the commit is, as a naive read of the primary would.
    const withoutQuorum = this.bugs.has('read-without-quorum');
    return this.reads.request(this.commitSeqno, withoutQuorum || this.log.viewAt(this.commitSeqno) === this.view);
  }

  campaign(): void {
    if (this.isRetired() || this.role === 'Primary' || !this.canCampaign()) return;
    this.startPreVote();
  }

  // ---- Outputs ------------------------------------------------------------------------------

  hasReady(): boolean {
    return this.broadcastPending || this.reads.roundPending || this.log.hasUnhandedWork() || this.pending.hasNews(this.reportedState());
  }

  ready(): Ready {
    if (this.broadcastPending) this.flushBroadcast();
    if (this.reads.roundPending) this.startReadRound();
    return this.pending.take(this.log.handOut(), this.reportedState());
  }

  advance(_ready: Ready): void {
    this.log.acknowledge();
    if (this.options.awaitDurability) return;
    // The primary's own acknowledgement counts only once persisted.
    this.log.markDurable(this.log.persistedSeqno);
    if (this.role === 'Primary') this.maybeCommit();
  }

  markDurable(seqno: Seqno): void {
    assert(this.options.awaitDurability, 'markDurable only when the caller makes entries durable itself');
    if (!this.log.markDurable(seqno)) return;
    // The primary's own acknowledgement counts only once durable.
    if (this.role === 'Primary') this.maybeCommit();
    else if (this.role === 'Backup') {
      const answer = this.heldAck.release(this.log.durableSeqno, this.commitSeqno, this.view);
      if (answer !== undefined) this.pending.send(answer);
    }
  }

  status(): RaftStatus {
    const peers = this.role === 'Primary' ? peerStatuses(this.progress) : [];
    return {
      id: this.selfId,
      view: this.view,
      primaryId: this.primaryId,
      role: this.role,
      commitSeqno: this.commitSeqno,
      lastSeqno: this.log.lastSeqno,
      lastView: this.log.lastView,
      lastSignatureSeqno: this.log.lastSignatureSeqno,
      startSeqno: this.log.startSeqno,
      configs: this.configs(),
      peers,
      viewHistory: this.log.viewHistory(),
      retirementStage: this.retirementStage(),
      droppedMessages: this.pending.droppedMessages,
    };
  }

  summary(): RaftSummary {
    return {
      view: this.view,
      role: this.role,
      primaryId: this.primaryId,
      commitSeqno: this.commitSeqno,
      lastSeqno: this.log.lastSeqno,
      lastSignatureSeqno: this.log.lastSignatureSeqno,
      retiring: this.log.removedAtSeqno(this.selfId) !== undefined,
    };
  }

  entry(seqno: Seqno): Entry | undefined {
    return this.log.entry(seqno);
  }

  // ---- Roles --------------------------------------------------------------------------------

  private becomeBackup(view: View, primaryId: NodeId | undefined): void {
    assert(view >= this.view, 'views never go back');
    if (view > this.view) {
      this.view = view;
      this.votedFor = undefined;
      this.pending.hardStateChanged = true;
      // Unsigned entries of an older view can never commit: the new primary rolled them back.
      this.dropUnsignedSuffix();
    }
    if (this.role !== 'Backup' || this.primaryId !== primaryId) {
      this.pending.roleChanged = true;
      this.heldAck.drop();
    }
    this.role = 'Backup';
    this.primaryId = primaryId;
    this.electionElapsedTicks = 0;
    this.resetElectionTimeout();
    this.votes.clear();
    this.progress.clear();
    this.broadcastPending = false;
    this.handingOver = false;
    this.abandonReads();
  }

  private startPreVote(): void {
    this.role = 'PreCandidate';
    this.pending.roleChanged = true;
    this.primaryId = undefined;
    this.electionElapsedTicks = 0;
    this.resetElectionTimeout();
    this.progress.clear();
    this.votes = new Map([[this.selfId, true]]);
    this.requestVotes(true, false);
    this.checkVotes();
  }

  private startElection(force: boolean): void {
    this.role = 'Candidate';
    this.pending.roleChanged = true;
    this.view += 1;
    this.votedFor = this.selfId;
    this.pending.hardStateChanged = true;
    this.dropUnsignedSuffix();
    this.primaryId = undefined;
    this.electionElapsedTicks = 0;
    this.resetElectionTimeout();
    this.progress.clear();
    this.votes = new Map([[this.selfId, true]]);
    this.requestVotes(false, force);
    this.checkVotes();
  }

  private becomePrimary(): void {
    this.role = 'Primary';
    this.pending.roleChanged = true;
    this.primaryId = this.selfId;
    // Roll back to the last committable entry; a fresh signature in this view is what commits it.
    this.dropUnsignedSuffix();
    this.pending.signatureRequestUnreported = true;
    this.handingOver = false;
    this.pending.forgetPrimaryReports();
    this.electionElapsedTicks = 0;
    this.heartbeatElapsedTicks = 0;
    this.progress.clear();
    this.syncProgress();
    // Probe every peer at once: the empty append asserts leadership and finds where logs match.
    for (const id of this.progress.keys()) sendAppend(this.primaryState(), id);
    if (this.retirementStage() === 'Completed') this.handingOver = true;
  }

  private canCampaign(): boolean {
    return mayStand(this.selfId, this.retirementStage(), this.configs());
  }

  private isRetired(): boolean {
    return this.retirementStage() === 'RetiredCommitted';
  }

  private inLease(): boolean {
    return this.primaryId !== undefined && this.electionElapsedTicks < this.options.electionTimeoutTicks;
  }

  private resetElectionTimeout(): void {
    this.randomizedElectionTimeoutTicks = this.options.electionTimeoutTicks + (this.random.nextUint32() % this.options.electionTimeoutTicks);
  }

  // ---- Elections ----------------------------------------------------------------------------

  private requestVotes(preVote: boolean, force: boolean): void {
    const view = preVote ? this.view + 1 : this.view;
    for (const request of voteRequests(this.selfId, this.log, this.configs(), view, preVote, force)) this.pending.send(request);
  }

  private checkVotes(): void {
    const outcome = voteOutcome(this.quorumConfigs(), this.votes);
    if (outcome === 'won') {
      if (this.role === 'PreCandidate') this.startElection(false);
      else this.becomePrimary();
    } else if (outcome === 'lost') {
      this.becomeBackup(this.view, undefined);
    }
  }

  private handleRequestVote(m: RequestVote): void {
    const upToDate = candidateIsUpToDate(this.log, m);
    if (m.preVote) {
      const granted = m.view > this.view && upToDate && (!this.inLease() || m.force);
      this.pending.send({ type: 'vote-response', from: this.selfId, to: m.from, view: granted ? m.view : this.view, preVote: true, granted });
      return;
    }
    assert(m.view === this.view, 'a vote request of a newer view was adopted before');
    const free = this.votedFor === undefined || this.votedFor === m.from || this.bugs.has('vote-twice-in-view');
    const granted = free && upToDate && this.role !== 'Primary';
    if (granted) {
      this.votedFor = m.from;
      this.pending.hardStateChanged = true;
      this.electionElapsedTicks = 0;
    }
    this.pending.send({ type: 'vote-response', from: this.selfId, to: m.from, view: this.view, preVote: false, granted });
  }

  private handleVoteResponse(m: VoteResponse): void {
    if (m.preVote) {
      if (this.role !== 'PreCandidate' || m.view !== (m.granted ? this.view + 1 : this.view)) return;
    } else if (this.role !== 'Candidate' || m.view !== this.view) {
      return;
    }
    this.votes.set(m.from, m.granted);
    this.checkVotes();
  }

  private handleProposeVote(_m: ProposeVote): void {
    // The retiring primary vouches for this node: skip PreVote and override the voters' lease.
    if (this.role !== 'Primary' && this.canCampaign()) this.startElection(true);
  }

  // ---- Replication (backup side) ------------------------------------------------------------

  private handleAppend(m: AppendEntries): void {
    assert(this.role !== 'Primary', () => `two primaries in view ${this.view}: ${this.selfId} and ${m.from}`);
    if (this.role !== 'Backup' || this.primaryId !== m.from) this.becomeBackup(this.view, m.from);
    this.electionElapsedTicks = 0;
    const outcome = acceptAppend(this.log, this.commitSeqno, m);
    const response: AppendResponse = {
      type: 'append-response',
      from: this.selfId,
      to: m.from,
      view: this.view,
      success: outcome.success,
      lastSeqno: outcome.lastSeqno,
      commitSeqno: this.commitSeqno,
    };
    const answer = m.readId !== undefined && m.readId > 0 ? { ...response, readId: m.readId } : response;
    const now = this.options.awaitDurability ? this.heldAck.offer(answer, this.log.durableSeqno) : answer;
    if (now !== undefined) this.pending.send(now);
    if (outcome.commitSeqno !== undefined) this.commitTo(outcome.commitSeqno);
  }

  private dropUnsignedSuffix(): void {
    const keep = this.log.lastSignatureSeqno;
    if (keep >= this.log.lastSeqno) return;
    assert(keep >= this.commitSeqno, () => `rollback to ${keep} keeps commit ${this.commitSeqno}`);
    this.log.truncateAfter(keep);
  }

  // ---- Replication (primary side) -----------------------------------------------------------

  private handleAppendResponse(m: AppendResponse): void {
    if (this.role !== 'Primary') return;
    const p = this.progress.get(m.from);
    if (p === undefined) return;
    p.recentActive = true;
    // Any answer in this view, success or not, acknowledges this primary after the reads it echoes.
    if (m.readId !== undefined && m.readId > p.readAck) {
      p.readAck = m.readId;
      this.confirmReads();
    }
    const learntRetirement = p.commit < m.commitSeqno && this.log.recordedAtSeqno(m.from) !== undefined;
    p.commit = Math.max(p.commit, m.commitSeqno);
    if (learntRetirement) this.syncProgress();
    if (!this.progress.has(m.from)) return;
    if (m.success) {
      acknowledge(p, m.lastSeqno, this.log);
      this.maybeCommit();
      // Committing may have ended this primary's role or this peer's membership.
      if (this.role === 'Primary' && this.progress.get(m.from) === p) fillPipeline(this.primaryState(), m.from, p);
      if (this.handingOver) this.tryHandOver();
      return;
    }
    if (rewind(p, m.lastSeqno, this.log)) sendAppend(this.primaryState(), m.from);
  }

  private flushBroadcast(): void {
    this.broadcastPending = false;
    if (this.role !== 'Primary') return;
    const state = this.primaryState();
    for (const [id, p] of this.progress) fillPipeline(state, id, p);
  }

  private maybeCommit(): void {
    if (this.role !== 'Primary') return;
    const target = commitTarget(this.primaryState(), this.quorumConfigs(), this.bugs);
    if (target !== undefined) this.commitTo(target);
  }

  private commitTo(seqno: Seqno): void {
    assert(seqno > this.commitSeqno && seqno <= this.log.lastSeqno, () => `commit moves forward within the log (${this.commitSeqno} -> ${seqno})`);
    this.commitSeqno = seqno;
    this.pending.hardStateChanged = true;
    this.log.compact(seqno);
    if (this.role !== 'Primary') return;
    if (this.log.viewAt(seqno) === this.view) {
      this.reads.onCommitInOwnView(seqno);
      this.confirmReads();
    }
    this.syncProgress();
    const stage = this.retirementStage();
    if ((stage === 'Completed' || stage === 'RetiredCommitted') && !this.handingOver) {
      this.handingOver = true;
      this.tryHandOver();
    }
  }

  /**
   * The retirement of this primary is committed. Once a peer of the newest configuration holds
   * everything up to this primary's last signature (so that every voter, this one included, finds
   * it up to date), share the commit, nudge that peer to stand, and step aside.
   */
  private tryHandOver(): void {
    const configs = this.configs();
    const newest = configs[configs.length - 1]!;
    const { successor, matchSeqno } = mostUpToDate(newest.nodes, this.progress, this.selfId);
    if (successor === undefined || matchSeqno < this.log.lastSignatureSeqno) return;
    const state = this.primaryState();
    for (const [id, p] of this.progress) sendHeartbeat(state, id, p);
    this.pending.send({ type: 'propose-vote', from: this.selfId, to: successor, view: this.view });
    this.becomeBackup(this.view, undefined);
  }

  // ---- Linearizable reads (read-index.ts) ---------------------------------------------------

  /** A read arrived since the last Ready: ask every peer at once instead of at the next heartbeat. */
  private startReadRound(): void {
    this.reads.roundPending = false;
    if (this.role !== 'Primary') return;
    readRound(this.primaryState());
    this.confirmReads();
  }

  private confirmReads(): void {
    if (this.role !== 'Primary' || this.reads.pendingCount === 0) return;
    const ackOf = (id: NodeId): number => (id === this.selfId ? this.reads.lastReadId : (this.progress.get(id)?.readAck ?? 0));
    const confirmed = this.reads.takeConfirmed(this.quorumConfigs(), ackOf, this.bugs.has('read-without-quorum'));
    if (confirmed.length > 0) this.pending.readsConfirmed.push(...confirmed);
  }

  private abandonReads(): void {
    const abandoned = this.reads.abandonAll();
    if (abandoned.length > 0) this.pending.readsAbandoned.push(...abandoned);
  }

  private syncProgress(): void {
    if (syncPeers(this.primaryState(), this.configs())) this.broadcastPending = true;
  }

  // ---- Configurations and retirement --------------------------------------------------------

  private configs(): Configuration[] {
    return this.log.activeConfigs(this.commitSeqno);
  }

  /** The configurations whose majorities decide (all active ones, unless a bug says otherwise). */
  private quorumConfigs(): Configuration[] {
    const configs = this.configs();
    return this.bugs.has('ignore-config-joint-majority') ? [configs[configs.length - 1]!] : configs;
  }

  private retirementStage(): RetirementStage | undefined {
    return retirementStageOf(this.log, this.selfId, this.commitSeqno);
  }

  /** Nodes whose retirement is committed but not yet recorded in this log (a primary handing over records nothing). */
  private retirementsToRecord(): NodeId[] {
    return this.handingOver ? [] : unrecordedRetirements(this.log, this.commitSeqno);
  }

  // ---- The state the helper modules work on ------------------------------------------------

  /** The state a Ready reports, read after any sends that building the Ready makes. */
  private reportedState(): ReportedState {
    return {
      view: this.view,
      votedFor: this.votedFor,
      commitSeqno: this.commitSeqno,
      role: this.role,
      primaryId: this.primaryId,
      retirementStage: () => this.retirementStage(),
      retirementsToRecord: () => this.retirementsToRecord(),
      snapshotsNeeded: () => peersNeedingSnapshot(this.progress),
    };
  }

  private primaryState(): PrimaryState {
    const { selfId, view, commitSeqno, log, progress, options } = this;
    return { selfId, view, commitSeqno, readId: this.reads.lastReadId, log, progress, options, send: (message) => this.pending.send(message) };
  }
}
