/**
 * ledger.durability: Synced makes persisted batches durable by grouped syncs off the event loop
 * and counts only durable entries (durableSeqno); Replicated leaves them in the page cache and
 * counts them at once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { encodeEntry } from '../../src/ledger/index.js';
import { LedgerSecrets } from '../../src/node/identity/ledger-secrets.js';
import { Replica } from '../../src/node/replica.js';
import { defaultNodeConfig } from '../../src/config/index.js';

function frame(seqno: number): Uint8Array {
  return encodeEntry({ view: 1, seqno, flags: 0, claimsDigest: new Uint8Array(32), commitEvidenceDigest: new Uint8Array(32), publicBytes: new Uint8Array(8), privateBytes: new Uint8Array(0) });
}

function replicaOn(disk: MemoryDisk, durability: 'Synced' | 'Replicated'): Replica {
  const replica = new Replica({ disk, logger: new MemoryLogger(), clock: new ManualClock(), ledgerDirectory: '/ledger', readOnlyLedgerDirectories: [], secrets: new LedgerSecrets(), durability });
  replica.openLedger(undefined);
  return replica;
}

function unsynced(disk: MemoryDisk): number {
  return disk.listDirectory('/ledger').reduce((n, name) => n + disk.unsyncedBytes(`/ledger/${name}`), 0);
}

const frames = (from: number, to: number): Uint8Array[] => Array.from({ length: to - from + 1 }, (_, i) => frame(from + i));

test('Synced: persist writes and returns at once; the batch is durable (and durableSeqno moves) when the sync off the event loop ends', () => {
  const disk = new MemoryDisk();
  disk.holdSyncs();
  const replica = replicaOn(disk, 'Synced');
  let told = 0;
  replica.whenDurable(() => told++);
  replica.persist(frames(1, 3), undefined);
  assert.ok(unsynced(disk) > 0, 'written, not yet durable');
  assert.equal(replica.durableSeqno, 0);
  assert.equal(disk.syncsUnderWay, 1);
  assert.equal(disk.releaseSyncs(), 1);
  assert.equal(unsynced(disk), 0);
  assert.equal(replica.durableSeqno, 3);
  assert.equal(told, 1);
});

test('Replicated: nothing is synced; every written entry counts at once', () => {
  const disk = new MemoryDisk();
  const replica = replicaOn(disk, 'Replicated');
  replica.persist(frames(1, 3), undefined);
  assert.ok(unsynced(disk) > 0);
  assert.equal(disk.asyncSyncCount, 0);
  assert.equal(replica.durableSeqno, 3);
});

test('syncs are grouped: the persists made while one sync is under way share the next one', () => {
  const disk = new MemoryDisk();
  disk.holdSyncs();
  const replica = replicaOn(disk, 'Synced');
  replica.persist(frames(1, 1), undefined);
  replica.persist(frames(2, 2), undefined);
  replica.persist(frames(3, 4), undefined);
  assert.equal(replica.ledgerSyncs, 1, 'one sync under way, the next group forming');
  disk.releaseSyncs();
  // The first sync covered entry 1 only; one more sync, started when it ended, covers 2..4.
  assert.equal(replica.durableSeqno, 1);
  assert.equal(replica.ledgerSyncs, 2);
  disk.releaseSyncs();
  assert.equal(replica.durableSeqno, 4);
  assert.equal(replica.ledgerSyncs, 2);
});

test('a truncation while a sync is under way: the sync covers only the entries before the cut', () => {
  const disk = new MemoryDisk();
  disk.holdSyncs();
  const replica = replicaOn(disk, 'Synced');
  replica.persist(frames(1, 5), undefined);
  // A new primary's entries replace 4 and 5 while the sync of 1..5 is under way.
  replica.persist(frames(4, 6), 3);
  disk.releaseSyncs();
  assert.equal(replica.durableSeqno, 3, 'the replaced 4 and 5 were not what the sync saw');
  disk.releaseSyncs();
  assert.equal(replica.durableSeqno, 6);
});

test('a power cut between a backup\'s append and its sync loses only entries it never counted as durable', () => {
  const disk = new MemoryDisk({ random: () => 0 });
  disk.holdSyncs();
  const replica = replicaOn(disk, 'Synced');
  replica.persist(frames(1, 3), undefined);
  disk.releaseSyncs();
  assert.equal(replica.durableSeqno, 3);
  replica.persist(frames(4, 6), undefined);
  assert.equal(replica.durableSeqno, 3);
  // The power goes before the sync of 4..6 ends: that sync never ends, the unsynced tail is torn off.
  disk.crash();
  assert.equal(disk.releaseSyncs(), 0);
  assert.equal(replica.durableSeqno, 3);
  const reopened = replicaOn(disk, 'Synced');
  assert.equal(reopened.ledger.lastSeqno, 3, 'everything counted as durable survived, nothing more');
});

test('ledger.durability defaults to Synced, the choice that loses no committed transaction', () => {
  assert.equal(defaultNodeConfig().ledger.durability, 'Synced');
  assert.equal(defaultNodeConfig({ ledger: { durability: 'Replicated' } }).ledger.durability, 'Replicated');
  assert.throws(() => defaultNodeConfig({ ledger: { durability: 'Sometimes' as never } }), /ledger\.durability/);
});
