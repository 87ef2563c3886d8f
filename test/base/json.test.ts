import { test } from 'node:test';
import assert from 'node:assert/strict';
import { JSON_NESTING_MAX, parseExternalJson } from '../../src/base/index.js';

const nested = (depth: number, open = '[', close = ']') => `${open.repeat(depth)}${close.repeat(depth)}`;

test('external JSON parses up to the nesting limit and is refused one level deeper', () => {
  assert.equal(JSON.stringify(parseExternalJson(nested(JSON_NESTING_MAX))), nested(JSON_NESTING_MAX));
  assert.throws(() => parseExternalJson(nested(JSON_NESTING_MAX + 1)), { name: 'SyntaxError', message: /nested deeper than 128/ });
  const objects = `${'{"a":'.repeat(JSON_NESTING_MAX + 1)}1${'}'.repeat(JSON_NESTING_MAX + 1)}`;
  assert.throws(() => parseExternalJson(objects), SyntaxError);
  // A hundred thousand levels, which JSON.stringify cannot walk back, are refused before anything walks them.
  assert.throws(() => parseExternalJson(nested(100_000)), /nested deeper/);
  assert.throws(() => parseExternalJson(`${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}`), /nested deeper/);
});

test('brackets inside strings, escaped quotes included, do not count as nesting', () => {
  const text = JSON.stringify({ a: '['.repeat(1000), b: 'say \\"[[[\\" and "{{{"', c: [[1]] });
  assert.deepEqual(parseExternalJson(text), JSON.parse(text));
  assert.deepEqual(parseExternalJson(`{"n": 5}`, 1), { n: 5 });
  assert.throws(() => parseExternalJson(`${' '.repeat(10)}{"n": [5]}`, 1), /nested deeper than 1 levels/);
});

test('the depth counts arrays and objects in any member, not only the first', () => {
  // The root is level 1: a member holding nested(127) reaches level 128 exactly.
  const deepInLast = { a: 1, b: [2, { c: 'x' }], d: JSON.parse(nested(JSON_NESTING_MAX - 1)) as unknown };
  assert.deepEqual(parseExternalJson(JSON.stringify(deepInLast)), deepInLast);
  const tooDeepInLast = { ...deepInLast, e: [JSON.parse(nested(JSON_NESTING_MAX - 1)) as unknown] };
  assert.throws(() => parseExternalJson(JSON.stringify(tooDeepInLast)), /nested deeper than 128/);
  // An own "__proto__" member is a member like any other.
  assert.throws(() => parseExternalJson(`{"__proto__": ${nested(JSON_NESTING_MAX)}}`), /nested deeper than 128/);
  assert.deepEqual(Object.keys(parseExternalJson(`{"__proto__": ${nested(JSON_NESTING_MAX - 1)}}`) as object), ['__proto__']);
});

test('malformed JSON is still a SyntaxError', () => {
  assert.throws(() => parseExternalJson('{"n":'), SyntaxError);
  assert.throws(() => parseExternalJson(`${'x'.repeat(300)}`), SyntaxError);
});

test('an object naming a key twice is refused, at any depth; the same key in different objects is not', () => {
  for (const text of ['{"a":1,"a":2}', '{"a":1,"b":{"c":1,"c":1}}', '[{"x":1},{"y":2,"y":2}]', '{"a:b":1,"a":1,"a":2}', '{"k\\"":1,"k\\"":2}', '{"a":1,"\\u0061":2}']) {
    assert.throws(() => parseExternalJson(text), /names the same key more than once/, text);
  }
  for (const text of ['{"a":1,"b":{"a":1}}', '[{"a":1},{"a":2}]', '{"a":"x:y","b":"::"}', '{"a\\\\":":","b":1}', '{"a":{}}', '{"k\\"":1,"k":2}']) {
    assert.doesNotThrow(() => parseExternalJson(text), text);
  }
});

test('a lone surrogate in a string or a key is refused; a pair, and an escaped backslash before "u", are not', () => {
  for (const text of ['"\\ud800"', '{"a":"x\\uDC00y"}', '{"\\ud83d":1}', '["\\ude00\\ud83d"]', '{"a":"\\ud83d\\u0041"}']) {
    assert.throws(() => parseExternalJson(text), /lone surrogate/, text);
  }
  for (const text of ['"\\ud83d\\ude00"', '{"a":"\\uD83D\\uDE00"}', '"\\\\ud800"', '"caf\\u00e9"']) {
    assert.doesNotThrow(() => parseExternalJson(text), text);
  }
});
