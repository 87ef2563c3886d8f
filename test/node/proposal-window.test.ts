/**
 * The window of recent proposals (src/node/proposal-window.ts) against a Map by seqno, the
 * structure it replaces: same lookups, same byte count, after any sequence of pushes (with gaps),
 * drops and clears, and across its compactions.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ProposalWindow } from '../../src/node/proposal-window.js';

interface Item {
  readonly seqno: number;
  readonly size: number;
}

type Op = { push: number; gap: boolean } | { dropThrough: number } | { clear: true };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ push: fc.integer({ min: 1, max: 400 }), gap: fc.integer({ min: 0, max: 19 }).map((n) => n === 0) }) },
  { weight: 2, arbitrary: fc.record({ dropThrough: fc.integer({ min: 0, max: 60 }) }) },
  { weight: 1, arbitrary: fc.constant({ clear: true as const }) },
);

/** The model: a Map by seqno, oldest first, trimmed to the budget as the window is. */
function model(maxBytes: number) {
  const map = new Map<number, Item>();
  let bytes = 0;
  const drop = (seqno: number) => {
    bytes -= map.get(seqno)!.size;
    map.delete(seqno);
  };
  return {
    map,
    bytes: () => bytes,
    push(item: Item) {
      const newest = [...map.keys()].pop();
      if (newest !== undefined && item.seqno !== newest + 1) {
        map.clear();
        bytes = 0;
      }
      map.set(item.seqno, item);
      bytes += item.size;
      for (const seqno of map.keys()) {
        if (bytes <= maxBytes) break;
        drop(seqno);
      }
    },
    dropThrough(seqno: number) {
      for (const s of [...map.keys()]) if (s <= seqno) drop(s);
    },
    clear() {
      map.clear();
      bytes = 0;
    },
  };
}

test('the window answers as a Map by seqno trimmed to its byte budget', () => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 300 }), fc.integer({ min: 100, max: 5000 }), (ops, maxBytes) => {
      const window = new ProposalWindow<Item>(maxBytes, (i) => i.size);
      const expected = model(maxBytes);
      let next = 1;
      for (const op of ops) {
        if ('push' in op) {
          if (op.gap) next += 3;
          const item = { seqno: next++, size: op.push };
          window.push(item);
          expected.push(item);
        } else if ('dropThrough' in op) {
          const through = next - op.dropThrough;
          window.dropThrough(through);
          expected.dropThrough(through);
        } else {
          window.clear();
          expected.clear();
        }
        assert.equal(window.size, expected.map.size);
        assert.equal(window.bytes, expected.bytes());
      }
      for (let s = next - 40; s <= next + 1; s++) assert.equal(window.get(s), expected.map.get(s), `seqno ${s}`);
    }),
    { numRuns: 300 },
  );
});

test('a long run of pushes and drops keeps every live entry reachable across compactions', () => {
  const window = new ProposalWindow<Item>(Number.POSITIVE_INFINITY, () => 1);
  for (let seqno = 1; seqno <= 50_000; seqno++) {
    window.push({ seqno, size: 1 });
    if (seqno % 100 === 0) window.dropThrough(seqno - 3000);
  }
  assert.equal(window.size, 3000);
  assert.equal(window.get(47_000), undefined, 'dropped');
  assert.equal(window.get(47_001)?.seqno, 47_001);
  assert.equal(window.get(50_000)?.seqno, 50_000);
  assert.equal(window.get(50_001), undefined);
  window.dropThrough(Number.POSITIVE_INFINITY);
  assert.equal(window.size, 0);
  assert.equal(window.bytes, 0);
});
