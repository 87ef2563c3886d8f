import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { combine, split } from 'shamir-secret-sharing';
import { bytesEqual } from '../../src/base/index.js';
import { combineKey, splitKey } from '../../src/recovery/key-sharing.js';
import { seededRandomBytes } from './helpers.js';

const raw = (s: { x: number; y: Uint8Array }) => new Uint8Array([...s.y, s.x]);

test('any threshold shares reassemble the key, threshold - 1 do not (property, against shamir-secret-sharing)', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.integer({ min: 1, max: 7 }).chain((count) => fc.tuple(fc.constant(count), fc.integer({ min: 1, max: count }), fc.shuffledSubarray([...Array(count).keys()], { minLength: count, maxLength: count }))),
      async (secret, [count, threshold, order]) => {
        const shares = await splitKey(secret, count, threshold);
        assert.equal(shares.length, count);
        assert.equal(new Set(shares.map((s) => s.x)).size, count, 'distinct x coordinates');
        assert.ok(shares.every((s) => s.x >= 1 && s.x <= 255 && s.y.byteLength === 32));
        const picked = order.map((i) => shares[i]!);
        assert.deepEqual(await combineKey(picked.slice(0, threshold)), secret);
        assert.deepEqual(await combineKey(picked), secret, 'more than the threshold also works');
        if (threshold > 1) assert.ok(!bytesEqual(await combineKey(picked.slice(0, threshold - 1)), secret), 'threshold - 1 shares give another value');
      },
    ),
    { numRuns: 200 },
  );
});

test('the shares are the library\'s: its combine reassembles ours, and ours reassembles its split', async () => {
  const random = seededRandomBytes('interop');
  for (const [count, threshold] of [[2, 2], [5, 3], [255, 17]] as const) {
    const secret = random(32);
    const ours = await splitKey(secret, count, threshold);
    assert.deepEqual(await combine(ours.slice(count - threshold).map(raw)), secret, `${threshold} of ${count}`);
    const theirs = await split(secret, count, threshold);
    assert.deepEqual(await combineKey(theirs.slice(0, threshold).map((b) => ({ x: b[32]!, y: b.slice(0, 32) }))), secret);
  }
});

test('a threshold of 1 makes every share the key itself, at indexes 1..count, without the library (which refuses it)', async () => {
  const secret = seededRandomBytes('one')(32);
  await assert.rejects(split(secret, 3, 1), /threshold must be at least 2/);
  await assert.rejects(split(secret, 1, 1), /shares must be at least 2/);
  for (const count of [1, 4]) {
    const shares = await splitKey(secret, count, 1);
    assert.deepEqual(shares.map((s) => s.x), Array.from({ length: count }, (_, i) => i + 1));
    for (const s of shares) {
      assert.deepEqual(s.y, secret);
      assert.notEqual(s.y.buffer, secret.buffer, 'a copy, not the caller\'s bytes');
      assert.deepEqual(await combineKey([s]), secret);
    }
  }
});
