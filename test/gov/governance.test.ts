/**
 * Proposals, ballots and the default constitution over an in-memory store: member activation,
 * majority resolution, withdrawal, replay, hostile ballots, validation and all-or-nothing apply.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CovenantError } from '../../src/base/errors.js';
import { generateIdentity } from '../../src/crypto/index.js';
import { GovTables, loadJsEngine, signGovRequest } from '../../src/gov/index.js';
import { Tables } from '../../src/node/tables.js';
import { jsonCodec } from '../../src/kv/index.js';
import { fixture, table, type Fixture } from './helpers.js';

function refused(f: Fixture, fn: () => unknown): CovenantError {
  const before = f.store.version;
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof CovenantError, String(e));
    assert.equal(f.store.version, before, 'a refused request writes nothing');
    return e;
  }
  assert.fail('expected a refusal');
}

describe('governance', () => {
  test('the table names agree with the node tables', () => {
    for (const [name, value] of Object.entries(GovTables)) {
      assert.equal((Tables as Record<string, string>)[name], value, name);
    }
  });

  test('members become Active by acknowledging the state digest; only Active members propose', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    const e = refused(f, () => f.propose(m, [{ name: 'trigger_snapshot' }]));
    assert.deepEqual([e.code, e.status], ['MemberNotActive', 403]);
    // Ack without update, then with the wrong digest.
    assert.equal(refused(f, () => f.write((tx) => f.gov.ackStateDigest(tx, f.sign(m, 'ack', { state_digest: 'aa' }), m.id))).code, 'StateDigestNotRequested');
    f.write((tx) => f.gov.updateStateDigest(tx, f.sign(m, 'state_digest', undefined), m.id, 'cd'.repeat(32)));
    assert.equal(refused(f, () => f.write((tx) => f.gov.ackStateDigest(tx, f.sign(m, 'ack', { state_digest: 'aa' }), m.id))).code, 'StateDigestMismatch');
    const acked = f.write((tx) => f.gov.ackStateDigest(tx, f.sign(m, 'ack', { state_digest: 'cd'.repeat(32) }), m.id));
    assert.equal(acked.body.status, 'Active');
    // The whole signed request is in the history table.
    const history = table(f, GovTables.history, m.id);
    assert.equal(history.type, 'ack');
    assert.ok(Buffer.from(history.cose_sign1, 'base64').length > 100);
  });

  test('one member opens the service: propose, vote, Accepted, applied', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    const id = f.propose(m, [{ name: 'transition_service_to_open', args: {} }]);
    assert.match(id, /^[0-9a-f]{64}$/);
    assert.equal(f.state(id), 'Open');
    assert.equal(table(f, GovTables.serviceInfo, '0').status, 'Opening');
    const after = f.vote(m, id, true);
    assert.equal(after.state, 'Accepted');
    assert.deepEqual(after.final_votes, { [m.id]: true });
    assert.equal(table(f, GovTables.serviceInfo, '0').status, 'Open');
    assert.equal(typeof table(f, GovTables.constitution, '0'), 'string', 'the constitution used is stored');
    // A second vote on a closed proposal is refused.
    assert.equal(refused(f, () => f.vote(m, id, true)).code, 'ProposalNotOpen');
  });

  test('trigger_ledger_chunk is a request in the store, counted, like every other effect of governance', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    assert.equal(table(f, GovTables.ledgerChunkRequests, '0'), undefined);
    for (const expected of [1, 2]) {
      const id = f.propose(m, [{ name: 'trigger_ledger_chunk' }]);
      assert.equal(f.vote(m, id, true).state, 'Accepted');
      assert.equal(table(f, GovTables.ledgerChunkRequests, '0'), expected);
    }
  });

  test('a recovery share request is verified again in the transaction that records it: a member changed meanwhile is refused', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    const share = Buffer.from('share bytes').toString('base64');
    const first = f.read((tx) => f.gov.recoveryShareRequest(tx, f.sign(m, 'recovery_share', { share }), m.id));
    const second = f.read((tx) => f.gov.recoveryShareRequest(tx, f.sign(m, 'recovery_share', { share }), m.id));
    f.write((tx) => first.record(tx));
    assert.equal(table(f, GovTables.history, m.id).type, 'recovery_share', 'recorded with the member unchanged');
    // The member's certificate changes between the check of the second request and its recording.
    f.write((tx) => tx.map(GovTables.membersCerts, jsonCodec<string>()).put(m.id, 'another certificate'));
    const e = refused(f, () => f.write((tx) => second.record(tx)));
    assert.deepEqual([e.code, e.status], ['InvalidAuthenticationInfo', 401]);
  });

  test('three members: one vote is not enough, two are; two against reject', async () => {
    const f = await fixture({ members: 3 });
    const [a, b, c] = f.members as [typeof f.members[0], typeof f.members[0], typeof f.members[0]];
    for (const m of f.members) f.activate(m);
    const user = await generateIdentity({ commonName: 'user' });
    const id = f.propose(a, [{ name: 'set_user', args: { cert: user.certificatePem, user_data: { role: 'x' } } }]);
    assert.equal(f.vote(a, id, true).state, 'Open');
    assert.equal(table(f, GovTables.usersCerts, user.id), undefined);
    assert.equal(refused(f, () => f.vote(a, id, true)).code, 'VoteAlreadyExists');
    assert.equal(f.vote(b, id, true).state, 'Accepted');
    assert.equal(table(f, GovTables.usersCerts, user.id), user.certificatePem);
    assert.deepEqual(table(f, GovTables.usersInfo, user.id), { user_data: { role: 'x' } });

    const id2 = f.propose(c, [{ name: 'trigger_snapshot' }]);
    assert.equal(f.vote(a, id2, false).state, 'Open');
    assert.equal(f.vote(b, id2, false).state, 'Rejected');
    assert.equal(table(f, GovTables.snapshotRequests, '0'), undefined);
  });

  test('the proposer withdraws an open proposal; others cannot; a withdrawn proposal takes no votes', async () => {
    const f = await fixture({ members: 2 });
    const [a, b] = f.members as [typeof f.members[0], typeof f.members[0]];
    f.activate(a);
    f.activate(b);
    const id = f.propose(a, [{ name: 'trigger_snapshot' }]);
    const byOther = refused(f, () => f.write((tx) => f.gov.withdrawProposal(tx, f.sign(b, 'withdrawal', undefined, id), id)));
    assert.equal(byOther.status, 403);
    const w = f.write((tx) => f.gov.withdrawProposal(tx, f.sign(a, 'withdrawal', undefined, id), id));
    assert.equal(w.body.state, 'Withdrawn');
    assert.equal(refused(f, () => f.vote(b, id, true)).code, 'ProposalNotOpen');
    assert.equal(refused(f, () => f.write((tx) => f.gov.withdrawProposal(tx, f.sign(a, 'withdrawal', undefined, id), id))).code, 'ProposalNotOpen');
  });

  test('a replayed proposal request is refused, and ids are unpredictable', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    const request = f.sign(m, 'proposal', { actions: [{ name: 'trigger_snapshot' }] });
    const first = f.write((tx) => f.gov.createProposal(tx, request)).body.proposal_id;
    const e = refused(f, () => f.write((tx) => f.gov.createProposal(tx, request)));
    assert.deepEqual([e.code, e.status], ['ProposalReplay', 400]);
    assert.match(e.message, new RegExp(first));
    // The same content signed again is a new request with a different id.
    const second = f.propose(m, [{ name: 'trigger_snapshot' }]);
    assert.notEqual(second, first);
  });

  test('replayed state digests, acks, ballots and withdrawals are refused (400 RequestReplay), not executed again', async () => {
    const f = await fixture({ members: 2 });
    const [a, b] = f.members as [typeof f.members[0], typeof f.members[0]];
    f.activate(a);
    const update = f.sign(b, 'state_digest', undefined);
    f.write((tx) => f.gov.updateStateDigest(tx, update, b.id, 'ef'.repeat(32)));
    const ack = f.sign(b, 'ack', { state_digest: 'ef'.repeat(32) });
    f.write((tx) => f.gov.ackStateDigest(tx, ack, b.id));
    // The member updates its digest again; an old ack replayed must not acknowledge the new one.
    f.write((tx) => f.gov.updateStateDigest(tx, f.sign(b, 'state_digest', undefined), b.id, 'ef'.repeat(32)));
    for (const replay of [() => f.gov.ackStateDigest(f.store.beginTx(), ack, b.id), () => f.gov.updateStateDigest(f.store.beginTx(), update, b.id, 'ef'.repeat(32))]) {
      const e = refused(f, replay);
      assert.deepEqual([e.code, e.status], ['RequestReplay', 400]);
    }
    const id = f.propose(a, [{ name: 'trigger_snapshot' }, { name: 'trigger_snapshot' }]);
    const withdrawal = f.sign(a, 'withdrawal', undefined, id);
    f.write((tx) => f.gov.withdrawProposal(tx, withdrawal, id));
    assert.equal(refused(f, () => f.write((tx) => f.gov.withdrawProposal(tx, withdrawal, id))).code, 'RequestReplay');
    const id2 = f.propose(a, [{ name: 'trigger_snapshot' }]);
    const ballot = f.sign(a, 'ballot', { ballot: 'export function vote(proposal, proposerId) { return false }' }, id2);
    f.write((tx) => f.gov.submitBallot(tx, ballot, id2, a.id));
    assert.equal(refused(f, () => f.write((tx) => f.gov.submitBallot(tx, ballot, id2, a.id))).code, 'RequestReplay');
    // Each accepted request once: a's update and ack, b's two updates and ack, a withdrawal, a ballot.
    assert.equal(f.read((tx) => tx.map(GovTables.recentRequests, jsonCodec<unknown>()).size), 7);
  });

  test('the replay memory is bounded; requests older than all it holds are refused', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    const start = Math.floor(f.nowMs / 1000);
    const old = f.sign(m, 'proposal', { actions: [{ name: 'trigger_snapshot' }] }, undefined, start - 200);
    for (let i = 0; i < 100; i++) {
      f.write((tx) => f.gov.createProposal(tx, f.sign(m, 'proposal', { actions: [{ name: 'trigger_snapshot' }] }, undefined, start - 100 + i)));
    }
    assert.equal(f.read((tx) => tx.map(GovTables.recentProposals, { encode: () => new Uint8Array(), decode: () => 0 }).size), 100);
    assert.equal(refused(f, () => f.write((tx) => f.gov.createProposal(tx, old))).code, 'ProposalCreatedTooLongAgo');
  });

  test('invalid proposals are refused with the constitution’s reasons and write nothing', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    const cases: [unknown[], RegExp][] = [
      [[], /at least one action/],
      [[{ name: 'no_such_action' }], /unknown action "no_such_action"/],
      [[{ name: 'set_user', args: {} }], /missing argument "cert"/],
      [[{ name: 'set_user', args: { cert: 'not a certificate' } }], /certificate/],
      [[{ name: 'set_recovery_threshold', args: { recovery_threshold: 0 } }], /integer in \[1, 255\]/],
      [[{ name: 'transition_node_to_trusted', args: { node_id: 'xyz' } }], /64 lower-case hex/],
      [[{ name: 'trigger_ledger_chunk', args: { now: true } }], /unknown argument "now"/],
      [[{ name: 'set_jwt_issuer', args: { issuer: 'https://idp', auto_refresh: true } }], /ca_cert_bundle_name/],
      [[{ name: 'set_jwt_public_signing_keys', args: { issuer: 'i', jwks: { keys: [{ kty: 'RSA', kid: 'k', x5c: ['!!'] }] } } }], /base64/],
      [[{ name: 'set_jwt_public_signing_keys', args: { issuer: 'i', jwks: { keys: [{ kty: 'EC', kid: 'k', crv: 'P-256', x: 'AA', y: 'AA', d: 'AA' }] } } }], /private parameter "d"/],
      [[{ name: 'set_jwt_public_signing_keys', args: { issuer: 'i', jwks: { keys: [{ kty: 'RSA', kid: 'k' }] } } }], /needs "n"/],
      [[{ name: 'set_jwt_public_signing_keys', args: { issuer: 'i', jwks: { keys: [{ kty: 'oct', kid: 'k', k: 'AA' }] } } }], /unsupported kty/],
      [[{ name: 'set_constitution', args: { constitution: 'export function validate() {}' } }], /does not export a function "resolve"/],
      [[{ name: 'set_constitution', args: { constitution: 'export function (' } }], /Syntax/],
      [[{ name: 'set_node_join_policy', args: { policy: 'export const policy = 1' } }], /policy/],
    ];
    for (const [actions, reason] of cases) {
      const e = refused(f, () => f.propose(m, actions));
      assert.equal(e.code, 'ProposalFailedToValidate', JSON.stringify(actions));
      assert.match(e.message, reason);
    }
  });

  test('a proposal whose signed payload is not UTF-8 is refused as not JSON, before any action is read', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    // {"actions":[{"name":"<0xff>"}]}: decoded lossily it would be a proposal of an unknown action.
    const payload = Buffer.concat([Buffer.from('{"actions":[{"name":"'), Buffer.from([0xff]), Buffer.from('"}]}')]);
    const body = signGovRequest({ type: 'proposal', payload, privateKeyPem: m.privateKeyPem, memberId: m.id, createdAtSeconds: Math.floor(f.nowMs / 1000) });
    const e = refused(f, () => f.write((tx) => f.gov.createProposal(tx, { body, contentType: 'application/cose' })));
    assert.deepEqual([e.code, e.status, e.message], ['InvalidInput', 400, 'proposal payload is not JSON: it is not valid UTF-8']);
  });

  test('hostile ballots make the proposal Failed with a clear reason; the engine stays usable', async () => {
    const hostile: [string, RegExp][] = [
      ['export function vote() { for (;;) {} }', /Timeout/],
      ['export function vote() { let s = "x"; for (;;) s = s + s }', /OutOfMemory/],
      ['export function vote() { process.exit(1) }', /process.*not defined/],
      ['export function vote() { return require("child_process") }', /require.*not defined/],
      ['export function vote() { throw new Error("I object") }', /I object/],
      ['export function vote() { return "yes" }', /not a boolean/],
    ];
    for (const [ballot, reason] of hostile) {
      const f = await fixture({ members: 3 });
      const [a, b] = f.members as [typeof f.members[0], typeof f.members[0]];
      for (const m of f.members) f.activate(m);
      const id = f.propose(a, [{ name: 'trigger_snapshot' }]);
      f.vote(a, id, true);
      const after = f.vote(b, id, ballot);
      assert.equal(after.state, 'Failed', ballot);
      assert.match(after.failure!.reason, reason);
      assert.match(after.vote_failures![b.id]!.reason, reason);
      assert.equal(table(f, GovTables.snapshotRequests, '0'), undefined);
      // A later proposal still works, once a worker that hit a limit is replaced (until then the
      // engine answers SandboxUnavailable, 503: retry shortly).
      await (await loadJsEngine()).ready();
      const id2 = f.propose(a, [{ name: 'trigger_snapshot' }]);
      f.vote(a, id2, true);
      assert.equal(f.vote(b, id2, true).state, 'Accepted');
    }
  });

  test('a failure reason is stored bounded, and marked when it was cut', async () => {
    const huge: [string, boolean][] = [
      // Returned: the reason quotes the value.
      ["export function vote() { return 'x'.repeat(3e6) }", true],
      // Over the engine's result limit: refused with a short reason of its own.
      ["export function vote() { return 'x'.repeat(5e6) }", false],
      ["export function vote() { throw 'x'.repeat(5e6) }", false],
      ["export function vote() { throw new Error('x'.repeat(5e6)) }", false],
    ];
    for (const [ballot, cut] of huge) {
      const f = await fixture({ members: 2 });
      const [a, b] = f.members as [typeof f.members[0], typeof f.members[0]];
      for (const m of f.members) f.activate(m);
      const id = f.propose(a, [{ name: 'trigger_snapshot' }]);
      const answered = f.vote(b, id, ballot);
      const stored = table(f, GovTables.proposalsInfo, id);
      assert.equal(stored.state, 'Failed', ballot);
      for (const reason of [stored.failure.reason, stored.vote_failures[b.id].reason, answered.failure!.reason, answered.vote_failures![b.id]!.reason]) {
        assert.ok(Buffer.byteLength(reason) <= 1024, `${ballot}: a reason of ${Buffer.byteLength(reason)} bytes`);
        if (cut) assert.match(reason, /… \(truncated, \d+ bytes\)$/);
      }
    }
  });

  test('all ballots evaluated by one request share one time budget', async () => {
    const f = await fixture({ members: 3 });
    const [a, b, c] = f.members as [typeof f.members[0], typeof f.members[0], typeof f.members[0]];
    for (const m of f.members) f.activate(m);
    // Each ballot alone fits in the budget (TEST_LIMITS: 300 ms); two in one request do not.
    const slow = 'export function vote() { const until = Date.now() + 200; while (Date.now() < until); return true }';
    const id = f.propose(a, [{ name: 'trigger_snapshot' }]);
    assert.equal(f.vote(a, id, slow).state, 'Open');
    const after = f.vote(b, id, slow);
    assert.equal(after.state, 'Failed');
    assert.match(after.failure!.reason, /Timeout/);
    assert.deepEqual(Object.keys(after.vote_failures!), [b.id]);
    assert.equal(refused(f, () => f.vote(c, id, true)).code, 'ProposalNotOpen');
  });

  test('a ballot that does not compile or lacks vote is refused before it is recorded', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    const id = f.propose(m, [{ name: 'trigger_snapshot' }]);
    assert.equal(refused(f, () => f.vote(m, id, 'export function vote( {')).code, 'InvalidBallot');
    assert.equal(refused(f, () => f.vote(m, id, 'export function ballot() { return true }')).code, 'InvalidBallot');
    assert.equal(f.state(id), 'Open');
  });

  test('apply is all or nothing: a failing action leaves no write of the earlier ones', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    const user = await generateIdentity({ commonName: 'user' });
    const id = f.propose(m, [
      { name: 'set_user', args: { cert: user.certificatePem } },
      { name: 'set_recovery_threshold', args: { recovery_threshold: 2 } },
    ]);
    const after = f.vote(m, id, true);
    assert.equal(after.state, 'Failed');
    assert.match(after.failure!.reason, /apply failed.*above the number of recovery members/);
    assert.equal(table(f, GovTables.usersCerts, user.id), undefined);
    assert.equal(table(f, GovTables.serviceConfig, '0').recovery_threshold, 1);
  });

  test('code trust actions: add and remove a virtual measurement; removing an unknown one fails', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    const measurement = 'ab'.repeat(32);
    assert.equal(f.vote(m, f.propose(m, [{ name: 'add_virtual_measurement', args: { measurement } }]), true).state, 'Accepted');
    assert.deepEqual(table(f, GovTables.virtualMeasurements, measurement), {});
    assert.equal(f.vote(m, f.propose(m, [{ name: 'remove_virtual_measurement', args: { measurement } }]), true).state, 'Accepted');
    assert.equal(table(f, GovTables.virtualMeasurements, measurement), undefined);
    const again = f.vote(m, f.propose(m, [{ name: 'remove_virtual_measurement', args: { measurement } }]), true);
    assert.equal(again.state, 'Failed');
    assert.match(again.failure!.reason, /is not registered/);
    assert.equal(refused(f, () => f.propose(m, [{ name: 'add_virtual_measurement', args: { measurement: 'nope' } }])).code, 'ProposalFailedToValidate');
  });

  test('changing the constitution drops other open proposals and the new rules apply', async () => {
    const f = await fixture({ members: 2 });
    const [a, b] = f.members as [typeof f.members[0], typeof f.members[0]];
    f.activate(a);
    f.activate(b);
    const pending = f.propose(b, [{ name: 'trigger_snapshot' }]);
    // The new constitution: any proposal is accepted at once, and apply records the proposal id.
    const constitution = `
      export function validate(p) { return { valid: true, description: 'ok' } }
      export function resolve(p, proposer, votes) { return 'Accepted' }
      export function apply(p, id) { svc.kv.put('public:svc.gov.snapshot_requests', '0', { by: id }) }`;
    const change = f.propose(a, [{ name: 'set_constitution', args: { constitution } }]);
    f.vote(a, change, true);
    assert.equal(f.vote(b, change, true).state, 'Accepted');
    assert.equal(f.state(pending), 'Dropped');
    assert.equal(f.read((tx) => f.gov.constitution(tx)), constitution);
    const next = f.propose(a, [{ name: 'anything' }]);
    assert.equal(f.state(next), 'Accepted');
    assert.deepEqual(table(f, GovTables.snapshotRequests, '0'), { by: next });
  });

  test('a constitution cannot write outside governance tables, nor the history, nor outside apply', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    const set = (constitution: string) => {
      const id = f.propose(m, [{ name: 'set_constitution', args: { constitution } }]);
      if (f.state(id) === 'Open') f.vote(m, id, true);
      assert.equal(f.state(id), 'Accepted');
    };
    set(`export function validate() { return { valid: true, description: '' } }
      export function resolve() { return 'Accepted' }
      export function apply(p, id) {
        const a = JSON.parse(p).actions[0];
        if (a.name === 'set_constitution') svc.kv.put('public:svc.gov.constitution', '0', a.args.constitution);
        else svc.kv.put(a.name, 'k', 1);
      }`);
    for (const target of ['records', 'public:records', 'public:svc.gov.history', 'public:svc.internal.signatures']) {
      const id = f.propose(m, [{ name: target }]);
      const info = f.read((tx) => f.gov.proposal(tx, id));
      assert.equal(info.state, 'Failed', target);
      assert.match(info.failure!.reason, /governance table|written only by the service/);
    }
    set(`export function validate() { svc.kv.put('public:svc.gov.proposals', 'x', 1); return { valid: true, description: '' } }
      export function resolve() { return 'Open' }
      export function apply() {}`);
    const e = refused(f, () => f.propose(m, [{ name: 'x' }]));
    assert.match(e.message, /only in apply/);
  });

  test('node actions: trust a pending node, retire a trusted one, delete a pending one, keep the last', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    const ids = ['1', '2', '3'].map((c) => c.repeat(64));
    f.write((tx) => {
      const nodes = tx.map(GovTables.nodesInfo, { encode: (v: unknown) => Buffer.from(JSON.stringify(v)), decode: (b: Uint8Array) => JSON.parse(Buffer.from(b).toString()) });
      nodes.put(ids[0]!, { status: 'Trusted', node_data: null });
      nodes.put(ids[1]!, { status: 'Pending', node_data: null });
      nodes.put(ids[2]!, { status: 'Pending', node_data: null });
    });
    const accept = (actions: unknown[]) => f.vote(m, f.propose(m, actions), true);
    assert.equal(accept([{ name: 'transition_node_to_trusted', args: { node_id: ids[1], valid_from: '2025-01-01T00:00:00Z' } }]).state, 'Accepted');
    assert.equal(table(f, GovTables.nodesInfo, ids[1]!).status, 'Trusted');
    assert.equal(accept([{ name: 'remove_node', args: { node_id: ids[1] } }]).state, 'Accepted');
    assert.deepEqual([table(f, GovTables.nodesInfo, ids[1]!).status, table(f, GovTables.nodesInfo, ids[1]!).retired_committed], ['Retired', false]);
    assert.equal(accept([{ name: 'remove_node', args: { node_id: ids[2] } }]).state, 'Accepted');
    assert.equal(table(f, GovTables.nodesInfo, ids[2]!), undefined);
    const last = accept([{ name: 'remove_node', args: { node_id: ids[0] } }]);
    assert.equal(last.state, 'Failed');
    assert.match(last.failure!.reason, /last trusted node/);
    const retired = accept([{ name: 'transition_node_to_trusted', args: { node_id: ids[1] } }]);
    assert.match(retired.failure!.reason, /retired/);
    assert.equal(accept([{ name: 'set_node_data', args: { node_id: ids[0], node_data: { rack: 7 } } }]).state, 'Accepted');
    assert.deepEqual(table(f, GovTables.nodesInfo, ids[0]!).node_data, { rack: 7 });
  });
});
