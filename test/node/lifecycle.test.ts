/** The node lifecycle table mirrors the spec's, and nothing outside it (or outside a flow's edges) can happen. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import { FLOW_TRIGGERS, LIFECYCLE_EDGES, Lifecycle, STATE_ALLOWANCES, edgeOf, type NodeLifecycleState } from '../../src/node/lifecycle.js';
import { RECOVERY_TRIGGERS } from '../../src/node/recovery/recovery-machine.js';

// The rows of the spec's node lifecycle table ("States and transitions"), as (from, to).
const SPEC_ROWS: [NodeLifecycleState, NodeLifecycleState][] = [
  ['Uninitialized', 'Initialized'],
  ['Initialized', 'PartOfNetwork'],
  ['Initialized', 'Pending'],
  ['Pending', 'PartOfNetwork'],
  ['Initialized', 'ReadingPublicLedger'],
  ['ReadingPublicLedger', 'PartOfPublicNetwork'],
  ['PartOfPublicNetwork', 'ReadingPrivateLedger'],
  ['ReadingPrivateLedger', 'PartOfNetwork'],
  ['Pending', 'PartOfPublicNetwork'],
];

test('every row of the spec table is an edge, every state has allowances, and only PartOfNetwork serves the application', () => {
  for (const [from, to] of SPEC_ROWS) assert.ok(LIFECYCLE_EDGES.some((e) => e.from === from && e.to === to), `${from} -> ${to}`);
  for (const state of Object.keys(STATE_ALLOWANCES) as NodeLifecycleState[]) {
    assert.equal(STATE_ALLOWANCES[state].applicationFrontend, state === 'PartOfNetwork', state);
    assert.equal(STATE_ALLOWANCES[state].privateDomain, state === 'PartOfNetwork', state);
  }
  assert.equal(STATE_ALLOWANCES.PartOfPublicNetwork.consensus, true, 'a recovering network runs consensus on the public domain');
  assert.equal(STATE_ALLOWANCES.Pending.consensus, false);
});

test('a flow takes its own edges in order; an undefined transition or another flow\'s edge fails an assertion', () => {
  const lifecycle = new Lifecycle(new MemoryLogger());
  lifecycle.transition('config', FLOW_TRIGGERS.join);
  lifecycle.transition('join', FLOW_TRIGGERS.join);
  assert.equal(lifecycle.state, 'Pending');
  assert.throws(() => lifecycle.transition('start', FLOW_TRIGGERS.start), /cannot take "start" from Pending/);
  assert.throws(() => lifecycle.transition('recover', FLOW_TRIGGERS.join), /may not take the edge "recover"/);
  assert.equal(lifecycle.state, 'Pending', 'a refused transition changes nothing');
  lifecycle.transition('trusted', FLOW_TRIGGERS.join);
  assert.equal(lifecycle.state, 'PartOfNetwork');
  assert.equal(lifecycle.allows.applicationFrontend, true);
  lifecycle.transition('stop', []);
  assert.equal(lifecycle.state, 'Stopped');
  assert.equal(edgeOf('Stopped', 'stop'), undefined, 'a stopped node stops once');
});

test('the recovery machine walks the spec recovery rows to PartOfNetwork; the start flow cannot', () => {
  const lifecycle = new Lifecycle(new MemoryLogger());
  const seen: NodeLifecycleState[] = [lifecycle.transition('config', FLOW_TRIGGERS.recover)];
  for (const trigger of ['recover', 'public-ledger-restored', 'shares-reassembled', 'private-ledger-restored'] as const) seen.push(lifecycle.transition(trigger, RECOVERY_TRIGGERS));
  assert.deepEqual(seen, ['Initialized', 'ReadingPublicLedger', 'PartOfPublicNetwork', 'ReadingPrivateLedger', 'PartOfNetwork']);
  assert.throws(() => new Lifecycle(new MemoryLogger()).transition('recover', FLOW_TRIGGERS.recover), /may not take the edge "recover"/, 'the recover flow posts to the machine instead');
  const other = new Lifecycle(new MemoryLogger());
  other.transition('config', FLOW_TRIGGERS.start);
  assert.throws(() => other.transition('recover', FLOW_TRIGGERS.start));
});
