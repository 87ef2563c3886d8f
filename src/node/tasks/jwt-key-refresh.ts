/**
 * Automatic refresh of token issuers' signing keys (docs/tokens.md): only the primary fetches. Each
 * auto-refresh issuer is refreshed on its own: at once when the node becomes primary and when the
 * issuers (or CA bundles) change, then every jwt.key_refresh_interval; after a failure again after
 * min(5 s, interval), doubling with each further failure, capped at the interval. One fetch
 * (discovery document, then JWKS) has a total deadline, jwt.key_refresh_timeout, after which it is
 * aborted and counted as a failure. An issuer's keys are written as soon as they are fetched, in a
 * transaction of their own (an unchanged key set writes nothing; keys gone at the provider are
 * removed): a slow or failing issuer never holds another's refresh.
 */
import type { Clock, TimerHandle } from '../../base/clock.js';
import { assert } from '../../base/assert.js';
import { errorMessage } from '../../base/errors.js';
import type { Logger } from '../../base/log.js';
import { fetchIssuerKeys, keyTableChanges, refreshDelayMs, type IssuerRefreshReport, type KeyFetcher, type KeyMetadata, type KeyRefreshMetrics } from '../../jwt/index.js';
import type { Tx } from '../../kv/index.js';
import { TableDefs } from '../tables.js';
import type { PrimaryTask } from './primary-tasks.js';

export interface JwtKeyRefreshHost {
  readonly clock: Clock;
  readonly logger: Logger;
  readonly intervalMs: number;
  /** Total deadline of one issuer's fetch (discovery and JWKS together). */
  readonly timeoutMs: number;
  readonly maxResponseBytes: number;
  readonly fetcher: KeyFetcher;
  executeRead<T>(fn: (tx: Tx) => T): T;
  executeWrite(fn: (tx: Tx) => void): unknown;
}

interface AutoIssuer {
  readonly issuer: string;
  readonly caBundlePem: string | undefined;
}

/** One issuer's schedule while this node refreshes. */
interface IssuerSchedule {
  timer: TimerHandle | undefined;
  /** Aborts the fetch in flight (its deadline, a stop, the issuer's removal). */
  inFlight: AbortController | undefined;
  /** The issuers changed during the fetch in flight: refresh again at once after it. */
  again: boolean;
}

class DeadlineError extends Error {}

export class JwtKeyRefresh implements PrimaryTask {
  readonly name = 'token key refresh';
  private running = false;
  /** Bumped at every start and stop: a fetch begun in an earlier primacy writes nothing. */
  private generation = 0;
  private readonly schedules = new Map<string, IssuerSchedule>();
  private syncPending = false;
  private readonly totals = { attempts: 0, successes: 0, failures: 0 };
  /** Reports of the auto-refresh issuers (one per row of the issuers table, which bounds them). */
  private readonly reports = new Map<string, IssuerRefreshReport>();

  constructor(private readonly host: JwtKeyRefreshHost) {
    assert(host.timeoutMs > 0 && host.intervalMs > 0, 'key refresh timeout and interval are positive');
  }

  start(): void {
    this.running = true;
    this.generation++;
    for (const report of this.reports.values()) report.consecutive_failures = 0;
    this.syncSoon();
  }

  stop(): void {
    this.running = false;
    this.generation++;
    for (const schedule of this.schedules.values()) this.drop(schedule);
    this.schedules.clear();
    for (const report of this.reports.values()) report.next_refresh_delay_ms = null;
  }

  /** The issuers or CA bundles changed: refresh every issuer now (after its fetch in flight, if any). */
  trigger(): void {
    if (this.running) this.syncSoon();
  }

  /** syncIssuers once the current work is done (a commit's listeners run inside the commit; several changes, one sync). */
  private syncSoon(): void {
    if (this.syncPending) return;
    this.syncPending = true;
    this.host.clock.defer(() => {
      this.syncPending = false;
      if (this.running) this.syncIssuers();
    });
  }

  metrics(): KeyRefreshMetrics {
    const issuers: Record<string, IssuerRefreshReport> = {};
    let next: number | null = null;
    let consecutive = 0;
    for (const [name, report] of this.reports) {
      issuers[name] = { ...report };
      if (report.next_refresh_delay_ms !== null) next = Math.min(next ?? Infinity, report.next_refresh_delay_ms);
      consecutive = Math.max(consecutive, report.consecutive_failures);
    }
    return { ...this.totals, active: this.running, next_refresh_delay_ms: next, consecutive_failures: consecutive, issuers };
  }

  /** Every auto-refresh issuer refreshed now; issuers no longer auto-refreshed forgotten (their fetch aborted). */
  private syncIssuers(): void {
    const current = new Set(this.host.executeRead(autoRefreshIssuers).map((i) => i.issuer));
    for (const [issuer, schedule] of this.schedules) {
      if (current.has(issuer)) continue;
      this.drop(schedule);
      this.schedules.delete(issuer);
    }
    for (const issuer of this.reports.keys()) if (!current.has(issuer)) this.reports.delete(issuer);
    for (const issuer of current) {
      let schedule = this.schedules.get(issuer);
      if (schedule === undefined) this.schedules.set(issuer, (schedule = { timer: undefined, inFlight: undefined, again: false }));
      if (schedule.inFlight !== undefined) schedule.again = true;
      else this.schedule(issuer, schedule, 0);
    }
  }

  private drop(schedule: IssuerSchedule): void {
    schedule.timer?.cancel();
    schedule.timer = undefined;
    schedule.inFlight?.abort(new Error('the node stopped refreshing this issuer'));
    schedule.inFlight = undefined;
  }

  private schedule(issuer: string, schedule: IssuerSchedule, delayMs: number): void {
    schedule.timer?.cancel();
    this.report(issuer).next_refresh_delay_ms = delayMs;
    schedule.timer = this.host.clock.setTimer(delayMs, () => {
      schedule.timer = undefined;
      this.refresh(issuer, schedule).catch((e: unknown) => {
        // refresh() catches what the fetch and the write throw; anything else is a broken invariant.
        assert(false, `token key refresh of ${issuer}: ${errorMessage(e)}`);
      });
    });
  }

  private async refresh(issuer: string, schedule: IssuerSchedule): Promise<void> {
    const generation = this.generation;
    const controller = new AbortController();
    schedule.inFlight = controller;
    const report = this.report(issuer);
    report.next_refresh_delay_ms = null;
    report.attempts++;
    this.totals.attempts++;
    const outcome = await this.fetch(issuer, controller);
    // Stopped, or the issuer removed, meanwhile: nothing written, nothing counted.
    if (generation !== this.generation || this.schedules.get(issuer) !== schedule || schedule.inFlight !== controller) return;
    schedule.inFlight = undefined;
    const error = 'error' in outcome ? outcome.error : this.write(issuer, outcome.keys);
    this.record(issuer, report, error, 'keys' in outcome ? outcome.keys.size : undefined, 'timedOut' in outcome);
    const again = schedule.again;
    schedule.again = false;
    this.schedule(issuer, schedule, again ? 0 : refreshDelayMs(report.consecutive_failures, this.host.intervalMs));
  }

  /** The issuer's keys, or why not, within its deadline: the fetch is aborted when the deadline passes. */
  private async fetch(issuer: string, controller: AbortController): Promise<{ keys: Map<string, KeyMetadata> } | { error: string; timedOut?: true }> {
    let record: AutoIssuer | undefined;
    try {
      record = this.host.executeRead((tx) => autoRefreshIssuers(tx).find((i) => i.issuer === issuer));
    } catch (e) {
      return { error: `its record could not be read: ${errorMessage(e)}` };
    }
    if (record === undefined) return { error: 'it is no longer an auto-refresh issuer' };
    if (record.caBundlePem === undefined) return { error: 'its CA certificate bundle is not registered' };
    const deadline = new DeadlineError(`no keys within ${this.host.timeoutMs} ms (jwt.key_refresh_timeout)`);
    let timer: TimerHandle | undefined;
    // The race settles at the deadline even if a fetcher ignored the signal.
    const expired = new Promise<never>((_resolve, reject) => {
      timer = this.host.clock.setTimer(this.host.timeoutMs, () => {
        controller.abort(deadline);
        reject(deadline);
      });
    });
    const signal = controller.signal;
    try {
      const keys = await Promise.race([fetchIssuerKeys(this.host.fetcher, { issuer, caBundlePem: record.caBundlePem, maxBytes: this.host.maxResponseBytes, signal }), expired]);
      return { keys };
    } catch (e) {
      if (e === deadline || signal.reason === deadline) return { error: deadline.message, timedOut: true };
      return { error: errorMessage(e) };
    } finally {
      // The race handles whichever of the two settles later.
      timer?.cancel();
    }
  }

  /** Writes the issuer's keys that changed, in a transaction of their own. Returns why it failed, if it did. */
  private write(issuer: string, fresh: Map<string, KeyMetadata>): string | undefined {
    const changesOf = (tx: Tx) => {
      if (!autoRefreshIssuers(tx).some((i) => i.issuer === issuer)) return new Map<string, KeyMetadata[] | null>();
      const current = new Map<string, KeyMetadata[]>();
      tx.table(TableDefs.jwtPublicSigningKeys).forEach((list: KeyMetadata[], kid: string) => {
        current.set(kid, list);
      });
      return keyTableChanges(current, issuer, fresh);
    };
    try {
      if (this.host.executeRead(changesOf).size === 0) return undefined;
      this.host.executeWrite((tx) => {
        const keys = tx.table(TableDefs.jwtPublicSigningKeys);
        for (const [kid, list] of changesOf(tx)) {
          if (list === null) keys.remove(kid);
          else keys.put(kid, list);
        }
      });
      this.host.logger.info(`token key refresh: wrote the new signing keys of ${issuer}`);
      return undefined;
    } catch (e) {
      return `the new keys could not be written: ${errorMessage(e)}`;
    }
  }

  private record(issuer: string, report: IssuerRefreshReport, error: string | undefined, keys: number | undefined, timedOut: boolean): void {
    const now = new Date(this.host.clock.nowMs()).toISOString();
    if (error === undefined) {
      report.successes++;
      this.totals.successes++;
      report.consecutive_failures = 0;
      report.last_success_at = now;
      if (keys !== undefined) report.keys = keys;
      return;
    }
    report.failures++;
    this.totals.failures++;
    if (timedOut) report.timeouts++;
    report.consecutive_failures++;
    report.last_failure_at = now;
    report.last_failure_reason = error;
    this.host.logger.fail(`token key refresh of ${issuer} failed: ${error}`);
  }

  private report(issuer: string): IssuerRefreshReport {
    let report = this.reports.get(issuer);
    if (report === undefined) {
      report = { attempts: 0, successes: 0, failures: 0, consecutive_failures: 0, timeouts: 0, next_refresh_delay_ms: null };
      this.reports.set(issuer, report);
    }
    return report;
  }
}

function autoRefreshIssuers(tx: Tx): AutoIssuer[] {
  const out: AutoIssuer[] = [];
  const bundles = tx.table(TableDefs.caCertBundles);
  tx.table(TableDefs.jwtIssuers).forEach((record, issuer) => {
    if (record.auto_refresh !== true) return;
    const pem = record.ca_cert_bundle_name === undefined ? undefined : bundles.get(record.ca_cert_bundle_name);
    out.push({ issuer, caBundlePem: pem });
  });
  return out;
}
