/** The proposer: transactions reach consensus framed and in seqno order; refusals leave nothing; a deposed primary's pipeline is dropped. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import { CovenantError } from '../../src/base/errors.js';
import { Store, type WriteSet } from '../../src/kv/index.js';
import { HistoryTree } from '../../src/merkle/index.js';
import { EntryFlags, decodeEntry, type EntryFramer, type FrameJob, type FramedEntry, EntryFraming } from '../../src/ledger/index.js';
import type { Entry, Raft } from '../../src/consensus/index.js';
import { LedgerSecrets } from '../../src/node/identity/ledger-secrets.js';
import { Proposer, type ProposerHost } from '../../src/node/write/proposer.js';
import { isNodeError } from '../../src/node/errors.js';

/** A framer that holds jobs until drained (a worker thread, made synchronous for the test). */
function queuedFramerFactory(queues: { jobs: FrameJob[] }[]) {
  return <J extends FrameJob>(secret: Uint8Array, complete: (job: J, framed: FramedEntry) => void): EntryFramer<J> => {
    const frame = new EntryFraming(secret);
    const queue = { jobs: [] as J[] };
    queues.push(queue as { jobs: FrameJob[] });
    return {
      submit: (job) => void queue.jobs.push(job),
      get pending() {
        return queue.jobs.length;
      },
      get pendingBytes() {
        return queue.jobs.reduce((n, j) => n + j.privatePlain.byteLength + j.publicBytes.byteLength, 0);
      },
      drain: () => {
        for (const job of queue.jobs.splice(0)) complete(job, frame.frame(job));
      },
      close: () => void queue.jobs.splice(0),
    };
  };
}

function setup(options: { entryBytesMax?: number; chunkSizeBytes?: number; refuse?: boolean } = {}) {
  const store = new Store();
  const tree = new HistoryTree();
  const secrets = new LedgerSecrets();
  secrets.install(0, new Uint8Array(32).fill(7));
  const proposed: Entry[] = [];
  const state = { primary: true, view: 2 };
  const raft = {
    summary: () => ({ view: state.view, retiring: false, role: state.primary ? 'Primary' : 'Backup' }),
    checkProposal: () => {
      if (options.refuse) throw new CovenantError('TooManyPendingTransactions', 'full', 503);
    },
    propose: (entry: Entry) => void proposed.push(entry),
  } as unknown as Raft;
  const queues: { jobs: FrameJob[] }[] = [];
  const host: ProposerHost = {
    logger: new MemoryLogger(),
    replica: { store, tree, ledger: { writeChunkSizeBytes: 0 }, dropUnproposed: (seqno: number) => store.rollback(seqno) } as unknown as ProposerHost['replica'],
    secrets,
    chunkSizeBytes: options.chunkSizeBytes ?? 1024 * 1024,
    entryBytesMax: options.entryBytesMax ?? 1024 * 1024,
    createEntryFramer: queuedFramerFactory(queues),
    raft: () => raft,
    isPrimary: () => state.primary,
    schedulePump: () => undefined,
    snapshotWantsEntry: () => false,
    snapshotAfterEntry: () => undefined,
  };
  const proposer = new Proposer(host);
  proposer.useLatestSecret();
  const codec = { encode: (v: string) => new TextEncoder().encode(v), decode: (b: Uint8Array) => new TextDecoder().decode(b) };
  const commit = (value: string): { version: number; writeSet: WriteSet } => {
    const tx = store.beginTx();
    tx.map('records', codec).put('k', value);
    return tx.apply()!;
  };
  return { store, tree, proposer, proposed, state, queues, commit };
}

test('pipelined transactions are proposed in seqno order once framed, with their leaves in the tree and private write sets beside them', () => {
  const s = setup();
  for (const v of ['a', 'b', 'c']) {
    const c = s.commit(v);
    assert.deepEqual(s.proposer.propose(c.version, c.writeSet, 0, undefined), { view: 2, seqno: c.version });
  }
  assert.equal(s.proposed.length, 0, 'nothing proposed before framing');
  s.proposer.drain();
  assert.deepEqual(s.proposed.map((e) => e.seqno), [1, 2, 3]);
  assert.deepEqual(s.proposed.map((e) => decodeEntry(e.bytes).seqno), [1, 2, 3]);
  assert.ok(s.proposed.every((e) => e.sidecar !== undefined), 'backups get the private write set in clear');
  assert.equal(s.tree.size, 3);
  assert.equal(s.proposer.recent(2), s.proposed[1], 'kept for resending');
});

test('a transaction consensus refuses, or too large to replicate, leaves the store as it was', () => {
  const refused = setup({ refuse: true });
  const c = refused.commit('a');
  assert.throws(() => refused.proposer.propose(c.version, c.writeSet, 0, undefined), /full/);
  assert.equal(refused.store.version, 0);
  const large = setup({ entryBytesMax: 100 });
  const big = large.commit('x'.repeat(500));
  assert.throws(() => large.proposer.propose(big.version, big.writeSet, 0, undefined), (e: unknown) => isNodeError(e, 'TransactionTooLarge'));
  assert.equal(large.store.version, 0);
});

test('a primary deposed while transactions are being framed drops them from the store, and their completions propose nothing', () => {
  const s = setup();
  const a = s.commit('a');
  s.proposer.propose(a.version, a.writeSet, 0, undefined);
  const b = s.commit('b');
  s.proposer.propose(b.version, b.writeSet, 0, undefined);
  s.state.primary = false;
  s.proposer.abandonIfDeposed();
  assert.equal(s.store.version, 0, 'rolled back');
  s.proposer.drain();
  assert.equal(s.proposed.length, 0);
});

test('a signature ends the chunk once it is full, or when forced; the next chunk counts from zero', () => {
  const s = setup({ chunkSizeBytes: 1 });
  const a = s.commit('a');
  s.proposer.propose(a.version, a.writeSet, 0, undefined);
  const sig = s.commit('signature');
  s.proposer.propose(sig.version, sig.writeSet, EntryFlags.SIGNATURE, undefined);
  const flags = s.proposed.map((e) => decodeEntry(e.bytes).flags);
  assert.equal(flags[0]! & EntryFlags.CHUNK_END, 0);
  assert.notEqual(flags[1]! & EntryFlags.CHUNK_END, 0, 'the signature after a full chunk ends it');
  const roomy = setup({ chunkSizeBytes: 1024 * 1024 });
  const t = roomy.commit('t');
  roomy.proposer.propose(t.version, t.writeSet, EntryFlags.SIGNATURE, undefined);
  roomy.proposer.forceLedgerChunk();
  const u = roomy.commit('u');
  roomy.proposer.propose(u.version, u.writeSet, EntryFlags.SIGNATURE, undefined);
  const roomyFlags = roomy.proposed.map((e) => decodeEntry(e.bytes).flags & EntryFlags.CHUNK_END);
  assert.deepEqual(roomyFlags.map((f) => f !== 0), [false, true]);
});
