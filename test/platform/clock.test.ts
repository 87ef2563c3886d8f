/** The real clock's timers (src/platform/clock.ts). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock } from '../../src/platform/clock.js';

test('a timer longer than setTimeout allows (2^31 - 1 ms, ~24.8 days) waits instead of firing at once', async () => {
  const fired: string[] = [];
  const long = systemClock.setTimer(30 * 24 * 3600_000, () => fired.push('30 days'));
  const short = systemClock.setTimer(1, () => fired.push('1 ms'));
  await sleep(50);
  long.cancel();
  short.cancel();
  assert.deepEqual(fired, ['1 ms']);
});
