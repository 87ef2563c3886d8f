/**
 * The primary's bound on how often one client address may ask to join (POST /node/join): a token
 * bucket per address, refilled at `perSecond` up to `burst` tokens, one token per request. Beyond,
 * the request is refused before any work (its key and quote are not even read) with 429
 * TooManyJoinRequests and Retry-After. The addresses tracked are bounded too: a new one beyond the
 * bound makes the least recently seen be forgotten (it starts again with a full bucket, as an
 * address never seen would: the bound is on memory, not a ban list).
 */
import type { Clock } from '../../base/clock.js';
import type { Logger } from '../../base/log.js';
import { retryLater } from '../errors.js';
import { joinRateAddressesMax, joinRequestsPerAddressBurst, joinRequestsPerAddressPerSecond } from '../limits.js';

export interface JoinRateLimits {
  readonly perSecond: number;
  readonly burst: number;
  readonly addressesMax: number;
}

export const DEFAULT_JOIN_RATE_LIMITS: JoinRateLimits = {
  perSecond: joinRequestsPerAddressPerSecond,
  burst: joinRequestsPerAddressBurst,
  addressesMax: joinRateAddressesMax,
};

interface Bucket {
  tokens: number;
  /** Monotonic time the tokens were counted at. */
  atMs: number;
  /** A refusal was logged since the last request that passed (one log line per episode, not per request). */
  refusalLogged: boolean;
}

export class JoinRateLimiter {
  readonly #clock: Pick<Clock, 'monotonicMs'>;
  readonly #logger: Logger;
  readonly #limits: JoinRateLimits;
  /** By client address, least recently seen first (a Map keeps insertion order; a use re-inserts). */
  readonly #buckets = new Map<string, Bucket>();

  constructor(clock: Pick<Clock, 'monotonicMs'>, logger: Logger, limits: JoinRateLimits = DEFAULT_JOIN_RATE_LIMITS) {
    this.#clock = clock;
    this.#logger = logger;
    this.#limits = limits;
  }

  /** Addresses tracked now (at most limits.addressesMax). */
  get trackedAddresses(): number {
    return this.#buckets.size;
  }

  /**
   * Counts one join request from `address` (undefined when the connection has none any more: all
   * such requests share one bucket). Throws TooManyJoinRequests when its bucket is empty.
   */
  take(address: string | undefined): void {
    const key = address ?? '(unknown)';
    const { perSecond, burst, addressesMax } = this.#limits;
    const now = this.#clock.monotonicMs();
    let bucket = this.#buckets.get(key);
    if (bucket !== undefined) {
      this.#buckets.delete(key);
      bucket.tokens = Math.min(burst, bucket.tokens + (Math.max(0, now - bucket.atMs) * perSecond) / 1000);
      bucket.atMs = now;
    } else {
      bucket = { tokens: burst, atMs: now, refusalLogged: false };
      for (const oldest of this.#buckets.keys()) {
        if (this.#buckets.size < addressesMax) break;
        this.#buckets.delete(oldest);
      }
    }
    this.#buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      bucket.refusalLogged = false;
      return;
    }
    const retryAfterMs = ((1 - bucket.tokens) * 1000) / perSecond;
    if (!bucket.refusalLogged) {
      bucket.refusalLogged = true;
      this.#logger.info(`join requests from ${key} refused: more than ${perSecond}/s (burst ${burst})`);
    }
    throw retryLater('TooManyJoinRequests', `too many join requests from ${key}: at most ${perSecond} per second (burst ${burst}); retry later`, retryAfterMs);
  }
}
