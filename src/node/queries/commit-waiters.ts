/**
 * Writes that asked to be answered only once committed (x-covenant-consistency: committed) wait
 * here: each waiter is settled when this node's commit reaches its seqno — Committed, or Invalid
 * if another transaction was committed there (the write was rolled back) — or, after its time
 * limit, left Pending for the client to poll. Bounded: beyond `waitersMax` a write is refused
 * before it runs.
 */
import type { Clock, TimerHandle } from '../../base/clock.js';
import type { TxId } from '../../base/ids.js';
import { retryLater } from '../errors.js';
import type { TxStatus } from '../tx-status.js';

interface Waiter {
  readonly txId: TxId;
  readonly resolve: (status: TxStatus) => void;
  readonly timer: TimerHandle;
}

export interface CommitWaitersHost {
  readonly clock: Clock;
  statusOf(txId: TxId): TxStatus;
}

export class CommitWaiters {
  /** In seqno order: a commit settles a prefix. */
  private readonly waiters: Waiter[] = [];

  constructor(
    private readonly host: CommitWaitersHost,
    private readonly waitersMax: number,
  ) {}

  /** Refuses a write that would wait when as many wait already (before it runs: nothing written). */
  checkRoom(): void {
    if (this.waiters.length >= this.waitersMax) {
      throw retryLater('TooManyCommitWaiters', `${this.waiters.length} writes are already waiting for their commit on this node: retry shortly`, 1000);
    }
  }

  /** Settles with Committed or Invalid once commit reaches txId, or Pending after timeoutMs. */
  wait(txId: TxId, timeoutMs: number): Promise<TxStatus> {
    const now = this.host.statusOf(txId);
    if (now === 'Committed' || now === 'Invalid') return Promise.resolve(now);
    return new Promise((resolve) => {
      const waiter: Waiter = {
        txId,
        resolve,
        timer: this.host.clock.setTimer(timeoutMs, () => {
          const i = this.waiters.indexOf(waiter);
          if (i !== -1) this.waiters.splice(i, 1);
          resolve(this.host.statusOf(txId));
        }),
      };
      let at = this.waiters.length;
      while (at > 0 && this.waiters[at - 1]!.txId.seqno > txId.seqno) at--;
      this.waiters.splice(at, 0, waiter);
    });
  }

  /** Commit reached `commitSeqno`: every waiter at or below it is settled. */
  onCommit(commitSeqno: number): void {
    let settled = 0;
    while (settled < this.waiters.length && this.waiters[settled]!.txId.seqno <= commitSeqno) settled++;
    if (settled === 0) return;
    for (const waiter of this.waiters.splice(0, settled)) {
      waiter.timer.cancel();
      waiter.resolve(this.host.statusOf(waiter.txId));
    }
  }

  get size(): number {
    return this.waiters.length;
  }
}
