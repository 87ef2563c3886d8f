/**
 * The rate at which one client address may send requests to one RPC interface: a token bucket per
 * address, refilled at `perSecond` up to `burst` tokens, one token per request, checked as soon as
 * a request's head is read (before it is routed, authenticated, read or executed). A request beyond
 * it is answered 429 TooManyRequests with Retry-After, and its connection is not read again for
 * that long: a client flooding the node at a high rate is pushed back by TCP rather than answered
 * one refusal per request (the waiting-work budget bounds the memory such a flood holds, this
 * bounds the CPU).
 *
 * The addresses tracked are bounded: a new one beyond the bound makes the least recently seen be
 * forgotten (it starts again with a full bucket, as an address never seen would: the bound is on
 * memory, not a ban list). Addresses the operator trusts (by default the loopback ones: a sandbox,
 * the benchmarks and local tools all connect from there) are not limited.
 */
import { assert } from '../base/assert.js';
import { CovenantError } from '../base/errors.js';

export interface RequestRateLimits {
  /** Tokens added to an address's bucket per second (max_requests_per_second_per_address). */
  readonly perSecond: number;
  /** Tokens a bucket holds at most, and starts with (max_request_burst_per_address). */
  readonly burst: number;
  /** Client addresses tracked at once (requestRateAddressesMax). */
  readonly addressesMax: number;
  /** Addresses never limited (request_rate_exempt_addresses). */
  readonly exemptAddresses: readonly string[];
}

/** Counts of one interface's rate limit (GET /node/metrics). */
export interface RequestRateMetrics {
  readonly per_second_per_address: number;
  readonly burst_per_address: number;
  readonly tracked_addresses: number;
  /** Requests answered 429 TooManyRequests, since start. */
  readonly refused: number;
  /** Addresses refused at least once, since start (an address counts again after it was forgotten). */
  readonly refused_addresses: number;
}

interface Bucket {
  tokens: number;
  /** Monotonic time the tokens were counted at. */
  atMs: number;
  /** Refused since its last admitted request (counted once per episode in refused_addresses). */
  refusing: boolean;
}

export class RequestRateLimiter {
  /** By client address, least recently seen first (a Map keeps insertion order; a use re-inserts). */
  private readonly buckets = new Map<string, Bucket>();
  private readonly exempt: ReadonlySet<string>;
  private refusedCount = 0;
  private refusedAddressCount = 0;

  constructor(
    private readonly limits: RequestRateLimits,
    private readonly nowMs: () => number = () => performance.now(),
  ) {
    assert(limits.perSecond > 0 && Number.isFinite(limits.perSecond), 'a request rate is a positive number per second');
    assert(Number.isInteger(limits.burst) && limits.burst >= 1, 'a burst admits at least one request');
    assert(Number.isInteger(limits.addressesMax) && limits.addressesMax >= 1, 'at least one address is tracked');
    this.exempt = new Set(limits.exemptAddresses.map(plainAddress));
  }

  /**
   * Counts one request from `address`: 0 when it may go on, else the milliseconds until its
   * bucket holds a token again (the request is to be refused, and counted as such here).
   */
  take(address: string | undefined): number {
    const key = address === undefined ? '(unknown)' : plainAddress(address);
    if (this.exempt.has(key)) return 0;
    const { perSecond, burst, addressesMax } = this.limits;
    const now = this.nowMs();
    let bucket = this.buckets.get(key);
    if (bucket !== undefined) {
      this.buckets.delete(key);
      bucket.tokens = Math.min(burst, bucket.tokens + (Math.max(0, now - bucket.atMs) * perSecond) / 1000);
      bucket.atMs = now;
    } else {
      bucket = { tokens: burst, atMs: now, refusing: false };
      for (const oldest of this.buckets.keys()) {
        if (this.buckets.size < addressesMax) break;
        this.buckets.delete(oldest);
      }
    }
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      bucket.refusing = false;
      return 0;
    }
    this.refusedCount++;
    if (!bucket.refusing) {
      bucket.refusing = true;
      this.refusedAddressCount++;
    }
    return Math.max(1, Math.ceil(((1 - bucket.tokens) * 1000) / perSecond));
  }

  metrics(): RequestRateMetrics {
    return {
      per_second_per_address: this.limits.perSecond,
      burst_per_address: this.limits.burst,
      tracked_addresses: this.buckets.size,
      refused: this.refusedCount,
      refused_addresses: this.refusedAddressCount,
    };
  }
}

/** An IPv4 client of a dual-stack listener appears as ::ffff:a.b.c.d: it is the same address. */
export function plainAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

/** 429 TooManyRequests, with Retry-After (whole seconds, at least 1). */
export function tooManyRequests(limits: Pick<RequestRateLimits, 'perSecond' | 'burst'>, retryAfterMs: number): CovenantError {
  return new CovenantError(
    'TooManyRequests',
    `this client address sends requests faster than this interface serves one address (max_requests_per_second_per_address ${limits.perSecond}, burst ${limits.burst}): retry later`,
    429,
    undefined,
    Math.max(1, Math.ceil(retryAfterMs / 1000)),
  );
}
