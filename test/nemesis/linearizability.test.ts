/** The register linearizability checker on hand-written histories that are, and are not, linearizable. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkRegister, describeOps, minimalFailing, type RegisterOp } from '../../src/testing/nemesis/linearizability.js';

let nextId = 1;
const w = (value: string, invokedMs: number, completedMs: number | undefined): RegisterOp => ({ id: nextId++, kind: 'write', value, invokedMs, completedMs });
const r = (value: string | null, invokedMs: number, completedMs: number): RegisterOp => ({ id: nextId++, kind: 'read', value, invokedMs, completedMs });
const ok = (ops: RegisterOp[]) => checkRegister(ops).linearizable;

test('sequential histories: a read returns the last completed write, nothing before any write', () => {
  assert.equal(ok([]), true);
  assert.equal(ok([r(null, 0, 1), w('a', 2, 3), r('a', 4, 5), w('b', 6, 7), r('b', 8, 9)]), true);
  assert.equal(ok([w('a', 0, 1), r(null, 2, 3)]), false, 'a read after a completed write must see it');
  assert.equal(ok([w('a', 0, 1), w('b', 2, 3), r('a', 4, 5)]), false, 'a stale read');
  assert.equal(ok([r('a', 0, 1), w('a', 2, 3)]), false, 'a read of a value not yet written');
  assert.equal(ok([r('ghost', 0, 1)]), false, 'a read of a value never written');
});

test('concurrent operations may take effect in either order, but once a read saw the new value no later read sees the old', () => {
  // The write overlaps both reads: old then new is fine.
  assert.equal(ok([w('a', 0, 1), w('b', 2, 10), r('a', 3, 4), r('b', 5, 6)]), true);
  // New then old while the write is still going: not linearizable (the write took effect once).
  assert.equal(ok([w('a', 0, 1), w('b', 2, 10), r('b', 3, 4), r('a', 5, 6)]), false);
  // Two concurrent writes, two concurrent reads that see both orders: each read can be placed.
  assert.equal(ok([w('a', 0, 5), w('b', 0, 5), r('a', 6, 7), r('a', 8, 9)]), true);
  assert.equal(ok([w('a', 0, 5), w('b', 0, 5), r('a', 6, 7), r('b', 8, 9)]), false, 'after both writes completed the value cannot change');
  // Operations that touch in time are concurrent.
  assert.equal(ok([w('a', 0, 5), r('a', 5, 6)]), true);
  assert.equal(ok([w('a', 0, 5), r(null, 5, 6)]), true);
});

test('a write of unknown outcome may take effect at any time after it was sent, or never', () => {
  assert.equal(ok([w('a', 0, 1), w('b', 2, undefined), r('a', 3, 4), r('b', 5, 6), r('b', 7, 8)]), true);
  assert.equal(ok([w('a', 0, 1), w('b', 2, undefined), r('a', 3, 4)]), true, 'never');
  assert.equal(ok([w('a', 0, 1), w('b', 2, undefined), r('b', 3, 4), r('a', 5, 6)]), false, 'took effect, then undone');
  assert.equal(ok([w('b', 5, undefined), r('b', 0, 3)]), false, 'not before it was sent');
});

test('the minimal failing sub-history keeps what the failure needs and drops the rest', () => {
  const noise = [w('x1', 0, 1), r('x1', 2, 3), w('x2', 4, 5), r('x2', 6, 7), w('x3', 8, 9), r('x3', 10, 11)];
  const stale = [w('a', 20, 21), w('b', 22, 23), r('a', 24, 25)];
  const after = [w('c', 30, 31), r('c', 32, 33)];
  const history = [...noise, ...stale, ...after];
  assert.equal(ok(history), false);
  const witness = minimalFailing(history);
  assert.equal(ok(witness), false);
  // The stale read, the write it saw and the write it missed: nothing else.
  assert.deepEqual(witness.map((op) => op.value).sort(), ['a', 'a', 'b']);
  const lines = describeOps(witness, 0);
  assert.equal(lines.length, 3);
  assert.match(lines.join('\n'), /read -> "a"/);
});

test('a history of a few thousand operations checks quickly enough to run after every nemesis run', () => {
  const ops: RegisterOp[] = [];
  let t = 0;
  for (let i = 0; i < 1500; i++) {
    // Four clients, overlapping: each write overlaps the next read.
    ops.push(w(`v${i}`, t, t + 3));
    ops.push(r(i === 0 ? null : `v${i - 1}`, t + 1, t + 2));
    ops.push(r(`v${i}`, t + 4, t + 5));
    t += 6;
  }
  const result = checkRegister(ops);
  assert.equal(result.linearizable, true);
  assert.ok(result.explored < 100_000, `${result.explored} states`);
});

test('many writes of unknown outcome do not make the search explode, and the ones read still count', () => {
  const ops: RegisterOp[] = [w('start', 0, 1)];
  // 300 writes whose answers were lost, all overlapping everything after them.
  for (let i = 0; i < 300; i++) ops.push(w(`lost${i}`, 2 + i, undefined));
  ops.push(r('start', 400, 401), r('lost7', 402, 403), r('lost7', 404, 405), r('lost250', 406, 407));
  const result = checkRegister(ops);
  assert.equal(result.linearizable, true);
  assert.ok(result.explored < 10_000, `${result.explored} states`);
  // A value read, then an older one again: still caught.
  assert.equal(ok([...ops, r('lost7', 408, 409)]), false);
});
