/**
 * How long the event loop of this process waited, from perf_hooks.monitorEventLoopDelay: a timer
 * due every `resolutionMs` records how late it ran, so one long turn (a synchronous piece of work)
 * shows as a delay of about its length. Reported in GET /node/metrics (`event_loop`) since the
 * process started and over the last complete window; a node's own work is meant to stay under a
 * documented bound per turn (src/node/limits.ts, eventLoopTurnMsBound).
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';

/** Delays in milliseconds, rounded to 0.1 ms. */
export interface EventLoopDelayFigures {
  readonly max_ms: number;
  readonly p99_ms: number;
  readonly mean_ms: number;
  /** Samples (one per resolution of the monitor). */
  readonly samples: number;
}

export interface EventLoopDelayReport {
  readonly resolution_ms: number;
  readonly since_start: EventLoopDelayFigures;
  /** The last complete window of `window_ms` (since start until one has passed). */
  readonly recent: EventLoopDelayFigures;
  readonly window_ms: number;
}

/** Sampling period of the monitor: well below the turn bound it watches (50 ms). */
export const EVENT_LOOP_RESOLUTION_MS = 10;
/** Length of the recent window. */
export const EVENT_LOOP_WINDOW_MS = 10_000;

const NS_PER_MS = 1e6;

function figuresOf(h: IntervalHistogram): EventLoopDelayFigures {
  const samples = h.count;
  if (samples === 0) return { max_ms: 0, p99_ms: 0, mean_ms: 0, samples: 0 };
  // The histogram records each timer's whole period plus its lateness: the delay is what exceeds the period.
  const delay = (ns: number) => Math.max(0, Math.round((ns / NS_PER_MS - EVENT_LOOP_RESOLUTION_MS) * 10) / 10);
  return { max_ms: delay(h.max), p99_ms: delay(h.percentile(99)), mean_ms: delay(h.mean), samples };
}

export class EventLoopDelayMonitor {
  readonly #sinceStart = monitorEventLoopDelay({ resolution: EVENT_LOOP_RESOLUTION_MS });
  readonly #window = monitorEventLoopDelay({ resolution: EVENT_LOOP_RESOLUTION_MS });
  #recent: EventLoopDelayFigures | undefined;
  readonly #timer: NodeJS.Timeout;

  constructor() {
    this.#sinceStart.enable();
    this.#window.enable();
    this.#timer = setInterval(() => {
      this.#recent = figuresOf(this.#window);
      this.#window.reset();
    }, EVENT_LOOP_WINDOW_MS);
    this.#timer.unref();
  }

  report(): EventLoopDelayReport {
    const sinceStart = figuresOf(this.#sinceStart);
    return { resolution_ms: EVENT_LOOP_RESOLUTION_MS, since_start: sinceStart, recent: this.#recent ?? sinceStart, window_ms: EVENT_LOOP_WINDOW_MS };
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#sinceStart.disable();
    this.#window.disable();
  }
}
