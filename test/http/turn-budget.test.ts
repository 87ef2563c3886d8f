/**
 * The request work of one event-loop turn: beyond its count or its time, requests wait for later
 * turns in order of arrival, and the event loop runs its timers and I/O between two batches.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { RequestTurnBudget } from '../../src/http/turn-budget.js';

const A = {};
const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

test('beyond requestsMax in one turn, requests run in later turns, that many per turn, in order of arrival; timers run in between', async () => {
  const budget = new RequestTurnBudget(100, 1_000_000);
  const ran: number[] = [];
  let timerFiredAfter: number | undefined;
  setTimeout(() => (timerFiredAfter = ran.length), 0);
  for (let i = 0; i < 450; i++) budget.run(() => ran.push(i), A);
  assert.equal(ran.length, 100, 'the first hundred ran at once');
  assert.equal(budget.metrics().waiting, 350);
  const perTurn: number[] = [];
  while (ran.length < 450) {
    const before = ran.length;
    await nextTurn();
    perTurn.push(ran.length - before);
  }
  assert.ok(perTurn.every((n) => n <= 100), `at most 100 per turn: ${perTurn.join(',')}`);
  assert.deepEqual(ran, Array.from({ length: 450 }, (_, i) => i), 'in order of arrival');
  assert.ok(timerFiredAfter !== undefined && timerFiredAfter < 450, `a timer ran before the last batch (after ${timerFiredAfter})`);
  const m = budget.metrics();
  assert.equal(m.deferred, 350);
  assert.equal(m.peak_waiting, 350);
  assert.equal(m.waiting, 0);
  assert.equal(m.peak_per_turn, 100);
});

test('deferred requests are taken one connection at a time: a connection with one request waits one batch, not behind a flood', async () => {
  const budget = new RequestTurnBudget(10, 1_000_000);
  const flood = {};
  const normal = {};
  const ran: string[] = [];
  for (let i = 0; i < 100; i++) budget.run(() => ran.push(`f${i}`), flood);
  budget.run(() => ran.push('n'), normal);
  assert.equal(ran.length, 10);
  await nextTurn();
  assert.ok(ran.includes('n'), `served in the first batch after it: ${ran.join(',')}`);
  assert.equal(ran.length, 20);
  while (ran.length < 101) await nextTurn();
  assert.deepEqual(
    ran.filter((r) => r.startsWith('f')),
    Array.from({ length: 100 }, (_, i) => `f${i}`),
    'a connection\u2019s own requests in order of arrival',
  );
});

test('a request arriving while others wait runs after them, even when its turn has room', async () => {
  const budget = new RequestTurnBudget(2, 1_000_000);
  const ran: string[] = [];
  for (const name of ['a', 'b', 'c', 'd']) budget.run(() => ran.push(name), A);
  assert.deepEqual(ran, ['a', 'b']);
  await nextTurn();
  budget.run(() => ran.push('e'), A);
  while (ran.length < 5) await nextTurn();
  assert.deepEqual(ran, ['a', 'b', 'c', 'd', 'e']);
});

test('beyond turnMs since the turn\u2019s first request, the rest wait; the first request of a turn always runs', async () => {
  let now = 0;
  const budget = new RequestTurnBudget(1000, 25, () => now);
  const ran: number[] = [];
  for (let i = 0; i < 10; i++) {
    budget.run(() => ran.push(i), A);
    now += 10;
  }
  assert.deepEqual(ran, [0, 1, 2], 'requests started at 0, 10 and 20 ms; at 30 ms the turn is spent');
  while (ran.length < 10) {
    now += 100;
    await nextTurn();
  }
  assert.deepEqual(ran, Array.from({ length: 10 }, (_, i) => i));
});
