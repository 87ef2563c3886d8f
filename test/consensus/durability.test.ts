/**
 * Consensus that awaits durability (RaftOptions.awaitDurability, the node's ledger.durability
 * Synced): entries are persisted (written) by a Ready and made durable later by a grouped sync
 * (Raft.markDurable). A backup acknowledges only durable entries; a primary sends its appends at
 * once and counts its own copy only once durable, so its backups' disks can commit without it.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { utf8 } from '../../src/base/index.js';
import { createRaft, type AppendEntries, type AppendResponse, type Entry, type Message, type Raft, type Ready } from '../../src/consensus/index.js';
import { Prng } from '../../src/testing/prng.js';

class Storage {
  entries: Entry[] = [];
  entryAt(seqno: number): Entry | undefined {
    return this.entries[seqno - 1];
  }
  persist(ready: Ready): void {
    if (ready.truncateAfterSeqno !== undefined) this.entries.length = ready.truncateAfterSeqno;
    this.entries.push(...ready.entriesToPersist);
  }
}

const CONFIG = [{ seqno: 0, nodes: ['a', 'b', 'c'] }];

function node(id: string): { raft: Raft; storage: Storage } {
  const storage = new Storage();
  const raft = createRaft({
    selfId: id,
    random: new Prng(3),
    storage,
    initial: { configs: CONFIG },
    electionTimeoutTicks: 10,
    heartbeatTicks: 2,
    maxBatchEntries: 100,
    maxBatchBytes: 100_000,
    maxUncommittedEntries: 100,
    awaitDurability: true,
  });
  return { raft, storage };
}

/** Persists (writes) every Ready and returns the messages, without making anything durable. */
function drain(n: { raft: Raft; storage: Storage }): Message[] {
  const out: Message[] = [];
  while (n.raft.hasReady()) {
    const ready = n.raft.ready();
    n.storage.persist(ready);
    out.push(...ready.messages);
    n.raft.advance(ready);
  }
  return out;
}

function entry(raft: Raft, kind: 'normal' | 'signature'): Entry {
  const s = raft.status();
  return { view: s.view, seqno: s.lastSeqno + 1, kind, bytes: utf8.encode(`${kind}${s.lastSeqno + 1}`) };
}

/** a is primary of view 1 (b voted), its opening signature at seqno 1 proposed and written, not yet durable. */
function primary(): { raft: Raft; storage: Storage } {
  const a = node('a');
  a.raft.campaign();
  a.raft.step({ type: 'vote-response', from: 'b', to: 'a', view: 1, preVote: true, granted: true });
  a.raft.step({ type: 'vote-response', from: 'b', to: 'a', view: 1, preVote: false, granted: true });
  assert.equal(a.raft.status().role, 'Primary');
  drain(a);
  a.raft.propose(entry(a.raft, 'signature'));
  return a;
}

function appendsTo(messages: Message[], to: string): AppendEntries[] {
  return messages.filter((m): m is AppendEntries => m.type === 'append' && m.to === to && m.entries.length > 0);
}

function responses(messages: Message[]): AppendResponse[] {
  return messages.filter((m): m is AppendResponse => m.type === 'append-response');
}

test('the primary sends its appends before its own sync ends, and without durable backups nothing commits', () => {
  const a = primary();
  const out = drain(a);
  // Written, not durable: the appends left all the same.
  assert.equal(appendsTo(out, 'b').length, 1);
  assert.equal(appendsTo(out, 'c').length, 1);
  assert.equal(a.raft.status().commitSeqno, 0);
  // Its own copy counts once durable: with b's acknowledgement that is a majority.
  a.raft.step({ type: 'append-response', from: 'b', to: 'a', view: 1, success: true, lastSeqno: 1, commitSeqno: 0 });
  assert.equal(a.raft.status().commitSeqno, 0, 'one backup alone is no majority while the primary has not synced');
  a.raft.markDurable(1);
  assert.equal(a.raft.status().commitSeqno, 1);
});

test('a primary whose own sync is slower than its backups\' commits on their disks alone', () => {
  const a = primary();
  drain(a);
  a.raft.step({ type: 'append-response', from: 'b', to: 'a', view: 1, success: true, lastSeqno: 1, commitSeqno: 0 });
  a.raft.step({ type: 'append-response', from: 'c', to: 'a', view: 1, success: true, lastSeqno: 1, commitSeqno: 0 });
  assert.equal(a.raft.status().commitSeqno, 1, 'b and c hold it on their disks: a majority without the primary');
  // The primary's own sync ending later changes nothing.
  a.raft.markDurable(1);
  assert.equal(a.raft.status().commitSeqno, 1);
});

test('a backup acknowledges an append only once the sync covering it has ended, cut down to what is durable', () => {
  const a = primary();
  a.raft.propose(entry(a.raft, 'normal'));
  a.raft.propose(entry(a.raft, 'signature'));
  const [append] = appendsTo(drain(a), 'b');
  assert.ok(append);
  const b = node('b');
  b.raft.step(append!);
  const before = responses(drain(b));
  assert.deepEqual(before, [], 'no acknowledgement while the entries are only written');
  // A sync that covered the first entry only (more arrived after it started).
  b.raft.markDurable(1);
  const partial = responses(drain(b));
  assert.equal(partial.length, 1);
  assert.equal(partial[0]!.success, true);
  assert.equal(partial[0]!.lastSeqno, 1);
  b.raft.markDurable(3);
  const whole = responses(drain(b));
  assert.equal(whole.length, 1);
  assert.equal(whole[0]!.lastSeqno, 3);
  // Nothing is held any more: a later sync sends nothing.
  b.raft.markDurable(3);
  assert.deepEqual(responses(drain(b)), []);
});

test('a backup never claims more than it persisted, even if told a sync covered more', () => {
  const a = primary();
  const [append] = appendsTo(drain(a), 'b');
  const b = node('b');
  b.raft.step(append!);
  // Stepped but not yet persisted (no Ready taken): nothing is durable.
  b.raft.markDurable(1);
  const first = b.raft.ready();
  assert.deepEqual(responses([...first.messages]), []);
  b.storage.persist(first);
  b.raft.advance(first);
  b.raft.markDurable(1);
  assert.equal(responses(drain(b))[0]?.lastSeqno, 1);
});

test('an append carrying a read id is answered at once (reads never wait for a disk), its entries acknowledged later', () => {
  const a = primary();
  const [append] = appendsTo(drain(a), 'b');
  const b = node('b');
  b.raft.step({ ...append!, readId: 7 });
  const now = responses(drain(b));
  assert.equal(now.length, 1);
  assert.equal(now[0]!.readId, 7);
  assert.equal(now[0]!.lastSeqno, 0, 'acknowledges only what is durable');
  b.raft.markDurable(1);
  const later = responses(drain(b));
  assert.equal(later[0]?.lastSeqno, 1);
});

test('without awaitDurability a backup acknowledges in the Ready that persists the entries (ledger.durability Replicated)', () => {
  const a = primary();
  const [append] = appendsTo(drain(a), 'b');
  const storage = new Storage();
  const b = createRaft({ selfId: 'b', random: new Prng(3), storage, initial: { configs: CONFIG }, electionTimeoutTicks: 10, heartbeatTicks: 2, maxBatchEntries: 100, maxBatchBytes: 100_000, maxUncommittedEntries: 100 });
  b.step(append!);
  const out = responses(drain({ raft: b, storage }));
  assert.equal(out[0]?.lastSeqno, 1);
  assert.throws(() => b.markDurable(1), /markDurable/);
});

test('entries read back from storage at start count as durable only once the caller says so (a process may have ended before its sync)', () => {
  const a = primary();
  a.raft.propose(entry(a.raft, 'normal'));
  const [append] = appendsTo(drain(a), 'b');
  // b had written both entries (page cache) when its process ended, before any sync.
  const storage = new Storage();
  storage.entries = [...append!.entries];
  const b = createRaft({
    selfId: 'b',
    random: new Prng(3),
    storage,
    initial: { configs: CONFIG, lastSeqno: 2, view: 1 },
    electionTimeoutTicks: 10,
    heartbeatTicks: 2,
    maxBatchEntries: 100,
    maxBatchBytes: 100_000,
    maxUncommittedEntries: 100,
    awaitDurability: true,
  });
  b.step({ type: 'append', from: 'a', to: 'b', view: 1, prevSeqno: 2, prevView: 1, commitSeqno: 0, entries: [] });
  assert.deepEqual(responses(drain({ raft: b, storage })), [], 'the heartbeat over entries not known durable is not answered as a match yet');
  b.markDurable(2);
  assert.equal(responses(drain({ raft: b, storage }))[0]?.lastSeqno, 2);
});
