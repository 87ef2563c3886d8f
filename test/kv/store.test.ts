import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvariantError } from '../../src/base/index.js';
import {
  encodeWriteSet,
  jsonCodec,
  jsonTable,
  KvErrorCode,
  stringCodec,
  Store,
  uintKeyCodec,
  type WriteSet,
} from '../../src/kv/index.js';
import { dumpView } from './helpers.js';

function put(store: Store, map: string, key: string, value: string) {
  const tx = store.beginTx();
  tx.map(map, stringCodec).put(key, value);
  return tx.apply()!;
}

test('a transaction reads its own writes and commits them as the next version', () => {
  const store = new Store();
  assert.equal(store.version, 0);
  const tx = store.beginTx();
  const records = tx.map('records', uintKeyCodec, jsonCodec<{ msg: string }>());
  assert.equal(records.get(1), undefined);
  records.put(1, { msg: 'one' });
  records.put(2, { msg: 'two' });
  assert.deepEqual(records.get(1), { msg: 'one' });
  assert.equal(records.has(2), true);
  assert.equal(records.size, 2);
  assert.equal(records.remove(2), true);
  assert.equal(records.remove(3), false);
  assert.equal(records.has(2), false);
  assert.equal(records.size, 1);
  // Another handle on the same map sees the same writes.
  assert.deepEqual(tx.map('records', uintKeyCodec, jsonCodec()).get(1), { msg: 'one' });
  // Nothing is visible outside the transaction before commit.
  assert.equal(store.current().map('records', uintKeyCodec, jsonCodec()).get(1), undefined);
  const result = tx.apply()!;
  assert.equal(result.version, 1);
  assert.equal(store.version, 1);
  assert.deepEqual(store.current().map('records', uintKeyCodec, jsonCodec()).get(1), { msg: 'one' });
  assert.equal(store.current().map('records', uintKeyCodec, jsonCodec()).has(2), false);
  // The removals are part of the write set.
  const writes = result.writeSet.get('records')!;
  assert.deepEqual([...writes.keys()], [uintKeyCodec.toKey(1), uintKeyCodec.toKey(2), uintKeyCodec.toKey(3)]);
  assert.equal(writes.get(uintKeyCodec.toKey(2)), null);
});

test('a read-only transaction consumes no version', () => {
  const store = new Store();
  put(store, 'm', 'k', 'v');
  const tx = store.beginTx();
  assert.equal(tx.map('m', stringCodec).get('k'), 'v');
  assert.equal(tx.apply(), undefined);
  assert.equal(store.version, 1);
});

test('a dropped transaction leaves no trace', () => {
  const store = new Store();
  put(store, 'm', 'k', 'v');
  const handler = () => {
    const tx = store.beginTx();
    tx.map('m', stringCodec).put('k', 'half-written');
    tx.map('m', stringCodec).put('k2', 'half-written');
    throw new Error('handler failed');
  };
  assert.throws(handler, /handler failed/);
  assert.deepEqual(dumpView(store.current()), { m: { k: Buffer.from('v').toString('hex') } });
  assert.equal(store.version, 1);
});

test('a transaction begun before another commit conflicts', () => {
  const store = new Store();
  const early = store.beginTx();
  early.map('m', stringCodec).put('a', '1');
  put(store, 'm', 'b', '2');
  assert.throws(() => early.apply(), { code: KvErrorCode.TransactionConflict, status: 409 });
  assert.equal(store.version, 1);
  assert.equal(store.current().map('m', stringCodec).has('a'), false);
  // Also after a rollback back to the same version number: it read a state that no longer exists.
  const stale = store.beginTx();
  stale.map('m', stringCodec).put('c', '3');
  put(store, 'm', 'x', 'y');
  store.rollback(1);
  assert.equal(store.version, stale.startVersion);
  assert.throws(() => stale.apply(), { code: KvErrorCode.TransactionConflict });
});

test('committing twice or writing after commit is a programmer error', () => {
  const store = new Store();
  const tx = store.beginTx();
  const m = tx.map('m', stringCodec);
  m.put('a', '1');
  tx.apply();
  assert.throws(() => tx.apply(), InvariantError);
  assert.throws(() => m.put('b', '2'), InvariantError);
});

test('keys and map names without a UTF-8 form are refused', () => {
  const store = new Store();
  const tx = store.beginTx();
  assert.throws(() => tx.map('m', stringCodec).put('\ud800', 'v'), { code: KvErrorCode.InvalidKey });
  assert.throws(() => tx.map('\udc00', stringCodec), { code: KvErrorCode.InvalidKey });
  assert.throws(() => tx.map('', stringCodec), { code: KvErrorCode.InvalidKey });
  assert.equal(tx.hasWrites, false);
});

test('forEach visits keys in UTF-8 byte order including the transaction writes, and stops on false', () => {
  const store = new Store();
  const setup = store.beginTx();
  const m = setup.map('m', stringCodec);
  for (const key of ['b', '\u{1f600}', 'a', '\ufffd', 'd']) m.put(key, key);
  setup.apply();
  const tx = store.beginTx();
  const view = tx.map('m', stringCodec);
  view.put('c', 'c');
  view.remove('d');
  const seen: string[] = [];
  view.forEach((_value, key) => {
    seen.push(key);
  });
  assert.deepEqual(seen, ['a', 'b', 'c', '\ufffd', '\u{1f600}']);
  const firstTwo: string[] = [];
  view.forEach((_value, key) => {
    firstTwo.push(key);
    return firstTwo.length < 2;
  });
  assert.deepEqual(firstTwo, ['a', 'b']);
  assert.equal(view.size, 5);
});

test('rollback is a return to an earlier state and refuses to go below the committed version', () => {
  const store = new Store();
  for (let i = 1; i <= 5; i++) put(store, 'm', `k${i}`, `v${i}`);
  const atThree = dumpView(store.readAt(3));
  store.compact(2);
  assert.equal(store.committedVersion, 2);
  const rolledBackTo: number[] = [];
  store.onRollback((v) => rolledBackTo.push(v));
  store.rollback(3);
  assert.equal(store.version, 3);
  assert.deepEqual(dumpView(store.current()), atThree);
  assert.deepEqual(rolledBackTo, [3]);
  assert.throws(() => store.rollback(1), InvariantError);
  assert.throws(() => store.rollback(4), InvariantError);
  // The next commit reuses version 4 with new content.
  assert.equal(put(store, 'm', 'other', 'x').version, 4);
  assert.equal(store.current().map('m', stringCodec).has('k4'), false);
});

test('readAt serves retained versions only', () => {
  const store = new Store();
  for (let i = 1; i <= 4; i++) put(store, 'm', 'k', `v${i}`);
  assert.equal(store.readAt(2).map('m', stringCodec).get('k'), 'v2');
  assert.equal(store.readAt(0).map('m', stringCodec).get('k'), undefined);
  store.compact(3);
  assert.equal(store.readAt(3).map('m', stringCodec).get('k'), 'v3');
  assert.equal(store.readAt(4).map('m', stringCodec).get('k'), 'v4');
  assert.throws(() => store.readAt(2), { code: KvErrorCode.VersionNotRetained });
  assert.throws(() => store.readAt(5), { code: KvErrorCode.VersionNotRetained });
  assert.throws(() => store.compact(5), InvariantError);
});

test('compaction over many versions keeps reads and rollback correct', () => {
  const store = new Store();
  for (let i = 1; i <= 5000; i++) {
    put(store, 'm', 'k', `v${i}`);
    if (i % 7 === 0) store.compact(i - 3);
  }
  assert.equal(store.committedVersion, 4995);
  for (let v = 4995; v <= 5000; v++) assert.equal(store.readAt(v).map('m', stringCodec).get('k'), `v${v}`);
  store.rollback(4996);
  assert.equal(store.current().map('m', stringCodec).get('k'), 'v4996');
});

test('local applications are refused once too many versions await consensus commit', () => {
  const store = new Store({ uncommittedVersionsMax: 3 });
  for (let i = 0; i < 3; i++) put(store, 'm', 'k', `${i}`);
  assert.throws(() => put(store, 'm', 'k', 'x'), { code: KvErrorCode.UncommittedHistoryFull, status: 503 });
  assert.equal(store.version, 3);
  store.compact(1);
  assert.equal(put(store, 'm', 'k', 'x').version, 4);
});

test('removing the last key drops the map', () => {
  const store = new Store();
  put(store, 'm', 'k', 'v');
  const tx = store.beginTx();
  tx.map('m', stringCodec).remove('k');
  tx.apply();
  assert.deepEqual(store.current().mapNames(), []);
});

test('hooks see every applied transaction and write set, per store and per map', () => {
  const primary = new Store();
  const backup = new Store();
  const seen: [string, number, string[]][] = [];
  for (const [name, store] of [
    ['primary', primary],
    ['backup', backup],
  ] as const) {
    store.onApplied((version, writes) => seen.push([name, version, [...writes.keys()]]));
  }
  const nodeWrites: [number, string[]][] = [];
  const unsubscribe = backup.onMapApplied('public:nodes', (version, writes) => nodeWrites.push([version, [...writes.keys()]]));
  const replicate = (writeSet: WriteSet, version: number) => {
    const { publicBytes, privateBytes } = encodeWriteSet(writeSet);
    backup.applyWriteSet(version, publicBytes, privateBytes);
  };
  const tx = primary.beginTx();
  tx.map('public:nodes', stringCodec).put('n1', 'Trusted');
  tx.map('records', stringCodec).put('r', 'x');
  const r1 = tx.apply()!;
  replicate(r1.writeSet, r1.version);
  const r2 = put(primary, 'records', 'r', 'y');
  replicate(r2.writeSet, r2.version);
  unsubscribe();
  const r3 = put(primary, 'public:nodes', 'n2', 'Pending');
  replicate(r3.writeSet, r3.version);
  assert.deepEqual(seen, [
    ['primary', 1, ['public:nodes', 'records']],
    ['backup', 1, ['public:nodes', 'records']],
    ['primary', 2, ['records']],
    ['backup', 2, ['records']],
    ['primary', 3, ['public:nodes']],
    ['backup', 3, ['public:nodes']],
  ]);
  assert.deepEqual(nodeWrites, [[1, ['n1']]]);
  assert.deepEqual(dumpView(backup.current()), dumpView(primary.current()));
});

test('applying a malformed write set changes nothing', () => {
  const store = new Store();
  put(store, 'm', 'k', 'v');
  const before = dumpView(store.current());
  assert.throws(() => store.applyWriteSet(2, new Uint8Array([1, 2, 3])), { code: KvErrorCode.MalformedWriteSet });
  const { privateBytes } = encodeWriteSet(new Map([['m', new Map([['k', null]])]]));
  assert.throws(() => store.applyWriteSet(2, privateBytes), { code: KvErrorCode.MalformedWriteSet });
  assert.equal(store.version, 1);
  assert.deepEqual(dumpView(store.current()), before);
  assert.throws(() => store.applyWriteSet(5, new Uint8Array(0)), InvariantError);
});

test('a public-only replay leaves private maps out', () => {
  const primary = new Store();
  const tx = primary.beginTx();
  tx.map('public:a', stringCodec).put('k', 'pub');
  tx.map('secret', stringCodec).put('k', 'priv');
  const { version, writeSet } = tx.apply()!;
  const replay = new Store();
  replay.applyWriteSet(version, encodeWriteSet(writeSet).publicBytes);
  assert.deepEqual(replay.current().mapNames(), ['public:a']);
});

test('recovery installs the private maps of a replay at the committed version, under the writes above it', () => {
  // The primary's history: the previous service's entries (1-3), then the recovered service's own
  // (4-6), among them a private write and a remove of a key the previous service wrote.
  const primary = new Store();
  const entries = [];
  for (const [map, key, value] of [
    ['public:nodes', 'n1', 'a'],
    ['records', 'r1', 'old'],
    ['records', 'r2', 'old'],
    ['records', 'r3', 'new'],
    ['records', 'r1', null],
    ['public:nodes', 'n2', 'b'],
  ] as const) {
    const tx = primary.beginTx();
    if (value === null) tx.map(map, stringCodec).remove(key);
    else tx.map(map, stringCodec).put(key, value);
    const { version, writeSet } = tx.apply()!;
    entries.push({ version, ...encodeWriteSet(writeSet) });
  }
  // A recovering node: the previous service's entries in the public domain only, its own in both;
  // 4 is committed, 5 and 6 not yet. Whole states every 2 versions: they must be rebuilt too.
  const live = new Store({ checkpointInterval: 2 });
  for (const { version, publicBytes, privateBytes } of entries) live.applyWriteSet(version, publicBytes, version > 3 ? privateBytes : undefined);
  live.compact(4);
  assert.equal(live.current().map('records', stringCodec).get('r2'), undefined);
  // The replay of both domains up to the committed version.
  const replay = new Store();
  for (const { version, publicBytes, privateBytes } of entries.slice(0, 4)) replay.applyWriteSet(version, publicBytes, privateBytes);
  const open = live.beginTx();
  open.map('public:nodes', stringCodec).put('n3', 'x');
  assert.throws(() => live.installPrivateMaps(primary.readAt(3)), InvariantError, 'only a replay at the committed version');
  live.installPrivateMaps(replay.current());
  assert.equal(live.version, 6);
  assert.deepEqual(dumpView(live.current()), dumpView(primary.current()), 'the remove above the committed version still removes r1');
  assert.throws(() => open.apply(), { code: KvErrorCode.TransactionConflict });
  assert.deepEqual(dumpView(live.readAt(5)), dumpView(primary.readAt(5)));
  live.rollback(4);
  assert.deepEqual(dumpView(live.current()), dumpView(primary.readAt(4)), 'a rollback keeps the installed private maps');
  assert.equal(live.current().map('records', stringCodec).get('r1'), 'old');
});

test('onMapCommitted reports a version that wrote the map once consensus commits it, never one rolled back first', () => {
  const store = new Store();
  const committed: [number, string[]][] = [];
  const unsubscribe = store.onMapCommitted('public:service', (version, writes) => committed.push([version, [...writes.keys()]]));
  put(store, 'public:service', 'status', 'Opening'); // 1
  put(store, 'records', 'r', 'x'); // 2: another map
  put(store, 'public:service', 'status', 'Open'); // 3
  assert.deepEqual(committed, [], 'applied is not committed');
  store.compact(2);
  assert.deepEqual(committed, [[1, ['status']]]);
  // A view change discards version 3 before it commits: it is never reported, its successor is.
  store.rollback(2);
  put(store, 'public:service', 'other', 'Recovering'); // 3 again, a different write
  store.compact(2);
  assert.deepEqual(committed, [[1, ['status']]], 'compacting to the same version reports nothing again');
  store.compact(3);
  assert.deepEqual(committed, [
    [1, ['status']],
    [3, ['other']],
  ]);
  unsubscribe();
  put(store, 'public:service', 'status', 'Open'); // 4
  store.compact(4);
  assert.equal(committed.length, 2, 'no report after unsubscribing');
});

test('a declared table is the same map as its name, read and written through its codec and value type', () => {
  const store = new Store();
  const services = jsonTable<{ status: string; count: number }>('public:service');
  const tx = store.beginTx();
  tx.table(services).put('0', { status: 'Open', count: 1 });
  const version = tx.apply()!.version;
  const read = store.beginTx();
  const record = read.table(services).get('0');
  assert.deepEqual(record, { status: 'Open', count: 1 });
  assert.deepEqual(read.map('public:service', jsonCodec<unknown>()).get('0'), record, 'the same map under its name');
  assert.deepEqual(store.readAt(version).table(services).get('0'), record);
});
