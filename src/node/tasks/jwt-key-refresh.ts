/**
 * Automatic refresh of token issuers' signing keys (docs/tokens.md): only the primary fetches,
 * every jwt.key_refresh_interval, at once when it becomes primary and when the issuers (or CA
 * bundles) change. Each round fetches every auto-refresh issuer's discovery document and JWKS
 * through the injected KeyFetcher, then writes the keys that changed in one transaction (an
 * unchanged key set writes nothing; keys gone at the provider are removed). After a failing round
 * the next comes after min(5 s, interval), doubling with each further failure, capped at the interval.
 */
import type { Clock, TimerHandle } from '../../base/clock.js';
import { errorMessage } from '../../base/errors.js';
import type { Logger } from '../../base/log.js';
import { fetchIssuerKeys, keyTableChanges, refreshDelayMs, type IssuerRefreshReport, type KeyFetcher, type KeyMetadata, type KeyRefreshMetrics } from '../../jwt/index.js';
import { jsonCodec, type Tx } from '../../kv/index.js';
import { Tables } from '../tables.js';
import type { PrimaryTask } from './primary-tasks.js';

const json = jsonCodec<any>();

export interface JwtKeyRefreshHost {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly intervalMs: number;
  readonly maxResponseBytes: number;
  readonly fetcher: KeyFetcher;
  executeRead<T>(fn: (tx: Tx) => T): T;
  executeWrite(fn: (tx: Tx) => void): unknown;
}

interface AutoIssuer {
  readonly issuer: string;
  readonly caBundlePem: string | undefined;
}

type Outcome = { issuer: string; keys: Map<string, KeyMetadata> } | { issuer: string; error: string };

export class JwtKeyRefresh implements PrimaryTask {
  readonly name = 'token key refresh';
  private running = false;
  /** Bumped at every start and stop: a round begun in an earlier primacy writes nothing. */
  private generation = 0;
  private timer: TimerHandle | undefined;
  private inFlight = false;
  private again = false;
  private consecutiveFailures = 0;
  private nextDelayMs: number | null = null;
  private readonly totals = { attempts: 0, successes: 0, failures: 0 };
  private readonly issuers = new Map<string, IssuerRefreshReport>();

  constructor(private readonly host: JwtKeyRefreshHost) {}

  start(): void {
    this.running = true;
    this.generation++;
    this.consecutiveFailures = 0;
    this.schedule(0);
  }

  stop(): void {
    this.running = false;
    this.generation++;
    this.timer?.cancel();
    this.timer = undefined;
    this.inFlight = false;
    this.again = false;
    this.nextDelayMs = null;
  }

  /** The issuers or CA bundles changed: refresh now (after the round in flight, if any). */
  trigger(): void {
    if (!this.running) return;
    if (this.inFlight) this.again = true;
    else this.schedule(0);
  }

  metrics(): KeyRefreshMetrics {
    const issuers: Record<string, IssuerRefreshReport> = {};
    for (const [name, report] of this.issuers) issuers[name] = { ...report };
    return { ...this.totals, active: this.running, next_refresh_delay_ms: this.nextDelayMs, consecutive_failures: this.consecutiveFailures, issuers };
  }

  private schedule(delayMs: number): void {
    this.timer?.cancel();
    this.nextDelayMs = delayMs;
    this.timer = this.host.clock.setTimer(delayMs, () => {
      this.timer = undefined;
      void this.round();
    });
  }

  private async round(): Promise<void> {
    const generation = this.generation;
    this.inFlight = true;
    let failed = false;
    try {
      const issuers = this.host.executeRead(autoRefreshIssuers);
      const outcomes = await Promise.all(issuers.map((i) => this.fetch(i)));
      if (generation !== this.generation) return;
      failed = this.write(outcomes);
    } catch (e) {
      failed = true;
      this.host.logger.fail(`token key refresh failed: ${errorMessage(e)}`);
    } finally {
      if (generation === this.generation) {
        this.inFlight = false;
        this.consecutiveFailures = failed ? this.consecutiveFailures + 1 : 0;
        const again = this.again;
        this.again = false;
        this.schedule(again ? 0 : refreshDelayMs(this.consecutiveFailures, this.host.intervalMs));
      }
    }
  }

  private async fetch(issuer: AutoIssuer): Promise<Outcome> {
    this.report(issuer.issuer).attempts++;
    this.totals.attempts++;
    if (issuer.caBundlePem === undefined) return { issuer: issuer.issuer, error: 'its CA certificate bundle is not registered' };
    try {
      return { issuer: issuer.issuer, keys: await fetchIssuerKeys(this.host.fetcher, issuer.issuer, issuer.caBundlePem, this.host.maxResponseBytes) };
    } catch (e) {
      return { issuer: issuer.issuer, error: errorMessage(e) };
    }
  }

  /** Writes the keys that changed in one transaction; counts each issuer's outcome. Returns whether any failed. */
  private write(outcomes: readonly Outcome[]): boolean {
    const fetched = outcomes.filter((o): o is Extract<Outcome, { keys: unknown }> => 'keys' in o);
    const changesOf = (tx: Tx) => {
      const stillAuto = new Set(autoRefreshIssuers(tx).map((i) => i.issuer));
      const current = new Map<string, KeyMetadata[]>();
      tx.map(Tables.jwtPublicSigningKeys, json).forEach((list: KeyMetadata[], kid: string) => {
        current.set(kid, list);
      });
      const all = new Map<string, KeyMetadata[] | null>();
      for (const o of fetched) {
        if (!stillAuto.has(o.issuer)) continue;
        for (const [kid, list] of keyTableChanges(current, o.issuer, o.keys)) {
          all.set(kid, list);
          if (list === null) current.delete(kid);
          else current.set(kid, list);
        }
      }
      return all;
    };
    let writeError: string | undefined;
    if (fetched.length > 0 && this.host.executeRead(changesOf).size > 0) {
      try {
        this.host.executeWrite((tx) => {
          const keys = tx.map(Tables.jwtPublicSigningKeys, json);
          for (const [kid, list] of changesOf(tx)) {
            if (list === null) keys.remove(kid);
            else keys.put(kid, list);
          }
        });
        this.host.logger.info(`token key refresh: wrote the new signing keys of ${fetched.map((o) => o.issuer).join(', ')}`);
      } catch (e) {
        writeError = `the new keys could not be written: ${errorMessage(e)}`;
      }
    }
    const now = new Date(this.host.clock.nowMs()).toISOString();
    let failed = false;
    for (const o of outcomes) {
      const report = this.report(o.issuer);
      const error = 'error' in o ? o.error : writeError;
      if (error === undefined) {
        report.successes++;
        this.totals.successes++;
        report.consecutive_failures = 0;
        report.last_success_at = now;
      } else {
        failed = true;
        report.failures++;
        this.totals.failures++;
        report.consecutive_failures++;
        report.last_failure_at = now;
        report.last_failure_reason = error;
        this.host.logger.fail(`token key refresh of ${o.issuer} failed: ${error}`);
      }
    }
    return failed;
  }

  private report(issuer: string): IssuerRefreshReport {
    let report = this.issuers.get(issuer);
    if (report === undefined) {
      report = { attempts: 0, successes: 0, failures: 0, consecutive_failures: 0 };
      this.issuers.set(issuer, report);
    }
    return report;
  }
}

function autoRefreshIssuers(tx: Tx): AutoIssuer[] {
  const out: AutoIssuer[] = [];
  const bundles = tx.map(Tables.caCertBundles, json);
  tx.map(Tables.jwtIssuers, json).forEach((record: { auto_refresh?: boolean; ca_cert_bundle_name?: string }, issuer: string) => {
    if (record.auto_refresh !== true) return;
    const pem = record.ca_cert_bundle_name === undefined ? undefined : (bundles.get(record.ca_cert_bundle_name) as string | undefined);
    out.push({ issuer, caBundlePem: pem });
  });
  return out;
}
