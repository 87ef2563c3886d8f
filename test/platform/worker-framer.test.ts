/**
 * The worker-thread framer (src/platform/worker-framer.ts) against the inline one: same bytes,
 * same order, completions after the turn, a synchronous drain, nothing after close, and a failed
 * worker reported, also to a drain blocked waiting for it, and a worker that ends without answering
 * found by that drain at once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import fc from 'fast-check';
import { EntryFraming, type FrameJob, type FramedEntry } from '../../src/ledger/index.js';
import { WorkerEntryFramer } from '../../src/platform/worker-framer.js';
import { packJobs, framePacked, TRANSFERRED_PART_BYTES, unpackJobs, unpackFramed } from '../../src/platform/frame-batch.js';
import { frameJobArb } from '../ledger/helpers.js';

const SECRET = new Uint8Array(32).fill(3);

function jobs(count: number, seed: number): FrameJob[] {
  return fc.sample(frameJobArb, { numRuns: count, seed });
}

function framer(completed: [FrameJob, FramedEntry][], onFailure: (e: Error) => void = (e) => assert.fail(e)): WorkerEntryFramer<FrameJob> {
  return new WorkerEntryFramer<FrameJob>(SECRET, (job, framed) => completed.push([job, framed]), { onFailure });
}

function assertFramedLikeInline(completed: [FrameJob, FramedEntry][], submitted: FrameJob[]): void {
  const inline = new EntryFraming(SECRET);
  assert.equal(completed.length, submitted.length);
  completed.forEach(([job, framed], i) => {
    assert.equal(job, submitted[i], `job ${i} completes in submission order`);
    const expected = inline.frame(job);
    assert.deepEqual(framed.bytes, expected.bytes, `entry ${i} has the inline framer's bytes`);
    assert.deepEqual(framed.leaf, expected.leaf);
  });
}

test('batches round-trip through their packed form', () => {
  fc.assert(
    fc.property(fc.array(frameJobArb, { maxLength: 20 }), (batch) => {
      assert.deepEqual(
        unpackJobs(packJobs(batch)).map((j) => ({ ...j, claimsDigest: [...j.claimsDigest], publicBytes: [...j.publicBytes], privatePlain: [...j.privatePlain] })),
        batch.map((j) => ({ ...j, claimsDigest: [...j.claimsDigest], publicBytes: [...j.publicBytes], privatePlain: [...j.privatePlain] })),
      );
      // Framed in place in the answer: the same frames and leaves as framed one by one.
      const frame = new EntryFraming(SECRET);
      const framed = batch.map((j) => frame.frame(j));
      const packed = framePacked(batch, frame);
      assert.deepEqual(packed.transferred, []);
      assert.deepEqual(
        unpackFramed(packed).map((s) => [[...s.bytes], [...s.leaf]]),
        framed.map((s) => [[...s.bytes], [...s.leaf]]),
      );
    }),
    { numRuns: 50 },
  );
});

/** Large parts: whole buffers of their own (transferred), and views into a larger buffer (copied). */
function largeJobs(): FrameJob[] {
  const big = (bytes: number, fill: number) => new Uint8Array(bytes).fill(fill);
  const digest = new Uint8Array(32).fill(9);
  return [
    { view: 2, seqno: 10, flags: 0, claimsDigest: digest, publicBytes: big(10, 1), privatePlain: big(TRANSFERRED_PART_BYTES, 2) },
    { view: 2, seqno: 11, flags: 0, claimsDigest: digest, publicBytes: big(3 * TRANSFERRED_PART_BYTES, 3), privatePlain: big(TRANSFERRED_PART_BYTES + 8, 4).subarray(8) },
    { view: 2, seqno: 12, flags: 0, claimsDigest: digest, publicBytes: new Uint8Array(0), privatePlain: big(TRANSFERRED_PART_BYTES - 1, 5) },
  ];
}

const copyOf = (job: FrameJob): FrameJob => ({ ...job, publicBytes: job.publicBytes.slice(), privatePlain: job.privatePlain.slice() });

test('large write sets and frames travel transferred beside the batch, and come back whole', () => {
  const batch = largeJobs();
  const copies = batch.map(copyOf);
  const packed = packJobs(batch);
  // The private part of 10 and the public part of 11 are whole buffers of their own; the rest is copied.
  assert.deepEqual(packed.transferred, [batch[0]!.privatePlain.buffer, batch[1]!.publicBytes.buffer]);
  assert.ok(packed.packed.byteLength < TRANSFERRED_PART_BYTES * 3, 'transferred parts are not in the packed buffer');
  const unpacked = unpackJobs(packed);
  assert.deepEqual(
    unpacked.map((j) => ({ ...j, claimsDigest: [...j.claimsDigest], publicBytes: Buffer.from(j.publicBytes).toString('hex'), privatePlain: Buffer.from(j.privatePlain).toString('hex') })),
    copies.map((j) => ({ ...j, claimsDigest: [...j.claimsDigest], publicBytes: Buffer.from(j.publicBytes).toString('hex'), privatePlain: Buffer.from(j.privatePlain).toString('hex') })),
  );
  const frame = new EntryFraming(SECRET);
  const framed = copies.map((j) => frame.frame(j));
  const back = framePacked(copies, frame);
  assert.equal(back.transferred.length, 3, 'every frame over the bound is a whole buffer of its own');
  assert.deepEqual(
    unpackFramed(back).map((e) => [Buffer.from(e.bytes).toString('hex'), [...e.leaf]]),
    framed.map((e) => [Buffer.from(e.bytes).toString('hex'), [...e.leaf]]),
  );
  // The same large bytes given twice travel transferred once and copied the second time.
  const twice = { view: 2, seqno: 13, flags: 0, claimsDigest: new Uint8Array(32), publicBytes: copies[0]!.privatePlain, privatePlain: copies[0]!.privatePlain };
  const shared = packJobs([twice]);
  assert.equal(shared.transferred.length, 1);
  assert.deepEqual(unpackJobs(shared).map((j) => Buffer.from(j.publicBytes).equals(Buffer.from(j.privatePlain))), [true]);
  // A batch that names a transferred part it does not carry is refused.
  assert.throws(() => unpackJobs({ packed: packed.packed, transferred: packed.transferred.slice(1) }), /transferred part/);
});

test('through the worker, large jobs frame as in line; once posted, their transferred parts are detached here', async () => {
  const completed: [FrameJob, FramedEntry][] = [];
  const s = framer(completed);
  try {
    const submitted = largeJobs();
    const copies = submitted.map(copyOf);
    for (const job of submitted) s.submit(job);
    const bytes = copies.reduce((sum, j) => sum + j.publicBytes.byteLength + j.privatePlain.byteLength, 0);
    assert.equal(s.pendingBytes, bytes, 'the write-set bytes in the pipeline are counted at submit');
    await nextTurn();
    assert.equal(s.pendingBytes, bytes, 'and still counted once posted, detached or not');
    assert.equal(submitted[0]!.privatePlain.byteLength, 0, 'the transferred write set is detached');
    assert.equal(submitted[1]!.privatePlain.byteLength, TRANSFERRED_PART_BYTES, 'a view into a larger buffer was copied, not moved');
    s.drain();
    assert.equal(completed.length, 3);
    assert.equal(s.pendingBytes, 0);
    const inline = new EntryFraming(SECRET);
    completed.forEach(([job, framed], i) => {
      assert.equal(job, submitted[i]);
      assert.deepEqual(framed.bytes, inline.frame(copies[i]!).bytes, `entry ${i} has the inline framer's bytes`);
    });
  } finally {
    s.close();
  }
});

test('the worker frames what the inline framer frames, in order, after the turn that submitted it', async () => {
  const completed: [FrameJob, FramedEntry][] = [];
  const s = framer(completed);
  try {
    const submitted: FrameJob[] = [];
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
    assertFramedLikeInline(completed, submitted);
  } finally {
    s.close();
  }
});

test('drain completes every submitted job before it returns, posted or not', async () => {
  const completed: [FrameJob, FramedEntry][] = [];
  const s = framer(completed);
  try {
    const submitted = jobs(200, 9);
    for (const job of submitted.slice(0, 150)) s.submit(job);
    await nextTurn(); // the first 150 are posted to the worker
    for (const job of submitted.slice(150)) s.submit(job); // these are not
    s.drain();
    assert.equal(s.pending, 0);
    assertFramedLikeInline(completed, submitted);
    // Answers already taken by drain are not delivered a second time.
    await nextTurn();
    await new Promise((resolve) => setTimeout(resolve, 50));
    assert.equal(completed.length, submitted.length);
  } finally {
    s.close();
  }
});

test('after close nothing completes and submit is refused', async () => {
  const completed: [FrameJob, FramedEntry][] = [];
  const s = framer(completed);
  for (const job of jobs(50, 4)) s.submit(job);
  await nextTurn();
  s.close();
  await new Promise((resolve) => setTimeout(resolve, 100));
  assert.equal(completed.length, 0);
  assert.equal(s.pending, 0);
  assert.throws(() => s.submit(jobs(1, 5)[0]!), /the framer is open/);
  s.drain(); // a closed framer has nothing to drain
});

test('a worker that fails is reported once', async () => {
  const failures: Error[] = [];
  const s = framer([], (e) => failures.push(e));
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
  const s = framer([], (e) => failures.push(e));
  try {
    s.submit({ view: 2 ** 33, seqno: 1, flags: 0, claimsDigest: new Uint8Array(32), publicBytes: new Uint8Array(0), privatePlain: new Uint8Array([1]) });
    await nextTurn(); // posted to the worker
    // Blocked in drain, the thread cannot receive the worker's 'error' event: the failure must
    // come through the answer itself (a timeout would say "did not answer").
    assert.throws(() => s.drain(), /the framing worker failed: .*view/);
    assert.equal(failures.length, 1, 'reported once, by drain');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(failures.length, 1, 'the worker ending afterwards is not reported again');
  } finally {
    s.close();
  }
});

test('drain learns at once that the worker ended without answering, not from its 30 s timeout', async () => {
  const failures: Error[] = [];
  const completed: [FrameJob, FramedEntry][] = [];
  const s = new WorkerEntryFramer<FrameJob>(SECRET, (job, framed) => completed.push([job, framed]), {
    onFailure: (e) => failures.push(e),
    vanishAtBatch: 2,
  });
  try {
    const submitted = jobs(20, 11);
    for (const job of submitted.slice(0, 10)) s.submit(job);
    await nextTurn(); // batch 1, answered
    while (completed.length < 10) await new Promise((resolve) => setTimeout(resolve, 5));
    for (const job of submitted.slice(10)) s.submit(job);
    await nextTurn(); // batch 2: the worker ends on it
    // The drain timeout would say "did not answer ... within 30000 ms".
    assert.throws(() => s.drain(), /the framing worker ended without answering 1 batch/);
    assert.equal(failures.length, 1, 'reported once, by drain');
    assert.equal(completed.length, 10, 'only the answered batch completed');
    await new Promise((resolve) => setTimeout(resolve, 100));
    assert.equal(failures.length, 1, 'the exit event afterwards is not reported again');
  } finally {
    s.close();
  }
});
