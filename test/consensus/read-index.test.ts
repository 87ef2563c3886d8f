/**
 * Linearizable reads (ReadIndex): a primary confirms a read only after a majority answered an
 * append carrying the read's id, at a seqno that is a commit of its own view; a deposed or
 * partitioned primary never confirms one.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CovenantError, utf8 } from '../../src/base/index.js';
import { createRaft, decodeMessage, encodeMessage, type AppendEntries, type Entry, type Message, type Raft, type Ready } from '../../src/consensus/index.js';
import { Prng } from '../../src/testing/prng.js';

class MemoryStorage {
  entries: Entry[] = [];
  entryAt(seqno: number): Entry | undefined {
    return this.entries[seqno - 1];
  }
  persist(ready: Ready): void {
    if (ready.truncateAfterSeqno !== undefined) this.entries.length = ready.truncateAfterSeqno;
    this.entries.push(...ready.entriesToPersist);
  }
}

const options = { electionTimeoutTicks: 10, heartbeatTicks: 2, maxBatchEntries: 16, maxBatchBytes: 1000, maxUncommittedEntries: 50 };

interface Node {
  raft: Raft;
  storage: MemoryStorage;
  confirmed: { readId: number; seqno: number }[];
  abandoned: number[];
}

function make(id: string, nodes: string[]): Node {
  const storage = new MemoryStorage();
  const raft = createRaft({ ...options, selfId: id, random: new Prng(3), storage, initial: { configs: [{ seqno: 0, nodes }] } });
  return { raft, storage, confirmed: [], abandoned: [] };
}

/** Persists and collects what the node sends and what it says of reads. */
function drain(node: Node): Message[] {
  const messages: Message[] = [];
  for (let i = 0; i < 10 && node.raft.hasReady(); i++) {
    const rd = node.raft.ready();
    node.storage.persist(rd);
    messages.push(...rd.messages);
    node.confirmed.push(...rd.readsConfirmed);
    node.abandoned.push(...rd.readsAbandoned);
    node.raft.advance(rd);
  }
  return messages;
}

function sign(node: Node): void {
  const s = node.raft.status();
  const entry: Entry = { view: s.view, seqno: s.lastSeqno + 1, kind: 'signature', bytes: utf8.encode('sig') };
  node.raft.propose(entry);
}

/** The answer a healthy, caught-up backup gives to an append (echoing its read id). */
function ack(m: Message, commitSeqno = 0): Message {
  assert.equal(m.type, 'append');
  const a = m as AppendEntries;
  const last = a.entries.length > 0 ? a.entries[a.entries.length - 1]!.seqno : a.prevSeqno;
  return { type: 'append-response', from: a.to, to: a.from, view: a.view, success: true, lastSeqno: last, commitSeqno, ...(a.readId ? { readId: a.readId } : {}) };
}

/** A primary `a` of view 1 over [a b c] whose first signature (1.1) is committed. */
function committedPrimary(): Node {
  const a = make('a', ['a', 'b', 'c']);
  a.raft.campaign();
  a.raft.step({ type: 'vote-response', from: 'b', to: 'a', view: 1, preVote: true, granted: true });
  a.raft.step({ type: 'vote-response', from: 'b', to: 'a', view: 1, preVote: false, granted: true });
  assert.equal(a.raft.status().role, 'Primary');
  drain(a);
  sign(a);
  for (const m of drain(a)) if (m.type === 'append' && m.to === 'b' && m.entries.length > 0) a.raft.step(ack(m));
  drain(a);
  assert.equal(a.raft.status().commitSeqno, 1);
  return a;
}

test('a primary confirms a read once a majority echoed its id, at its commit seqno', () => {
  const a = committedPrimary();
  const readId = a.raft.requestRead();
  const sent = drain(a);
  // The read goes out at once, one heartbeat per peer, each carrying the read id.
  const heartbeats = sent.filter((m): m is AppendEntries => m.type === 'append' && m.readId === readId);
  assert.deepEqual(heartbeats.map((m) => m.to).sort(), ['b', 'c']);
  assert.deepEqual(a.confirmed, []);
  a.raft.step(ack(heartbeats[0]!, 1));
  drain(a);
  assert.deepEqual(a.confirmed, [{ readId, seqno: 1 }]);
});

test('an answer to an append sent before the read arrived does not confirm it', () => {
  const a = committedPrimary();
  const first = a.raft.requestRead();
  const early = drain(a).filter((m): m is AppendEntries => m.type === 'append');
  const second = a.raft.requestRead();
  drain(a);
  // Echoes of the first read's round: the first is confirmed, the second is not.
  a.raft.step(ack(early.find((m) => m.to === 'b')!, 1));
  a.raft.step(ack(early.find((m) => m.to === 'c')!, 1));
  drain(a);
  assert.deepEqual(a.confirmed.map((r) => r.readId), [first]);
  assert.ok(second > first);
});

test('a new primary whose commit is of an older view confirms only once it commits in its own view', () => {
  // b holds a committed signature of view 1 and becomes primary of view 2 with a commit of 0.
  const b = make('b', ['a', 'b', 'c']);
  b.raft.step({ type: 'append', from: 'a', to: 'b', view: 1, prevSeqno: 0, prevView: 0, commitSeqno: 0, entries: [{ view: 1, seqno: 1, kind: 'signature', bytes: utf8.encode('s') }] });
  drain(b);
  for (let i = 0; i < 40 && b.raft.status().role === 'Backup'; i++) b.raft.tick();
  b.raft.step({ type: 'vote-response', from: 'c', to: 'b', view: 2, preVote: true, granted: true });
  b.raft.step({ type: 'vote-response', from: 'c', to: 'b', view: 2, preVote: false, granted: true });
  assert.equal(b.raft.status().role, 'Primary');
  drain(b);
  assert.equal(b.raft.status().commitSeqno, 0);
  const readId = b.raft.requestRead();
  const round = drain(b).filter((m): m is AppendEntries => m.type === 'append' && m.readId === readId);
  b.raft.step(ack(round.find((m) => m.to === 'c')!));
  drain(b);
  // Acknowledged, but the commit (0) may lag what view 1 committed: not yet.
  assert.deepEqual(b.confirmed, []);
  sign(b);
  for (const m of drain(b)) if (m.type === 'append' && m.to === 'c' && m.entries.length > 0) b.raft.step(ack(m));
  drain(b);
  assert.equal(b.raft.status().commitSeqno, 2);
  assert.deepEqual(b.confirmed, [{ readId, seqno: 2 }]);
});

test('a deposed primary abandons its reads and never confirms them', () => {
  const a = committedPrimary();
  const readId = a.raft.requestRead();
  const round = drain(a).filter((m): m is AppendEntries => m.type === 'append');
  // c answers from a newer view: a new primary exists; a steps down.
  a.raft.step({ type: 'append-response', from: 'c', to: 'a', view: 2, success: false, lastSeqno: 1, commitSeqno: 1 });
  drain(a);
  assert.equal(a.raft.status().role, 'Backup');
  assert.deepEqual(a.abandoned, [readId]);
  // A late echo from the old view changes nothing.
  a.raft.step(ack(round.find((m) => m.to === 'b')!, 1));
  drain(a);
  assert.deepEqual(a.confirmed, []);
  assert.throws(() => a.raft.requestRead(), (e: unknown) => e instanceof CovenantError && e.code === 'NotPrimary');
});

test('a partitioned primary never confirms a read: it steps down (CheckQuorum) and abandons it', () => {
  const a = committedPrimary();
  const readId = a.raft.requestRead();
  // Nothing reaches a: it keeps sending heartbeats with the read id, nobody answers.
  for (let i = 0; i < 25; i++) {
    a.raft.tick();
    drain(a);
  }
  assert.equal(a.raft.status().role, 'Backup');
  assert.deepEqual(a.confirmed, []);
  assert.deepEqual(a.abandoned, [readId]);
});

test('a primary alone in its configuration confirms at once; a backup refuses reads', () => {
  const solo = make('a', ['a']);
  for (let i = 0; i < 30 && solo.raft.status().role !== 'Primary'; i++) solo.raft.tick();
  drain(solo);
  sign(solo);
  drain(solo);
  const readId = solo.raft.requestRead();
  drain(solo);
  assert.deepEqual(solo.confirmed, [{ readId, seqno: 1 }]);
  const backup = make('b', ['a', 'b', 'c']);
  assert.throws(() => backup.raft.requestRead(), (e: unknown) => e instanceof CovenantError && e.code === 'NotPrimary');
});

test('the read id travels on the wire; without one, appends and answers encode as before', () => {
  const base: AppendEntries = { type: 'append', from: 'a', to: 'b', view: 3, prevSeqno: 5, prevView: 2, commitSeqno: 4, entries: [] };
  const plain = encodeMessage(base);
  const withRead = encodeMessage({ ...base, readId: 7 });
  assert.equal(withRead.length, plain.length + 8);
  assert.deepEqual(decodeMessage(withRead), { ...base, readId: 7 });
  assert.deepEqual(decodeMessage(plain), base);
  const answer: Message = { type: 'append-response', from: 'b', to: 'a', view: 3, success: true, lastSeqno: 5, commitSeqno: 4, readId: 2 ** 40 };
  assert.deepEqual(decodeMessage(encodeMessage(answer)), answer);
  // A read id of 0 is never written; a decoder refuses one.
  const zero = new Uint8Array([...plain, 0, 0, 0, 0, 0, 0, 0, 0]);
  assert.throws(() => decodeMessage(zero), (e: unknown) => e instanceof CovenantError && e.code === 'InvalidConsensusMessage');
});
