/**
 * Indexing strategies an application declares in app.json (`indexes`), maintained by this node
 * over the committed ledger (docs/apps.md "Indexing strategies"). The one strategy is CCF's
 * "seqnos by key" (`seqnos_by_key`): for one map, every committed seqno that wrote each key.
 *
 * The index lives in this node's memory and is rebuilt from the node's ledger files when the node
 * starts (or the bundle declares a new index): a background loop reads the committed entries after
 * the last one indexed, at most INDEX_ENTRIES_PER_TURN per turn of the event loop, and follows
 * commit. Entries the files do not hold (a node that started from a snapshot without the older
 * chunks in a read-only ledger directory) are skipped: the index then covers from the first entry
 * it read after the last one missing (`first_seqno`), and a query reaching before it is refused. The indexes stop at
 * INDEX_SEQNOS_MAX seqnos together (each then reported `full`): their memory is bounded.
 */
import { isCovenantError } from '../../base/errors.js';
import type { Logger } from '../../base/log.js';
import type { WriteSet } from '../../kv/index.js';
import type { AppIndex } from './bundle.js';
import { INDEX_ENTRIES_PER_TURN, INDEX_SEQNOS_MAX } from './limits.js';

export interface IndexingSource {
  historicalEntryAt(seqno: number): { view: number; writes: WriteSet };
  commitSeqno(): number;
}

interface Strategy {
  readonly definition: AppIndex;
  /** Key → ascending seqnos that wrote it (a removal is a write). */
  readonly seqnosByKey: Map<string, number[]>;
  seqnos: number;
  full: boolean;
  /** Every committed seqno up to this one is in the index (it stops following when full). */
  upTo: number;
}

/** What a query of a strategy answers. */
export type SeqnosAnswer = { kind: 'seqnos'; seqnos: number[] } | { kind: 'behind'; indexedUpTo: number } | { kind: 'uncovered'; firstSeqno: number };

export class IndexingService {
  private strategies = new Map<string, Strategy>();
  private definitionsKey = '';
  /** Every committed seqno up to this one is indexed (or unavailable). */
  private indexedUpTo = 0;
  /** The first seqno the ledger files gave (0 before any). */
  private firstSeqno = 0;
  private timer: NodeJS.Timeout | undefined;
  /** Seqnos held by every index together (bounded by INDEX_SEQNOS_MAX). */
  private seqnosHeld = 0;
  entriesRead = 0;

  constructor(
    private readonly source: IndexingSource,
    private readonly logger: Logger,
    private readonly intervalMs: number,
    /** The installed bundle's indexes (read at each turn: a new set restarts indexing from the start). */
    private readonly declared: () => readonly AppIndex[],
  ) {}

  private define(indexes: readonly AppIndex[]): void {
    const key = JSON.stringify(indexes);
    if (key === this.definitionsKey) return;
    this.definitionsKey = key;
    this.strategies = new Map(indexes.map((definition) => [definition.name, { definition, seqnosByKey: new Map(), seqnos: 0, full: false, upTo: 0 }]));
    this.indexedUpTo = 0;
    this.firstSeqno = 0;
    this.seqnosHeld = 0;
  }

  start(): void {
    if (this.timer !== undefined) return;
    this.timer = setInterval(() => {
      try {
        this.advance();
      } catch (e) {
        // The node is not ready (no store, no secrets yet): the next turn tries again.
        if (!isCovenantError(e)) throw e;
        this.paused(e.message);
      }
    }, this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer !== undefined) clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Indexes at most INDEX_ENTRIES_PER_TURN committed entries; returns how many it read. */
  advance(): number {
    this.define(this.declared());
    if (this.strategies.size === 0) return 0;
    const commit = this.source.commitSeqno();
    let read = 0;
    while (this.indexedUpTo < commit && read < INDEX_ENTRIES_PER_TURN) {
      const seqno = this.indexedUpTo + 1;
      read++;
      let writes: WriteSet;
      try {
        writes = this.source.historicalEntryAt(seqno).writes;
      } catch (e) {
        if (!isCovenantError(e)) throw e;
        if (e.code !== 'HistoricalDataUnavailable') {
          this.paused(`seqno ${seqno}: ${e.message}`);
          return read;
        }
        // Not in this node's files (before the snapshot it started from, or a hole): the index covers from later.
        this.firstSeqno = 0;
        this.advanced(seqno);
        continue;
      }
      if (this.firstSeqno === 0) this.firstSeqno = seqno;
      this.entriesRead++;
      for (const strategy of this.strategies.values()) this.add(strategy, seqno, writes);
      this.advanced(seqno);
    }
    return read;
  }

  private lastPause: string | undefined;

  /** Logs why indexing waits, once per reason. */
  private paused(reason: string): void {
    if (reason === this.lastPause) return;
    this.lastPause = reason;
    this.logger.info('indexing waits', { reason });
  }

  private advanced(seqno: number): void {
    this.indexedUpTo = seqno;
    for (const strategy of this.strategies.values()) if (!strategy.full) strategy.upTo = seqno;
  }

  /** Whether the index holds every write since the ledger's first entry up to `from` (else the query reaches before what it read). */
  private uncovered(from: number): SeqnosAnswer | undefined {
    if (this.firstSeqno === 1 || (this.firstSeqno !== 0 && from >= this.firstSeqno)) return undefined;
    return { kind: 'uncovered', firstSeqno: this.firstSeqno };
  }

  private add(strategy: Strategy, seqno: number, writes: WriteSet): void {
    if (strategy.full) return;
    const map = writes.get(strategy.definition.map);
    if (map === undefined) return;
    for (const key of map.keys()) {
      if (this.seqnosHeld >= INDEX_SEQNOS_MAX) {
        strategy.full = true;
        this.logger.info('index full: it no longer follows commit', { index: strategy.definition.name, seqnos: strategy.seqnos });
        return;
      }
      let list = strategy.seqnosByKey.get(key);
      if (list === undefined) strategy.seqnosByKey.set(key, (list = []));
      list.push(seqno);
      strategy.seqnos++;
      this.seqnosHeld++;
    }
  }

  /** The strategy named `name`, if the bundle declares it. */
  has(name: string): boolean {
    return this.strategies.has(name);
  }

  /** The name of a seqnos_by_key strategy over `map`, if any. */
  strategyOver(map: string): string | undefined {
    for (const s of this.strategies.values()) if (s.definition.map === map) return s.definition.name;
    return undefined;
  }

  /** The seqnos in [from, to] that wrote `key`, once the index reached `to` and covers `from`. */
  seqnosByKey(name: string, key: string, from: number, to: number): SeqnosAnswer {
    const strategy = this.strategies.get(name);
    if (strategy === undefined) throw new Error(`no index "${name}" in app.json`);
    if (strategy.upTo < to) return { kind: 'behind', indexedUpTo: strategy.upTo };
    const uncovered = this.uncovered(from);
    if (uncovered !== undefined) return uncovered;
    const list = strategy.seqnosByKey.get(key) ?? [];
    const seqnos: number[] = [];
    for (let i = upperBound(list, to) - 1; i >= 0 && list[i]! >= from; i--) seqnos.push(list[i]!);
    return { kind: 'seqnos', seqnos: seqnos.reverse() };
  }

  /** The latest seqno at or before `seqno` that wrote `key`; undefined when none did since the index's first seqno. */
  latestWrite(name: string, key: string, seqno: number): SeqnosAnswer | { kind: 'latest'; seqno: number | undefined } {
    const strategy = this.strategies.get(name)!;
    if (strategy.upTo < seqno) return { kind: 'behind', indexedUpTo: strategy.upTo };
    const list = strategy.seqnosByKey.get(key) ?? [];
    const i = upperBound(list, seqno) - 1;
    if (i >= 0) return { kind: 'latest', seqno: list[i]! };
    // Nothing since the first seqno read: never written only if the index starts at the first entry.
    return this.uncovered(0) ?? { kind: 'latest', seqno: undefined };
  }

  report(): Record<string, unknown>[] {
    const commit = this.source.commitSeqno();
    return [...this.strategies.values()].map((s) => ({
      name: s.definition.name,
      strategy: s.definition.strategy,
      map: s.definition.map,
      indexed_up_to: s.upTo,
      first_seqno: this.firstSeqno,
      commit_seqno: commit,
      state: s.full ? 'full' : s.upTo >= commit ? 'up_to_date' : 'catching_up',
      keys: s.seqnosByKey.size,
      seqnos: s.seqnos,
      max_seqnos: INDEX_SEQNOS_MAX,
    }));
  }
}

/** The first index whose value is greater than `value` in an ascending list. */
function upperBound(list: readonly number[], value: number): number {
  let lo = 0;
  let hi = list.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (list[mid]! <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
