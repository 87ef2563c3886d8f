/** Time for the node layer, injected so that the simulator can drive it. */
export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Milliseconds since the Unix epoch, as the (untrusted) host's clock says. */
  nowMs(): number;
  /** Monotonic milliseconds, for measuring intervals. */
  monotonicMs(): number;
  setTimer(delayMs: number, fn: () => void): TimerHandle;
  /** Runs fn once the current batch of synchronous work is done (a micro-batching point). */
  defer(fn: () => void): void;
}
