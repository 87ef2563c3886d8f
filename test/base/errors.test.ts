import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CovenantError } from '../../src/base/index.js';

test('an error answering a bad request carries no stack; a server error keeps its stack', () => {
  const limit = Error.stackTraceLimit;
  for (const status of [400, 401, 404, 409, 413]) {
    const e = new CovenantError('Bad', 'bad input', status);
    assert.doesNotMatch(e.stack ?? '', /\n\s+at /, `status ${status}`);
    assert.equal(e.message, 'bad input');
    assert.deepEqual(e.toBody(), { error: { code: 'Bad', message: 'bad input' } });
  }
  for (const status of [500, 503]) assert.match(new CovenantError('Broken', 'server side', status).stack ?? '', /\n\s+at /, `status ${status}`);
  assert.equal(Error.stackTraceLimit, limit, 'the global stack trace limit is restored');
});
