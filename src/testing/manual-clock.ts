/**
 * A Clock for tests whose time moves only when the test says so: timers fire from advance(),
 * so that a test of a timeout or a retry neither waits in real time nor depends on the machine's speed.
 */
import type { Clock, TimerHandle } from '../base/clock.js';

interface ManualTimer {
  readonly dueMs: number;
  readonly delayMs: number;
  readonly fn: () => void;
  cancelled: boolean;
}

export class ManualClock implements Clock {
  private nowAtMs: number;
  private timers: ManualTimer[] = [];
  private deferred: (() => void)[] = [];

  constructor(startMs = 1_700_000_000_000) {
    this.nowAtMs = startMs;
  }

  nowMs(): number {
    return this.nowAtMs;
  }

  monotonicMs(): number {
    return this.nowAtMs;
  }

  setTimer(delayMs: number, fn: () => void): TimerHandle {
    const timer: ManualTimer = { dueMs: this.nowAtMs + delayMs, delayMs, fn, cancelled: false };
    this.timers.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
      },
    };
  }

  defer(fn: () => void): void {
    this.deferred.push(fn);
  }

  /** The delays of the timers armed and neither fired nor cancelled, in the order they were set. */
  pendingDelaysMs(): number[] {
    return this.timers.filter((t) => !t.cancelled).map((t) => t.delayMs);
  }

  /** Moves time forward by ms, running deferred work and then every timer that falls due, in time order. */
  advance(ms: number): void {
    const targetMs = this.nowAtMs + ms;
    this.runDeferred();
    for (;;) {
      const due = this.timers.filter((t) => !t.cancelled && t.dueMs <= targetMs).sort((a, b) => a.dueMs - b.dueMs)[0];
      if (due === undefined) break;
      this.timers = this.timers.filter((t) => t !== due);
      this.nowAtMs = Math.max(this.nowAtMs, due.dueMs);
      due.fn();
      this.runDeferred();
    }
    this.nowAtMs = targetMs;
    this.timers = this.timers.filter((t) => !t.cancelled);
  }

  private runDeferred(): void {
    while (this.deferred.length > 0) this.deferred.shift()!();
  }
}
