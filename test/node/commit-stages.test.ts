/** The stages of a committed write: each milestone timed from the request read, on the node's clock, bounded. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { CommitStages, type CommitStage, type CommitStagesHost } from '../../src/node/write/commit-stages.js';
import { commitStageTracesMax } from '../../src/node/limits.js';

function setup() {
  const clock = new ManualClock();
  const node = { proposed: 0, written: 0, durable: 0, backup: 0, commit: 0 };
  const host: CommitStagesHost = {
    clock,
    proposedSeqno: () => node.proposed,
    ledgerLastSeqno: () => node.written,
    durableSeqno: () => node.durable,
    backupMatchSeqno: () => node.backup,
    commitSeqno: () => node.commit,
  };
  const recorded: [CommitStage, number][] = [];
  const stages = new CommitStages(host, { commitStage: (stage, seconds) => recorded.push([stage, Math.round(seconds * 1000)]) });
  return { clock, node, stages, recorded };
}

test('a committed write: each milestone is the time from its request read, recorded once it is answered', () => {
  const { clock, node, stages, recorded } = setup();
  stages.requestRead();
  clock.advance(1);
  const trace = stages.executed(5);
  clock.advance(2);
  node.proposed = 5;
  stages.check();
  clock.advance(1);
  stages.signed(6);
  node.proposed = 6;
  node.written = 6;
  stages.check();
  clock.advance(3);
  node.durable = 6;
  stages.check();
  clock.advance(2);
  node.backup = 6;
  stages.check();
  assert.deepEqual(recorded, [], 'nothing recorded before the answer');
  stages.check(true);
  clock.advance(1);
  node.commit = 6;
  clock.advance(1);
  stages.answered(trace, true);
  assert.deepEqual(new Map(recorded), new Map<CommitStage, number>([
    ['executed', 1],
    ['framed', 3],
    ['signed', 4],
    ['appended', 4],
    ['signature_appended', 4],
    ['synced', 7],
    ['signature_synced', 7],
    // The backup's acknowledgement is read only when a consensus message arrived (check(true)).
    ['backup_acked', 9],
    ['committed', 11],
    ['answered', 11],
  ]));
});

test('a write whose wait ends uncommitted is forgotten; none is traced without timings or a request read', () => {
  const { node, stages, recorded } = setup();
  stages.requestRead();
  const trace = stages.executed(3);
  node.commit = 10;
  stages.answered(trace, false);
  assert.deepEqual(recorded, []);
  assert.equal(stages.executed(4), undefined, 'no request read before it');
  const untimed = new CommitStages({ clock: new ManualClock(), proposedSeqno: () => 0, ledgerLastSeqno: () => 0, durableSeqno: () => 0, backupMatchSeqno: () => 0, commitSeqno: () => 0 }, undefined);
  untimed.requestRead();
  assert.equal(untimed.executed(1), undefined);
});

test(`at most ${commitStageTracesMax} writes are traced at once`, () => {
  const { stages } = setup();
  const traces = [];
  for (let i = 1; i <= commitStageTracesMax + 1; i++) {
    stages.requestRead();
    traces.push(stages.executed(i));
  }
  assert.equal(traces.filter((t) => t !== undefined).length, commitStageTracesMax);
  assert.equal(traces.at(-1), undefined);
  stages.answered(traces[0], false);
  stages.requestRead();
  assert.notEqual(stages.executed(commitStageTracesMax + 2), undefined, 'room again once one ended');
});
