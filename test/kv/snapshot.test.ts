import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { bytesCodec, encodeWriteSet, KvErrorCode, LedgerEncryptor, readSnapshotHeader, SNAPSHOT_HEADER_BYTES, stringCodec, Store } from '../../src/kv/index.js';
import { dumpView, secret } from './helpers.js';

const encryptor = new LedgerEncryptor(secret(9));

function storeWith(entries: [string, string, string][], options: { reverse?: boolean; noise?: boolean } = {}): Store {
  const store = new Store();
  const list = options.reverse ? [...entries].reverse() : entries;
  for (const [map, key, value] of list) {
    const tx = store.beginTx();
    if (options.noise) tx.map(map, stringCodec).put(`${key}-noise`, 'transient');
    tx.map(map, stringCodec).put(key, value);
    tx.apply();
    if (options.noise) {
      const cleanup = store.beginTx();
      cleanup.map(map, stringCodec).remove(`${key}-noise`);
      cleanup.apply();
    }
  }
  return store;
}

/** Writes the same padding entry until the store reaches `version`, so two stores can be compared at one seqno. */
function advanceTo(store: Store, version: number): void {
  while (store.version < version) {
    const tx = store.beginTx();
    tx.map('public:pad', stringCodec).put('p', 'p');
    tx.apply();
  }
}

const entriesArb = fc.uniqueArray(
  fc.tuple(fc.constantFrom('public:a', 'public:b', 'priv', 'records'), fc.string({ unit: 'binary', maxLength: 6 }), fc.string({ maxLength: 6 })),
  { selector: ([map, key]) => `${map}\u0000${key}`, maxLength: 30 },
);

test('equal states give byte-identical snapshots, whatever history built them', () => {
  fc.assert(
    fc.property(entriesArb, (entries) => {
      const a = storeWith(entries);
      const b = storeWith(entries, { reverse: true, noise: true });
      const version = Math.max(a.version, b.version) + 1;
      advanceTo(a, version);
      advanceTo(b, version);
      assert.deepEqual(dumpView(a.current()), dumpView(b.current()));
      assert.deepEqual(Buffer.from(a.serializeSnapshot(encryptor, 2)), Buffer.from(b.serializeSnapshot(encryptor, 2)));
    }),
    { numRuns: 100 },
  );
});

test('a snapshot restores the state and version, committed', () => {
  fc.assert(
    fc.property(entriesArb, (entries) => {
      const store = storeWith(entries);
      const snapshot = store.serializeSnapshot(encryptor, 5);
      const restored = Store.fromSnapshot(snapshot, encryptor);
      assert.equal(restored.version, store.version);
      assert.equal(restored.committedVersion, store.version);
      assert.deepEqual(dumpView(restored.current()), dumpView(store.current()));
      // Re-serialising the restored store gives the same bytes.
      assert.deepEqual(Buffer.from(restored.serializeSnapshot(encryptor, 5)), Buffer.from(snapshot));
    }),
    { numRuns: 100 },
  );
});

test('a restored store continues from the snapshot version', () => {
  const store = storeWith([['records', 'k', 'v']]);
  const restored = Store.fromSnapshot(store.serializeSnapshot(encryptor, 1), encryptor);
  const tx = restored.beginTx();
  tx.map('records', stringCodec).put('k2', 'v2');
  assert.equal(tx.apply()!.version, store.version + 1);
  restored.rollback(store.version);
  assert.equal(restored.current().map('records', stringCodec).has('k2'), false);
});

test('the header carries format, seqno, view and the SHA-256 of the body', () => {
  const store = storeWith([
    ['public:a', 'k', 'in clear'],
    ['records', 'k', 'hidden value'],
  ]);
  const snapshot = store.serializeSnapshot(encryptor, 7);
  const header = readSnapshotHeader(snapshot);
  assert.equal(header.format, 1);
  assert.equal(header.seqno, 2);
  assert.equal(header.view, 7);
  assert.deepEqual(Buffer.from(header.bodyDigest), createHash('sha256').update(snapshot.subarray(SNAPSHOT_HEADER_BYTES)).digest());
  const text = Buffer.from(snapshot).toString('latin1');
  assert.ok(text.includes('in clear'));
  assert.ok(!text.includes('hidden value') && !text.includes('records'));
});

test('a snapshot at an earlier retained version holds that version', () => {
  const store = storeWith([
    ['records', 'a', '1'],
    ['records', 'b', '2'],
  ]);
  const atOne = Store.fromSnapshot(store.serializeSnapshot(encryptor, 1, 1), encryptor);
  assert.equal(atOne.version, 1);
  assert.deepEqual(dumpView(atOne.current()), dumpView(store.readAt(1)));
  store.compact(2);
  assert.throws(() => store.serializeSnapshot(encryptor, 1, 1), { code: KvErrorCode.VersionNotRetained });
});

test('without the ledger secret only the public maps are restored', () => {
  const store = storeWith([
    ['public:a', 'k', 'v'],
    ['records', 'k', 'v'],
  ]);
  const restored = Store.fromSnapshot(store.serializeSnapshot(encryptor, 1));
  assert.deepEqual(restored.current().mapNames(), ['public:a']);
  assert.throws(() => Store.fromSnapshot(store.serializeSnapshot(encryptor, 1), new LedgerEncryptor(secret(1))), {
    code: KvErrorCode.LedgerDecryptionFailed,
  });
});

test('any tampered byte is detected', () => {
  const store = storeWith([
    ['public:a', 'k', 'v'],
    ['records', 'k', 'v'],
  ]);
  const snapshot = store.serializeSnapshot(encryptor, 1);
  fc.assert(
    fc.property(fc.nat(snapshot.byteLength - 1), fc.integer({ min: 1, max: 255 }), (position, mask) => {
      const tampered = Buffer.from(snapshot);
      tampered[position]! ^= mask;
      assert.throws(
        () => Store.fromSnapshot(tampered, encryptor),
        (e: { code?: string }) => e.code === KvErrorCode.MalformedSnapshot || e.code === KvErrorCode.LedgerDecryptionFailed,
      );
    }),
    { numRuns: 500 },
  );
  assert.throws(() => Store.fromSnapshot(snapshot.subarray(0, 20), encryptor), { code: KvErrorCode.MalformedSnapshot });
  assert.throws(() => Store.fromSnapshot(snapshot.subarray(0, snapshot.byteLength - 1), encryptor), { code: KvErrorCode.MalformedSnapshot });
});

test('garbage is rejected with MalformedSnapshot', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 120 }), (bytes) => {
      assert.throws(() => Store.fromSnapshot(bytes, encryptor), { code: KvErrorCode.MalformedSnapshot });
    }),
  );
});

test('an empty store has a valid snapshot', () => {
  const restored = Store.fromSnapshot(new Store().serializeSnapshot(encryptor, 0), encryptor);
  assert.equal(restored.version, 0);
  assert.deepEqual(restored.current().mapNames(), []);
});

// The snapshot is encoded in one buffer, its private section encrypted there in place, 1 MiB at a
// time: the bytes are the sections laid out one after another as docs/kv.md says, built here
// independently (each part encoded on its own, the private one sealed in one call).
test('a snapshot written in place equals its sections laid out one after another', () => {
  const reference = (store: Store, view: number): Buffer => {
    const publicWrites = new Map<string, Map<string, Uint8Array>>();
    const privateWrites = new Map<string, Map<string, Uint8Array>>();
    const current = store.current();
    for (const name of current.mapNames()) {
      const writes = new Map<string, Uint8Array>();
      current.map(name, bytesCodec).forEach((value, key) => {
        writes.set(key, value);
      });
      (name.startsWith('public:') ? publicWrites : privateWrites).set(name, writes);
    }
    const { publicBytes } = encodeWriteSet(publicWrites);
    const { privateBytes } = encodeWriteSet(privateWrites);
    const aad = Buffer.alloc(17);
    aad.write('CVKS', 0, 'latin1');
    aad[4] = 1;
    aad.writeUInt32LE(store.version, 5);
    aad.writeUInt32LE(view, 13);
    const sealed = encryptor.encryptSnapshot(view, store.version, privateBytes, aad);
    const u64 = (n: number) => {
      const b = Buffer.alloc(8);
      b.writeUInt32LE(n, 0);
      return b;
    };
    const body = Buffer.concat([u64(publicBytes.byteLength), publicBytes, u64(sealed.byteLength), sealed]);
    return Buffer.concat([aad, createHash('sha256').update(body).digest(), body]);
  };
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.tuple(fc.constantFrom('public:a', 'b', 'c'), fc.string({ maxLength: 6 }), fc.string({ maxLength: 30 })), { selector: ([m, k]) => `${m}\u0000${k}`, maxLength: 30 }),
      (entries) => {
        const store = storeWith(entries);
        assert.deepEqual(Buffer.from(store.serializeSnapshot(encryptor, 4)), reference(store, 4));
      },
    ),
    { numRuns: 100 },
  );
  // A private section of several in-place chunks, and a value larger than one.
  const large = storeWith([['big', 'a', 'y'.repeat(3 << 20)], ['big', 'b', 'z'.repeat(700_000)], ['public:p', 'k', 'v']]);
  assert.deepEqual(Buffer.from(large.serializeSnapshot(encryptor, 2)), reference(large, 2));
});
