/**
 * Signature transactions (docs/architecture.md, decision 4): the primary signs the Merkle root
 * over every earlier entry with its node key every `ledger_signatures.tx_count` transactions or
 * `ledger_signatures.delay`, whichever comes first, and when consensus asks for one (a new view,
 * a reconfiguration). Commit advances only to signatures. Writes waiting for their commit ask for
 * one at the end of their turn, but at most one such signature is in flight (proposed, not yet
 * committed): the writes that arrive meanwhile are all covered by the next one, made as soon as
 * the one in flight commits, so that a busy primary signs (and its backups verify) once per
 * commit round rather than once per turn. A signature that is a snapshot point
 * carries the snapshot marker and ends its chunk; the transaction right after it records the
 * snapshot's digest (its evidence).
 */
import { assert } from '../../base/assert.js';
import { toHex } from '../../base/bytes.js';
import { isCovenantError } from '../../base/errors.js';
import type { Clock, TimerHandle } from '../../base/clock.js';
import { EntryFlags } from '../../ledger/index.js';
import type { NodeConfig } from '../../config/index.js';
import type { NodeIdentity } from '../identity/node-identity.js';
import { signatureWaitPollMs, signatureWaitsForBytesMin } from '../limits.js';
import type { Replica } from '../replica.js';
import type { SnapshotManager } from '../snapshots.js';
import { SINGLETON_KEY, TableDefs, type SignatureRecord } from '../tables.js';
import type { Proposer } from './proposer.js';

export interface SignaturesHost {
  readonly config: NodeConfig;
  readonly clock: Clock;
  readonly identity: NodeIdentity;
  readonly replica: Replica;
  readonly proposer: Proposer;
  readonly snapshots: SnapshotManager;
  isPrimary(): boolean;
  /** Whether the node is stopping: deferred work does nothing. */
  stopped(): boolean;
  currentView(): number;
  viewOf(seqno: number): number;
  /** Hands the consensus core's work to the driver. */
  pump(): void;
  /** A signature transaction was proposed at `seqno` (the commit stages' tracer). */
  onSigned?(seqno: number): void;
}

export class Signatures {
  /** Transactions proposed since the last signature. */
  private unsignedCount = 0;
  private timer: TimerHandle | undefined;
  private turnEndRequested = false;
  /** The last signature proposed (0: none since a rollback): waiters' signatures wait while it is not committed. */
  private lastEmittedSeqno = 0;
  /** Writes waiting for their commit asked for a signature while one was in flight. */
  private wantedAfterInFlight = false;

  constructor(private readonly host: SignaturesHost) {}

  /** After each proposed transaction: sign now when tx_count is reached, else make sure the delay timer runs. */
  afterWrite(): void {
    this.unsignedCount++;
    this.scheduleNext();
  }

  private scheduleNext(): void {
    const { tx_count, delay } = this.host.config.ledger_signatures;
    if (this.unsignedCount >= tx_count) {
      this.emit();
    } else if (this.timer === undefined) {
      this.timer = this.host.clock.setTimer(delay, () => {
        this.timer = undefined;
        this.signWhenFramed(this.host.clock.nowMs() + this.host.config.consensus.election_timeout / 2);
      });
    }
  }

  /** A transaction that will be signed by the next signature, with no timer of its own (retirements). */
  countUnsigned(): void {
    this.unsignedCount++;
  }

  /** A signature soon, outside the current call (never from inside a KV transaction). */
  request(): void {
    this.host.clock.defer(() => {
      if (this.host.stopped() || !this.host.isPrimary()) return;
      this.emit();
      this.host.pump();
    });
  }

  /**
   * A signature at the end of this turn unless one is already coming: writes waiting for their
   * commit need one sooner than the delay, and all the writes of a turn share it.
   */
  requestAtTurnEnd(): void {
    if (this.turnEndRequested) return;
    if (this.lastEmittedSeqno > this.host.replica.commitSeqno) {
      // One in flight: the next one, when it commits, covers these writes too (onCommit).
      this.wantedAfterInFlight = true;
      return;
    }
    this.turnEndRequested = true;
    this.host.clock.defer(() => {
      this.turnEndRequested = false;
      if (this.host.stopped() || !this.host.isPrimary() || this.unsignedCount === 0) return;
      this.emit();
      this.host.pump();
    });
  }

  /** Commit reached `seqno`: when it covers the signature in flight, the writes that asked for one meanwhile get it. */
  onCommit(seqno: number): void {
    if (!this.wantedAfterInFlight || seqno < this.lastEmittedSeqno) return;
    this.wantedAfterInFlight = false;
    this.requestAtTurnEnd();
  }

  /** The entries after `seqno` were rolled back: none of them waits for a signature. */
  onRollback(): void {
    this.unsignedCount = 0;
    this.lastEmittedSeqno = 0;
    this.wantedAfterInFlight = false;
  }

  /**
   * The signature the delay calls for. A signature drains the framing pipeline first, blocking the
   * request thread while the worker frames what is in it: with a large write set there (tens of
   * megabytes take it hundreds of milliseconds), the signature waits for the worker instead,
   * polling, for at most `waitUntilMs` (half an election timeout), so that commit is delayed by
   * that much at worst and never starved by a stream of large writes.
   */
  private signWhenFramed(waitUntilMs: number): void {
    if (this.unsignedCount === 0 || !this.host.isPrimary()) return;
    if (this.host.proposer.pendingBytes >= signatureWaitsForBytesMin && this.host.clock.nowMs() < waitUntilMs) {
      this.timer = this.host.clock.setTimer(signatureWaitPollMs, () => {
        this.timer = undefined;
        this.signWhenFramed(waitUntilMs);
      });
      return;
    }
    this.emit();
    this.host.pump();
  }

  /** No longer primary: no timer, and no signature is in flight from this node any more. */
  cancelTimer(): void {
    this.lastEmittedSeqno = 0;
    this.wantedAfterInFlight = false;
    this.stopTimer();
  }

  private stopTimer(): void {
    if (this.timer) {
      this.timer.cancel();
      this.timer = undefined;
    }
  }

  /** A signature transaction: the Merkle root over every entry before it, signed with the node key. */
  emit(): void {
    const { replica, proposer, snapshots, identity } = this.host;
    assert(identity.exists, 'node identity exists');
    // This signature covers whatever asked for one meanwhile.
    this.stopTimer();
    this.wantedAfterInFlight = false;
    // The root must cover every earlier transaction: let the pipeline empty into consensus.
    proposer.drain();
    if (!this.host.isPrimary()) return;
    const root = replica.tree.root();
    const seqno = replica.store.version + 1;
    const record: SignatureRecord = {
      view: this.host.currentView(),
      seqno,
      root: toHex(root),
      sig: Buffer.from(identity.sign(root)).toString('base64'),
      node: identity.nodeId,
      commit_seqno: replica.commitSeqno,
      commit_view: this.host.viewOf(replica.commitSeqno),
      cert: identity.nodeCertificatePem,
    };
    const tx = replica.store.beginTx();
    tx.table(TableDefs.signatures).put(SINGLETON_KEY, record);
    // A snapshot point travels in the signature itself, which ends its chunk (ledger invariants 3, 4).
    const snapshot = snapshots.dueAt(seqno);
    if (snapshot) {
      tx.table(TableDefs.snapshotMarker).put(SINGLETON_KEY, seqno);
      proposer.forceLedgerChunk();
    }
    const committed = tx.apply();
    assert(committed && committed.version === seqno, 'signature transaction takes the next seqno');
    proposer.propose(seqno, committed.writeSet, EntryFlags.SIGNATURE, undefined);
    this.unsignedCount = 0;
    this.lastEmittedSeqno = seqno;
    replica.markSigned(seqno);
    this.host.onSigned?.(seqno);
    // Evidence of a snapshot written meanwhile (or left unrecorded by an earlier primary).
    this.writeDueEvidence();
  }

  /** A snapshot file was written (or may be): record its evidence from a fresh call. */
  requestEvidence(): void {
    this.host.clock.defer(() => {
      if (!this.host.stopped() && this.host.isPrimary()) this.writeDueEvidence();
    });
  }

  /**
   * The transactions recording the digests of snapshots whose files are written (each also as its
   * claims digest, so that a receipt for it binds the digest). Any transaction after the snapshot
   * point may be the evidence: the file is written over many turns while writes go on.
   */
  private writeDueEvidence(): void {
    const { replica, proposer, snapshots } = this.host;
    if (!this.host.isPrimary()) return;
    let written = 0;
    for (let evidence = snapshots.dueEvidence(); evidence !== undefined; evidence = snapshots.dueEvidence()) {
      // The evidence follows every transaction already in the pipeline, like any other.
      const tx = replica.store.beginTx();
      tx.table(TableDefs.snapshotEvidence).put(SINGLETON_KEY, evidence.record);
      const committed = tx.apply();
      assert(committed !== undefined, 'a snapshot evidence transaction writes');
      try {
        proposer.propose(committed.version, committed.writeSet, EntryFlags.SNAPSHOT_EVIDENCE, undefined, evidence.digest);
      } catch (e) {
        // Refused like any transaction (too many pending, no longer primary): the next signature tries again.
        if (!isCovenantError(e)) throw e;
        break;
      }
      snapshots.evidenceProposed(evidence.record.seqno, committed.version);
      this.unsignedCount++;
      written++;
    }
    if (written === 0) return;
    // Signed by the next signature, started from a fresh call so a snapshot can never recurse.
    this.host.clock.defer(() => {
      if (!this.host.stopped() && this.host.isPrimary() && this.unsignedCount > 0) this.scheduleNext();
    });
  }
}
