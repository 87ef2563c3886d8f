import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  compareUtf8,
  isPublicMapName,
  jsonCodec,
  stringCodec,
  bytesCodec,
  uint64Codec,
  uint64KeyCodec,
  uintKeyCodec,
  KvErrorCode,
} from '../../src/kv/index.js';

const anyString = fc.string({ unit: 'binary', maxLength: 12 });

test('compareUtf8 orders strings as their UTF-8 bytes', () => {
  fc.assert(
    fc.property(anyString, anyString, (a, b) => {
      const expected = Math.sign(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
      assert.equal(Math.sign(compareUtf8(a, b)), expected);
    }),
    { numRuns: 2000 },
  );
  // Code units on both sides of the surrogate range, where a wrong shift shows.
  const edges = ['', 'a', '\u0000', '\ub801', '\ud7ff', '\ue000', '\uffff', '\u{10000}', '\u{10ffff}', '\u{1f600}'];
  for (const a of edges) {
    for (const b of edges) {
      const expected = Math.sign(Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
      assert.equal(Math.sign(compareUtf8(a, b)), expected, `${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
    }
  }
  // The case UTF-16 order gets wrong: U+FFFD (EF BF BD) sorts before U+1F600 (F0 9F 98 80).
  assert.ok(compareUtf8('\ufffd', '\u{1f600}') < 0);
  assert.ok('\ufffd' > '\u{1f600}');
});

test('public maps are exactly those named public:...', () => {
  assert.equal(isPublicMapName('public:svc.gov.members'), true);
  assert.equal(isPublicMapName('svc.private'), false);
  assert.equal(isPublicMapName('Public:x'), false);
  assert.equal(isPublicMapName('xpublic:x'), false);
});

test('value codecs round-trip', () => {
  const json = jsonCodec<{ id: number; msg: string }>();
  assert.deepEqual(json.decode(json.encode({ id: 1, msg: 'héllo' })), { id: 1, msg: 'héllo' });
  assert.equal(Buffer.from(json.encode({ id: 1, msg: 'x' })).toString(), '{"id":1,"msg":"x"}');
  assert.equal(stringCodec.decode(stringCodec.encode('✓ ok')), '✓ ok');
  assert.equal(uint64Codec.decode(uint64Codec.encode(2n ** 64n - 1n)), 2n ** 64n - 1n);
  assert.deepEqual([...uint64Codec.encode(258n)], [2, 1, 0, 0, 0, 0, 0, 0]);
  assert.throws(() => uint64Codec.encode(-1n), RangeError);
  assert.throws(() => json.decode(new Uint8Array([0x7b])), { code: KvErrorCode.MalformedValue });
  assert.throws(() => uint64Codec.decode(new Uint8Array(7)), { code: KvErrorCode.MalformedValue });
});

test('bytesCodec copies, so callers cannot mutate stored bytes', () => {
  const original = new Uint8Array([1, 2, 3]);
  const encoded = bytesCodec.encode(original);
  original[0] = 9;
  assert.equal(encoded[0], 1);
  const decoded = bytesCodec.decode(encoded);
  decoded[1] = 9;
  assert.equal(encoded[1], 2);
});

test('integer key codecs are fixed-width so key order is numeric order', () => {
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }), (a, b) => {
      const ka = uint64KeyCodec.toKey(a);
      assert.equal(uint64KeyCodec.fromKey(ka), a);
      assert.equal(Math.sign(compareUtf8(ka, uint64KeyCodec.toKey(b))), a < b ? -1 : a > b ? 1 : 0);
    }),
  );
  fc.assert(
    fc.property(fc.maxSafeNat(), (n) => {
      assert.equal(uintKeyCodec.fromKey(uintKeyCodec.toKey(n)), n);
      assert.equal(uintKeyCodec.toKey(n), uint64KeyCodec.toKey(BigInt(n)));
    }),
  );
  assert.throws(() => uintKeyCodec.toKey(-1), RangeError);
  assert.throws(() => uintKeyCodec.toKey(1.5), RangeError);
  assert.throws(() => uint64KeyCodec.fromKey('12'), { code: KvErrorCode.MalformedValue });
  assert.throws(() => uintKeyCodec.fromKey('ffffffffffffffff'), { code: KvErrorCode.MalformedValue });
});
