// A packed snapshot encoded piece by piece (src/kv/snapshot-stream.ts): the same bytes as the
// one-call encoder for any piece size, pieces never larger than asked, and the packed chunks
// dropped as their entries are written when the encoder owns them.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { bytesCodec, encodePackedSnapshotStreamed, LedgerEncryptor, PackedSnapshotEncoder, type PackedSnapshot, SNAPSHOT_HEADER_BYTES, stringCodec, Store } from '../../src/kv/index.js';
import { secret } from './helpers.js';

const encryptor = new LedgerEncryptor(secret(9));
const VIEW = 4;

function packed(store: Store): PackedSnapshot {
  const packer = store.snapshotPacker(VIEW);
  while (!packer.step(1000));
  return packer.result();
}

function storeOf(entries: readonly (readonly [string, string, string])[]): Store {
  const store = new Store();
  for (const [map, key, value] of entries) {
    const tx = store.beginTx();
    tx.map(map, stringCodec).put(key, value);
    tx.apply();
  }
  return store;
}

test('the streamed store snapshot equals the one-call one for any piece size, public and private maps', () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(
        fc.tuple(fc.constantFrom('public:a', 'public:b', 'priv', 'records', 'z\u00e9'), fc.string({ unit: 'binary', maxLength: 8 }), fc.string({ maxLength: 60 })),
        { selector: ([map, key]) => `${map}\u0000${key}`, maxLength: 80 },
      ),
      fc.integer({ min: 8, max: 300 }),
      (entries, pieceBytes) => {
        const store = storeOf(entries);
        const oneCall = Buffer.from(store.serializeSnapshot(encryptor, VIEW));
        const state = packed(store);
        const chunks = state.chunks.length;
        assert.deepEqual(Buffer.from(encodePackedSnapshotStreamed(state, encryptor, pieceBytes)), oneCall);
        assert.equal(state.chunks.length, chunks, 'without consumeChunks the chunks stay the caller\'s');
      },
    ),
    { numRuns: 300 },
  );
});

test('pieces are at most the piece size, in order, and the header comes once the body is done', () => {
  const store = storeOf(Array.from({ length: 2000 }, (_, i) => [i % 3 === 0 ? 'public:records' : 'records', `k${i}`, 'v'.repeat(i % 97)] as const));
  const oneCall = Buffer.from(store.serializeSnapshot(encryptor, VIEW));
  for (const pieceBytes of [8, 1000, 4096, 65_536, 1 << 20]) {
    const encoder = new PackedSnapshotEncoder(packed(store), encryptor, { pieceBytes, consumeChunks: true });
    assert.throws(() => encoder.header(), /the header follows the body/);
    const pieces: Buffer[] = [];
    encoder.encodeBody((piece) => {
      assert.ok(piece.byteLength > 0 && piece.byteLength <= pieceBytes, `a piece of ${piece.byteLength} bytes for ${pieceBytes}`);
      pieces.push(Buffer.from(piece));
    });
    assert.equal(encoder.byteLength, oneCall.byteLength);
    assert.deepEqual(encoder.header(), oneCall.subarray(0, SNAPSHOT_HEADER_BYTES));
    assert.deepEqual(Buffer.concat(pieces), oneCall.subarray(SNAPSHOT_HEADER_BYTES));
  }
});

test('an encoder that owns the chunks drops each once its entries are written', () => {
  const store = new Store();
  const tx = store.beginTx();
  // Values of 100 KiB: about ten entries per 1 MiB chunk, in two maps (public, private).
  for (let i = 0; i < 60; i++) tx.map(i % 2 === 0 ? 'public:blobs' : 'blobs', bytesCodec).put(`b${String(i).padStart(3, '0')}`, new Uint8Array(100 * 1024).fill(i));
  tx.apply();
  const state = packed(store);
  const chunks = state.chunks.length;
  assert.ok(chunks >= 5, `${chunks} chunks`);
  const encoder = new PackedSnapshotEncoder(state, encryptor, { pieceBytes: 64 * 1024, consumeChunks: true });
  assert.equal(state.chunks.length, 0, 'the encoder took the chunks');
  assert.equal(encoder.chunksHeld, chunks);
  const pieces: Buffer[] = [];
  const held: number[] = [];
  encoder.encodeBody((piece) => {
    held.push(encoder.chunksHeld);
    pieces.push(Buffer.from(piece));
  });
  assert.deepEqual(Buffer.concat([encoder.header(), ...pieces]), Buffer.from(store.serializeSnapshot(encryptor, VIEW)));
  assert.equal(encoder.chunksHeld, 0, 'every chunk dropped at the end');
  for (let i = 1; i < held.length; i++) assert.ok(held[i]! <= held[i - 1]!, 'chunks are only ever dropped');
  assert.ok(held.some((n) => n > 0 && n < chunks), `some chunks dropped while others are still to write: ${held.join(',')}`);
});

test('without consumeChunks every chunk stays with the caller, and a second encoding is refused', () => {
  const store = storeOf([['records', 'a', 'x'], ['public:r', 'b', 'y']]);
  const state = packed(store);
  const encoder = new PackedSnapshotEncoder(state, encryptor, { pieceBytes: 16, consumeChunks: false });
  encoder.encodeBody(() => {});
  assert.equal(encoder.chunksHeld, state.chunks.length);
  assert.throws(() => encoder.encodeBody(() => {}), /encoded once/);
});
