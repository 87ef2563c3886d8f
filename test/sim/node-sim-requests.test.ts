/**
 * Client requests through each production node's request pipeline under the seeded simulator:
 * governance proposals and ballots (some sent to a backup, which forwards them), a JavaScript
 * application's committed writes and linearizable reads on any node, through crashes, restarts,
 * partitions and lossy links — every answer allowed, every acknowledged write committed, every
 * read linearizable; a run is a function of its seed; a broken invariant while a node executes a
 * request stops that node; and the read checker catches stale reads.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assert as invariant, InvariantError } from '../../src/base/assert.js';
import { parseTxId } from '../../src/base/ids.js';
import type { Route } from '../../src/http/route.js';
import { Violation } from '../../src/testing/sim/checker.js';
import { RequestSim, runRequestSim, staleReadProblem, type AckedWrite } from '../../src/testing/sim/node-sim-requests.js';

test('fixed seeds: governance, forwarded writes and a JavaScript endpoint through the pipeline keep every checker green under faults', async () => {
  let crashes = 0;
  let forwardedGovernance = 0;
  for (const seed of [1, 2, 3]) {
    const report = await runRequestSim({ seed, nodes: 3, steps: 1200, livenessStepsMax: 1500 });
    assert.ok(report.acknowledgedWrites > 20, `seed ${seed}: committed writes were acknowledged (${report.acknowledgedWrites})`);
    assert.ok(report.linearizableReads > 20, `seed ${seed}: linearizable reads were answered (${report.linearizableReads})`);
    assert.ok(report.forwardedAnswers > 10, `seed ${seed}: backups forwarded requests to the primary (${report.forwardedAnswers})`);
    assert.equal(Object.keys(report.answers).filter((label) => label.startsWith('5') && !label.startsWith('503')).length, 0, JSON.stringify(report.answers));
    forwardedGovernance += report.governance.filter((line) => line.includes('(backup): 200')).length;
    crashes += report.crashes;
  }
  assert.ok(crashes >= 3, `faults were injected (${crashes} crashes)`);
  assert.ok(forwardedGovernance > 0, 'some governance requests were sent to a backup and forwarded');
});

test('a ballot sent again after a refusal that left open whether it ran, and refused because the first closed its proposal, is no violation: the proposal is read back Accepted', async () => {
  // Seed 5018: the ballot on the application's deployment waits at a backup until the forward times
  // out (503), and the ballot sent again finds the proposal Accepted (400 ProposalNotOpen).
  const report = await runRequestSim({ seed: 5018, nodes: 3, steps: 2000, livenessStepsMax: 2000 });
  const ballots = report.governance.filter((line) => line.includes('/ballots/'));
  const retried = ballots.findIndex((line, i) => line.endsWith(': 503') && ballots[i + 1]?.endsWith(': 400'));
  assert.ok(retried >= 0, `the run holds the retried ballot: ${ballots.join('; ')}`);
  assert.ok(report.acknowledgedWrites > 20, 'the application was deployed and served writes after it');
});

test('a run with requests is a function of its seed', async () => {
  const a = await runRequestSim({ seed: 11, nodes: 3, steps: 500, livenessStepsMax: 1500 });
  const b = await runRequestSim({ seed: 11, nodes: 3, steps: 500, livenessStepsMax: 1500 });
  assert.deepEqual(a.trace, b.trace);
  assert.deepEqual(a.answers, b.answers);
  assert.deepEqual(a.governance, b.governance);
});

test('an invariant broken while a node executes a request stops that node: no answer, and the run reports it', async () => {
  const broken: Route = {
    method: 'GET',
    path: '/node/broken',
    summary: 'breaks an invariant',
    handler: () => {
      invariant(false, 'a request found what can never be');
    },
  };
  const sim = new RequestSim({ seed: 5, nodes: 3, steps: 0, livenessStepsMax: 0, extraRoutes: [broken] });
  try {
    await sim.setUp();
    const backup = sim.hosts.find((h) => h.node !== undefined && !h.node.isPrimary())!;
    const outcome = await sim.send(backup, 'GET', '/node/broken').then(
      (answer) => `answered ${answer.status}`,
      (e: unknown) => (e instanceof InvariantError ? 'no answer' : String(e)),
    );
    assert.equal(outcome, 'no answer');
    assert.equal(backup.node, undefined, 'the node stopped (its process ended)');
    assert.throws(
      () => sim.check(),
      (e: unknown) => e instanceof Violation && e.checker === 'invariant' && e.message.includes('a request found what can never be'),
    );
  } finally {
    sim.stopAll();
  }
});

test('the linearizable-read checker catches clients that read without asking for linearizability (a backup answers from its own, older state)', async () => {
  await assert.rejects(
    runRequestSim({ seed: 1, nodes: 3, steps: 1200, livenessStepsMax: 1500, readConsistency: 'default' }),
    (e: unknown) => e instanceof Violation && e.checker === 'linearizable-read',
  );
});

test('the linearizable-read checker: a read that misses an acknowledged write, or returns an older value, is stale', () => {
  const w = (value: string, seqno: number): AckedWrite => ({ key: 'k', value, seqno, txId: `2.${seqno}` });
  const acked = [w('a', 10), w('b', 20)];
  assert.equal(staleReadProblem('k', 'b', parseTxId('2.25')!, acked, acked), undefined, 'the newest value');
  assert.equal(staleReadProblem('k', 'c', parseTxId('2.25')!, acked, acked), undefined, 'a newer write not acknowledged yet');
  assert.equal(staleReadProblem('k', 'a', parseTxId('2.15')!, [w('a', 10)], acked), undefined, 'a read before b was acknowledged, at a state before it');
  assert.match(staleReadProblem('k', 'a', parseTxId('2.15')!, acked, acked)!, /misses the write 2\.20/);
  assert.match(staleReadProblem('k', 'a', parseTxId('2.25')!, acked, acked)!, /returned a .* older than b/);
  assert.match(staleReadProblem('k', undefined, parseTxId('2.25')!, acked, acked)!, /found nothing, though 2\.20 wrote it/);
});
