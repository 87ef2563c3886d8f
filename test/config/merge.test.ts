import { test } from 'node:test';
import assert from 'node:assert/strict';
import { deepMerge } from '../../src/config/index.js';

test('objects merge recursively; arrays and scalars are replaced', () => {
  const base = { a: { b: 1, c: [1, 2], d: { e: 'x' } }, f: 'keep' };
  const merged = deepMerge<unknown>(base, { a: { c: [3], d: { g: true } }, h: null });
  assert.deepEqual(merged, { a: { b: 1, c: [3], d: { e: 'x', g: true } }, f: 'keep', h: null });
  assert.deepEqual(base, { a: { b: 1, c: [1, 2], d: { e: 'x' } }, f: 'keep' }, 'base is not modified');
});

test('a scalar replaces an object and an object replaces a scalar', () => {
  assert.deepEqual(deepMerge<unknown>({ a: { b: 1 } }, { a: 2 }), { a: 2 });
  assert.deepEqual(deepMerge<unknown>({ a: 2 }, { a: { b: 1 } }), { a: { b: 1 } });
});

test('undefined in a fragment keeps the base value', () => {
  assert.deepEqual(deepMerge({ a: 1, b: 2 }, { a: undefined, b: 3 }), { a: 1, b: 3 });
  assert.deepEqual(deepMerge({ a: 1 }, undefined as never), { a: 1 });
});

test('a "__proto__" key from JSON stays data and never changes a prototype', () => {
  const merged = deepMerge<unknown>({}, JSON.parse('{"__proto__": {"polluted": true}}')) as Record<string, unknown>;
  assert.equal(Object.getPrototypeOf(merged), Object.prototype);
  assert.equal(({} as Record<string, unknown>)['polluted'], undefined);
  assert.deepEqual(Object.keys(merged), ['__proto__']);
});
