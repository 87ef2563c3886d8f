import { test } from 'node:test';
import assert from 'node:assert/strict';
import { WaitingWorkBudget, waitingWorkExhausted } from '../../src/http/waiting-work.js';

test('the waiting-work budget: one holder takes at most half, all together at most the whole, each release once', () => {
  const budget = new WaitingWorkBudget(1000);
  assert.equal(budget.maxBytesPerHolder, 500);
  const a1 = budget.tryTake(300, 'a');
  assert.ok(a1 !== undefined);
  assert.equal(budget.tryTake(250, 'a'), undefined, 'beyond the holder’s half');
  const b1 = budget.tryTake(450, 'b')!;
  const c1 = budget.tryTake(300, 'c');
  assert.equal(c1, undefined, 'beyond the whole budget (300 + 450 + 300 > 1000)');
  const c2 = budget.tryTake(250, 'c')!;
  assert.deepEqual(budget.metrics(), { used_bytes: 1000, peak_bytes: 1000, max_bytes: 1000, max_bytes_per_holder: 500, requests: 3, holders: 3, refused: 2 });
  a1!();
  a1!();
  b1();
  assert.equal(budget.metrics().used_bytes, 250, 'a second release gives nothing back twice');
  assert.equal(budget.metrics().holders, 1);
  c2();
  assert.deepEqual(budget.metrics(), { used_bytes: 0, peak_bytes: 1000, max_bytes: 1000, max_bytes_per_holder: 500, requests: 0, holders: 0, refused: 2 });
  const refusal = waitingWorkExhausted(budget);
  assert.equal(refusal.code, 'WaitingWorkBudgetExhausted');
  assert.equal(refusal.status, 503);
  assert.equal(refusal.retryAfterSeconds, 1);
});
