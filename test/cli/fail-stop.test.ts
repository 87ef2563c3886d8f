/**
 * The node's fail-stop: an invariant broken while a request executes is logged as fatal, with its
 * stack, and ends the process with status 70 (the exit is injected here; `covenant node` passes
 * process.exit).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvariantError, assert as invariant } from '../../src/base/assert.js';
import { failStopOf, INVARIANT_EXIT_STATUS } from '../../src/cli/node-command.js';

test('a broken invariant is logged as fatal, then the process exits with status 70', () => {
  const events: string[] = [];
  const failStop = failStopOf({ fatal: (msg, fields) => events.push(`fatal ${msg} ${String(fields?.['reason']).split('\n')[0]}`) }, (status) => events.push(`exit ${status}`));
  let broken: InvariantError | undefined;
  try {
    invariant(false, 'the store went back in time');
  } catch (e) {
    broken = e as InvariantError;
  }
  failStop(broken!);
  assert.equal(INVARIANT_EXIT_STATUS, 70);
  assert.deepEqual(events, [
    'fatal an invariant broke while a request was executed: the node stops InvariantError: invariant violated: the store went back in time',
    'exit 70',
  ]);
});
