/** The real clock: wall time, monotonic time, timers and the end-of-burst deferral (setImmediate). */
import type { Clock, TimerHandle } from '../base/clock.js';

/** setTimeout's longest delay (~24.8 days): above it Node fires after 1 ms instead. */
const TIMEOUT_DELAY_MS_MAX = 2 ** 31 - 1;

export const systemClock: Clock = {
  nowMs: () => Date.now(),
  monotonicMs: () => performance.now(),
  setTimer(delayMs: number, fn: () => void): TimerHandle {
    // Durations come from the configuration ("30d" is a valid snapshots.time_interval): a longer
    // delay is waited out in steps rather than turned into a timer that fires at once.
    const deadlineMs = performance.now() + delayMs;
    let handle: NodeJS.Timeout;
    const arm = (remainingMs: number): void => {
      handle = remainingMs > TIMEOUT_DELAY_MS_MAX ? setTimeout(() => arm(deadlineMs - performance.now()), TIMEOUT_DELAY_MS_MAX) : setTimeout(fn, remainingMs);
    };
    arm(delayMs);
    return { cancel: () => clearTimeout(handle) };
  },
  defer(fn: () => void): void {
    setImmediate(fn);
  },
};
