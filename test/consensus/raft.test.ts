import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CovenantError, InvariantError, utf8 } from '../../src/base/index.js';
import {
  createRaft,
  type Entry,
  type EntryKind,
  type Message,
  type Raft,
  type RaftInitialState,
  type Ready,
} from '../../src/consensus/index.js';
import { Prng } from '../../src/testing/prng.js';

/** The simplest node layer: an array as the disk. */
class MemoryStorage {
  entries: Entry[] = [];
  constructor(readonly startSeqno = 0) {}
  entryAt(seqno: number): Entry | undefined {
    return this.entries[seqno - this.startSeqno - 1];
  }
  persist(ready: Ready): void {
    if (ready.truncateAfterSeqno !== undefined) this.entries.length = ready.truncateAfterSeqno - this.startSeqno;
    this.entries.push(...ready.entriesToPersist);
  }
}

const options = { electionTimeoutTicks: 10, heartbeatTicks: 2, maxBatchEntries: 3, maxBatchBytes: 100, maxUncommittedEntries: 5 };

function make(selfId: string, initial: RaftInitialState, storage = new MemoryStorage(initial.startSeqno ?? 0)): { raft: Raft; storage: MemoryStorage } {
  return { raft: createRaft({ ...options, selfId, random: new Prng(7), storage, initial }), storage };
}

function entry(raft: Raft, kind: EntryKind, size = 4): Entry {
  const s = raft.status();
  return { view: s.view, seqno: s.lastSeqno + 1, kind, bytes: utf8.encode('x'.repeat(size)) };
}

/** Persists and "sends" (returns the messages), as the node layer would. */
function drain(raft: Raft, storage: MemoryStorage): { messages: Message[]; readies: Ready[] } {
  const messages: Message[] = [];
  const readies: Ready[] = [];
  for (let i = 0; i < 10 && raft.hasReady(); i++) {
    const rd = raft.ready();
    storage.persist(rd);
    messages.push(...rd.messages);
    readies.push(rd);
    raft.advance(rd);
  }
  return { messages, readies };
}

/** Makes a 3-node primary of view 1 without peers answering anything but votes. */
function primaryOfThree(): { raft: Raft; storage: MemoryStorage } {
  const node = make('a', { configs: [{ seqno: 0, nodes: ['a', 'b', 'c'] }] });
  node.raft.campaign();
  node.raft.step({ type: 'vote-response', from: 'b', to: 'a', view: 1, preVote: true, granted: true });
  node.raft.step({ type: 'vote-response', from: 'b', to: 'a', view: 1, preVote: false, granted: true });
  assert.equal(node.raft.status().role, 'Primary');
  return node;
}

test('a single node elects itself, asks for a signature, and commits it once persisted', () => {
  const { raft, storage } = make('a', { configs: [{ seqno: 0, nodes: ['a'] }] });
  for (let i = 0; i < 20 && raft.status().role !== 'Primary'; i++) raft.tick();
  assert.equal(raft.status().role, 'Primary');
  assert.equal(raft.status().view, 1);
  const first = raft.ready();
  assert.equal(first.signatureRequested, true);
  assert.deepEqual(first.hardState, { view: 1, votedFor: 'a', commitSeqno: 0 });
  storage.persist(first);
  raft.advance(first);
  raft.propose(entry(raft, 'normal'));
  raft.propose(entry(raft, 'signature'));
  // Not committed before it is persisted: the primary's own acknowledgement needs the disk.
  assert.equal(raft.status().commitSeqno, 0);
  const { readies } = drain(raft, storage);
  assert.equal(readies[0]!.entriesToPersist.length, 2);
  assert.equal(raft.status().commitSeqno, 2);
  assert.equal(readies[readies.length - 1]!.committedSeqno, 2);
});

test('only signatures commit: a majority-held normal entry stays uncommitted', () => {
  const { raft, storage } = primaryOfThree();
  drain(raft, storage);
  raft.propose(entry(raft, 'signature'));
  raft.propose(entry(raft, 'normal'));
  drain(raft, storage);
  raft.step({ type: 'append-response', from: 'b', to: 'a', view: 1, success: true, lastSeqno: 2, commitSeqno: 0 });
  assert.equal(raft.status().commitSeqno, 1);
});

test('a backup refuses proposals with NotPrimary', () => {
  const { raft } = make('b', { configs: [{ seqno: 0, nodes: ['a', 'b', 'c'] }] });
  assert.throws(
    () => raft.propose({ view: 0, seqno: 1, kind: 'normal', bytes: new Uint8Array() }),
    (e: unknown) => e instanceof CovenantError && e.code === 'NotPrimary' && e.status === 503,
  );
});

test('beyond maxUncommittedEntries the primary refuses work with TooManyPendingTransactions, but still signs', () => {
  const { raft, storage } = primaryOfThree();
  drain(raft, storage);
  for (let i = 0; i < options.maxUncommittedEntries; i++) raft.propose(entry(raft, 'normal'));
  assert.throws(
    () => raft.propose(entry(raft, 'normal')),
    (e: unknown) => e instanceof CovenantError && e.code === 'TooManyPendingTransactions' && e.status === 503,
  );
  raft.propose(entry(raft, 'signature'));
  drain(raft, storage);
  raft.step({ type: 'append-response', from: 'c', to: 'a', view: 1, success: true, lastSeqno: 6, commitSeqno: 0 });
  assert.equal(raft.status().commitSeqno, 6);
  raft.propose(entry(raft, 'normal'));
});

test('checkProposal counts entries still on their way to propose, and refuses what propose would', () => {
  const { raft: backup } = make('b', { configs: [{ seqno: 0, nodes: ['a', 'b', 'c'] }] });
  assert.throws(() => backup.checkProposal('normal', 0), (e: unknown) => e instanceof CovenantError && e.code === 'NotPrimary');
  const { raft, storage } = primaryOfThree();
  drain(raft, storage);
  const uncommitted = raft.status().lastSeqno - raft.status().commitSeqno;
  const room = options.maxUncommittedEntries - uncommitted;
  raft.checkProposal('normal', room - 1);
  assert.throws(
    () => raft.checkProposal('normal', room),
    (e: unknown) => e instanceof CovenantError && e.code === 'TooManyPendingTransactions',
  );
  raft.checkProposal('signature', room + 10);
  // Checking changes nothing: the room is still there.
  for (let i = 0; i < room; i++) raft.propose(entry(raft, 'normal'));
  assert.throws(() => raft.checkProposal('normal', 0), (e: unknown) => e instanceof CovenantError && e.code === 'TooManyPendingTransactions');
});

test('summary().retiring: from the entry that removes the primary on; once that commits, no more ordinary work', () => {
  const { raft, storage } = primaryOfThree();
  drain(raft, storage);
  assert.equal(raft.summary().retiring, false);
  raft.propose(entry(raft, 'normal'));
  const seqno = raft.status().lastSeqno + 1;
  raft.propose({ view: 1, seqno, kind: 'reconfiguration', bytes: utf8.encode('remove a'), configuration: { seqno, nodes: ['b', 'c'] } });
  assert.equal(raft.summary().retiring, true, 'retiring as soon as the removal is in the log');
  // Until the removal commits the primary still takes work; then only signatures.
  raft.checkProposal('normal', 0);
  raft.propose(entry(raft, 'signature'));
  drain(raft, storage);
  const last = raft.status().lastSeqno;
  raft.step({ type: 'append-response', from: 'b', to: 'a', view: 1, success: true, lastSeqno: last, commitSeqno: 0 });
  raft.step({ type: 'append-response', from: 'c', to: 'a', view: 1, success: true, lastSeqno: last, commitSeqno: 0 });
  assert.equal(raft.status().commitSeqno, last);
  // Handing over (or already stepped aside): no more ordinary work.
  assert.throws(() => raft.checkProposal('normal', 0), (e: unknown) => e instanceof CovenantError && e.code === 'NotPrimary');
});

test('append batches are bounded by entry count and by bytes', () => {
  const { raft, storage } = primaryOfThree();
  drain(raft, storage);
  // The peers answered the probe: they hold nothing beyond genesis.
  raft.step({ type: 'append-response', from: 'b', to: 'a', view: 1, success: true, lastSeqno: 0, commitSeqno: 0 });
  for (let i = 0; i < 4; i++) raft.propose(entry(raft, 'normal', 30));
  raft.propose(entry(raft, 'signature', 80));
  const { messages } = drain(raft, storage);
  const toB = messages.filter((m): m is Extract<Message, { type: 'append' }> => m.type === 'append' && m.to === 'b' && m.entries.length > 0);
  assert.ok(toB.length >= 2, 'the suffix is split into several batches');
  for (const m of toB) {
    assert.ok(m.entries.length <= options.maxBatchEntries);
    const bytes = m.entries.reduce((n, e) => n + e.bytes.length, 0);
    assert.ok(m.entries.length === 1 || bytes <= options.maxBatchBytes, `batch of ${bytes} bytes`);
  }
  assert.deepEqual(toB.flatMap((m) => m.entries.map((e) => e.seqno)).slice(0, 5), [1, 2, 3, 4, 5]);
});

test('votes compare the last signature, not the last entry', () => {
  const storage = new MemoryStorage();
  storage.entries.push(
    { view: 1, seqno: 1, kind: 'signature', bytes: new Uint8Array() },
    { view: 1, seqno: 2, kind: 'normal', bytes: new Uint8Array() },
    { view: 1, seqno: 3, kind: 'signature', bytes: new Uint8Array() },
  );
  const { raft } = make('b', { configs: [{ seqno: 0, nodes: ['a', 'b', 'c'] }], lastSeqno: 3, view: 1, commitSeqno: 1 }, storage);
  // A candidate whose log is longer but whose last signature is older does not get the vote.
  raft.step({ type: 'request-vote', from: 'a', to: 'b', view: 2, preVote: false, force: false, lastSignatureView: 1, lastSignatureSeqno: 1 });
  raft.step({ type: 'request-vote', from: 'c', to: 'b', view: 2, preVote: false, force: false, lastSignatureView: 1, lastSignatureSeqno: 3 });
  const rd = raft.ready();
  const answers = rd.messages.filter((m) => m.type === 'vote-response').map((m) => [m.to, m.type === 'vote-response' && m.granted]);
  assert.deepEqual(answers, [['a', false], ['c', true]]);
  assert.equal(rd.hardState?.votedFor, 'c');
});

test('a node learning of a new view drops its unsigned suffix, never below commit', () => {
  const storage = new MemoryStorage();
  storage.entries.push(
    { view: 1, seqno: 1, kind: 'signature', bytes: new Uint8Array() },
    { view: 1, seqno: 2, kind: 'normal', bytes: new Uint8Array() },
    { view: 1, seqno: 3, kind: 'normal', bytes: new Uint8Array() },
  );
  const { raft } = make('b', { configs: [{ seqno: 0, nodes: ['a', 'b', 'c'] }], lastSeqno: 3, view: 1, commitSeqno: 1 }, storage);
  raft.step({ type: 'append', from: 'c', to: 'b', view: 2, prevSeqno: 1, prevView: 1, commitSeqno: 1, entries: [] });
  const rd = raft.ready();
  assert.equal(rd.truncateAfterSeqno, 1);
  assert.equal(raft.status().lastSeqno, 1);
  assert.equal(raft.status().primaryId, 'c');
});

test('a primary lease makes a backup ignore an ordinary election from a returning node', () => {
  const storage = new MemoryStorage();
  const { raft } = make('b', { configs: [{ seqno: 0, nodes: ['a', 'b', 'c'] }] }, storage);
  raft.step({ type: 'append', from: 'a', to: 'b', view: 1, prevSeqno: 0, prevView: 0, commitSeqno: 0, entries: [] });
  drain(raft, storage);
  raft.step({ type: 'request-vote', from: 'c', to: 'b', view: 5, preVote: true, force: false, lastSignatureView: 0, lastSignatureSeqno: 0 });
  raft.step({ type: 'request-vote', from: 'c', to: 'b', view: 5, preVote: false, force: false, lastSignatureView: 0, lastSignatureSeqno: 0 });
  const { messages } = drain(raft, storage);
  assert.deepEqual(
    messages.map((m) => (m.type === 'vote-response' ? `${m.preVote ? 'pre' : 'vote'}:${m.granted}` : m.type)),
    ['pre:false'],
  );
  assert.equal(raft.status().view, 1);
  // A forced request (a retiring primary nudged the candidate) overrides the lease.
  raft.step({ type: 'request-vote', from: 'c', to: 'b', view: 5, preVote: false, force: true, lastSignatureView: 0, lastSignatureSeqno: 0 });
  assert.equal(raft.status().view, 5);
});

test('a node joining from a snapshot reports its start and view history', () => {
  const { raft } = make('d', {
    startSeqno: 40,
    startView: 3,
    viewHistory: [1, 12, 30],
    configs: [{ seqno: 20, nodes: ['a', 'b', 'c'] }],
  });
  const s = raft.status();
  assert.equal(s.startSeqno, 40);
  assert.equal(s.commitSeqno, 40);
  assert.equal(s.lastSeqno, 40);
  assert.deepEqual(s.viewHistory, [1, 12, 30]);
  assert.deepEqual(s.configs, [{ seqno: 20, nodes: ['a', 'b', 'c'] }]);
  // Not a member: it waits to be added and never stands for election.
  for (let i = 0; i < 100; i++) raft.tick();
  assert.equal(s.role, 'Backup');
  assert.equal(raft.hasReady(), false);
});

test('the caller acknowledges a Ready before taking the next', () => {
  const { raft } = primaryOfThree();
  raft.ready();
  assert.throws(() => raft.ready(), InvariantError);
});

test('messages for another node are ignored', () => {
  const { raft } = make('b', { configs: [{ seqno: 0, nodes: ['a', 'b', 'c'] }] });
  raft.step({ type: 'append', from: 'a', to: 'z', view: 4, prevSeqno: 0, prevView: 0, commitSeqno: 0, entries: [] });
  assert.equal(raft.status().view, 0);
  assert.equal(raft.hasReady(), false);
});
