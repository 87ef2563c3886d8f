/**
 * The parts of historical endpoints that need no node: an app.json's indexes, the seqnos_by_key
 * index over a ledger that may lack its first entries or have a hole, and the historical cache's
 * bounds (entries, bytes, queued reads) and failures.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CovenantError } from '../../src/base/errors.js';
import { nullLogger } from '../../src/base/log.js';
import type { WriteSet } from '../../src/kv/index.js';
import { parseBundle } from '../../src/apps/js/bundle.js';
import { HistoricalCache } from '../../src/apps/js/historical.js';
import { IndexingService } from '../../src/apps/js/indexing.js';
import { HISTORICAL_FETCHES_QUEUED_MAX, INDEX_ENTRIES_PER_TURN } from '../../src/apps/js/limits.js';

const bytes = (s: string) => new Uint8Array(Buffer.from(s));
const writeSet = (map: string, entries: Record<string, string | null>): WriteSet =>
  new Map([[map, new Map(Object.entries(entries).map(([k, v]) => [k, v === null ? null : bytes(v)]))]]);
const unavailable = (seqno: number) => new CovenantError('HistoricalDataUnavailable', `seqno ${seqno} is not in this node's ledger files`, 404);
const turn = () => new Promise((r) => setImmediate(r));

describe('app.json indexes', () => {
  const bundle = (metadata: unknown) => ({ metadata, modules: [{ name: 'app.js', module: 'export function f() {}' }] });
  const endpoints = { '/x': { get: { js_module: 'app.js', js_function: 'f', authn_policies: [], mode: 'historical' } } };

  test('a historical endpoint and a seqnos_by_key index are accepted', () => {
    const parsed = parseBundle(bundle({ endpoints, indexes: { byKey: { strategy: 'seqnos_by_key', map: 'records' } } }));
    assert.deepEqual(parsed.indexes, [{ name: 'byKey', strategy: 'seqnos_by_key', map: 'records' }]);
    assert.equal(parsed.endpoints[0]!.properties.mode, 'historical');
  });

  test('an unknown strategy, a name that is not an identifier or a service map is refused, naming it', () => {
    assert.throws(() => parseBundle(bundle({ endpoints, indexes: { byKey: { strategy: 'by_value', map: 'records' } } })), /strategy/);
    assert.throws(() => parseBundle(bundle({ endpoints, indexes: { 'by key': { strategy: 'seqnos_by_key', map: 'records' } } })), /metadata\.indexes\.by key/);
    assert.throws(() => parseBundle(bundle({ endpoints, indexes: { byKey: { strategy: 'seqnos_by_key', map: 'svc.secrets' } } })), /private to the service/);
  });
});

/** A ledger of `count` committed entries; `missing` seqnos are not in the files. */
function ledger(entries: Record<number, WriteSet>, count: number, missing: (seqno: number) => boolean = () => false) {
  let commit = count;
  return {
    source: {
      historicalEntryAt: (seqno: number) => {
        if (missing(seqno)) throw unavailable(seqno);
        return { view: 2, writes: entries[seqno] ?? new Map() };
      },
      commitSeqno: () => commit,
    },
    commitTo: (seqno: number) => (commit = seqno),
  };
}

const byKey = [{ name: 'byKey', strategy: 'seqnos_by_key' as const, map: 'records' }];

describe('the seqnos_by_key index', () => {
  test('every seqno that wrote a key, a removal included, in bounded turns that follow commit', () => {
    const entries: Record<number, WriteSet> = {};
    for (let s = 1; s <= 600; s++) entries[s] = writeSet(s % 3 === 0 ? 'records' : 'other', { [`k${s % 4}`]: s % 5 === 0 ? null : `v${s}` });
    const l = ledger(entries, 600);
    const index = new IndexingService(l.source, nullLogger, 10, () => byKey);
    assert.equal(index.advance(), INDEX_ENTRIES_PER_TURN, 'one turn reads a bounded number of entries');
    assert.deepEqual(index.seqnosByKey('byKey', 'k0', 1, 600), { kind: 'behind', indexedUpTo: INDEX_ENTRIES_PER_TURN });
    while (index.advance() > 0);
    const expected = (key: string, from: number, to: number) =>
      Object.keys(entries).map(Number).filter((s) => s >= from && s <= to && s % 3 === 0 && `k${s % 4}` === key);
    for (const key of ['k0', 'k1', 'k2', 'k3']) assert.deepEqual(index.seqnosByKey('byKey', key, 1, 600), { kind: 'seqnos', seqnos: expected(key, 1, 600) });
    assert.deepEqual(index.seqnosByKey('byKey', 'k3', 100, 200), { kind: 'seqnos', seqnos: expected('k3', 100, 200) });
    assert.deepEqual(index.latestWrite('byKey', 'k1', 100), { kind: 'latest', seqno: 93 });
    assert.deepEqual(index.latestWrite('byKey', 'never', 100), { kind: 'latest', seqno: undefined });
    l.commitTo(601);
    entries[601] = writeSet('records', { k1: 'late' });
    assert.deepEqual(index.latestWrite('byKey', 'k1', 601), { kind: 'behind', indexedUpTo: 600 });
    index.advance();
    assert.deepEqual(index.latestWrite('byKey', 'k1', 601), { kind: 'latest', seqno: 601 });
    assert.equal(index.report()[0]!.state, 'up_to_date');
  });

  test('a ledger that starts after a snapshot, or has a hole, is covered only after the last entry missing', () => {
    const entries: Record<number, WriteSet> = { 5: writeSet('records', { a: '5' }), 12: writeSet('records', { a: '12' }), 20: writeSet('records', { a: '20' }) };
    const index = new IndexingService(ledger(entries, 30, (s) => s < 4 || s === 10).source, nullLogger, 10, () => byKey);
    while (index.advance() > 0);
    assert.equal(index.report()[0]!.first_seqno, 11);
    assert.deepEqual(index.seqnosByKey('byKey', 'a', 1, 30), { kind: 'uncovered', firstSeqno: 11 });
    assert.deepEqual(index.seqnosByKey('byKey', 'a', 11, 30), { kind: 'seqnos', seqnos: [12, 20] });
    assert.deepEqual(index.latestWrite('byKey', 'a', 15), { kind: 'latest', seqno: 12 });
    assert.deepEqual(index.latestWrite('byKey', 'b', 15), { kind: 'uncovered', firstSeqno: 11 }, 'b may have been written in what is missing');
  });

  test('a bundle with other indexes starts them again from the first entry', () => {
    let declared = byKey;
    const index = new IndexingService(ledger({ 1: writeSet('records', { a: '1' }), 2: writeSet('notes', { a: '2' }) }, 2).source, nullLogger, 10, () => declared);
    index.advance();
    assert.deepEqual(index.seqnosByKey('byKey', 'a', 1, 2), { kind: 'seqnos', seqnos: [1] });
    declared = [{ name: 'notesByKey', strategy: 'seqnos_by_key', map: 'notes' }];
    index.advance();
    assert.equal(index.has('byKey'), false);
    assert.deepEqual(index.seqnosByKey('notesByKey', 'a', 1, 2), { kind: 'seqnos', seqnos: [2] });
  });
});

describe('the historical cache', () => {
  const source = (reads: number[], failing = new Set<number>()) => ({
    historicalEntryAt: (seqno: number) => {
      reads.push(seqno);
      if (failing.has(seqno)) throw unavailable(seqno);
      return { view: 3, writes: writeSet('records', { k: 'x'.repeat(1000) }) };
    },
    receipt: async () => ({ receipt: true }),
  });

  test('an entry is read in the background, then served from the cache with its receipt', async () => {
    const reads: number[] = [];
    const cache = new HistoricalCache(source(reads), { entriesMax: 10, bytesMax: 1 << 20 }, nullLogger);
    const txId = { view: 3, seqno: 7 };
    assert.equal(cache.entry(7, txId), undefined, 'not read yet');
    assert.deepEqual(reads, [], 'never inside the request');
    await turn();
    await turn();
    const entry = cache.entry(7, txId);
    assert.equal(entry?.view, 3);
    assert.deepEqual(entry?.receipt, { receipt: true });
    assert.deepEqual(reads, [7]);
  });

  test('bounded by entries and by bytes, the least recently used dropped first; the queue is bounded', async () => {
    const reads: number[] = [];
    const cache = new HistoricalCache(source(reads), { entriesMax: 5, bytesMax: 3500 }, nullLogger);
    for (let s = 1; s <= 8; s++) cache.entry(s);
    for (let i = 0; i < 4; i++) await turn();
    const report = cache.report();
    assert.ok(report.estimated_size_bytes! <= 3500, JSON.stringify(report));
    assert.equal(report.entry_count, 3, 'three entries of about 1.1 KB fit 3500 bytes');
    assert.equal(report.evicted_total, 5);
    assert.ok(cache.entry(8) !== undefined && cache.entry(1) === undefined, 'the oldest went first');

    const flood = new HistoricalCache(source([]), { entriesMax: 5, bytesMax: 1 << 20 }, nullLogger);
    for (let s = 1; s <= HISTORICAL_FETCHES_QUEUED_MAX; s++) flood.entry(s);
    assert.throws(() => flood.entry(HISTORICAL_FETCHES_QUEUED_MAX + 1), (e: CovenantError) => e.code === 'HistoricalFetchesBusy' && e.status === 503);
    flood.prefetch([HISTORICAL_FETCHES_QUEUED_MAX + 2]);
    assert.equal(flood.report().queued_fetches, HISTORICAL_FETCHES_QUEUED_MAX, 'a prefetch does not go beyond the bound either');
    assert.equal(flood.report().refused_queue_full_total, 1);
  });

  test('prefetch reads the entries a request is about to read in one go', async () => {
    const reads: number[] = [];
    const cache = new HistoricalCache(source(reads), { entriesMax: 50, bytesMax: 1 << 20 }, nullLogger);
    cache.entry(3);
    cache.prefetch([3, 5, 9, 12]);
    await turn();
    assert.deepEqual(reads, [3, 5, 9, 12], 'each once');
    for (const s of [3, 5, 9, 12]) assert.equal(cache.entry(s)?.seqno, s);
  });

  test('an entry the files do not hold answers its error once read', async () => {
    const cache = new HistoricalCache(source([], new Set([4])), { entriesMax: 5, bytesMax: 1 << 20 }, nullLogger);
    assert.equal(cache.entry(4), undefined);
    await turn();
    assert.throws(() => cache.entry(4), /not in this node's ledger files/);
  });
});
