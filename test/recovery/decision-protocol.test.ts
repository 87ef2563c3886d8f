import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { InvariantError } from '../../src/base/index.js';
import {
  RecoveryDecision,
  compareLedgerPositions,
  isRecoveryError,
  parseDecisionMessage,
  type DecisionMessage,
  type DecisionOutput,
  type LedgerPosition,
  type RecoveryDecisionInit,
  type RecoveryErrorCode,
} from '../../src/recovery/index.js';

const code = (c: RecoveryErrorCode) => (e: unknown) => isRecoveryError(e, c);
const RETRY_MS = 100;

function locations(names: readonly string[]) {
  return names.map((name) => ({ name, address: `${name}.example:8000` }));
}

function make(self: string, names: readonly string[], position: LedgerPosition, more: Partial<RecoveryDecisionInit> = {}): RecoveryDecision {
  return new RecoveryDecision({ self, expected: locations(names), position, failoverTimeoutMs: 0, retryIntervalMs: RETRY_MS, ...more });
}

const gossip = (view: number, seqno: number): DecisionMessage => ({ kind: 'Gossip', position: { view, seqno } });
const vote = (candidate: string, heardAll = true): DecisionMessage => ({ kind: 'Vote', candidate, heard_all: heardAll });
const sent = (out: DecisionOutput) => out.send.map((s) => `${s.message.kind}->${s.to}`).sort();

/**
 * A perfect network: starts every instance, then delivers every message sent (in order, each
 * through JSON and the parser) until none is left; ticks only when told to. Returns each
 * location's decision.
 */
function runToQuiet(instances: Map<string, RecoveryDecision>, maxMessages = 10_000): void {
  const queue: { from: string; to: string; message: DecisionMessage }[] = [];
  const enqueue = (from: string, out: DecisionOutput) => {
    for (const s of out.send) queue.push({ from, to: s.to, message: parseDecisionMessage(JSON.parse(JSON.stringify(s.message))) });
  };
  for (const [name, instance] of instances) enqueue(name, instance.tick(0));
  for (let delivered = 0; queue.length > 0; delivered++) {
    assert.ok(delivered < maxMessages, 'the protocol goes quiet');
    const m = queue.shift()!;
    enqueue(m.to, instances.get(m.to)!.receive(m.from, m.message));
  }
}

function network(positions: Record<string, LedgerPosition>, more: Partial<RecoveryDecisionInit> = {}, order?: readonly string[]): Map<string, RecoveryDecision> {
  const names = order ?? Object.keys(positions);
  return new Map(names.map((name) => [name, make(name, names, positions[name]!, more)]));
}

test('happy path, 3 locations: the best ledger opens by election, the others join it', () => {
  const instances = network({ a: { view: 1, seqno: 10 }, b: { view: 2, seqno: 5 }, c: { view: 1, seqno: 20 } });
  runToQuiet(instances);
  assert.deepEqual(instances.get('b')!.decision, { kind: 'Open', openKind: 'Election' });
  assert.deepEqual(instances.get('a')!.decision, { kind: 'Join', target: 'b', targetAddress: 'b.example:8000' });
  assert.deepEqual(instances.get('c')!.decision, { kind: 'Join', target: 'b', targetAddress: 'b.example:8000' });
  assert.equal(instances.get('b')!.phase, 'Open');
  assert.equal(instances.get('a')!.phase, 'Join');
  assert.deepEqual(instances.get('a')!.vote, { candidate: 'b', heardAll: true, castAtMs: 0 });
  assert.match(instances.get('b')!.status(), /^Open \(Election\): this location opened the service at 0 ms with votes from/);
  assert.equal(instances.get('c')!.status(), 'Join: b opened the service; restarting as its joiner (b.example:8000)');
});

test('the best ledger: the higher view of the last signature wins over a higher seqno, then the higher seqno', () => {
  assert.ok(compareLedgerPositions({ view: 2, seqno: 5 }, { view: 1, seqno: 100 }) < 0);
  assert.ok(compareLedgerPositions({ view: 2, seqno: 5 }, { view: 2, seqno: 7 }) > 0);
  assert.equal(compareLedgerPositions({ view: 3, seqno: 9 }, { view: 3, seqno: 9 }), 0);
  const byView = network({ a: { view: 2, seqno: 5 }, b: { view: 1, seqno: 100 }, c: { view: 1, seqno: 99 } });
  runToQuiet(byView);
  assert.equal(byView.get('a')!.decision?.kind, 'Open');
  const bySeqno = network({ a: { view: 2, seqno: 5 }, b: { view: 2, seqno: 7 }, c: { view: 1, seqno: 99 } });
  runToQuiet(bySeqno);
  assert.equal(bySeqno.get('b')!.decision?.kind, 'Open');
});

test('equal ledgers: the smallest location name wins, whatever the configuration order', () => {
  const same = { view: 4, seqno: 40 };
  const instances = network({ carol: same, bob: same, alice: same, dave: { view: 4, seqno: 39 } }, {}, ['dave', 'carol', 'bob', 'alice']);
  runToQuiet(instances);
  assert.deepEqual(instances.get('alice')!.decision, { kind: 'Open', openKind: 'Election' });
  for (const name of ['bob', 'carol', 'dave']) assert.equal((instances.get(name)!.decision as { target: string }).target, 'alice');
});

test('a single location opens by itself at its first tick', () => {
  const solo = make('a', ['a'], { view: 1, seqno: 1 });
  assert.equal(solo.phase, 'Gossip');
  const out = solo.tick(0);
  assert.deepEqual(out, { send: [], decision: { kind: 'Open', openKind: 'Election' } });
  assert.equal(solo.phase, 'Open');
  assert.deepEqual(solo.tick(RETRY_MS * 10), { send: [] }, 'the decision is reported once');
  assert.deepEqual(solo.decision, { kind: 'Open', openKind: 'Election' });
});

test('every set of 1 to 7 positions elects the best ledger, and the others join it (property)', () => {
  const names = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
  fc.assert(
    fc.property(fc.array(fc.record({ view: fc.integer({ min: 0, max: 3 }), seqno: fc.integer({ min: 0, max: 4 }) }), { minLength: 1, maxLength: 7 }), (list) => {
      const positions = Object.fromEntries(list.map((p, i) => [names[i]!, p]));
      const instances = network(positions);
      runToQuiet(instances);
      // The oracle: the highest (view, seqno), then the smallest name.
      const best = [...Object.entries(positions)].sort(([n1, p1], [n2, p2]) => p2.view - p1.view || p2.seqno - p1.seqno || n1.localeCompare(n2))[0]![0];
      for (const [name, instance] of instances) {
        assert.deepEqual(instance.decision, name === best ? { kind: 'Open', openKind: 'Election' } : { kind: 'Join', target: best, targetAddress: `${best}.example:8000` });
      }
    }),
    { numRuns: 200 },
  );
});

test('messages: the documented shapes parse to themselves; anything else is InvalidDecisionMessage', () => {
  const good: unknown[] = [
    { kind: 'Gossip', position: { view: 4, seqno: 1207 } },
    { kind: 'Gossip', position: { view: 0, seqno: 0 } },
    { kind: 'Vote', candidate: 'b', heard_all: true },
    { kind: 'Vote', candidate: 'x'.repeat(256), heard_all: false },
    { kind: 'IAmOpen', open_kind: 'Election' },
    { kind: 'IAmOpen', open_kind: 'Failover' },
  ];
  for (const m of good) assert.deepEqual(parseDecisionMessage(JSON.parse(JSON.stringify(m))), m);
  const bad: unknown[] = [
    undefined,
    null,
    'Gossip',
    7,
    [],
    {},
    { kind: 'gossip', position: { view: 1, seqno: 1 } },
    { kind: 'Gossip' },
    { kind: 'Gossip', position: null },
    { kind: 'Gossip', position: { view: 1 } },
    { kind: 'Gossip', position: { view: -1, seqno: 1 } },
    { kind: 'Gossip', position: { view: 1, seqno: 0.5 } },
    { kind: 'Gossip', position: { view: 1, seqno: 2 ** 53 } },
    { kind: 'Gossip', position: { view: '1', seqno: 1 } },
    { kind: 'Gossip', position: { view: 1, seqno: 1 }, from: 'a' },
    { kind: 'Vote', candidate: 'b' },
    { kind: 'Vote', candidate: '', heard_all: true },
    { kind: 'Vote', candidate: 'x'.repeat(257), heard_all: true },
    { kind: 'Vote', candidate: ['b'], heard_all: true },
    { kind: 'Vote', candidate: 'b', heard_all: 1 },
    { kind: 'IAmOpen' },
    { kind: 'IAmOpen', open_kind: 'election' },
    { kind: 'IAmOpen', open_kind: 'Quorum' },
    Object.assign(Object.create({ inherited: true }) as object, { kind: 'IAmOpen', open_kind: 'Election' }),
  ];
  for (const m of bad) {
    assert.throws(() => parseDecisionMessage(m), code('InvalidDecisionMessage'), JSON.stringify(m) ?? String(m));
  }
  try {
    parseDecisionMessage({ kind: 'Vote', candidate: 'b', heard_all: 'yes' });
  } catch (e) {
    assert.ok(isRecoveryError(e));
    assert.equal(e.status, 400);
    assert.match(e.message, /heard_all is not a boolean/);
  }
});

test('messages from unknown locations, or claiming to be this one, are ignored', () => {
  const b = make('b', ['a', 'b', 'c'], { view: 9, seqno: 9 });
  b.tick(0);
  for (const from of ['mallory', 'b', '']) {
    assert.deepEqual(b.receive(from, gossip(1, 1)), { send: [] });
    assert.deepEqual(b.receive(from, vote('b')), { send: [] });
    assert.deepEqual(b.receive(from, { kind: 'IAmOpen', open_kind: 'Election' }), { send: [] });
  }
  assert.equal(b.phase, 'Gossip');
  assert.equal(b.status(), 'Gossip: heard 1 of 3 locations; waiting for gossip from a, c');
  // A vote for another location is not this one's to count.
  b.receive('a', vote('c'));
  b.receive('c', vote('c'));
  b.receive('a', gossip(1, 1));
  b.receive('c', gossip(1, 1));
  assert.equal(b.vote?.candidate, 'b');
  assert.match(b.status(), /votes from b \(1 of 2 needed\)/);
});

test('the configuration is checked: InvalidDecisionConfiguration', () => {
  const ok: RecoveryDecisionInit = { self: 'a', expected: locations(['a', 'b']), position: { view: 1, seqno: 1 }, failoverTimeoutMs: 0, retryIntervalMs: 1 };
  assert.doesNotThrow(() => new RecoveryDecision(ok));
  const broken: Partial<RecoveryDecisionInit>[] = [
    { self: 'z' },
    { self: '' },
    { expected: [] },
    { expected: locations(['a', 'b', 'a']) },
    { expected: locations(['a', '']) },
    { expected: locations(Array.from({ length: 65 }, (_, i) => (i === 0 ? 'a' : `n${i}`))) },
    { position: { view: -1, seqno: 1 } },
    { position: { view: 1, seqno: Number.NaN } },
    { failoverTimeoutMs: -1 },
    { failoverTimeoutMs: 1.5 },
    { retryIntervalMs: 0 },
    { retryIntervalMs: Number.POSITIVE_INFINITY },
  ];
  for (const change of broken) {
    assert.throws(() => new RecoveryDecision({ ...ok, ...change }), code('InvalidDecisionConfiguration'), JSON.stringify(change));
  }
  const a = new RecoveryDecision(ok);
  assert.throws(() => a.tick(-1), InvariantError);
  assert.throws(() => a.tick(Number.NaN), InvariantError);
});

test('retries: Gossip goes to every other location each retry interval, the Vote to its candidate, until this location decides', () => {
  const a = make('a', ['a', 'b', 'c'], { view: 1, seqno: 1 });
  assert.deepEqual(sent(a.tick(0)), ['Gossip->b', 'Gossip->c']);
  assert.deepEqual(sent(a.tick(RETRY_MS - 1)), [], 'nothing before the interval');
  assert.deepEqual(sent(a.tick(1)), ['Gossip->b', 'Gossip->c']);
  assert.deepEqual(a.receive('b', gossip(1, 5)), { send: [] });
  assert.deepEqual(sent(a.tick(RETRY_MS / 2)), []);
  // Hearing the last position casts the vote, sent at once.
  assert.deepEqual(sent(a.receive('c', gossip(1, 3))), ['Vote->b']);
  assert.equal(a.phase, 'Vote');
  assert.equal(a.status(), 'Vote: voted for b (having heard all); waiting for IAmOpen');
  assert.deepEqual(sent(a.tick(RETRY_MS / 2)), ['Gossip->b', 'Gossip->c'], 'the Gossip timer runs on');
  assert.deepEqual(sent(a.tick(RETRY_MS / 2)), ['Vote->b'], 'the Vote has its own timer');
  const repeated = a.tick(RETRY_MS * 5);
  assert.deepEqual(sent(repeated), ['Gossip->b', 'Gossip->c', 'Vote->b'], 'a long pause sends each message once');
  assert.deepEqual(repeated.send.find((s) => s.message.kind === 'Vote')!.message, { kind: 'Vote', candidate: 'b', heard_all: true });
  // The candidate's IAmOpen acknowledges the vote: the decision ends every retry.
  assert.deepEqual(a.receive('b', { kind: 'IAmOpen', open_kind: 'Election' }), { send: [], decision: { kind: 'Join', target: 'b', targetAddress: 'b.example:8000' } });
  assert.deepEqual(a.tick(RETRY_MS * 3), { send: [] });
});

test('a location never opens by election without heard_all votes from a majority; repeats count once', () => {
  const names = ['a', 'b', 'c', 'd', 'e'];
  const a = make('a', names, { view: 5, seqno: 5 });
  a.tick(0);
  assert.equal(a.receive('b', vote('a')).decision, undefined);
  assert.equal(a.receive('b', vote('a')).decision, undefined, 'a duplicate');
  assert.equal(a.receive('c', vote('a', false)).decision, undefined, 'a vote without heard_all counts for nothing here');
  assert.equal(a.receive('c', vote('a', false)).decision, undefined);
  assert.equal(a.phase, 'Gossip');
  // Votes cast after hearing all prove this is the best ledger: a opens with a majority even before it heard all.
  const out = a.receive('d', vote('a'));
  assert.equal(out.decision, undefined, '2 of 3');
  const opening = a.receive('e', vote('a'));
  assert.deepEqual(opening.decision, { kind: 'Open', openKind: 'Election' });
  assert.deepEqual(sent(opening), ['IAmOpen->b', 'IAmOpen->c', 'IAmOpen->d', 'IAmOpen->e']);
  assert.equal(a.vote, undefined, 'it opened without having voted itself');
});

test('an open location answers Gossip and Vote with IAmOpen, and warns once of another IAmOpen (a fork)', () => {
  const b = make('b', ['a', 'b', 'c'], { view: 2, seqno: 2 });
  b.tick(0);
  b.receive('a', gossip(1, 1));
  b.receive('c', gossip(1, 1));
  const opening = b.receive('a', vote('b'));
  assert.deepEqual(opening.decision, { kind: 'Open', openKind: 'Election' });
  assert.deepEqual(b.receive('c', gossip(1, 1)), { send: [{ to: 'c', message: { kind: 'IAmOpen', open_kind: 'Election' } }] });
  assert.deepEqual(b.receive('a', vote('b')), { send: [{ to: 'a', message: { kind: 'IAmOpen', open_kind: 'Election' } }] });
  assert.deepEqual(b.tick(RETRY_MS * 10), { send: [] }, 'an open location sends nothing of its own accord');
  const fork = b.receive('c', { kind: 'IAmOpen', open_kind: 'Failover' });
  assert.deepEqual(fork.send, []);
  assert.match(fork.warning ?? '', /c says it opened the service \(Failover\).*forked/);
  assert.equal(b.receive('c', { kind: 'IAmOpen', open_kind: 'Failover' }).warning, undefined, 'warned once');
  assert.match(b.status(), /FORK: also opened by c$/);
  assert.deepEqual(b.decision, { kind: 'Open', openKind: 'Election' });
});

test('IAmOpen makes an undecided location join its sender, finally', () => {
  const a = make('a', ['a', 'b', 'c'], { view: 1, seqno: 1 });
  a.tick(0);
  const out = a.receive('c', { kind: 'IAmOpen', open_kind: 'Failover' });
  assert.deepEqual(out, { send: [], decision: { kind: 'Join', target: 'c', targetAddress: 'c.example:8000' } });
  assert.deepEqual(a.receive('b', { kind: 'IAmOpen', open_kind: 'Election' }), { send: [] });
  assert.deepEqual(a.receive('b', gossip(1, 1)), { send: [] });
  assert.deepEqual(a.decision, { kind: 'Join', target: 'c', targetAddress: 'c.example:8000' });
  assert.equal(a.phase, 'Join');
});

test('a restart after voting: the new instance votes the same, and the candidate counts each voter once', () => {
  const names = ['a', 'b', 'c'];
  const positions = { a: { view: 1, seqno: 10 }, b: { view: 2, seqno: 1 }, c: { view: 1, seqno: 3 } };
  const hearAll = (instance: RecoveryDecision, self: string): DecisionOutput[] =>
    names.filter((n) => n !== self).map((n) => instance.receive(n, gossip(positions[n as 'a'].view, positions[n as 'a'].seqno)));
  let a = make('a', names, positions.a);
  a.tick(0);
  hearAll(a, 'a');
  assert.equal(a.vote?.candidate, 'b');
  // a crashes: its protocol state is gone, its ledger position is not.
  a = make('a', names, positions.a);
  a.tick(0);
  assert.equal(a.vote, undefined);
  const outs = hearAll(a, 'a');
  assert.deepEqual(a.vote, { candidate: 'b', heardAll: true, castAtMs: 0 });
  assert.deepEqual(outs.flatMap((o) => o.send), [{ to: 'b', message: { kind: 'Vote', candidate: 'b', heard_all: true } }]);

  // b restarts after receiving a's vote: the votes are gone, a's retries bring them back.
  let b = make('b', names, positions.b);
  b.tick(0);
  assert.equal(b.receive('a', vote('b')).decision, undefined);
  b = make('b', names, positions.b);
  b.tick(0);
  assert.equal(b.receive('a', vote('b')).decision, undefined, 'one vote of the two needed');
  assert.equal(b.receive('a', vote('b')).decision, undefined, 'the same voter again');
  hearAll(b, 'b');
  assert.deepEqual(b.decision, { kind: 'Open', openKind: 'Election' }, 'its own vote makes the majority');
});

test('failover off: a location waits for every position however long it takes', () => {
  const a = make('a', ['a', 'b', 'c'], { view: 9, seqno: 9 });
  a.tick(0);
  a.receive('b', gossip(1, 1));
  for (let i = 0; i < 100; i++) a.tick(60_000);
  assert.equal(a.phase, 'Gossip');
  assert.equal(a.vote, undefined);
  assert.equal(a.status(), 'Gossip: heard 2 of 3 locations; waiting for gossip from c');
});

test('failover: after the timeout a location votes for the best ledger heard so far, and opens only after its own timeout', () => {
  const T = 1000;
  const a = make('a', ['a', 'b', 'c'], { view: 2, seqno: 2 }, { failoverTimeoutMs: T });
  a.tick(0);
  a.receive('b', gossip(1, 1));
  // b's failover vote arrives early: it does not count before a's own timeout.
  assert.equal(a.receive('b', vote('a', false)).decision, undefined);
  assert.match(a.status(), /failover vote in 1000 ms$/);
  assert.equal(a.tick(T - 1).decision, undefined);
  assert.equal(a.vote, undefined);
  const out = a.tick(1);
  assert.deepEqual(a.vote, { candidate: 'a', heardAll: false, castAtMs: T });
  assert.deepEqual(out.decision, { kind: 'Open', openKind: 'Failover' }, 'its own timeout has elapsed and votes from a majority are in');
  assert.deepEqual(sent(out), ['IAmOpen->b', 'IAmOpen->c']);
  assert.equal(out.send[0]!.message.kind === 'IAmOpen' && out.send[0]!.message.open_kind, 'Failover');
});

test('failover: a location alone opens once the timeout has elapsed again since its vote', () => {
  const T = 500;
  const a = make('a', ['a', 'b', 'c'], { view: 1, seqno: 1 }, { failoverTimeoutMs: T });
  a.tick(0);
  a.tick(T);
  assert.deepEqual(a.vote, { candidate: 'a', heardAll: false, castAtMs: T });
  assert.equal(a.phase, 'Vote');
  assert.match(a.status(), /^Vote: voted for itself \(after the failover timeout\); votes from a \(1 of 2 needed\); failover opening in 500 ms$/);
  assert.equal(a.tick(T - 1).decision, undefined);
  assert.deepEqual(a.tick(1).decision, { kind: 'Open', openKind: 'Failover' });
  assert.match(a.status(), /^Open \(Failover\): this location opened the service at 1000 ms/);
});

test('failover: a location that voted for another waits for its IAmOpen; votes after hearing all still open by election', () => {
  const T = 300;
  const c = make('c', ['a', 'b', 'c'], { view: 1, seqno: 1 }, { failoverTimeoutMs: T });
  c.tick(0);
  c.receive('b', gossip(5, 5));
  assert.deepEqual(sent(c.tick(T)), ['Gossip->a', 'Gossip->b', 'Vote->b']);
  assert.deepEqual(c.vote, { candidate: 'b', heardAll: false, castAtMs: T });
  for (let i = 0; i < 20; i++) assert.equal(c.tick(T).decision, undefined);
  assert.equal(c.phase, 'Vote');

  const b = make('b', ['a', 'b', 'c'], { view: 5, seqno: 5 }, { failoverTimeoutMs: T });
  b.tick(0);
  b.receive('a', gossip(1, 1));
  b.receive('c', gossip(1, 1));
  assert.deepEqual(b.vote, { candidate: 'b', heardAll: true, castAtMs: 0 });
  assert.deepEqual(b.receive('a', vote('b')).decision, { kind: 'Open', openKind: 'Election' }, 'before any timeout');
});

test('the failover vote of an instance that then hears all stays its only vote', () => {
  const a = make('a', ['a', 'b', 'c'], { view: 1, seqno: 1 }, { failoverTimeoutMs: 100 });
  a.tick(0);
  a.tick(100);
  assert.deepEqual(a.vote, { candidate: 'a', heardAll: false, castAtMs: 100 });
  a.receive('b', gossip(3, 3));
  a.receive('c', gossip(2, 2));
  assert.deepEqual(a.vote, { candidate: 'a', heardAll: false, castAtMs: 100 });
});

test('a location whose gossiped position changes keeps its first one, with a warning once', () => {
  const a = make('a', ['a', 'b', 'c'], { view: 1, seqno: 1 });
  a.tick(0);
  assert.deepEqual(a.receive('b', gossip(2, 2)), { send: [] });
  const changed = a.receive('b', gossip(3, 3));
  assert.match(changed.warning ?? '', /^b now gossips position 3\.3 after 2\.2 \(kept\)/);
  assert.equal(a.receive('b', gossip(3, 3)).warning, undefined, 'warned once');
  assert.equal(a.receive('b', gossip(2, 2)).warning, undefined, 'the kept position is no change');
  a.receive('c', gossip(2, 3));
  assert.equal(a.vote?.candidate, 'c', 'judged on the first position heard from b');
});
