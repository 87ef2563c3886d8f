/** The real clock: wall time, monotonic time, timers and the end-of-burst deferral (setImmediate). */
import type { Clock, TimerHandle } from '../base/clock.js';

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  monotonicMs: () => performance.now(),
  setTimer(delayMs: number, fn: () => void): TimerHandle {
    const handle = setTimeout(fn, delayMs);
    return { cancel: () => clearTimeout(handle) };
  },
  defer(fn: () => void): void {
    setImmediate(fn);
  },
};
