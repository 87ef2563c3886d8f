import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fc from 'fast-check';
import {
  decodeEntry,
  encodeEntry,
  ENTRY_OVERHEAD_BYTES,
  EntryFlags,
  entryWriteSets,
  LedgerError,
  peekFrameSizeBytes,
  writeSetDigest,
  type EntryFields,
} from '../../src/ledger/index.js';
import { toHex } from '../../src/base/index.js';

const fieldsArb: fc.Arbitrary<EntryFields> = fc.record({
  view: fc.maxSafeNat(),
  seqno: fc.maxSafeNat(),
  flags: fc.integer({ min: 0, max: 15 }),
  claimsDigest: fc.uint8Array({ minLength: 32, maxLength: 32 }),
  commitEvidenceDigest: fc.uint8Array({ minLength: 32, maxLength: 32 }),
  publicBytes: fc.uint8Array({ maxLength: 300 }),
  privateBytes: fc.uint8Array({ maxLength: 300 }),
});

function isLedgerDecodeError(e: unknown): boolean {
  return e instanceof LedgerError && (e.code === 'MalformedLedgerEntry' || e.code === 'TruncatedLedgerEntry');
}

test('the frame has the documented layout', () => {
  const bytes = encodeEntry({
    view: 0x0102030405,
    seqno: 7,
    flags: EntryFlags.SIGNATURE | EntryFlags.CHUNK_END,
    claimsDigest: new Uint8Array(32).fill(0xaa),
    commitEvidenceDigest: new Uint8Array(32).fill(0xbb),
    publicBytes: new Uint8Array([1, 2, 3]),
    privateBytes: new Uint8Array([9, 8]),
  });
  assert.equal(bytes.byteLength, 96 + 3 + 2 + 4);
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  assert.equal(dv.getUint32(0, true), bytes.byteLength - 4);
  assert.equal(bytes[4], 1);
  assert.equal(bytes[5], 0b11);
  assert.equal(dv.getUint16(6, true), 0);
  assert.equal(dv.getBigUint64(8, true), 0x0102030405n);
  assert.equal(dv.getBigUint64(16, true), 7n);
  assert.equal(toHex(bytes.subarray(24, 56)), 'aa'.repeat(32));
  assert.equal(toHex(bytes.subarray(56, 88)), 'bb'.repeat(32));
  assert.equal(dv.getUint32(88, true), 3);
  assert.equal(dv.getUint32(92, true), 2);
  assert.deepEqual([...bytes.subarray(96, 101)], [1, 2, 3, 9, 8]);
  assert.equal(peekFrameSizeBytes(bytes), bytes.byteLength);
});

test('encode then decode gives back every field, as views into the input', () => {
  fc.assert(
    fc.property(fieldsArb, fc.nat(16), (fields, pad) => {
      const frame = encodeEntry(fields);
      assert.equal(frame.byteLength, ENTRY_OVERHEAD_BYTES + fields.publicBytes.byteLength + fields.privateBytes.byteLength);
      const buffer = new Uint8Array(pad + frame.byteLength + 5);
      buffer.set(frame, pad);
      const d = decodeEntry(buffer, pad);
      assert.equal(d.view, fields.view);
      assert.equal(d.seqno, fields.seqno);
      assert.equal(d.flags, fields.flags);
      assert.deepEqual(d.claimsDigest, fields.claimsDigest);
      assert.deepEqual(d.commitEvidenceDigest, fields.commitEvidenceDigest);
      assert.deepEqual(d.publicBytes, fields.publicBytes);
      assert.deepEqual(d.privateBytes, fields.privateBytes);
      assert.equal(d.frameSizeBytes, frame.byteLength);
      assert.deepEqual(d.frameBytes, frame);
      assert.equal(d.publicBytes.buffer, buffer.buffer, 'no copy');
    }),
    { numRuns: 300 },
  );
});

test('any flipped bit is detected', () => {
  fc.assert(
    fc.property(fieldsArb, fc.nat(), fc.integer({ min: 0, max: 7 }), (fields, at, bit) => {
      const frame = encodeEntry(fields);
      const i = at % frame.byteLength;
      frame[i] = frame[i]! ^ (1 << bit);
      assert.throws(() => decodeEntry(frame), isLedgerDecodeError);
    }),
    { numRuns: 500 },
  );
});

test('any truncation is detected and names the offset', () => {
  fc.assert(
    fc.property(fieldsArb, fc.nat(), fc.nat(8), (fields, cut, pad) => {
      const frame = encodeEntry(fields);
      const kept = cut % frame.byteLength;
      const buffer = new Uint8Array(pad + kept);
      buffer.set(frame.subarray(0, kept), pad);
      assert.throws(
        () => decodeEntry(buffer, pad),
        (e: unknown) => e instanceof LedgerError && e.code === 'TruncatedLedgerEntry' && e.offsetBytes === pad,
      );
    }),
    { numRuns: 300 },
  );
});

test('garbage never decodes into anything but a typed error', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 400 }), (garbage) => {
      try {
        decodeEntry(garbage);
        assert.fail('garbage decoded');
      } catch (e) {
        assert.ok(isLedgerDecodeError(e), String(e));
      }
    }),
    { numRuns: 500 },
  );
  // A huge length claim is refused without allocating.
  assert.throws(() => decodeEntry(new Uint8Array([0xff, 0xff, 0xff, 0xff, 1, 0, 0, 0])), isLedgerDecodeError);
});

test('unknown flags, versions and reserved bits are refused even with a valid crc', async () => {
  const { crc32 } = await import('node:zlib');
  const frame = encodeEntry({
    view: 1,
    seqno: 1,
    flags: 0,
    claimsDigest: new Uint8Array(32),
    commitEvidenceDigest: new Uint8Array(32),
    publicBytes: new Uint8Array(4),
    privateBytes: new Uint8Array(0),
  });
  const reseal = (mutate: (f: Uint8Array) => void) => {
    const f = frame.slice();
    mutate(f);
    new DataView(f.buffer).setUint32(f.byteLength - 4, crc32(f.subarray(4, f.byteLength - 4)), true);
    return f;
  };
  assert.throws(() => decodeEntry(reseal((f) => (f[4] = 2))), /unsupported format version 2/);
  assert.throws(() => decodeEntry(reseal((f) => (f[5] = 0x10))), /unknown flags/);
  assert.throws(() => decodeEntry(reseal((f) => (f[7] = 1))), /reserved/);
  assert.throws(() => decodeEntry(reseal((f) => (f[88] = 5))), /lengths/);
  assert.throws(() => decodeEntry(reseal((f) => (f[23] = 0xff))), /seqno exceeds/);
});

test('encode refuses fields it cannot represent', () => {
  const base: EntryFields = {
    view: 1,
    seqno: 1,
    flags: 0,
    claimsDigest: new Uint8Array(32),
    commitEvidenceDigest: new Uint8Array(32),
    publicBytes: new Uint8Array(0),
    privateBytes: new Uint8Array(0),
  };
  assert.throws(() => encodeEntry({ ...base, seqno: -1 }), TypeError);
  assert.throws(() => encodeEntry({ ...base, view: 2 ** 53 }), TypeError);
  assert.throws(() => encodeEntry({ ...base, flags: 16 }), TypeError);
  assert.throws(() => encodeEntry({ ...base, claimsDigest: new Uint8Array(31) }), TypeError);
});

test('writeSetDigest is SHA-256 of public then private bytes', () => {
  fc.assert(
    fc.property(fieldsArb, (fields) => {
      const expected = createHash('sha256').update(fields.publicBytes).update(fields.privateBytes).digest();
      assert.equal(toHex(writeSetDigest(fields)), expected.toString('hex'));
      assert.equal(toHex(writeSetDigest(decodeEntry(encodeEntry(fields)))), expected.toString('hex'));
      // The primary's shortcut: the write sets of a frame it just encoded, read in place.
      const frame = encodeEntry(fields);
      const inPlace = entryWriteSets(frame);
      assert.deepEqual(inPlace, { publicBytes: fields.publicBytes, privateBytes: fields.privateBytes });
      assert.equal(inPlace.publicBytes.buffer, frame.buffer, 'views of the frame, not copies');
      assert.equal(toHex(writeSetDigest(inPlace)), expected.toString('hex'));
    }),
    { numRuns: 100 },
  );
});
