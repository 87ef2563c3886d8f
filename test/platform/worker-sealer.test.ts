/**
 * The worker-thread sealer (src/platform/worker-sealer.ts) against the inline one: same bytes,
 * same order, completions after the turn, a synchronous drain, nothing after close, and a failed
 * worker reported, also to a drain blocked waiting for it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import fc from 'fast-check';
import { EntrySeal, type SealJob, type SealedEntry } from '../../src/ledger/index.js';
import { WorkerEntrySealer } from '../../src/platform/worker-sealer.js';
import { packJobs, packSealed, unpackJobs, unpackSealed } from '../../src/platform/seal-batch.js';
import { sealJobArb } from '../ledger/helpers.js';

const SECRET = new Uint8Array(32).fill(3);

function jobs(count: number, seed: number): SealJob[] {
  return fc.sample(sealJobArb, { numRuns: count, seed });
}

function sealer(completed: [SealJob, SealedEntry][], onFailure: (e: Error) => void = (e) => assert.fail(e)): WorkerEntrySealer<SealJob> {
  return new WorkerEntrySealer<SealJob>(SECRET, (job, sealed) => completed.push([job, sealed]), { onFailure });
}

function assertSealedLikeInline(completed: [SealJob, SealedEntry][], submitted: SealJob[]): void {
  const inline = new EntrySeal(SECRET);
  assert.equal(completed.length, submitted.length);
  completed.forEach(([job, sealed], i) => {
    assert.equal(job, submitted[i], `job ${i} completes in submission order`);
    const expected = inline.seal(job);
    assert.deepEqual(sealed.bytes, expected.bytes, `entry ${i} has the inline sealer's bytes`);
    assert.deepEqual(sealed.leaf, expected.leaf);
  });
}

test('batches round-trip through their packed form', () => {
  fc.assert(
    fc.property(fc.array(sealJobArb, { maxLength: 20 }), (batch) => {
      assert.deepEqual(
        unpackJobs(packJobs(batch)).map((j) => ({ ...j, claimsDigest: [...j.claimsDigest], publicBytes: [...j.publicBytes], privatePlain: [...j.privatePlain] })),
        batch.map((j) => ({ ...j, claimsDigest: [...j.claimsDigest], publicBytes: [...j.publicBytes], privatePlain: [...j.privatePlain] })),
      );
      const seal = new EntrySeal(SECRET);
      const sealed = batch.map((j) => seal.seal(j));
      assert.deepEqual(
        unpackSealed(packSealed(sealed)).map((s) => [[...s.bytes], [...s.leaf]]),
        sealed.map((s) => [[...s.bytes], [...s.leaf]]),
      );
    }),
    { numRuns: 50 },
  );
});

test('the worker seals what the inline sealer seals, in order, after the turn that submitted it', async () => {
  const completed: [SealJob, SealedEntry][] = [];
  const s = sealer(completed);
  try {
    const submitted: SealJob[] = [];
    // Several turns, one of them larger than a batch.
    for (const [turn, count] of [10, 300, 1, 57].entries()) {
      for (const job of jobs(count, turn + 1)) {
        s.submit(job);
        submitted.push(job);
      }
      assert.ok(completed.length < submitted.length, 'nothing completes inside submit');
      await nextTurn();
    }
    const deadline = Date.now() + 20_000;
    while (s.pending > 0 && Date.now() < deadline) await nextTurn();
    assert.equal(s.pending, 0);
    assertSealedLikeInline(completed, submitted);
  } finally {
    s.close();
  }
});

test('drain completes every submitted job before it returns, posted or not', async () => {
  const completed: [SealJob, SealedEntry][] = [];
  const s = sealer(completed);
  try {
    const submitted = jobs(200, 9);
    for (const job of submitted.slice(0, 150)) s.submit(job);
    await nextTurn(); // the first 150 are posted to the worker
    for (const job of submitted.slice(150)) s.submit(job); // these are not
    s.drain();
    assert.equal(s.pending, 0);
    assertSealedLikeInline(completed, submitted);
    // Answers already taken by drain are not delivered a second time.
    await nextTurn();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(completed.length, submitted.length);
  } finally {
    s.close();
  }
});

test('after close nothing completes and submit is refused', async () => {
  const completed: [SealJob, SealedEntry][] = [];
  const s = sealer(completed);
  for (const job of jobs(50, 4)) s.submit(job);
  await nextTurn();
  s.close();
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(completed.length, 0);
  assert.equal(s.pending, 0);
  assert.throws(() => s.submit(jobs(1, 5)[0]!), /the sealer is open/);
  s.drain(); // a closed sealer has nothing to drain
});

test('a worker that fails is reported once', async () => {
  const failures: Error[] = [];
  const s = sealer([], (e) => failures.push(e));
  try {
    // A view beyond 32 bits cannot form an AES-GCM IV: the worker's assertion fails.
    s.submit({ view: 2 ** 33, seqno: 1, flags: 0, claimsDigest: new Uint8Array(32), publicBytes: new Uint8Array(0), privatePlain: new Uint8Array([1]) });
    const deadline = Date.now() + 10_000;
    while (failures.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(failures.length, 1);
    assert.match(failures[0]!.message, /view/);
  } finally {
    s.close();
  }
});

test('drain reports the worker failing on a posted batch with the worker\'s reason, not as a timeout', async () => {
  const failures: Error[] = [];
  const s = sealer([], (e) => failures.push(e));
  try {
    s.submit({ view: 2 ** 33, seqno: 1, flags: 0, claimsDigest: new Uint8Array(32), publicBytes: new Uint8Array(0), privatePlain: new Uint8Array([1]) });
    await nextTurn(); // posted to the worker
    // Blocked in drain, the thread cannot receive the worker's 'error' event: the failure must
    // come through the answer itself (a timeout would say "did not answer").
    assert.throws(() => s.drain(), /the sealing worker failed: .*view/);
    assert.equal(failures.length, 1, 'reported once, by drain');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(failures.length, 1, 'the worker ending afterwards is not reported again');
  } finally {
    s.close();
  }
});
