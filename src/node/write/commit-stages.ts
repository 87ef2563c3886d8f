/**
 * Where the time of a committed write goes, on the primary (docs/performance.md, "The stages of a
 * commit round"). Each write answered once committed (x-covenant-consistency: committed) is
 * traced, up to commitStageTracesMax at once: the node's monotonic clock (injected) is read when
 * its request was read (checked against the commit waiters' room) and again as it passes each
 * milestone below; once answered, the time from its request read to each milestone goes to the
 * timings (GET /node/metrics: covenant_commit_stage_seconds, fixed buckets, one series a stage).
 *
 * Milestones are checked where the node moves them (a proposal, a persist, a sync's end, a pump, a
 * commit), so each is seen within the same event-loop turn as it happens. A write whose wait ends
 * otherwise (rolled back, timed out) is forgotten.
 */
import type { Clock } from '../../base/clock.js';
import type { ConsensusDriver } from '../driver.js';
import { commitStageTracesMax } from '../limits.js';
import type { Replica } from '../replica.js';

/** The milestones of a committed write, in the order they usually come. */
export const COMMIT_STAGES = [
  /** The write ran: its transaction is in the store, with its seqno. */
  'executed',
  /** Its entry was framed (encrypted, framed, hashed) and proposed to consensus. */
  'framed',
  /** Its entry was written to this node's ledger file (and its append sent to the backups). */
  'appended',
  /** This node's sync covering the entry ended (its own copy counts from here). */
  'synced',
  /** The signature transaction covering it was produced (Merkle root signed, proposed). */
  'signed',
  /** That signature was written to this node's ledger file (and sent to the backups). */
  'signature_appended',
  /** This node's sync covering the signature ended. */
  'signature_synced',
  /** A backup acknowledged the signature: received, written and synced on its disk. */
  'backup_acked',
  /** Commit reached the signature: a majority holds it on disk. */
  'committed',
  /** The waiting write was handed its answer. */
  'answered',
] as const;

export type CommitStage = (typeof COMMIT_STAGES)[number];

/** Where the measured times go (the node process's metrics registry). */
export interface CommitStageTimings {
  /** `seconds` from a committed write's request read to `stage`. */
  commitStage(stage: CommitStage, seconds: number): void;
}

/** What the tracer reads of the node at a milestone check. */
export interface CommitStagesHost {
  readonly clock: Clock;
  /** The last seqno proposed to consensus. */
  proposedSeqno(): number;
  ledgerLastSeqno(): number;
  durableSeqno(): number;
  /** The highest seqno some backup acknowledged (0 when not primary). */
  backupMatchSeqno(): number;
  commitSeqno(): number;
}

/** One traced write: its seqno, the signature covering it once produced, and its milestones' times. */
export interface CommitTrace {
  readonly seqno: number;
  signature: number;
  readonly readMs: number;
  /** Milliseconds from the request read to each milestone (NaN: not reached yet). */
  readonly at: Float64Array;
}

const stageIndex = (stage: CommitStage): number => COMMIT_STAGES.indexOf(stage);
const EXECUTED = stageIndex('executed');
const FRAMED = stageIndex('framed');
const APPENDED = stageIndex('appended');
const SYNCED = stageIndex('synced');
const SIGNED = stageIndex('signed');
const SIGNATURE_APPENDED = stageIndex('signature_appended');
const SIGNATURE_SYNCED = stageIndex('signature_synced');
const BACKUP_ACKED = stageIndex('backup_acked');
const COMMITTED = stageIndex('committed');
const ANSWERED = stageIndex('answered');

export class CommitStages {
  private readMs: number | undefined;
  private readonly traces: CommitTrace[] = [];

  constructor(
    private readonly host: CommitStagesHost,
    private readonly timings: CommitStageTimings | undefined,
  ) {}

  /** A write that will wait for its commit was read (it executes next). */
  requestRead(): void {
    if (this.timings !== undefined) this.readMs = this.host.clock.monotonicMs();
  }

  /** The write that was read last executed at `seqno`: traced when there is room. */
  executed(seqno: number): CommitTrace | undefined {
    const readMs = this.readMs;
    this.readMs = undefined;
    if (this.timings === undefined || readMs === undefined || this.traces.length >= commitStageTracesMax) return undefined;
    const trace: CommitTrace = { seqno, signature: 0, readMs, at: new Float64Array(COMMIT_STAGES.length).fill(Number.NaN) };
    this.traces.push(trace);
    this.mark(trace, EXECUTED, this.host.clock.monotonicMs());
    this.check();
    return trace;
  }

  /** A signature transaction was produced at `seqno`: it covers every traced write before it. */
  signed(seqno: number): void {
    if (this.traces.length === 0) return;
    const now = this.host.clock.monotonicMs();
    for (const trace of this.traces) {
      if (trace.signature === 0 && trace.seqno < seqno) {
        trace.signature = seqno;
        this.mark(trace, SIGNED, now);
      }
    }
  }

  /**
   * Something moved (a proposal, a persist, a sync's end): marks the milestones reached. `acks`:
   * a consensus message arrived, which may acknowledge a signature (the peers' progress is read).
   */
  check(acks = false): void {
    if (this.traces.length === 0) return;
    const host = this.host;
    const now = host.clock.monotonicMs();
    const proposed = host.proposedSeqno();
    const written = host.ledgerLastSeqno();
    const durable = host.durableSeqno();
    const commit = host.commitSeqno();
    let backup: number | undefined;
    for (const trace of this.traces) {
      const { seqno, signature } = trace;
      this.markIf(trace, FRAMED, proposed >= seqno, now);
      this.markIf(trace, APPENDED, written >= seqno, now);
      this.markIf(trace, SYNCED, durable >= seqno, now);
      if (signature > 0) {
        this.markIf(trace, SIGNATURE_APPENDED, written >= signature, now);
        this.markIf(trace, SIGNATURE_SYNCED, durable >= signature, now);
        if (acks && Number.isNaN(trace.at[BACKUP_ACKED])) {
          backup ??= host.backupMatchSeqno();
          this.markIf(trace, BACKUP_ACKED, backup >= signature, now);
        }
      }
      this.markIf(trace, COMMITTED, commit >= seqno, now);
    }
  }

  /** The traced write's wait ended: committed (its times are recorded) or not (forgotten). */
  answered(trace: CommitTrace | undefined, committed: boolean): void {
    if (trace === undefined) return;
    const i = this.traces.indexOf(trace);
    if (i === -1) return;
    if (committed) this.check(true);
    this.traces.splice(i, 1);
    if (!committed || this.timings === undefined) return;
    this.mark(trace, ANSWERED, this.host.clock.monotonicMs());
    for (let stage = 0; stage < COMMIT_STAGES.length; stage++) {
      const ms = trace.at[stage]!;
      if (!Number.isNaN(ms)) this.timings.commitStage(COMMIT_STAGES[stage]!, ms / 1000);
    }
  }

  private markIf(trace: CommitTrace, stage: number, reached: boolean, now: number): void {
    if (reached && Number.isNaN(trace.at[stage])) this.mark(trace, stage, now);
  }

  private mark(trace: CommitTrace, stage: number, now: number): void {
    trace.at[stage] = Math.max(0, now - trace.readMs);
  }
}

/** The tracer of a node: its clock, replica and consensus. */
export function nodeCommitStages(clock: Clock, replica: Replica, driver: ConsensusDriver, timings: CommitStageTimings | undefined): CommitStages {
  const host: CommitStagesHost = {
    clock,
    // The primary adds an entry's leaf to its tree as it proposes it: the tree ends at the last proposal.
    proposedSeqno: () => replica.tree.size,
    ledgerLastSeqno: () => replica.ledger.lastSeqno,
    durableSeqno: () => replica.durableSeqno,
    backupMatchSeqno: () => {
      let match = 0;
      for (const peer of driver.raft?.status().peers ?? []) match = Math.max(match, peer.matchSeqno);
      return match;
    },
    commitSeqno: () => replica.commitSeqno,
  };
  return new CommitStages(host, timings);
}
