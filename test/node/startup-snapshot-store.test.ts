// A startup snapshot without its store's bytes (src/node/startup-snapshot-store.ts): the node
// keeps its metadata and path, and reads the store section again from the file, checked against
// the evidence digest it started with, when a recovery's private phase needs it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CovenantError } from '../../src/base/errors.js';
import { stringCodec, Store } from '../../src/kv/index.js';
import { encodeSnapshotReceipt, parseSnapshotFile } from '../../src/ledger/index.js';
import { ServiceIdentity } from '../../src/node/identity/service-identity.js';
import { verifySnapshotFile } from '../../src/node/snapshots.js';
import { storeBytesOf, withoutStoreBytes } from '../../src/node/startup-snapshot-store.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { committedSnapshotOf } from './committed-snapshot.js';
import { TurnClock } from './turn-clock.js';

const DIR = '/snapshots';

async function setUp(): Promise<{ disk: MemoryDisk; path: string; file: Uint8Array; service: ServiceIdentity; name: string }> {
  const service = new ServiceIdentity();
  await service.create(30);
  const store = new Store();
  for (let i = 0; i < 3000; i++) {
    const tx = store.beginTx();
    tx.map(i % 2 === 0 ? 'records' : 'public:records', stringCodec).put(`k${i}`, `value ${i} ${'z'.repeat(i % 300)}`);
    tx.apply();
  }
  const file = await committedSnapshotOf(store, service);
  const name = `snapshot_${store.version}_${store.version + 1}.committed`;
  const disk = new MemoryDisk();
  disk.ensureDirectory(DIR);
  const path = disk.join(DIR, name);
  const handle = disk.createFile(path);
  handle.append([file]);
  handle.close();
  return { disk, path, file, service, name };
}

async function reread(clock: TurnClock, read: Promise<Uint8Array | undefined>): Promise<Uint8Array | undefined> {
  let outcome: { value: Uint8Array | undefined } | { error: unknown } | undefined;
  read.then(
    (value) => (outcome = { value }),
    (error: unknown) => (outcome = { error }),
  );
  await clock.runUntil(() => outcome !== undefined, 10_000);
  if ('error' in outcome!) throw outcome.error;
  return outcome!.value;
}

test('a snapshot without its store bytes keeps what the node uses and reads the store again from its file', async () => {
  const { disk, path, file, service, name } = await setUp();
  const started = { ...verifySnapshotFile(name, file, service.certificatePem), path };
  const clock = new TurnClock();
  const dropped = withoutStoreBytes(started, { clock, disk, stopped: () => false });
  assert.equal(dropped.parts.kv.byteLength, 0, 'the store bytes are dropped');
  assert.deepEqual(dropped.parts.meta, started.parts.meta);
  assert.deepEqual(dropped.parts.digest, started.parts.digest);
  assert.equal(dropped.seqno, started.seqno);
  assert.equal(dropped.path, path);
  assert.equal(withoutStoreBytes(dropped, { clock, disk, stopped: () => false }), dropped, 'dropping twice changes nothing');
  assert.deepEqual(Buffer.from((await reread(clock, storeBytesOf(dropped)))!), Buffer.from(started.parts.kv));
  // A snapshot that still holds its bytes gives them at once.
  assert.equal(await storeBytesOf(started), started.parts.kv);

  // An endorsement appended since (a recovering node rewrites the receipt) is outside the evidence: still read.
  const covered = parseSnapshotFile(file).evidenceCoveredBytes;
  const endorsed = Buffer.concat([file.subarray(0, covered), encodeSnapshotReceipt({ endorsed: true })]);
  disk.remove(path);
  const handle = disk.createFile(path);
  handle.append([endorsed]);
  handle.close();
  assert.deepEqual(Buffer.from((await reread(clock, storeBytesOf(dropped)))!), Buffer.from(started.parts.kv));

  // A file changed within what the evidence covers is refused.
  disk.corrupt(path, covered - 10);
  await assert.rejects(reread(clock, storeBytesOf(dropped)), (e: unknown) => e instanceof CovenantError && e.code === 'InvalidSnapshot' && /changed since the node started/.test(e.message));
  disk.remove(path);
  await assert.rejects(storeBytesOf(dropped), (e: unknown) => e instanceof CovenantError && e.code === 'DiskIoFailed');
});

test('a node stopped while the store is read again gets nothing', async () => {
  const { disk, path, file, service, name } = await setUp();
  const clock = new TurnClock();
  let stopped = false;
  const dropped = withoutStoreBytes({ ...verifySnapshotFile(name, file, service.certificatePem), path }, { clock, disk, stopped: () => stopped });
  const read = storeBytesOf(dropped);
  stopped = true;
  assert.equal(await reread(clock, read).catch(() => 'failed'), undefined);
});
