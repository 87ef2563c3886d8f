/**
 * Linearizable reads waiting on the primary: answered once consensus confirmed them and commit
 * reached their seqno; refused (retryable) when abandoned, late, or beyond the bound; NotPrimary
 * from consensus passes through.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { isNodeError, notPrimary } from '../../src/node/errors.js';
import { LinearizableReads } from '../../src/node/queries/linearizable-reads.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

function setup(max = 10, primary = true) {
  const clock = new ManualClock();
  const state = { commit: 4, nextReadId: 1 };
  const reads = new LinearizableReads(
    {
      clock,
      commitSeqno: () => state.commit,
      requestRead: () => {
        if (!primary) throw notPrimary('a backup');
        return state.nextReadId++;
      },
    },
    max,
    5000,
  );
  return { clock, state, reads };
}

test('a read is answered once confirmed and once commit reached its seqno, not before', async () => {
  const { state, reads } = setup();
  const settled: number[] = [];
  const first = reads.waitForReadIndex().then((seqno) => settled.push(seqno));
  const second = reads.waitForReadIndex().then((seqno) => settled.push(seqno));
  await Promise.resolve();
  assert.deepEqual(settled, []);
  // The first is confirmed at 4 (committed already): it runs; the second at 7, beyond commit: it waits.
  reads.onSettled([{ readId: 1, seqno: 4 }, { readId: 2, seqno: 7 }], []);
  await first;
  assert.deepEqual(settled, [4]);
  assert.equal(reads.size, 1);
  state.commit = 7;
  reads.onCommit(7);
  await second;
  assert.deepEqual(settled, [4, 7]);
  assert.equal(reads.size, 0);
});

test('an abandoned read, a read not confirmed in time and a read beyond the bound are refused with a retryable 503', async () => {
  const { clock, reads } = setup(2);
  const abandoned = reads.waitForReadIndex();
  const late = reads.waitForReadIndex();
  await assert.rejects(reads.waitForReadIndex(), (e: unknown) => isNodeError(e, 'TooManyPendingReads') && e.status === 503 && e.retryAfterSeconds === 1);
  reads.onSettled([], [1]);
  await assert.rejects(abandoned, (e: unknown) => isNodeError(e, 'ReadNotConfirmed') && /stopped being the primary/.test(e.message));
  clock.advance(5000);
  await assert.rejects(late, (e: unknown) => isNodeError(e, 'ReadNotConfirmed') && e.status === 503 && e.retryAfterSeconds === 1);
  assert.equal(reads.size, 0);
  // A confirmation that comes after the time limit changes nothing.
  reads.onSettled([{ readId: 2, seqno: 1 }], []);
  assert.equal(reads.size, 0);
});

test('on a backup consensus refuses the read: NotPrimary, nothing waits', async () => {
  const { reads } = setup(10, false);
  await assert.rejects(reads.waitForReadIndex(), (e: unknown) => isNodeError(e, 'NotPrimary'));
  assert.equal(reads.size, 0);
});

test('a stopping node refuses every waiting read', async () => {
  const { reads } = setup();
  const waiting = reads.waitForReadIndex();
  reads.close();
  await assert.rejects(waiting, (e: unknown) => isNodeError(e, 'ReadNotConfirmed') && /stopping/.test(e.message));
});
