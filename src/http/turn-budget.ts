/**
 * How much request work one turn of the event loop may do. Node's HTTP server hands the node every
 * request it parsed from every readable connection in one pass: 160 connections pipelining
 * committed writes made one turn execute thousands of them, and the node-to-node messages and
 * consensus ticks waiting behind that turn came too late (a primary lost its view to its own
 * clients). Here, once a turn has started `requestsMax` requests or spent `turnMs` since its first
 * one, the requests that follow are deferred to later turns, the same number per turn: between two
 * batches the event loop runs its timers and reads the other nodes' messages. Deferred requests are
 * taken one connection at a time, in turn (each connection's own in order of arrival): a client
 * with one request waits for one batch, not behind everything a flood pipelined before it.
 *
 * The deferred requests were admitted (their place in their connection's pipeline and their bytes
 * in the waiting-work budget are taken), so their number is bounded by those limits, not here.
 */
import { assert } from '../base/assert.js';

/** Counts of the budget (GET /node/metrics). */
export interface TurnBudgetMetrics {
  readonly requests_per_turn_max: number;
  readonly turn_ms_max: number;
  /** Requests deferred to a later turn, since start. */
  readonly deferred: number;
  /** Requests waiting now for a later turn. */
  readonly waiting: number;
  /** The most requests waiting at once, since start. */
  readonly peak_waiting: number;
  /** The most requests started in one turn, since start (at most requests_per_turn_max). */
  readonly peak_per_turn: number;
}

export class RequestTurnBudget {
  /** Requests started in the current turn, and when its first one started. */
  private started = 0;
  private turnStartedMs = 0;
  /** A reset (and drain) is scheduled at the end of the current turn. */
  private endOfTurnScheduled = false;
  /**
   * Deferred work by connection. A Map iterates in insertion order and visits entries set during
   * the iteration: taking one request of a connection and setting it again at the end makes one
   * loop a round robin.
   */
  private readonly queues = new Map<object, (() => void)[]>();
  private waitingCount = 0;
  private deferredCount = 0;
  private peakWaiting = 0;
  private peakPerTurn = 0;

  constructor(
    readonly requestsMax: number,
    readonly turnMs: number,
    private readonly nowMs: () => number = () => performance.now(),
  ) {
    assert(Number.isInteger(requestsMax) && requestsMax >= 1, 'a turn runs at least one request');
    assert(turnMs > 0, 'a turn has some time for requests');
  }

  /**
   * Runs `work` (one request's routing and execution) in this turn if the turn still has room and
   * nothing waits, else in a later one: after the requests `connection` deferred before it, and
   * after one request of each other connection with some waiting.
   */
  run(work: () => void, connection: object): void {
    if (this.waitingCount === 0 && this.hasRoom()) {
      this.count();
      work();
      return;
    }
    const queue = this.queues.get(connection);
    if (queue === undefined) this.queues.set(connection, [work]);
    else queue.push(work);
    this.waitingCount++;
    this.deferredCount++;
    if (this.waiting() > this.peakWaiting) this.peakWaiting = this.waiting();
    this.scheduleEndOfTurn();
  }

  private hasRoom(): boolean {
    return this.started === 0 || (this.started < this.requestsMax && this.nowMs() - this.turnStartedMs < this.turnMs);
  }

  private count(): void {
    if (this.started === 0) this.turnStartedMs = this.nowMs();
    this.started++;
    if (this.started > this.peakPerTurn) this.peakPerTurn = this.started;
    this.scheduleEndOfTurn();
  }

  private scheduleEndOfTurn(): void {
    if (this.endOfTurnScheduled) return;
    this.endOfTurnScheduled = true;
    setImmediate(this.endOfTurn);
  }

  /** After the event loop's I/O of this turn: a new turn's budget, spent first on the requests deferred, one connection at a time. */
  private readonly endOfTurn = (): void => {
    this.endOfTurnScheduled = false;
    this.started = 0;
    for (const [connection, queue] of this.queues) {
      if (!this.hasRoom()) break;
      const work = queue.shift()!;
      this.waitingCount--;
      // To the end of the round, or out of it once empty.
      this.queues.delete(connection);
      if (queue.length > 0) this.queues.set(connection, queue);
      this.count();
      work();
    }
    // The requests left, and the count of this batch, wait for the next turn's I/O to pass.
    if (this.waitingCount > 0 || this.started > 0) this.scheduleEndOfTurn();
  };

  private waiting(): number {
    return this.waitingCount;
  }

  metrics(): TurnBudgetMetrics {
    return {
      requests_per_turn_max: this.requestsMax,
      turn_ms_max: this.turnMs,
      deferred: this.deferredCount,
      waiting: this.waiting(),
      peak_waiting: this.peakWaiting,
      peak_per_turn: this.peakPerTurn,
    };
  }
}
