// Writing a snapshot file as a stream (src/ledger/snapshot-writer.ts): the file equals the one-turn
// encoding (encodeSnapshotFile of Store.serializeSnapshot) for any piece size, on a real disk and
// on the simulator's, and a failure at any write leaves nothing under the snapshot's name.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { bytesCodec, LedgerEncryptor, stringCodec, Store, type PackedSnapshot } from '../../src/kv/index.js';
import { DiskError, encodeSnapshotFile, parseSnapshotFile, snapshotFileBytesOf, snapshotWritingPath, writeSnapshotJob, type Disk, type SnapshotMeta } from '../../src/ledger/index.js';
import { FsDisk } from '../../src/platform/fs-disk.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { withTempDir } from './helpers.js';

const SECRET = new Uint8Array(32).fill(5);
const VIEW = 2;

function meta(seqno: number): SnapshotMeta {
  return {
    seqno,
    view: VIEW,
    view_history: [1, 3],
    configurations: [{ seqno: 1, nodes: ['n1'] }],
    service_certificate: '-----BEGIN CERTIFICATE-----\nnot checked here\n-----END CERTIFICATE-----\n',
    tree: { size: seqno, compaction_point: 0, block_hashes: '', leaves: '' },
  };
}

/** A store with public and private maps, values of many sizes (one larger than a packed chunk). */
function sampleStore(): Store {
  const store = new Store();
  for (let batch = 0; batch < 4; batch++) {
    const tx = store.beginTx();
    for (let i = 0; i < 700; i++) {
      const n = batch * 700 + i;
      tx.map(n % 3 === 0 ? 'public:records' : 'records', stringCodec).put(`k${n}`, 'x'.repeat(n % 211));
    }
    tx.apply();
  }
  const tx = store.beginTx();
  tx.map('blobs', bytesCodec).put('big', new Uint8Array((1 << 20) + 77).fill(3));
  tx.map('public:gov', stringCodec).put('constitution', 'export function apply() {}');
  tx.apply();
  return store;
}

function packedOf(store: Store): PackedSnapshot {
  const packer = store.snapshotPacker(VIEW);
  while (!packer.step(333));
  return packer.result();
}

function oneTurnFile(store: Store): Buffer {
  return Buffer.from(encodeSnapshotFile(store.serializeSnapshot(new LedgerEncryptor(SECRET), VIEW), meta(store.version)));
}

test('the streamed file equals the one-turn file for several piece sizes, on a real and a simulated disk', () => {
  const store = sampleStore();
  const expected = oneTurnFile(store);
  const expectedDigest = createHash('sha256').update(expected).digest();
  withTempDir('snapshot-writer', (dir) => {
    const disks: [string, Disk, string][] = [
      ['fs', new FsDisk(), dir],
      ['memory', new MemoryDisk(), '/snapshots'],
    ];
    for (const [kind, disk, directory] of disks) {
      disk.ensureDirectory(directory);
      for (const pieceBytes of [8, 4096, 100_000, 1 << 20, 8 << 20]) {
        const target = disk.join(directory, `snapshot_${pieceBytes}.v2.uncommitted`);
        const job = { packed: packedOf(store), secret: SECRET, meta: meta(store.version), path: target, pieceBytes };
        assert.deepEqual(Buffer.from(snapshotFileBytesOf(job)), expected, `${kind}, pieces of ${pieceBytes}: the file's bytes in one buffer`);
        const result = writeSnapshotJob(job, disk);
        assert.equal(job.packed.chunks.length, 0, 'the job gave its chunks up');
        assert.deepEqual(Buffer.from(disk.readAll(target)), expected, `${kind}, pieces of ${pieceBytes}`);
        assert.deepEqual(Buffer.from(result.digest), expectedDigest);
        assert.equal(result.sizeBytes, expected.byteLength);
        assert.ok(!disk.exists(snapshotWritingPath(target)), 'no file left under the writing name');
        // And it reads back as a snapshot file whose digest is the evidence.
        assert.deepEqual(Buffer.from(parseSnapshotFile(disk.readAll(target)).digest), expectedDigest);
      }
    }
  });
});

test('a failure at any write leaves no file under the snapshot\'s name, and an older file there stays whole', () => {
  const store = sampleStore();
  const expected = oneTurnFile(store);
  const pieceBytes = 128 * 1024;
  // Writes of one job: the two heads, the pieces of the body, the metadata, the header in its place.
  let writes = 0;
  {
    const disk = new MemoryDisk();
    disk.ensureDirectory('/s');
    const counting = countingWrites(disk, () => writes++);
    writeSnapshotJob({ packed: packedOf(store), secret: SECRET, meta: meta(store.version), path: '/s/snap', pieceBytes }, counting);
  }
  assert.ok(writes > 10, `${writes} writes`);
  for (let failAt = 0; failAt < writes; failAt++) {
    for (const older of [false, true]) {
      const disk = new MemoryDisk();
      disk.ensureDirectory('/s');
      const olderBytes = new Uint8Array([1, 2, 3, 4]);
      if (older) {
        const file = disk.createFile('/s/snap');
        file.append([olderBytes]);
        file.sync();
        file.close();
      }
      let seen = 0;
      const failing = countingWrites(disk, () => {
        if (seen++ === failAt) disk.failWrites(1);
      });
      assert.throws(
        () => writeSnapshotJob({ packed: packedOf(store), secret: SECRET, meta: meta(store.version), path: '/s/snap', pieceBytes }, failing),
        (e: unknown) => e instanceof DiskError && e.code === 'DiskFull',
        `write ${failAt} fails`,
      );
      if (older) assert.deepEqual([...disk.readAll('/s/snap')], [...olderBytes], `write ${failAt}: the older file is untouched`);
      else assert.ok(!disk.exists('/s/snap'), `write ${failAt}: nothing under the name`);
      assert.deepEqual(disk.listDirectory('/s'), older ? ['snap'] : [], `write ${failAt}: the partial file is removed`);
    }
  }
  // With no failure the same job writes the expected file over the older one.
  const disk = new MemoryDisk();
  disk.ensureDirectory('/s');
  const file = disk.createFile('/s/snap');
  file.append([new Uint8Array(9)]);
  file.close();
  writeSnapshotJob({ packed: packedOf(store), secret: SECRET, meta: meta(store.version), path: '/s/snap', pieceBytes }, disk);
  assert.deepEqual(Buffer.from(disk.readAll('/s/snap')), expected);
});

/** `disk`, calling `before` ahead of each append or positioned write of the files it creates. */
function countingWrites(disk: MemoryDisk, before: () => void): Disk {
  return new Proxy(disk, {
    get(target, property, receiver) {
      if (property !== 'createFile') {
        const value = Reflect.get(target, property, receiver) as unknown;
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      }
      return (p: string) => {
        const file = target.createFile(p);
        return {
          sizeBytes: () => file.sizeBytes(),
          append: (parts: readonly Uint8Array[]) => {
            before();
            file.append(parts);
          },
          writeAt: (position: number, bytes: Uint8Array) => {
            before();
            file.writeAt(position, bytes);
          },
          sync: () => file.sync(),
          syncAsync: (done: (error: DiskError | undefined) => void) => file.syncAsync(done),
          close: () => file.close(),
        };
      };
    },
  });
}
