import { test } from 'node:test';
import assert from 'node:assert/strict';
import { JSON_NESTING_MAX, parseExternalJson } from '../../src/base/index.js';

const nested = (depth: number, open = '[', close = ']') => `${open.repeat(depth)}${close.repeat(depth)}`;

test('external JSON parses up to the nesting limit and is refused one level deeper', () => {
  assert.equal(JSON.stringify(parseExternalJson(nested(JSON_NESTING_MAX))), nested(JSON_NESTING_MAX));
  assert.throws(() => parseExternalJson(nested(JSON_NESTING_MAX + 1)), { name: 'SyntaxError', message: /nested deeper than 128/ });
  const objects = `${'{"a":'.repeat(JSON_NESTING_MAX + 1)}1${'}'.repeat(JSON_NESTING_MAX + 1)}`;
  assert.throws(() => parseExternalJson(objects), SyntaxError);
  // A hundred thousand levels, which JSON.stringify cannot walk back, are refused before parsing.
  assert.throws(() => parseExternalJson(nested(100_000)), /nested deeper/);
});

test('brackets inside strings, escaped quotes included, do not count as nesting', () => {
  const text = JSON.stringify({ a: '['.repeat(1000), b: 'say \\"[[[\\" and "{{{"', c: [[1]] });
  assert.deepEqual(parseExternalJson(text), JSON.parse(text));
  assert.deepEqual(parseExternalJson(`{"n": 5}`, 1), { n: 5 });
  assert.throws(() => parseExternalJson(`${' '.repeat(10)}{"n": [5]}`, 1), /nested deeper than 1 levels/);
});

test('malformed JSON is still a SyntaxError', () => {
  assert.throws(() => parseExternalJson('{"n":'), SyntaxError);
  assert.throws(() => parseExternalJson(`${'x'.repeat(300)}`), SyntaxError);
});
