import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseDurationMs, parseSizeBytes, formatTxId, parseTxId, toHex, fromHex } from '../../src/base/index.js';

test('durations parse with their units', () => {
  assert.equal(parseDurationMs('100ms'), 100);
  assert.equal(parseDurationMs('2s'), 2000);
  assert.equal(parseDurationMs('30min'), 1_800_000);
  assert.equal(parseDurationMs('1h'), 3_600_000);
  assert.equal(parseDurationMs('0s'), 0);
  assert.throws(() => parseDurationMs('100'), /not a duration/);
  assert.throws(() => parseDurationMs('fast'), /not a duration/);
});

test('sizes parse with binary units', () => {
  assert.equal(parseSizeBytes('5MB'), 5 * 1024 * 1024);
  assert.equal(parseSizeBytes('64KB'), 65536);
  assert.equal(parseSizeBytes('1048576'), 1048576);
  assert.equal(parseSizeBytes(42), 42);
  assert.throws(() => parseSizeBytes('5XB'), /not a size/);
  assert.throws(() => parseSizeBytes(-1), /not a size/);
});

test('transaction ids round-trip and reject other shapes', () => {
  assert.equal(formatTxId({ view: 2, seqno: 17 }), '2.17');
  assert.deepEqual(parseTxId('2.17'), { view: 2, seqno: 17 });
  assert.equal(parseTxId('2'), undefined);
  assert.equal(parseTxId('a.b'), undefined);
  assert.equal(parseTxId('1.2.3'), undefined);
});

test('hex round-trips', () => {
  const bytes = new Uint8Array([0, 1, 254, 255]);
  assert.equal(toHex(bytes), '0001feff');
  assert.deepEqual(fromHex('0001feff'), bytes);
  assert.throws(() => fromHex('abc'));
});
