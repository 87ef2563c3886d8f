// A node loads a snapshot's store one bounded slice per turn (src/node/snapshot-loading.ts): other
// work runs between slices, each slice stays within the entry bound (a clock that stands still)
// or the time bound (a clock that moves), and a stop between slices ends the load. A snapshot it
// serves is hashed over several turns too.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { LedgerEncryptor, SnapshotLoader, Store, stringCodec } from '../../src/kv/index.js';
import { snapshotDigestSliceBytes, snapshotSliceEntriesMax, snapshotSliceMs } from '../../src/node/limits.js';
import { digestInSlices, loadSnapshotInSlices } from '../../src/node/snapshot-loading.js';
import { TurnClock } from './turn-clock.js';

const encryptor = new LedgerEncryptor(new Uint8Array(32).fill(5));
const RECORDS = 3 * snapshotSliceEntriesMax + 100;

function snapshotOf(records: number): Uint8Array {
  const store = new Store();
  const tx = store.beginTx();
  for (let i = 0; i < records; i++) tx.map(i % 2 === 0 ? 'records' : 'public:records', stringCodec).put(`k${i}`, 'x'.repeat(100));
  tx.apply();
  return store.serializeSnapshot(encryptor, 2);
}

test('the load runs one slice per turn, other work runs between slices, and no slice decodes more than the entry bound', async () => {
  const bytes = snapshotOf(RECORDS);
  const clock = new TurnClock(0);
  const loader = new SnapshotLoader(bytes, encryptor);
  let loaded: Store | undefined;
  void loadSnapshotInSlices(clock, loader).then((store) => {
    loaded = store;
  });
  // A peer's message arrives at every turn: each must be handled before the load ends.
  let handledBeforeLoaded = 0;
  const peer = (): void => {
    if (loaded === undefined) handledBeforeLoaded++;
    clock.defer(peer);
  };
  clock.defer(peer);
  await clock.runUntil(() => loaded !== undefined, 10_000);
  // The clock stands still: only the entry bound ends a slice (the digest and the decryption take a few more).
  assert.ok(loader.slices >= Math.ceil(RECORDS / snapshotSliceEntriesMax), `${loader.slices} slices`);
  assert.ok(handledBeforeLoaded >= loader.slices - 1, `${handledBeforeLoaded} messages handled during ${loader.slices} slices`);
  assert.equal(loaded!.current().map('records', stringCodec).get('k0'), 'x'.repeat(100));
  assert.equal(loaded!.current().map('public:records', stringCodec).size, Math.floor(RECORDS / 2));
});

test('a slice ends once it has spent snapshotSliceMs', async () => {
  const bytes = snapshotOf(2000);
  // Every look at the clock moves it 1 ms: a slice ends after about snapshotSliceMs looks.
  const clock = new TurnClock(1);
  const loader = new SnapshotLoader(bytes, encryptor);
  let loaded: Store | undefined;
  void loadSnapshotInSlices(clock, loader).then((store) => {
    loaded = store;
  });
  await clock.runUntil(() => loaded !== undefined, 10_000);
  // 2,000 entries at 256 per look, and the bytes at 64 KiB per look, well under the entry bound: time ends the slices.
  assert.ok(loader.slices >= 2, `${loader.slices} slices`);
  assert.equal(loaded!.version, 1);
  assert.ok(snapshotSliceMs > 1);
});

test('a node that stops between two slices stops loading', async () => {
  const bytes = snapshotOf(RECORDS);
  const clock = new TurnClock(0);
  const loader = new SnapshotLoader(bytes, encryptor);
  let stopped = false;
  let outcome: Store | undefined | 'pending' = 'pending';
  void loadSnapshotInSlices(clock, loader, () => stopped).then((store) => {
    outcome = store;
  });
  await clock.runUntil(() => loader.slices >= 2, 100);
  stopped = true;
  await clock.runUntil(() => outcome !== 'pending', 5);
  assert.equal(outcome, undefined);
  assert.equal(loader.done, false);
  assert.equal(clock.queue.length, 0, 'no slice is scheduled after the stop');
});

test('a damaged snapshot rejects the load with the loader\'s error', async () => {
  const bytes = snapshotOf(1000);
  bytes[bytes.byteLength - 3]! ^= 1;
  const clock = new TurnClock(0);
  const load = loadSnapshotInSlices(clock, new SnapshotLoader(bytes, encryptor));
  let failure: unknown;
  load.catch((e: unknown) => {
    failure = e;
  });
  await clock.runUntil(() => failure !== undefined, 1000);
  assert.match(String(failure), /body digest does not match/);
});

test('a served snapshot is hashed over several turns, to the digest of one call', async () => {
  const bytes = new Uint8Array(3 * snapshotDigestSliceBytes + 12345).map((_, i) => i % 251);
  const clock = new TurnClock(0);
  let digest: Uint8Array | undefined;
  void digestInSlices(clock, bytes).then((d) => {
    digest = d;
  });
  const turns = await clock.runUntil(() => digest !== undefined, 100);
  assert.equal(turns, 3, 'the first slice runs at once, then one per turn');
  assert.deepEqual(Buffer.from(digest!), createHash('sha256').update(bytes).digest());
});
