/**
 * Automatic key refresh of token issuers (set_jwt_issuer with auto_refresh): the logic, apart
 * from the I/O. The fetch goes through an injected KeyFetcher (src/platform/key-fetcher.ts with
 * undici in a node process, a fake in tests); the schedule is a pure function of the failures.
 */
import { checkIssuerKeyBounds, metadataFromJwks, sameMetadata, type KeyMetadata } from './keys.js';

export interface KeyFetchRequest {
  /** The issuer whose CA bundle verifies the server (one TLS agent per issuer). */
  readonly issuer: string;
  readonly url: string;
  /** PEM certificates: the only roots trusted for this issuer. */
  readonly caBundlePem: string;
  /** Largest response accepted; a larger one is a failure, cut at the limit. */
  readonly maxBytes: number;
  /** The issuer's deadline: aborts the request wherever it is (connecting, waiting, reading a trickling body). */
  readonly signal?: AbortSignal;
}

export interface KeyFetcher {
  /** GET over TLS verified against the request's CA bundle only; the body parsed as JSON. Rejects with the reason. */
  getJson(request: KeyFetchRequest): Promise<unknown>;
}

/** A fetcher for nodes that have none (the simulator): every fetch fails. */
export const NO_KEY_FETCHER: KeyFetcher = {
  getJson: () => Promise.reject(new Error('this node has no key fetcher')),
};

/** The first retry after a failure comes after this (or the interval, if shorter). */
export const REFRESH_RETRY_FIRST_MS = 5000;

/** When to try again: the interval after a success; after n consecutive failures min(5 s, interval)·2^(n-1), capped at the interval. */
export function refreshDelayMs(consecutiveFailures: number, intervalMs: number): number {
  if (consecutiveFailures <= 0) return intervalMs;
  const first = Math.min(REFRESH_RETRY_FIRST_MS, intervalMs);
  return Math.min(intervalMs, first * 2 ** Math.min(consecutiveFailures - 1, 40));
}

export interface IssuerFetch {
  readonly issuer: string;
  readonly caBundlePem: string;
  readonly maxBytes: number;
  /** Aborted at the issuer's deadline. */
  readonly signal?: AbortSignal;
}

/**
 * The issuer's discovery document, then its jwks_uri: the keys as governance would store them, by
 * kid, within the bounds of one issuer's keys (checkIssuerKeyBounds).
 */
export async function fetchIssuerKeys(fetcher: KeyFetcher, fetch: IssuerFetch): Promise<Map<string, KeyMetadata>> {
  const { issuer, caBundlePem, maxBytes } = fetch;
  const signal = fetch.signal !== undefined ? { signal: fetch.signal } : {};
  const discoveryUrl = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
  const discovery = await fetcher.getJson({ issuer, url: discoveryUrl, caBundlePem, maxBytes, ...signal });
  const jwksUri = (discovery as { jwks_uri?: unknown } | null)?.jwks_uri;
  if (typeof jwksUri !== 'string' || !jwksUri.startsWith('https://')) {
    throw new Error(`the discovery document of ${issuer} has no https jwks_uri`);
  }
  const jwks = await fetcher.getJson({ issuer, url: jwksUri, caBundlePem, maxBytes, ...signal });
  const keys = metadataFromJwks(issuer, jwks);
  checkIssuerKeyBounds(keys);
  return keys;
}

/**
 * What to write so that the issuer's keys are `fresh`: kid → the new list (other issuers' entries
 * kept) or null (remove the kid). Empty when the stored keys are already these.
 */
export function keyTableChanges(
  current: ReadonlyMap<string, readonly KeyMetadata[]>,
  issuer: string,
  fresh: ReadonlyMap<string, KeyMetadata>,
): Map<string, KeyMetadata[] | null> {
  const out = new Map<string, KeyMetadata[] | null>();
  const kids = new Set<string>(fresh.keys());
  for (const [kid, list] of current) if (list.some((m) => m.issuer === issuer)) kids.add(kid);
  for (const kid of kids) {
    const list = current.get(kid) ?? [];
    const mine = list.filter((m) => m.issuer === issuer);
    const wanted = fresh.get(kid);
    if (wanted !== undefined && mine.length === 1 && sameMetadata(mine[0]!, wanted)) continue;
    const others = list.filter((m) => m.issuer !== issuer);
    const next = wanted === undefined ? others : [...others, wanted];
    out.set(kid, next.length === 0 ? null : next);
  }
  return out;
}

/** Per issuer, for GET /node/jwt_keys/refresh/metrics: each issuer is refreshed on its own schedule. */
export interface IssuerRefreshReport {
  attempts: number;
  successes: number;
  failures: number;
  consecutive_failures: number;
  /** Failures that were the issuer's deadline (jwt.key_refresh_timeout), counted in failures too. */
  timeouts: number;
  /** The delay before this issuer's next refresh, as last scheduled; null while one is in flight. */
  next_refresh_delay_ms: number | null;
  /** Keys the issuer published at its last success. */
  keys?: number;
  last_success_at?: string;
  last_failure_at?: string;
  last_failure_reason?: string;
}

export interface KeyRefreshMetrics {
  /** Sums over the issuers. */
  attempts: number;
  successes: number;
  failures: number;
  /** Whether this node refreshes (it is the primary). */
  active: boolean;
  /** The soonest of the issuers' next refreshes, as last scheduled (null when none is scheduled). */
  next_refresh_delay_ms: number | null;
  /** The most consecutive failures of any issuer. */
  consecutive_failures: number;
  issuers: Record<string, IssuerRefreshReport>;
}
