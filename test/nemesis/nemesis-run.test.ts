/**
 * A short nemesis run with a fixed seed (npm run nemesis runs longer ones): three real node
 * processes under clients on four keys while the seed's faults hit them (SIGKILL and restart,
 * SIGSTOP of the primary, kills right after a snapshot or a chunk was asked for). Faults come one at
 * a time and each waits until the network is whole again, so the run always completes; the
 * history must be linearizable and every committed write must still be there.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runNemesis } from '../../src/testing/nemesis/run.js';

test('a short nemesis run: faults injected, every key linearizable, no committed write missing', async () => {
  const lines: string[] = [];
  const report = await runNemesis({ seconds: 5, seed: 3, log: (line) => lines.push(line) });
  const faults = Object.values(report.faults).reduce((a, b) => a + b, 0);
  assert.deepEqual(report.violations, [], `seed ${report.seed}:\n${lines.join('\n')}\n${JSON.stringify(report.violations, null, 2)}`);
  assert.ok(faults >= 2, `faults were injected (${JSON.stringify(report.faults)})`);
  assert.ok(report.writes.committed > 20 && report.reads.answered > 20, JSON.stringify(report));
  // Every committed write was read back from the ledger, and the history had something to judge.
  assert.equal(report.checkedCommittedWrites, report.writes.committed);
  assert.ok(report.searchStates >= report.reads.answered);
});
