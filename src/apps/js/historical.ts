/**
 * The historical cache of the application frontend: committed ledger entries read back from this
 * node's own ledger files for historical endpoints (docs/apps.md "Historical endpoints"), each
 * decoded (the private part decrypted) and kept in a bounded LRU (entries and bytes, the
 * `historical_cache` configuration), with the receipt of each transaction a request named.
 *
 * A request never reads the ledger files itself: it asks for the entries it needs, and those not
 * cached are queued (at most HISTORICAL_FETCHES_QUEUED_MAX; beyond, 503 HistoricalFetchesBusy) and
 * read in the background, at most HISTORICAL_FETCHES_PER_TURN per turn of the event loop, while
 * the request is answered 202 with Retry-After. A transaction's receipt is built from the entry read (its proof must fold to the
 * signed root: the entry read is the one the service signed).
 */
import { CovenantError, isCovenantError } from '../../base/errors.js';
import { formatTxId, type TxId } from '../../base/ids.js';
import type { Logger } from '../../base/log.js';
import type { WriteSet } from '../../kv/index.js';
import { HISTORICAL_FETCHES_PER_TURN, HISTORICAL_FETCHES_QUEUED_MAX, HISTORICAL_RETRY_AFTER_SECONDS } from './limits.js';

/** What the cache needs of the node. */
export interface HistoricalSource {
  /** The writes of the committed entry at `seqno`, read from the ledger files (HistoricalDataUnavailable when they do not hold it). */
  historicalEntryAt(seqno: number): { view: number; writes: WriteSet };
  /** The JSON receipt of a committed transaction, or 'pending'. */
  receipt(txId: TxId): Promise<unknown>;
}

export interface HistoricalCacheLimits {
  readonly entriesMax: number;
  readonly bytesMax: number;
}

/** One cached entry: its writes, or why the files cannot give them. */
export interface HistoricalEntry {
  readonly seqno: number;
  readonly view: number;
  readonly writes: WriteSet;
  readonly bytes: number;
  receipt?: unknown;
}

interface Failed {
  readonly failure: CovenantError;
}

/** Bytes an entry holds in memory (keys and values; a fixed cost per write for the maps around them). */
function sizeOf(writes: WriteSet): number {
  let bytes = 0;
  for (const [name, map] of writes) {
    bytes += name.length + 64;
    for (const [key, value] of map) bytes += key.length + (value?.byteLength ?? 0) + 48;
  }
  return bytes;
}

/** Thrown (and recorded on the request) when an entry is not cached yet: the request is answered 202. */
export class HistoricalNotReady extends Error {
  constructor(readonly what: string) {
    super(`${what} is being read from the ledger files: retry in ${HISTORICAL_RETRY_AFTER_SECONDS} s`);
  }
}

export class HistoricalCache {
  /** Oldest use first (a Map keeps insertion order). */
  private readonly entries = new Map<number, HistoricalEntry | Failed>();
  private readonly queue = new Map<number, TxId | undefined>();
  private readonly receiptsRunning = new Set<number>();
  private bytes = 0;
  private scheduled = false;
  fetched = 0;
  evicted = 0;
  refusedQueueFull = 0;

  constructor(
    private readonly source: HistoricalSource,
    private readonly limits: HistoricalCacheLimits,
    private readonly logger: Logger,
  ) {}

  report(): Record<string, number> {
    let entries = 0;
    for (const e of this.entries.values()) if ('writes' in e) entries++;
    return {
      store_count: entries,
      entry_count: entries,
      estimated_size_bytes: this.bytes,
      max_entries: this.limits.entriesMax,
      max_size_bytes: this.limits.bytesMax,
      queued_fetches: this.queue.size,
      fetched_total: this.fetched,
      evicted_total: this.evicted,
      refused_queue_full_total: this.refusedQueueFull,
    };
  }

  /**
   * The committed entry at `seqno` with its receipt when `txId` names it (the target of a request),
   * or undefined after queueing what is missing. Throws the failure of an earlier read.
   */
  entry(seqno: number, txId?: TxId): HistoricalEntry | undefined {
    const found = this.entries.get(seqno);
    if (found !== undefined) {
      this.entries.delete(seqno);
      this.entries.set(seqno, found);
      if ('failure' in found) {
        this.entries.delete(seqno);
        throw found.failure;
      }
      if (txId === undefined || found.receipt !== undefined) return found;
      this.startReceipt(found, txId);
      return undefined;
    }
    if (!this.queue.has(seqno)) {
      if (this.queue.size >= HISTORICAL_FETCHES_QUEUED_MAX) {
        this.refusedQueueFull++;
        throw new CovenantError(
          'HistoricalFetchesBusy',
          `${this.queue.size} ledger entries are queued to be read for historical requests (at most ${HISTORICAL_FETCHES_QUEUED_MAX}): retry in ${HISTORICAL_RETRY_AFTER_SECONDS} s`,
          503,
          undefined,
          HISTORICAL_RETRY_AFTER_SECONDS,
        );
      }
      this.queue.set(seqno, txId);
    } else if (txId !== undefined) this.queue.set(seqno, txId);
    this.schedule();
    return undefined;
  }

  /** Queues the entries of `seqnos` not cached (a request about to read them), as far as the queue has room. */
  prefetch(seqnos: readonly number[]): void {
    for (const seqno of seqnos) {
      if (this.entries.has(seqno) || this.queue.has(seqno)) continue;
      if (this.queue.size >= HISTORICAL_FETCHES_QUEUED_MAX) return;
      this.queue.set(seqno, undefined);
    }
    if (this.queue.size > 0) this.schedule();
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.fetchSome();
    });
  }

  private fetchSome(): void {
    let n = 0;
    for (const [seqno, txId] of this.queue) {
      if (n++ >= HISTORICAL_FETCHES_PER_TURN) break;
      this.queue.delete(seqno);
      try {
        const { view, writes } = this.source.historicalEntryAt(seqno);
        const entry: HistoricalEntry = { seqno, view, writes, bytes: sizeOf(writes) };
        this.store(seqno, entry);
        this.fetched++;
        if (txId !== undefined) this.startReceipt(entry, txId);
      } catch (e) {
        if (!isCovenantError(e)) throw e;
        this.store(seqno, { failure: e });
      }
    }
    if (this.queue.size > 0) this.schedule();
  }

  private startReceipt(entry: HistoricalEntry, txId: TxId): void {
    if (this.receiptsRunning.has(entry.seqno)) return;
    this.receiptsRunning.add(entry.seqno);
    this.source.receipt(txId).then(
      (receipt) => {
        if (receipt !== 'pending') entry.receipt = receipt;
      },
      (e: unknown) => {
        // A receipt that cannot be built now (a busy block re-read) is tried again by the next request.
        this.logger.info('historical receipt not built', { transaction_id: formatTxId(txId), reason: (e as Error).message });
      },
    ).finally(() => this.receiptsRunning.delete(entry.seqno));
  }

  private store(seqno: number, value: HistoricalEntry | Failed): void {
    this.drop(seqno);
    this.entries.set(seqno, value);
    if ('writes' in value) this.bytes += value.bytes;
    for (const [oldest] of this.entries) {
      if (this.entries.size <= this.limits.entriesMax && this.bytes <= this.limits.bytesMax) break;
      if (oldest === seqno && this.entries.size === 1) break;
      this.drop(oldest);
      this.evicted++;
    }
  }

  private drop(seqno: number): void {
    const old = this.entries.get(seqno);
    if (old === undefined) return;
    this.entries.delete(seqno);
    if ('writes' in old) this.bytes -= old.bytes;
  }
}

/** 202 with Retry-After: the entries a historical request needs are being read. */
export function historicalPending(transactionId: string, reason: string): { status: number; headers: Record<string, string>; body: string } {
  return {
    status: 202,
    headers: { 'retry-after': String(HISTORICAL_RETRY_AFTER_SECONDS), 'content-type': 'application/json' },
    body: JSON.stringify({ transaction_id: transactionId, status: 'Pending', reason }),
  };
}

export function historicalUnavailable(message: string): CovenantError {
  return new CovenantError('HistoricalDataUnavailable', message, 404);
}
