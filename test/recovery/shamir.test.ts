import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import { syncBuiltinESMExports } from 'node:module';
import fc from 'fast-check';
import { combine, split } from 'shamir-secret-sharing';
import { bytesEqual } from '../../src/base/index.js';
import { combineShares, rawShareBytes, splitSecret } from '../../src/recovery/index.js';
import { seededRandomBytes } from './helpers.js';

/**
 * The library's split with its CSPRNG replaced by `randomBytes`: it imports node:crypto's
 * randomBytes, so the builtin's export is swapped for the duration of the call (its body runs
 * synchronously, no other code runs meanwhile) and then restored.
 */
async function librarySplit(secret: Uint8Array, count: number, threshold: number, randomBytes: (n: number) => Uint8Array): Promise<Uint8Array[]> {
  const original = nodeCrypto.randomBytes;
  (nodeCrypto as { randomBytes: unknown }).randomBytes = (n: number) => {
    const bytes = randomBytes(n);
    return Buffer.from(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + n));
  };
  syncBuiltinESMExports();
  try {
    const promise = split(secret, count, threshold);
    (nodeCrypto as { randomBytes: unknown }).randomBytes = original;
    syncBuiltinESMExports();
    return await promise;
  } finally {
    (nodeCrypto as { randomBytes: unknown }).randomBytes = original;
    syncBuiltinESMExports();
  }
}

test('splitSecret emits the library\'s shares for the same random bytes', async () => {
  for (const [count, threshold] of [[2, 2], [3, 2], [5, 3], [7, 5], [255, 17]] as const) {
    const secret = seededRandomBytes(`secret ${count}/${threshold}`)(32);
    const ours = splitSecret(secret, count, threshold, seededRandomBytes(`split ${count}/${threshold}`)).map(rawShareBytes);
    const theirs = await librarySplit(secret, count, threshold, seededRandomBytes(`split ${count}/${threshold}`));
    assert.deepEqual(ours, theirs, `${threshold} of ${count}`);
  }
});

test('the library\'s combine reassembles our shares, and combineShares reassembles the library\'s', async () => {
  const random = seededRandomBytes('combine');
  for (let run = 0; run < 20; run++) {
    const secret = random(32);
    const count = 2 + (random(1)[0]! % 6);
    const threshold = 2 + (random(1)[0]! % (count - 1));
    const ours = splitSecret(secret, count, threshold, random);
    assert.deepEqual(await combine(ours.slice(0, threshold).map(rawShareBytes)), secret);
    const theirs = await split(secret, count, threshold);
    const decoded = theirs.map((b) => ({ x: b[32]!, y: b.slice(0, 32) }));
    assert.deepEqual(combineShares(decoded.slice(count - threshold)), secret);
  }
});

test('any threshold shares reassemble the secret, threshold - 1 do not (property)', () => {
  fc.assert(
    fc.property(
      fc.uint8Array({ minLength: 32, maxLength: 32 }),
      fc.integer({ min: 1, max: 7 }).chain((count) => fc.tuple(fc.constant(count), fc.integer({ min: 1, max: count }), fc.shuffledSubarray([...Array(count).keys()], { minLength: count, maxLength: count }))),
      fc.string(),
      (secret, [count, threshold, order], seed) => {
        const shares = splitSecret(secret, count, threshold, seededRandomBytes(seed));
        assert.equal(new Set(shares.map((s) => s.x)).size, count, 'distinct x coordinates');
        const picked = order.map((i) => shares[i]!);
        assert.deepEqual(combineShares(picked.slice(0, threshold)), secret);
        assert.deepEqual(combineShares(picked), secret, 'more than the threshold also works');
        if (threshold > 1) assert.ok(!bytesEqual(combineShares(picked.slice(0, threshold - 1)), secret), 'threshold - 1 shares give another value');
      },
    ),
    { numRuns: 200 },
  );
});

test('a threshold of 1 makes every share the secret itself', () => {
  const secret = seededRandomBytes('one')(32);
  for (const s of splitSecret(secret, 4, 1, seededRandomBytes('one split'))) {
    assert.deepEqual(s.y, secret);
    assert.deepEqual(combineShares([s]), secret);
  }
});
