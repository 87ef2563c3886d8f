/**
 * The recovery machine's table (src/node/recovery/recovery-machine.ts): its lifecycle edges are
 * the lifecycle table's, every state is reachable, an accepted event runs its edge's effect, an
 * ignored one changes nothing, and every event a state neither accepts nor ignores is refused —
 * a client's with the effects' typed error, any other with an assertion.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { InvariantError } from '../../src/base/assert.js';
import { MemoryLogger } from '../../src/base/log.js';
import { LIFECYCLE_EDGES, type NodeLifecycleState } from '../../src/node/lifecycle.js';
import {
  CLIENT_EVENTS,
  RECOVERY_EDGES,
  RECOVERY_IGNORED,
  RECOVERY_TRIGGERS,
  RecoveryMachine,
  edgeName,
  recoveryEdgeOf,
  type RecoveryEffect,
  type RecoveryEventKind,
  type RecoveryState,
} from '../../src/node/recovery/recovery-machine.js';

const STATES = Object.keys(RECOVERY_IGNORED) as RecoveryState[];
const EVENTS: readonly RecoveryEventKind[] = [
  'recover',
  'public-ledger-read',
  'trusted-by-recovering-service',
  'joined-network',
  'open-proposal-applied',
  'secrets-unsealed',
  'share-submitted',
  'key-reassembled',
  'recovered-secrets-applied',
  'private-domain-read',
  'private-domain-failed',
  'role-changed',
  'open-committed',
  'stop',
];

class Refused extends Error {
  constructor(readonly state: RecoveryState) {
    super(`refused in ${state}`);
  }
}

interface Event {
  readonly kind: RecoveryEventKind;
}

function machine(): { machine: RecoveryMachine<Event>; ran: RecoveryEffect[] } {
  const ran: RecoveryEffect[] = [];
  const m = new RecoveryMachine<Event>({ run: (effect) => void ran.push(effect), refusal: (state) => new Refused(state) }, new MemoryLogger());
  return { machine: m, ran };
}

/** The events that lead from Inactive to `state` (breadth first over the table and stop). */
function pathTo(state: RecoveryState): RecoveryEventKind[] {
  const paths = new Map<RecoveryState, RecoveryEventKind[]>([['Inactive', []]]);
  const queue: RecoveryState[] = ['Inactive'];
  while (queue.length > 0) {
    const from = queue.shift()!;
    for (const event of EVENTS) {
      const edge = recoveryEdgeOf(from, event);
      if (edge === undefined || paths.has(edge.to)) continue;
      paths.set(edge.to, [...paths.get(from)!, event]);
      queue.push(edge.to);
    }
  }
  const path = paths.get(state);
  assert.ok(path !== undefined, `${state} is reachable`);
  return path;
}

function machineIn(state: RecoveryState): ReturnType<typeof machine> {
  const made = machine();
  for (const event of pathTo(state)) made.machine.post({ kind: event });
  assert.equal(made.machine.state, state);
  made.ran.length = 0;
  return made;
}

test('every state is reachable, and each edge with a lifecycle trigger is the lifecycle table\'s edge to the same state', () => {
  for (const state of STATES) pathTo(state);
  const lifecycleStates = new Set<string>(LIFECYCLE_EDGES.map((e) => e.to));
  for (const edge of RECOVERY_EDGES.filter((e) => e.trigger !== undefined)) {
    const lifecycle = LIFECYCLE_EDGES.find((e) => e.trigger === edge.trigger);
    assert.ok(lifecycle !== undefined, `${edge.trigger} is a lifecycle edge`);
    assert.ok(lifecycleStates.has(edge.to), `${edgeName(edge)} ends in a lifecycle state`);
    assert.equal(lifecycle.to, edge.to as NodeLifecycleState, `${edgeName(edge)} takes ${edge.trigger} to the same state`);
  }
  assert.deepEqual([...new Set(RECOVERY_TRIGGERS)].sort(), ['private-ledger-restored', 'public-ledger-restored', 'recover', 'shares-reassembled', 'trusted-by-recovered-network']);
});

test('no state both accepts and ignores an event, and each (state, event) has one edge at most', () => {
  for (const state of STATES) {
    for (const event of RECOVERY_IGNORED[state]) assert.equal(recoveryEdgeOf(state, event), undefined, `${state} ignores or accepts ${event}, not both`);
  }
  const names = RECOVERY_EDGES.map((e) => `${e.from} ${e.event}`);
  assert.equal(new Set(names).size, names.length);
});

test('a recovery with members\' shares walks its edges in order, running each effect', () => {
  const { machine: m, ran } = machine();
  const walk: [RecoveryEventKind, RecoveryState][] = [
    ['recover', 'ReadingPublicLedger'],
    ['public-ledger-read', 'PartOfPublicNetwork'],
    ['open-proposal-applied', 'WaitingForShares'],
    ['share-submitted', 'WaitingForShares'],
    ['key-reassembled', 'WaitingForShares'],
    ['recovered-secrets-applied', 'ReadingPrivateLedger'],
    ['private-domain-read', 'PartOfNetwork'],
    ['open-committed', 'PartOfNetwork'],
    ['stop', 'Stopped'],
  ];
  for (const [event, state] of walk) {
    m.post({ kind: event });
    assert.equal(m.state, state, event);
  }
  assert.deepEqual(ran, ['take-lifecycle-edge', 'take-lifecycle-edge', 'none', 'check-and-record-share', 'check-key-and-record-chain', 'read-private-domain', 'enter-network', 'complete-recovery', 'close']);
  assert.equal(m.taken.size, walk.length);
});

test('sealing-based recovery and a failed read (edges outside the simulated procedure) walk their edges, running each effect', () => {
  const { machine: m, ran } = machine();
  for (const event of ['recover', 'public-ledger-read', 'secrets-unsealed', 'recovered-secrets-applied', 'private-domain-failed'] as const) m.post({ kind: event });
  assert.equal(m.state, 'Failed');
  assert.deepEqual(ran, ['take-lifecycle-edge', 'take-lifecycle-edge', 'record-unsealed-chain', 'read-private-domain', 'fail']);
  const outside = RECOVERY_EDGES.filter((e) => e.only !== undefined).map(edgeName);
  assert.deepEqual(outside.filter((name) => !m.taken.has(name)), [], 'the walk took every edge outside the simulated procedure');
  const joiner = machine();
  for (const event of ['trusted-by-recovering-service', 'open-proposal-applied', 'recovered-secrets-applied', 'private-domain-read', 'role-changed'] as const) joiner.machine.post({ kind: event });
  assert.equal(joiner.machine.state, 'PartOfNetwork');
  assert.deepEqual(joiner.ran, ['take-lifecycle-edge', 'none', 'read-private-domain', 'enter-network', 'open-if-primary']);
});

test('an ignored event changes nothing and runs no effect; a stopped machine ignores every event but a client\'s', () => {
  for (const state of STATES) {
    for (const event of RECOVERY_IGNORED[state]) {
      const { machine: m, ran } = machineIn(state);
      m.post({ kind: event });
      assert.equal(m.state, state);
      assert.deepEqual(ran, []);
    }
  }
  const { machine: stopped, ran } = machineIn('Stopped');
  for (const event of EVENTS.filter((e) => !CLIENT_EVENTS.includes(e))) stopped.post({ kind: event });
  assert.equal(stopped.state, 'Stopped');
  assert.deepEqual(ran, []);
});

/** Every (state, event) the table refuses: neither an edge nor ignored. */
function refusals(event: RecoveryEventKind): RecoveryState[] {
  return STATES.filter((state) => recoveryEdgeOf(state, event) === undefined && !RECOVERY_IGNORED[state].includes(event) && !(state === 'Stopped' && !CLIENT_EVENTS.includes(event)));
}

test('stop leads from every state to Stopped, closing; a stopped machine stops once', () => {
  for (const state of STATES.filter((s) => s !== 'Stopped')) {
    const { machine: m, ran } = machineIn(state);
    m.post({ kind: 'stop' });
    assert.equal(m.state, 'Stopped');
    assert.deepEqual(ran, ['close']);
  }
  assert.deepEqual(refusals('stop'), []);
});

// A store listener's or the role callback's notice may come in any state: no state refuses it.
const ANY_STATE: readonly RecoveryEventKind[] = ['open-proposal-applied', 'recovered-secrets-applied', 'role-changed', 'open-committed'];

test('a listener\'s notice (a service record applied or committed, the recovered chain applied, a role change) is accepted or ignored in every state', () => {
  for (const event of ANY_STATE) {
    assert.deepEqual(refusals(event), [], event);
    for (const state of STATES) machineIn(state).machine.post({ kind: event });
  }
});

for (const event of EVENTS.filter((e) => e !== 'stop' && !ANY_STATE.includes(e))) {
  const client = CLIENT_EVENTS.includes(event);
  test(`"${event}" where it is not accepted is refused with ${client ? 'the typed error of a client\'s event' : 'an assertion'}, and changes nothing`, () => {
    const states = refusals(event);
    assert.ok(states.length > 0, `some state refuses ${event}`);
    for (const state of states) {
      const { machine: m, ran } = machineIn(state);
      if (client) assert.throws(() => m.post({ kind: event }), (e: unknown) => e instanceof Refused && e.state === state, `${state} refuses ${event}`);
      else assert.throws(() => m.post({ kind: event }), (e: unknown) => e instanceof InvariantError && e.message.includes(`${state} does not accept "${event}"`), `${state} refuses ${event}`);
      assert.equal(m.state, state);
      assert.deepEqual(ran, []);
    }
  });
}
