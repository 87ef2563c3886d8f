/** ledger.durability: Synced makes each persisted batch durable before the driver acknowledges it; Replicated leaves it in the page cache. */
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

function unsyncedOf(durability: 'Synced' | 'Replicated'): number {
  const disk = new MemoryDisk();
  const replica = new Replica({ disk, logger: new MemoryLogger(), clock: new ManualClock(), ledgerDirectory: '/ledger', readOnlyLedgerDirectories: [], secrets: new LedgerSecrets(), durability });
  replica.openLedger(undefined);
  replica.persist([frame(1), frame(2), frame(3)], undefined);
  return disk.listDirectory('/ledger').reduce((n, name) => n + disk.unsyncedBytes(`/ledger/${name}`), 0);
}

test('Synced: a persisted batch is on disk when persist returns (one sync for the batch); Replicated: it is not yet', () => {
  assert.equal(unsyncedOf('Synced'), 0);
  assert.ok(unsyncedOf('Replicated') > 0);
});

test('ledger.durability defaults to Synced, the choice that loses no committed transaction', () => {
  assert.equal(defaultNodeConfig().ledger.durability, 'Synced');
  assert.equal(defaultNodeConfig({ ledger: { durability: 'Replicated' } }).ledger.durability, 'Replicated');
  assert.throws(() => defaultNodeConfig({ ledger: { durability: 'Sometimes' as never } }), /ledger\.durability/);
});
