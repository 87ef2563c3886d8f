/**
 * A clock for tests of work done in slices over event-loop turns (snapshot loading, restart
 * replay): its deferred work runs one turn at a time, when the test says; `tickMs` per look at
 * the time.
 */
import assert from 'node:assert/strict';
import type { Clock } from '../../src/base/clock.js';

export class TurnClock implements Clock {
  readonly queue: (() => void)[] = [];
  #nowMs = 0;
  constructor(readonly tickMs = 0) {}
  nowMs(): number {
    return this.#nowMs;
  }
  monotonicMs(): number {
    this.#nowMs += this.tickMs;
    return this.#nowMs;
  }
  setTimer(): { cancel(): void } {
    throw new Error('work in slices sets no timer');
  }
  defer(fn: () => void): void {
    this.queue.push(fn);
  }
  /** Runs queued turns until `until` is true; the count of turns. */
  async runUntil(until: () => boolean, turnsMax: number): Promise<number> {
    let turns = 0;
    while (!until()) {
      assert.ok(turns < turnsMax, `still working after ${turns} turns`);
      const next = this.queue.shift();
      assert.ok(next !== undefined, 'nothing left to run');
      next();
      turns++;
      // Let the promises of a finished step settle.
      for (let i = 0; i < 5; i++) await Promise.resolve();
    }
    return turns;
  }
}
