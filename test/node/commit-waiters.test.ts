/** Writes waiting for their commit: settled by commit (Committed or Invalid), by their time limit (Pending), bounded in number. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { TxId } from '../../src/base/ids.js';
import { CommitWaiters } from '../../src/node/queries/commit-waiters.js';
import { isNodeError } from '../../src/node/errors.js';
import type { TxStatus } from '../../src/node/tx-status.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

function setup(max = 10) {
  const clock = new ManualClock();
  const state = { commit: 0, committedView: new Map<number, number>() };
  const statusOf = (txId: TxId): TxStatus => {
    if (txId.seqno > state.commit) return 'Pending';
    return (state.committedView.get(txId.seqno) ?? txId.view) === txId.view ? 'Committed' : 'Invalid';
  };
  return { clock, state, waiters: new CommitWaiters({ clock, statusOf }, max) };
}

test('a waiter settles when commit reaches it: Committed, or Invalid when another view committed its seqno', async () => {
  const { state, waiters } = setup();
  const settled: string[] = [];
  const a = waiters.wait({ view: 2, seqno: 5 }, 1000).then((s) => settled.push(`5:${s}`));
  const b = waiters.wait({ view: 2, seqno: 9 }, 1000).then((s) => settled.push(`9:${s}`));
  state.commit = 6;
  waiters.onCommit(6);
  await a;
  assert.deepEqual(settled, ['5:Committed']);
  assert.equal(waiters.size, 1);
  state.commit = 10;
  state.committedView.set(9, 3);
  waiters.onCommit(10);
  await b;
  assert.deepEqual(settled, ['5:Committed', '9:Invalid']);
  assert.equal(waiters.size, 0);
});

test('a waiter not reached in time is answered Pending and forgotten; beyond the bound a write is refused before it runs', async () => {
  const { clock, waiters } = setup(2);
  const late = waiters.wait({ view: 1, seqno: 3 }, 500);
  clock.advance(500);
  assert.equal(await late, 'Pending');
  assert.equal(waiters.size, 0);
  void waiters.wait({ view: 1, seqno: 4 }, 500);
  void waiters.wait({ view: 1, seqno: 5 }, 500);
  assert.throws(() => waiters.checkRoom(), (e: unknown) => isNodeError(e, 'TooManyCommitWaiters') && e.retryAfterSeconds === 1);
});
