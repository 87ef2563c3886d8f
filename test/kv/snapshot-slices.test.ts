// Snapshots written in slices (src/kv/snapshot-slices.ts): the bytes equal the one-call
// serialisation, and writes committed while the slices are packed never appear in them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { bytesCodec, encodePackedSnapshot, LedgerEncryptor, PACKED_CHUNK_BYTES, stringCodec, Store } from '../../src/kv/index.js';
import { secret } from './helpers.js';

const encryptor = new LedgerEncryptor(secret(7));
const VIEW = 3;

function sha256Hex(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

function write(store: Store, map: string, key: string, value: string | null): void {
  const tx = store.beginTx();
  if (value === null) tx.map(map, stringCodec).remove(key);
  else tx.map(map, stringCodec).put(key, value);
  tx.apply();
}

test('sliced packing gives the bytes and digest of the one-call snapshot, for any slice size', () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(
        fc.tuple(fc.constantFrom('public:a', 'public:b', 'priv', 'records'), fc.string({ unit: 'binary', maxLength: 8 }), fc.string({ maxLength: 40 })),
        { selector: ([map, key]) => `${map}\u0000${key}`, maxLength: 60 },
      ),
      fc.integer({ min: 1, max: 70 }),
      (entries, sliceEntries) => {
        const store = new Store();
        for (const [map, key, value] of entries) write(store, map, key, value);
        const oneCall = store.serializeSnapshot(encryptor, VIEW);
        const packer = store.snapshotPacker(VIEW);
        let steps = 0;
        while (!packer.step(sliceEntries)) steps++;
        assert.ok(steps <= Math.ceil(entries.length / sliceEntries) + 1, `${steps} steps for ${entries.length} entries`);
        const sliced = encodePackedSnapshot(packer.result(), encryptor);
        assert.equal(sha256Hex(sliced), sha256Hex(oneCall));
        assert.deepEqual(Buffer.from(sliced), Buffer.from(oneCall));
      },
    ),
    { numRuns: 200 },
  );
});

test('a write that lands while a snapshot is packed never appears in it', () => {
  const store = new Store();
  for (let i = 0; i < 500; i++) write(store, i % 2 === 0 ? 'records' : 'public:records', `k${i}`, `v${i}`);
  const version = store.version;
  const expected = store.serializeSnapshot(encryptor, VIEW);
  const packer = store.snapshotPacker(VIEW);
  let slices = 0;
  let i = 0;
  while (!packer.step(16)) {
    slices++;
    // Between slices the store moves on: overwrites, removals, new keys, new maps.
    write(store, 'records', `k${(i * 2) % 500}`, 'overwritten');
    write(store, 'public:records', `k${(i * 2 + 1) % 500}`, null);
    write(store, 'records', `new${i}`, 'added');
    write(store, `public:late${i % 3}`, 'x', 'y');
    i++;
  }
  assert.ok(slices > 10, `packed in ${slices + 1} slices`);
  assert.ok(store.version > version + 100, 'the store moved on while the snapshot was packed');
  const sliced = encodePackedSnapshot(packer.result(), encryptor);
  assert.deepEqual(Buffer.from(sliced), Buffer.from(expected));
  // And it restores the state as it was at that version.
  const restored = Store.fromSnapshot(sliced, encryptor);
  assert.equal(restored.version, version);
  assert.equal(restored.current().map('records', stringCodec).get('k0'), 'v0');
  assert.equal(restored.current().map('records', stringCodec).get('new0'), undefined);
  assert.equal(restored.current().map('public:records', stringCodec).get('k1'), 'v1');
  assert.deepEqual(restored.current().mapNames(), ['public:records', 'records']);
});

test('entries spread over several chunks, one larger than a chunk, keep their bytes', () => {
  const store = new Store();
  const big = new Uint8Array(PACKED_CHUNK_BYTES + 100).fill(0xab);
  let tx = store.beginTx();
  tx.map('blobs', bytesCodec).put('big', big);
  for (let i = 0; i < 3000; i++) tx.map('public:blobs', bytesCodec).put(`b${i}`, new Uint8Array(1000).fill(i % 251));
  tx.apply();
  tx = store.beginTx();
  tx.map('blobs', bytesCodec).put('small', new Uint8Array([1, 2, 3]));
  tx.apply();
  const packer = store.snapshotPacker(VIEW);
  while (!packer.step(500));
  const packed = packer.result();
  assert.ok(packed.chunks.length >= 3, `${packed.chunks.length} chunks`);
  assert.ok(packed.chunks.some((c) => c.byteLength > PACKED_CHUNK_BYTES), 'the large value has a chunk of its own size');
  assert.deepEqual(Buffer.from(encodePackedSnapshot(packed, encryptor)), Buffer.from(store.serializeSnapshot(encryptor, VIEW)));
});
