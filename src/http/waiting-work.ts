/**
 * The node-wide budget of waiting work, in bytes (src/node/limits.ts says what counts and why):
 * every client request from its head to its answer, on every RPC interface, and every request a
 * backup forwarded to this node. A request that does not fit is refused at once with a retryable
 * 503, before any handler runs: nothing is queued for want of memory.
 */
import type { IncomingMessage } from 'node:http';
import { assert } from '../base/assert.js';
import { CovenantError } from '../base/errors.js';
import { waitingRequestHeadFactor, waitingRequestOverheadBytes, waitingWorkRetryAfterSeconds, waitingWorkShareOfOneHolder } from '../node/node.js';

/** Gives back what a request took; calling it again does nothing. */
export type ReleaseWaitingWork = () => void;

/** The budget's counts (GET /node/metrics). */
export interface WaitingWorkMetrics {
  readonly used_bytes: number;
  readonly peak_bytes: number;
  readonly max_bytes: number;
  /** What one client address (or one backup forwarding to this node) may hold. */
  readonly max_bytes_per_holder: number;
  /** Requests in the budget now. */
  readonly requests: number;
  /** Client addresses and backups holding some of it now. */
  readonly holders: number;
  /** Requests refused for want of budget, since start. */
  readonly refused: number;
}

export class WaitingWorkBudget {
  private usedBytes = 0;
  private peakBytes = 0;
  private requests = 0;
  private refusedCount = 0;
  /** Bytes held by each holder (a client address, or a backup forwarding to this node). */
  private readonly byHolder = new Map<string, number>();
  /** What one holder may hold (waitingWorkShareOfOneHolder of the budget). */
  readonly maxBytesPerHolder: number;

  constructor(readonly maxBytes: number) {
    assert(Number.isSafeInteger(maxBytes) && maxBytes > 0, 'a waiting-work budget is a positive number of bytes');
    this.maxBytesPerHolder = Math.floor(maxBytes * waitingWorkShareOfOneHolder);
  }

  /**
   * Takes `bytes` for one request of `holder`; undefined (and counted) when they do not fit in the
   * budget or in the holder's share of it, so that one client address cannot take all of it.
   */
  tryTake(bytes: number, holder: string): ReleaseWaitingWork | undefined {
    assert(Number.isSafeInteger(bytes) && bytes > 0, 'a request costs a positive number of bytes');
    const held = this.byHolder.get(holder) ?? 0;
    if (this.usedBytes + bytes > this.maxBytes || held + bytes > this.maxBytesPerHolder) {
      this.refusedCount++;
      return undefined;
    }
    this.usedBytes += bytes;
    this.byHolder.set(holder, held + bytes);
    this.requests++;
    if (this.usedBytes > this.peakBytes) this.peakBytes = this.usedBytes;
    let holding = true;
    return () => {
      if (!holding) return;
      holding = false;
      this.usedBytes -= bytes;
      this.requests--;
      const left = this.byHolder.get(holder)! - bytes;
      if (left === 0) this.byHolder.delete(holder);
      else this.byHolder.set(holder, left);
      assert(this.usedBytes >= 0 && this.requests >= 0 && left >= 0, 'waiting work is given back once');
    };
  }

  metrics(): WaitingWorkMetrics {
    return {
      used_bytes: this.usedBytes,
      peak_bytes: this.peakBytes,
      max_bytes: this.maxBytes,
      max_bytes_per_holder: this.maxBytesPerHolder,
      requests: this.requests,
      holders: this.byHolder.size,
      refused: this.refusedCount,
    };
  }
}

/** 503 WaitingWorkBudgetExhausted, with Retry-After. */
export function waitingWorkExhausted(budget: WaitingWorkBudget): CovenantError {
  return new CovenantError(
    'WaitingWorkBudgetExhausted',
    `this node holds as many waiting requests as it may (max_waiting_work_size ${budget.maxBytes} bytes, at most ${budget.maxBytesPerHolder} from one client address): retry shortly`,
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
