import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  compareUtf8,
  decodeWriteSet,
  decodeWriteSetParts,
  encodeWriteSet,
  isPublicMapName,
  KvErrorCode,
  mergeWriteSets,
  type Write,
  type WriteSet,
} from '../../src/kv/index.js';
import { encodeWriteSetPart } from '../../src/kv/write-set.js';
import { isCovenantError } from '../../src/base/index.js';

const keyArb = fc.string({ unit: 'binary', maxLength: 8 });
const mapNameArb = fc.oneof(
  fc.string({ unit: 'binary', minLength: 1, maxLength: 6 }),
  fc.string({ unit: 'binary', maxLength: 6 }).map((s) => `public:${s}`),
);
const writeArb: fc.Arbitrary<Write> = fc.option(fc.uint8Array({ maxLength: 16 }), { nil: null, freq: 4 });
const writeSetArb: fc.Arbitrary<WriteSet> = fc
  .dictionary(mapNameArb, fc.dictionary(keyArb, writeArb, { minKeys: 1, maxKeys: 5, noNullPrototype: true }), {
    maxKeys: 5,
    noNullPrototype: true,
  })
  .map((maps) => new Map(Object.entries(maps).map(([name, writes]) => [name, new Map(Object.entries(writes))])));

/** The canonical form a decoded write set must have: maps and keys sorted, as plain arrays. */
function canonical(writes: WriteSet): [string, [string, number[] | null][]][] {
  return [...writes]
    .sort((a, b) => compareUtf8(a[0], b[0]))
    .map(([name, w]) => [name, [...w].sort((a, b) => compareUtf8(a[0], b[0])).map(([k, v]) => [k, v === null ? null : [...v]])]);
}

function decodeBoth(publicBytes: Uint8Array, privateBytes: Uint8Array): WriteSet {
  return mergeWriteSets(decodeWriteSet(publicBytes, { domain: 'public' }), decodeWriteSet(privateBytes, { domain: 'private' }));
}

test('write sets round-trip through their encoding, in canonical order', () => {
  fc.assert(
    fc.property(writeSetArb, (writes) => {
      const { publicBytes, privateBytes } = encodeWriteSet(writes);
      const decoded = decodeBoth(publicBytes, privateBytes);
      assert.deepEqual(canonical(decoded), canonical(writes));
      // Decoded write sets iterate in canonical order already.
      assert.deepEqual([...decoded.keys()], canonical(writes).map(([name]) => name));
      // One encoding per write set: re-encoding gives the same bytes.
      const again = encodeWriteSet(decoded);
      assert.deepEqual(again.publicBytes, publicBytes);
      assert.deepEqual(again.privateBytes, privateBytes);
    }),
    { numRuns: 500 },
  );
});

test('encoding does not depend on insertion order', () => {
  fc.assert(
    fc.property(writeSetArb, (writes) => {
      const reversed = new Map([...writes].reverse().map(([name, w]) => [name, new Map([...w].reverse())]));
      assert.deepEqual(encodeWriteSet(reversed), encodeWriteSet(writes));
    }),
  );
});

test('public maps are readable in the public part; private maps appear only in the private part', () => {
  const writes: WriteSet = new Map([
    ['public:svc.nodes', new Map([['n1', Buffer.from('trusted-node')]])],
    ['records', new Map([['k', Buffer.from('secret-message')]])],
  ]);
  const { publicBytes, privateBytes } = encodeWriteSet(writes);
  const pub = Buffer.from(publicBytes).toString('latin1');
  assert.ok(pub.includes('public:svc.nodes') && pub.includes('trusted-node'));
  assert.ok(!pub.includes('secret-message') && !pub.includes('records'));
  assert.ok(Buffer.from(privateBytes).toString('latin1').includes('secret-message'));
  fc.assert(
    fc.property(writeSetArb, (ws) => {
      const enc = encodeWriteSet(ws);
      for (const name of decodeWriteSet(enc.publicBytes).keys()) assert.ok(isPublicMapName(name));
      for (const name of decodeWriteSet(enc.privateBytes).keys()) assert.ok(!isPublicMapName(name));
    }),
  );
});

test('decoded private values are views of the decrypted buffer handed over; public values are copies', () => {
  const writes: WriteSet = new Map([
    ['public:svc.nodes', new Map([['n1', Buffer.from('trusted-node')]])],
    ['records', new Map([['a', Buffer.from('first')], ['b', Buffer.from('second')]])],
  ]);
  const { publicBytes, privateBytes } = encodeWriteSet(writes);
  // As a node receives them: the public part inside a larger message, the private part its own buffer.
  const message = new Uint8Array(publicBytes.byteLength + 100);
  message.set(publicBytes, 10);
  const publicView = message.subarray(10, 10 + publicBytes.byteLength);
  const privatePlain = new Uint8Array(privateBytes);
  const decoded = decodeWriteSetParts(publicView, privatePlain);
  const record = decoded.get('records')!.get('b')!;
  assert.equal(Buffer.from(record).toString(), 'second');
  assert.equal(record.buffer, privatePlain.buffer, 'no copy of a private value');
  const node = decoded.get('public:svc.nodes')!.get('n1')!;
  assert.notEqual(node.buffer, message.buffer, 'a public value does not keep the message alive');
  message.fill(0);
  assert.equal(Buffer.from(node).toString(), 'trusted-node');
  assert.deepEqual(canonical(decoded), canonical(writes));
});

test('an empty domain encodes as empty bytes', () => {
  const onlyPublic: WriteSet = new Map([['public:a', new Map([['k', null]])]]);
  assert.equal(encodeWriteSet(onlyPublic).privateBytes.byteLength, 0);
  assert.equal(encodeWriteSet(new Map()).publicBytes.byteLength, 0);
  assert.equal(decodeWriteSet(new Uint8Array(0)).size, 0);
});

test('a part in the wrong domain is rejected', () => {
  const { publicBytes, privateBytes } = encodeWriteSet(
    new Map([
      ['public:a', new Map([['k', null]])],
      ['b', new Map([['k', null]])],
    ]),
  );
  assert.throws(() => decodeWriteSet(publicBytes, { domain: 'private' }), { code: KvErrorCode.MalformedWriteSet });
  assert.throws(() => decodeWriteSet(privateBytes, { domain: 'public' }), { code: KvErrorCode.MalformedWriteSet });
});

/** Decoding arbitrary bytes either throws MalformedWriteSet or yields the unique preimage. */
function checkDecodeOfArbitraryBytes(bytes: Uint8Array): void {
  let decoded: WriteSet;
  try {
    decoded = decodeWriteSet(bytes);
  } catch (e) {
    assert.ok(isCovenantError(e), `not a CovenantError: ${String(e)}`);
    assert.equal(e.code, KvErrorCode.MalformedWriteSet);
    return;
  }
  // Without a domain option a part may mix domains: re-encode it as one part.
  assert.deepEqual(Buffer.from(encodeWriteSetPart([...decoded])), Buffer.from(bytes));
}

test('garbage is rejected with MalformedWriteSet, never a crash', () => {
  fc.assert(fc.property(fc.uint8Array({ maxLength: 64 }), checkDecodeOfArbitraryBytes), { numRuns: 3000 });
  // Garbage that starts like a write set, so that decoding gets past the format byte.
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 64 }), (tail) => checkDecodeOfArbitraryBytes(Buffer.concat([Buffer.from([1]), tail]))),
    { numRuns: 3000 },
  );
  // Huge counts and lengths must not allocate or loop.
  const huge = Buffer.from([1, 0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0, 0x61]);
  assert.throws(() => decodeWriteSet(huge), { code: KvErrorCode.MalformedWriteSet });
  const hugeName = Buffer.from([1, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x61]);
  assert.throws(() => decodeWriteSet(hugeName), { code: KvErrorCode.MalformedWriteSet });
});

test('tampered encodings are rejected or decode to what they encode', () => {
  fc.assert(
    fc.property(
      writeSetArb.filter((w) => w.size > 0),
      fc.nat(),
      fc.integer({ min: 1, max: 255 }),
      (writes, position, mask) => {
        const { publicBytes, privateBytes } = encodeWriteSet(writes);
        const part = Buffer.from(publicBytes.byteLength > 0 ? publicBytes : privateBytes);
        part[position % part.byteLength]! ^= mask;
        checkDecodeOfArbitraryBytes(part);
      },
    ),
    { numRuns: 2000 },
  );
});

test('non-canonical encodings are rejected', () => {
  const bytes = (...parts: (number[] | string | Uint8Array)[]) => Buffer.concat(parts.map((p) => (typeof p === 'string' ? Buffer.from(p) : Buffer.from(p))));
  const u32 = (n: number) => [n & 0xff, (n >> 8) & 0xff, (n >> 16) & 0xff, n >>> 24];
  const oneRemoval = (key: string) => [...u32(key.length), ...Buffer.from(key), 0];
  const good = bytes([1], u32(1), u32(1), 'm', u32(2), oneRemoval('a'), oneRemoval('b'));
  assert.equal(decodeWriteSet(good).get('m')!.size, 2);
  const unsortedKeys = bytes([1], u32(1), u32(1), 'm', u32(2), oneRemoval('b'), oneRemoval('a'));
  const duplicateKeys = bytes([1], u32(1), u32(1), 'm', u32(2), oneRemoval('a'), oneRemoval('a'));
  const emptyMap = bytes([1], u32(1), u32(1), 'm', u32(0));
  const noMaps = bytes([1], u32(0));
  const badUtf8 = bytes([1], u32(1), u32(1), [0xff], u32(1), oneRemoval('a'));
  const trailing = bytes(good, [0]);
  const badFormat = bytes([2], good.subarray(1));
  for (const bad of [unsortedKeys, duplicateKeys, emptyMap, noMaps, badUtf8, trailing, badFormat]) {
    assert.throws(() => decodeWriteSet(bad), { code: KvErrorCode.MalformedWriteSet });
  }
});
