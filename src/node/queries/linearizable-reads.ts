/**
 * Reads that asked to be linearizable (x-covenant-consistency: linearizable) wait here on the
 * primary: consensus confirms, with a round of acknowledgements from a majority, that this node is
 * still primary after the read arrived and names the seqno the read must reflect (its commit then:
 * etcd's ReadIndex, src/consensus/read-index.ts); the read then waits until this node's commit
 * reaches that seqno and runs on the committed state. A read not settled within its time limit, or
 * abandoned because this node stopped being primary, is refused with a retryable 503
 * (ReadNotConfirmed). Bounded: beyond `readsMax` waiting reads a new one is refused before it asks
 * consensus anything (TooManyPendingReads).
 */
import type { Clock, TimerHandle } from '../../base/clock.js';
import type { ReadConfirmed } from '../../consensus/index.js';
import { retryLater } from '../errors.js';

interface Waiter {
  readonly readId: number;
  readonly resolve: (seqno: number) => void;
  readonly reject: (error: Error) => void;
  readonly timer: TimerHandle;
  /** Known once confirmed. */
  seqno?: number;
}

export interface LinearizableReadsHost {
  readonly clock: Clock;
  /** This node's commit seqno (what its committed state holds). */
  commitSeqno(): number;
  /** Asks consensus for a read index (throws NotPrimary on a backup) and gets it pumped out now. */
  requestRead(): number;
}

export class LinearizableReads {
  /** Asked, not yet confirmed, by read id. */
  private readonly unconfirmed = new Map<number, Waiter>();
  /** Confirmed, waiting for this node's commit to reach their seqno. */
  private awaitingCommit: Waiter[] = [];

  constructor(
    private readonly host: LinearizableReadsHost,
    private readonly readsMax: number,
    private readonly timeoutMs: number,
  ) {}

  get size(): number {
    return this.unconfirmed.size + this.awaitingCommit.length;
  }

  /** Resolves with the seqno the read must reflect, once this node's commit has reached it. */
  waitForReadIndex(): Promise<number> {
    if (this.size >= this.readsMax) {
      return Promise.reject(retryLater('TooManyPendingReads', `${this.size} linearizable reads are already waiting on this node: retry shortly`, 1000));
    }
    let readId: number;
    try {
      readId = this.host.requestRead();
    } catch (e) {
      return Promise.reject(e);
    }
    return new Promise<number>((resolve, reject) => {
      const waiter: Waiter = {
        readId,
        resolve,
        reject,
        timer: this.host.clock.setTimer(this.timeoutMs, () => {
          this.unconfirmed.delete(readId);
          const i = this.awaitingCommit.indexOf(waiter);
          if (i !== -1) this.awaitingCommit.splice(i, 1);
          reject(notConfirmed(`the primary could not confirm within ${this.timeoutMs} ms that it still leads a majority`));
        }),
      };
      this.unconfirmed.set(readId, waiter);
    });
  }

  /** What a consensus Ready says of reads: confirmed (with their seqno) or abandoned (no longer primary). */
  onSettled(confirmed: readonly ReadConfirmed[], abandoned: readonly number[]): void {
    for (const { readId, seqno } of confirmed) {
      const waiter = this.unconfirmed.get(readId);
      if (waiter === undefined) continue;
      this.unconfirmed.delete(readId);
      waiter.seqno = seqno;
      this.awaitingCommit.push(waiter);
    }
    for (const readId of abandoned) {
      const waiter = this.unconfirmed.get(readId);
      if (waiter === undefined) continue;
      this.unconfirmed.delete(readId);
      waiter.timer.cancel();
      waiter.reject(notConfirmed('this node stopped being the primary before it could confirm the read'));
    }
    if (confirmed.length > 0) this.onCommit(this.host.commitSeqno());
  }

  /** This node's commit reached `commitSeqno`: reads confirmed at or below it may run. */
  onCommit(commitSeqno: number): void {
    if (this.awaitingCommit.length === 0) return;
    const still: Waiter[] = [];
    for (const waiter of this.awaitingCommit) {
      if (waiter.seqno! <= commitSeqno) {
        waiter.timer.cancel();
        waiter.resolve(waiter.seqno!);
      } else {
        still.push(waiter);
      }
    }
    this.awaitingCommit = still;
  }

  /** The node stops: every waiting read is refused. */
  close(): void {
    for (const waiter of [...this.unconfirmed.values(), ...this.awaitingCommit]) {
      waiter.timer.cancel();
      waiter.reject(notConfirmed('the node is stopping'));
    }
    this.unconfirmed.clear();
    this.awaitingCommit = [];
  }
}

function notConfirmed(why: string): Error {
  return retryLater('ReadNotConfirmed', `${why}: the read was not run; retry it (any node forwards it to the primary)`, 1000);
}
