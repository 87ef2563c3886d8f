/** Signature scheduling: every tx_count transactions, after the delay, and waiting (bounded) for a busy sealer. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Store } from '../../src/kv/index.js';
import { HistoryTree } from '../../src/merkle/index.js';
import { EntryFlags } from '../../src/ledger/index.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { Signatures, type SignaturesHost } from '../../src/node/write/signatures.js';

function setup(options: { txCount: number; delayMs: number; electionTimeoutMs?: number }) {
  const clock = new ManualClock();
  const store = new Store();
  const proposed: { seqno: number; flags: number }[] = [];
  const sealer = { pendingBytes: 0, drains: 0 };
  const proposer = {
    drain: () => void sealer.drains++,
    get pendingBytes() {
      return sealer.pendingBytes;
    },
    propose: (seqno: number, _writeSet: unknown, flags: number) => {
      proposed.push({ seqno, flags });
      return { view: 1, seqno };
    },
    forceLedgerChunk: () => undefined,
  };
  const host = {
    config: { ledger_signatures: { tx_count: options.txCount, delay: options.delayMs }, consensus: { election_timeout: options.electionTimeoutMs ?? 1000 } },
    clock,
    identity: { exists: true, nodeId: 'n', nodeCertificatePem: 'C', sign: () => new Uint8Array(8) },
    replica: {
      store,
      tree: new HistoryTree(),
      commitSeqno: 0,
      lastSignedSeqno: 0,
      markSigned(seqno: number) {
        this.lastSignedSeqno = seqno;
      },
    },
    proposer,
    snapshots: { dueAt: () => false, dueEvidence: () => undefined },
    isPrimary: () => true,
    stopped: () => false,
    currentView: () => 1,
    viewOf: () => 1,
    pump: () => undefined,
  } as unknown as SignaturesHost;
  const signatures = new Signatures(host);
  /** A transaction the store commits, then counted as the node counts it. */
  const write = () => {
    const tx = store.beginTx();
    tx.map('t', { encode: (v: string) => new TextEncoder().encode(v), decode: (b: Uint8Array) => new TextDecoder().decode(b) }).put('k', 'v');
    tx.apply();
    signatures.afterWrite();
  };
  const signed = () => proposed.filter((p) => (p.flags & EntryFlags.SIGNATURE) !== 0).map((p) => p.seqno);
  return { clock, signatures, sealer, write, signed };
}

test('a signature every tx_count transactions, at the next seqno, the sealer drained first', () => {
  const s = setup({ txCount: 3, delayMs: 1000 });
  s.write();
  s.write();
  assert.deepEqual(s.signed(), []);
  s.write();
  assert.deepEqual(s.signed(), [4]);
  assert.equal(s.sealer.drains, 1);
});

test('fewer than tx_count transactions are signed once the delay has passed, and only once', () => {
  const s = setup({ txCount: 100, delayMs: 50 });
  s.write();
  s.clock.advance(49);
  assert.deepEqual(s.signed(), []);
  s.clock.advance(1);
  assert.deepEqual(s.signed(), [2]);
  s.clock.advance(500);
  assert.deepEqual(s.signed(), [2], 'nothing unsigned: no signature');
});

test('a signature due while the sealer holds a large write set waits for it, but no longer than half an election timeout', () => {
  const s = setup({ txCount: 100, delayMs: 10, electionTimeoutMs: 1000 });
  s.sealer.pendingBytes = 1024 * 1024;
  s.write();
  s.clock.advance(10);
  s.clock.advance(200);
  assert.deepEqual(s.signed(), [], 'waiting for the sealer');
  s.sealer.pendingBytes = 0;
  s.clock.advance(5);
  assert.deepEqual(s.signed(), [2], 'signed once the sealer caught up');

  const stuck = setup({ txCount: 100, delayMs: 10, electionTimeoutMs: 1000 });
  stuck.sealer.pendingBytes = 1024 * 1024;
  stuck.write();
  stuck.clock.advance(10);
  stuck.clock.advance(495);
  assert.deepEqual(stuck.signed(), []);
  stuck.clock.advance(10);
  assert.deepEqual(stuck.signed(), [2], 'commit is never starved by the sealer: signed after half an election timeout');
});

test('writes waiting for their commit get one signature at the end of their turn, not after the delay', () => {
  const s = setup({ txCount: 100, delayMs: 1000 });
  s.write();
  s.signatures.requestAtTurnEnd();
  s.write();
  s.signatures.requestAtTurnEnd();
  assert.deepEqual(s.signed(), [], 'not inside the turn');
  s.clock.advance(0);
  assert.deepEqual(s.signed(), [3], 'one signature for both writes of the turn');
  s.signatures.requestAtTurnEnd();
  s.clock.advance(0);
  assert.deepEqual(s.signed(), [3], 'nothing unsigned: no signature');
});

test('at most one waiters\' signature in flight: the writes of later turns share the next one, made once it commits', () => {
  const s = setup({ txCount: 100, delayMs: 1000 });
  const replica = (s.signatures as unknown as { host: { replica: { commitSeqno: number } } }).host.replica;
  s.write();
  s.signatures.requestAtTurnEnd();
  s.clock.advance(0);
  assert.deepEqual(s.signed(), [2]);
  // Three more turns of writes while signature 2 is not committed: no signature each.
  for (let turn = 0; turn < 3; turn++) {
    s.write();
    s.signatures.requestAtTurnEnd();
    s.clock.advance(0);
  }
  assert.deepEqual(s.signed(), [2], 'one signature in flight at most');
  // Commit of something before the signature changes nothing; commit of the signature brings the next.
  replica.commitSeqno = 1;
  s.signatures.onCommit(1);
  s.clock.advance(0);
  assert.deepEqual(s.signed(), [2]);
  replica.commitSeqno = 2;
  s.signatures.onCommit(2);
  s.clock.advance(0);
  assert.deepEqual(s.signed(), [2, 6], 'one signature for the writes of the three turns');
  // The delay still bounds how long a write waits, whatever is in flight.
  s.write();
  s.signatures.requestAtTurnEnd();
  s.clock.advance(1000);
  assert.deepEqual(s.signed(), [2, 6, 8]);
});

test('a node that stops being primary forgets its signature in flight: the next waiters are signed at their turn end', () => {
  const s = setup({ txCount: 100, delayMs: 1000 });
  s.write();
  s.signatures.requestAtTurnEnd();
  s.clock.advance(0);
  s.signatures.cancelTimer();
  s.write();
  s.signatures.requestAtTurnEnd();
  s.clock.advance(0);
  assert.deepEqual(s.signed(), [2, 4]);
});
