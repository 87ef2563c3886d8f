/**
 * The node-wide budget of waiting work, in bytes (src/node/limits.ts says what counts and why):
 * every client request from its head to its answer, on every RPC interface, and every request a
 * backup forwarded to this node. A request that does not fit is refused at once with a retryable
 * 503, before any handler runs: nothing is queued for want of memory.
 */
import type { IncomingMessage } from 'node:http';
import { assert } from '../base/assert.js';
import { CovenantError } from '../base/errors.js';
import { waitingRequestHeadFactor, waitingRequestOverheadBytes, waitingWorkRetryAfterSeconds } from '../node/node.js';

/** Gives back what a request took; calling it again does nothing. */
export type ReleaseWaitingWork = () => void;

/** The budget's counts (GET /node/metrics). */
export interface WaitingWorkMetrics {
  readonly used_bytes: number;
  readonly peak_bytes: number;
  readonly max_bytes: number;
  /** Requests in the budget now. */
  readonly requests: number;
  /** Requests refused for want of budget, since start. */
  readonly refused: number;
}

export class WaitingWorkBudget {
  private usedBytes = 0;
  private peakBytes = 0;
  private requests = 0;
  private refusedCount = 0;

  constructor(readonly maxBytes: number) {
    assert(Number.isSafeInteger(maxBytes) && maxBytes > 0, 'a waiting-work budget is a positive number of bytes');
  }

  /** Takes `bytes` for one request; undefined (and counted) when they do not fit. */
  tryTake(bytes: number): ReleaseWaitingWork | undefined {
    assert(Number.isSafeInteger(bytes) && bytes > 0, 'a request costs a positive number of bytes');
    if (this.usedBytes + bytes > this.maxBytes) {
      this.refusedCount++;
      return undefined;
    }
    this.usedBytes += bytes;
    this.requests++;
    if (this.usedBytes > this.peakBytes) this.peakBytes = this.usedBytes;
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.usedBytes -= bytes;
      this.requests--;
      assert(this.usedBytes >= 0 && this.requests >= 0, 'waiting work is given back once');
    };
  }

  metrics(): WaitingWorkMetrics {
    return { used_bytes: this.usedBytes, peak_bytes: this.peakBytes, max_bytes: this.maxBytes, requests: this.requests, refused: this.refusedCount };
  }
}

/** 503 WaitingWorkBudgetExhausted, with Retry-After. */
export function waitingWorkExhausted(maxBytes: number): CovenantError {
  return new CovenantError(
    'WaitingWorkBudgetExhausted',
    `this node already holds its ${maxBytes} bytes of waiting requests (max_waiting_work_size): retry shortly`,
    503,
    undefined,
    waitingWorkRetryAfterSeconds,
  );
}

/**
 * What a client request costs while it waits: its head (kept twice by Node: the raw list and the
 * parsed object), its declared body, and the objects every request carries. A chunked body is
 * bounded by max_body_size and is not counted ahead.
 */
export function clientRequestCostBytes(req: IncomingMessage): number {
  let headBytes = (req.url?.length ?? 0) + 16;
  const raw = req.rawHeaders;
  for (let i = 0; i < raw.length; i++) headBytes += raw[i]!.length + 2;
  const declared = Number(req.headers['content-length'] ?? 0);
  const bodyBytes = Number.isSafeInteger(declared) && declared > 0 ? declared : 0;
  return waitingRequestHeadFactor * headBytes + bodyBytes + waitingRequestOverheadBytes;
}

/** What a request forwarded by a backup costs on this node while it waits: its frame, decoded once. */
export function forwardedRequestCostBytes(frameBytes: number): number {
  return waitingRequestHeadFactor * frameBytes + waitingRequestOverheadBytes;
}
