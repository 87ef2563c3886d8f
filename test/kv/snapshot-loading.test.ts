// Snapshots loaded in slices (src/kv/snapshot-loading.ts): the store equals the one-call
// Store.fromSnapshot (same contents, same snapshot bytes), for any slice size, and any damaged
// input fails the same way as the one-call load.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { CovenantError } from '../../src/base/index.js';
import { KvErrorCode, LedgerEncryptor, loadSnapshotAtOnce, SnapshotLoader, Store, stringCodec, type StoreOptions } from '../../src/kv/index.js';
import { dumpView, secret } from './helpers.js';

const encryptor = new LedgerEncryptor(secret(7));
const VIEW = 3;

function write(store: Store, map: string, key: string, value: string): void {
  const tx = store.beginTx();
  tx.map(map, stringCodec).put(key, value);
  tx.apply();
}

/** Loads in steps of at most `entries` entries and `bytes` bytes, counting the calls. */
function loadInSteps(bytes: Uint8Array, withSecret: LedgerEncryptor | undefined, entries: number, stepBytes: number, options?: StoreOptions): { store: Store; calls: number } {
  const loader = new SnapshotLoader(bytes, withSecret, options);
  let calls = 1;
  loader.beginSlice();
  while (!loader.load(entries, stepBytes)) {
    loader.beginSlice();
    calls++;
  }
  assert.equal(loader.slices, calls);
  return { store: loader.result(), calls };
}

/** The outcome of a load: the dump of the store, or the error code and message. */
function outcomeOf(load: () => Store): unknown {
  try {
    const store = load();
    return { version: store.version, committed: store.committedVersion, state: dumpView(store.current()) };
  } catch (e) {
    assert.ok(e instanceof CovenantError, `a typed error, not ${String(e)}`);
    return { code: e.code, message: e.message };
  }
}

const entriesArbitrary = fc.uniqueArray(
  fc.tuple(fc.constantFrom('public:a', 'public:b', 'priv', 'records', 'z'), fc.string({ unit: 'binary', maxLength: 8 }), fc.string({ maxLength: 40 })),
  { selector: ([map, key]) => `${map}\u0000${key}`, maxLength: 60 },
);

test('a store loaded in slices equals the one-call load: contents, versions and snapshot bytes, for any slice size', () => {
  fc.assert(
    fc.property(entriesArbitrary, fc.integer({ min: 1, max: 20 }), fc.integer({ min: 1, max: 300 }), fc.boolean(), (entries, sliceEntries, sliceBytes, privateToo) => {
      const source = new Store();
      for (const [map, key, value] of entries) write(source, map, key, value);
      const bytes = source.serializeSnapshot(encryptor, VIEW);
      const withSecret = privateToo ? encryptor : undefined;
      const oneCall = Store.fromSnapshot(bytes, withSecret);
      const { store, calls } = loadInSteps(bytes, withSecret, sliceEntries, sliceBytes);
      assert.equal(store.version, oneCall.version);
      assert.equal(store.committedVersion, oneCall.committedVersion);
      assert.deepEqual(dumpView(store.current()), dumpView(oneCall.current()));
      if (privateToo) assert.deepEqual(Buffer.from(store.serializeSnapshot(encryptor, VIEW)), Buffer.from(bytes));
      // Bounded work per call: the digest in bytes, each section's entries, and the decryption.
      const bound = Math.ceil(bytes.byteLength / sliceBytes) * 2 + Math.ceil(entries.length / sliceEntries) + 4 + entries.length;
      assert.ok(calls <= bound, `${calls} calls for ${entries.length} entries and ${bytes.byteLength} bytes`);
    }),
    { numRuns: 200 },
  );
});

test('a large state is loaded in many bounded slices, and the loaded store takes writes', () => {
  const source = new Store();
  for (let i = 0; i < 3000; i++) write(source, i % 3 === 0 ? 'public:records' : 'records', `k${i}`, 'x'.repeat(200));
  const bytes = source.serializeSnapshot(encryptor, VIEW);
  const { store, calls } = loadInSteps(bytes, encryptor, 256, 64 * 1024, { uncommittedVersionsMax: 10 });
  // 3,000 entries at 256 a call, plus the digest and the decryption of ~600 KB at 64 KiB a call.
  assert.ok(calls >= 3000 / 256 + 2 * Math.floor(bytes.byteLength / 2 / (64 * 1024)), `${calls} calls`);
  assert.deepEqual(dumpView(store.current()), dumpView(Store.fromSnapshot(bytes, encryptor).current()));
  // The options reach the store, and it moves on from the snapshot's version like any other.
  for (let i = 0; i < 10; i++) write(store, 'records', `new${i}`, 'v');
  assert.throws(() => write(store, 'records', 'one-too-many', 'v'), (e: unknown) => e instanceof CovenantError && e.code === KvErrorCode.UncommittedHistoryFull);
  assert.equal(store.current().map('records', stringCodec).get('k1'), 'x'.repeat(200));
  assert.equal(store.version, source.version + 10);
});

test('any damaged snapshot fails as the one-call load does (same code, same message), at whatever slice size', () => {
  const source = new Store();
  for (let i = 0; i < 40; i++) write(source, i % 2 === 0 ? 'public:records' : 'records', `k${i}`, `value ${i}`);
  const bytes = source.serializeSnapshot(encryptor, VIEW);
  fc.assert(
    fc.property(fc.integer({ min: 0, max: bytes.byteLength - 1 }), fc.integer({ min: 1, max: 255 }), fc.integer({ min: 1, max: 9 }), fc.boolean(), (at, flip, slice, fixDigest) => {
      const damaged = new Uint8Array(bytes);
      damaged[at]! ^= flip;
      // With the digest recomputed, the damage reaches the decoder and the decryption, not only the digest check.
      if (fixDigest && at >= 49) damaged.set(sha256(damaged.subarray(49)), 17);
      const expected = outcomeOf(() => Store.fromSnapshot(damaged, encryptor));
      assert.deepEqual(outcomeOf(() => loadInSteps(damaged, encryptor, slice, slice * 7).store), expected);
      assert.deepEqual(outcomeOf(() => loadSnapshotAtOnce(damaged, encryptor)), expected);
    }),
    { numRuns: 400 },
  );
});

test('a wrong secret fails with LedgerDecryptionFailed once the whole private section is read, and no store exists', () => {
  const source = new Store();
  for (let i = 0; i < 100; i++) write(source, 'records', `k${i}`, `value ${i}`);
  const bytes = source.serializeSnapshot(encryptor, VIEW);
  const loader = new SnapshotLoader(bytes, new LedgerEncryptor(secret(8)));
  let failure: unknown;
  let calls = 0;
  try {
    while (!loader.load(4, 64)) calls++;
  } catch (e) {
    failure = e;
  }
  assert.ok(failure instanceof CovenantError && failure.code === KvErrorCode.LedgerDecryptionFailed, String(failure));
  assert.ok(calls > bytes.byteLength / 64, `the tag is checked after the last byte (${calls} calls)`);
  assert.throws(() => loader.result(), /not loaded yet/);
});

function sha256(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(createHash('sha256').update(bytes).digest());
}
