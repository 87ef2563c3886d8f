/**
 * What one request to a historical endpoint reads (docs/apps.md "Historical endpoints"): the
 * transaction it names, with its receipt, and the state right after any committed transaction,
 * key by key.
 *
 * The state right after seqno S, for key K of map M: the value K took in the latest committed
 * transaction at or before S that wrote K. The transaction at S itself answers for the keys it
 * wrote; any other key is looked up in the app's `seqnos_by_key` index over M (indexing.ts),
 * whose latest seqno at or before S is read from the historical cache. A map with no such index is
 * readable only for the keys the transaction at S wrote: the service does not rebuild whole past
 * states.
 */
import { CovenantError } from '../../base/errors.js';
import { formatTxId } from '../../base/ids.js';
import type { HistoricalCache, HistoricalEntry } from './historical.js';
import { HistoricalNotReady, historicalUnavailable } from './historical.js';
import type { HistoricalScope } from './host.js';
import type { IndexingService } from './indexing.js';
import { HISTORICAL_STATES_PER_REQUEST_MAX, INDEX_QUERY_SEQNOS_MAX } from './limits.js';

export class RequestHistory implements HistoricalScope {
  readonly stateJson: string;
  /** Why the request must be answered 202 (set by the first read that is not ready). */
  notReady: string | undefined;
  /** The first error a read raised (answered with its status even if the handler caught it). */
  failure: CovenantError | undefined;
  private readonly seqnosRead = new Set<number>();

  constructor(
    private readonly target: HistoricalEntry,
    private readonly cache: HistoricalCache,
    private readonly indexing: IndexingService,
    private readonly commitSeqno: number,
  ) {
    this.stateJson = JSON.stringify({ transactionId: formatTxId({ view: target.view, seqno: target.seqno }), receipt: target.receipt });
  }

  /** Runs a read, remembering the first service error it raised. */
  private guard<T>(read: () => T): T {
    try {
      return read();
    } catch (e) {
      if (e instanceof CovenantError) this.failure ??= e;
      throw e;
    }
  }

  private wait(what: string): never {
    this.notReady ??= what;
    throw new HistoricalNotReady(what);
  }

  /** The committed entry at `seqno`, from the cache (queued and HistoricalNotReady when not read yet). */
  private entryAt(seqno: number): HistoricalEntry {
    if (seqno === this.target.seqno) return this.target;
    if (seqno < 1 || seqno > this.commitSeqno) throw new CovenantError('InvalidInput', `seqno ${seqno} is not committed (commit is at ${this.commitSeqno})`, 400);
    if (!this.seqnosRead.has(seqno) && this.seqnosRead.size >= HISTORICAL_STATES_PER_REQUEST_MAX) {
      throw new CovenantError('InvalidInput', `a historical request reads at most ${HISTORICAL_STATES_PER_REQUEST_MAX} transactions`, 400);
    }
    this.seqnosRead.add(seqno);
    return this.cache.entry(seqno) ?? this.wait(`the entry at seqno ${seqno}`);
  }

  transactionIdAt(seqno: number): string {
    return this.guard(() => this.transactionIdOf(seqno));
  }

  get(seqno: number, map: string, key: string): Uint8Array | undefined {
    return this.guard(() => this.valueAt(seqno, map, key));
  }

  seqnosByKey(index: string, key: string, from: number, to: number): number[] {
    return this.guard(() => this.seqnosOf(index, key, from, to));
  }

  private transactionIdOf(seqno: number): string {
    const entry = this.entryAt(seqno);
    return formatTxId({ view: entry.view, seqno });
  }

  private valueAt(seqno: number, map: string, key: string): Uint8Array | undefined {
    const at = this.entryAt(seqno);
    const own = at.writes.get(map)?.get(key);
    if (own !== undefined) return own ?? undefined;
    const index = this.indexing.strategyOver(map);
    if (index === undefined) {
      throw new CovenantError(
        'HistoricalMapNotIndexed',
        `map "${map}" has no seqnos_by_key index in app.json: a historical state reads it only for the keys its transaction wrote`,
        400,
      );
    }
    const latest = this.indexing.latestWrite(index, key, seqno);
    if (latest.kind === 'behind') return this.wait(`index "${index}" (at seqno ${latest.indexedUpTo})`);
    if (latest.kind === 'uncovered') throw historicalUnavailable(`index "${index}" covers this node's ledger from seqno ${latest.firstSeqno} only`);
    if (latest.kind !== 'latest' || latest.seqno === undefined) return undefined;
    const value = this.entryAt(latest.seqno).writes.get(map)?.get(key);
    return value ?? undefined;
  }

  private seqnosOf(index: string, key: string, from: number, to: number): number[] {
    if (!this.indexing.has(index)) throw new CovenantError('InvalidInput', `no index "${index}" in app.json`, 400);
    if (from > to) throw new CovenantError('InvalidInput', `from (${from}) is after to (${to})`, 400);
    if (to > this.commitSeqno) throw new CovenantError('InvalidInput', `to (${to}) is beyond commit (${this.commitSeqno})`, 400);
    const answer = this.indexing.seqnosByKey(index, key, from, to);
    if (answer.kind === 'behind') return this.wait(`index "${index}" (at seqno ${answer.indexedUpTo})`);
    if (answer.kind === 'uncovered') throw historicalUnavailable(`index "${index}" covers this node's ledger from seqno ${answer.firstSeqno} only`);
    if (answer.seqnos.length > INDEX_QUERY_SEQNOS_MAX) {
      throw new CovenantError('InvalidInput', `${answer.seqnos.length} seqnos wrote the key in [${from}, ${to}]: ask at most ${INDEX_QUERY_SEQNOS_MAX} at once (a narrower range)`, 400);
    }
    // The handler reads these states next (the audit trail): their entries are read in one go.
    this.cache.prefetch(answer.seqnos.slice(0, HISTORICAL_STATES_PER_REQUEST_MAX));
    return answer.seqnos;
  }
}
