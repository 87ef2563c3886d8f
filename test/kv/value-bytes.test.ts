import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { bytesCodec, copyValue, jsonCodec, MAX_CARVED_BYTES, SLAB_BYTES, utf8Value } from '../../src/kv/index.js';

test('utf8Value encodes exactly as TextEncoder, in plain arrays that never overlap', () => {
  const encoder = new TextEncoder();
  const values: [string, Uint8Array][] = [];
  fc.assert(
    fc.property(fc.string({ unit: 'binary', maxLength: 300 }), (text) => {
      const bytes = utf8Value(text);
      assert.equal(Object.getPrototypeOf(bytes), Uint8Array.prototype);
      assert.deepEqual(new Uint8Array(bytes), encoder.encode(text));
      values.push([text, bytes]);
    }),
    { numRuns: 500 },
  );
  // Values carved later did not write over earlier ones (lone surrogates included).
  for (const [text, bytes] of values) assert.deepEqual(new Uint8Array(bytes), encoder.encode(text));
});

test('small values share a slab; large ones and slab overflow get buffers of their own', () => {
  const a = utf8Value('a'.repeat(100));
  const b = utf8Value('b'.repeat(100));
  if (a.buffer === b.buffer) assert.equal(b.byteOffset, a.byteOffset + 100);
  else assert.equal(b.byteOffset, 0, 'b opened a new slab');
  assert.equal(a.buffer.byteLength, SLAB_BYTES);

  const large = utf8Value('c'.repeat(MAX_CARVED_BYTES + 1));
  assert.equal(large.byteOffset, 0);
  assert.equal(large.buffer.byteLength, MAX_CARVED_BYTES + 1);

  // Enough carved values to fill several slabs: each fits in its slab.
  for (let i = 0; i < 3 * (SLAB_BYTES / MAX_CARVED_BYTES) + 1; i++) {
    const v = utf8Value(String(i % 10).repeat(MAX_CARVED_BYTES));
    assert.ok(v.byteOffset + v.byteLength <= v.buffer.byteLength);
    assert.equal(v.buffer.byteLength, SLAB_BYTES);
    assert.equal(new TextDecoder().decode(v), String(i % 10).repeat(MAX_CARVED_BYTES));
  }
  assert.equal(utf8Value('').byteLength, 0);
});

test('copyValue copies, also from a Buffer (whose slice would share its memory)', () => {
  const frame = Buffer.from('0123456789abcdef');
  for (const length of [0, 5, MAX_CARVED_BYTES + 1]) {
    const source = length <= frame.length ? frame.subarray(2, 2 + length) : Buffer.alloc(length, 7);
    const copy = copyValue(source);
    assert.equal(Object.getPrototypeOf(copy), Uint8Array.prototype);
    assert.deepEqual(Buffer.from(copy), Buffer.from(source));
    if (length > 0) {
      source[0] = source[0]! ^ 0xff;
      assert.notEqual(copy[0], source[0], `a copy of ${length} bytes does not follow its source`);
    }
  }
});

test('codecs keep values of their own', () => {
  const record = jsonCodec<{ msg: string }>();
  const stored = [record.encode({ msg: 'first' }), record.encode({ msg: 'second' })];
  assert.deepEqual(stored.map((b) => record.decode(b)), [{ msg: 'first' }, { msg: 'second' }]);
  const caller = Buffer.from([1, 2, 3]);
  const bytes = bytesCodec.encode(caller);
  caller[0] = 9;
  assert.deepEqual([...bytes], [1, 2, 3], 'the store does not share the Buffer of the caller');
  const read = bytesCodec.decode(bytes);
  read[1] = 9;
  assert.deepEqual([...bytes], [1, 2, 3], 'nor hands its own bytes to a reader');
});
