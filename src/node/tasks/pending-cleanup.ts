/**
 * pending_node_timeout: the primary removes Pending nodes that sent no join request for longer
 * than the timeout, checking at least once a minute (spec "Limits"). Join requests are seen in
 * memory on the primary only; a node seen before a failover gets a fresh grace period on the new
 * primary (it did not see its requests): the task starts with an empty record at each primacy.
 */
import type { Clock, TimerHandle } from '../../base/clock.js';
import { errorMessage } from '../../base/errors.js';
import type { Logger } from '../../base/log.js';
import type { Tx } from '../../kv/index.js';
import { pendingCleanupIntervalMsMax } from '../limits.js';
import { TableDefs, type NodeInfo } from '../tables.js';
import type { PrimaryTask } from './primary-tasks.js';

export interface PendingCleanupHost {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly timeoutMs: number;
  executeRead<T>(fn: (tx: Tx) => T): T;
  executeWrite(fn: (tx: Tx) => void): unknown;
}

export class PendingNodeCleanup implements PrimaryTask {
  readonly name = 'pending node cleanup';
  /** When each Pending node last sent a join request (this primacy only). */
  private readonly lastSeenMs = new Map<string, number>();
  private timer: TimerHandle | undefined;

  constructor(private readonly host: PendingCleanupHost) {}

  /** A join request from `nodeId` (the primary's admission calls it). */
  seen(nodeId: string): void {
    this.lastSeenMs.set(nodeId, this.host.clock.nowMs());
  }

  start(): void {
    const timeoutMs = this.host.timeoutMs;
    if (timeoutMs <= 0 || this.timer !== undefined) return;
    const intervalMs = Math.max(1, Math.min(pendingCleanupIntervalMsMax, timeoutMs));
    const check = () => {
      this.timer = this.host.clock.setTimer(intervalMs, check);
      this.removeSilent(timeoutMs);
    };
    this.timer = this.host.clock.setTimer(intervalMs, check);
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = undefined;
    this.lastSeenMs.clear();
  }

  /** Removes the Pending nodes silent for longer than `timeoutMs`; a node first met here starts its grace period now. */
  removeSilent(timeoutMs: number): void {
    const now = this.host.clock.nowMs();
    const expired: string[] = [];
    this.host.executeRead((tx) =>
      tx.table(TableDefs.nodesInfo).forEach((info: NodeInfo, id: string) => {
        if (info.status !== 'Pending') return;
        const seen = this.lastSeenMs.get(id);
        if (seen === undefined) this.lastSeenMs.set(id, now);
        else if (now - seen > timeoutMs) expired.push(id);
      }),
    );
    if (expired.length === 0) return;
    try {
      this.host.executeWrite((tx) => {
        for (const id of expired) {
          tx.table(TableDefs.nodesInfo).remove(id);
          tx.table(TableDefs.nodesEndorsedCertificates).remove(id);
        }
      });
      for (const id of expired) {
        this.lastSeenMs.delete(id);
        this.host.logger.info(`removed Pending node ${id}: no join request for more than ${timeoutMs}ms (pending_node_timeout)`);
      }
    } catch (e) {
      this.host.logger.fail(`could not remove silent Pending nodes: ${errorMessage(e)}`);
    }
  }
}
