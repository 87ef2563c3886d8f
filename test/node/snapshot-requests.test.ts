/**
 * Snapshot requests (POST /node/snapshot:create, trigger_snapshot): a request while one is pending
 * is coalesced with it; operator requests are limited to one per snapshots.min_interval (429
 * TooManySnapshotRequests with Retry-After beyond). Time comes from a manual clock. An automatic
 * snapshot point also waits for snapshots.min_ledger_fraction of the previous snapshot's size in
 * new ledger bytes; a requested one does not.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import { defaultNodeConfig } from '../../src/config/index.js';
import { Store } from '../../src/kv/index.js';
import { isNodeError } from '../../src/node/errors.js';
import { SnapshotManager, type SnapshotHost } from '../../src/node/snapshots.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';

function manager(snapshots: { min_interval?: string; min_ledger_fraction?: number; tx_count?: number } = {}, disk = new MemoryDisk()) {
  const clock = new ManualClock();
  let ledgerBytes = 0;
  const logger = new MemoryLogger();
  const store = new Store();
  let signaturesAsked = 0;
  const unused = (): never => assert.fail('not used by snapshot requests');
  const host: SnapshotHost = {
    config: defaultNodeConfig({ snapshots: { tx_count: 1000, ...snapshots } }, '/'),
    disk,
    logger,
    clock,
    store: () => store,
    tree: unused,
    encryptor: unused,
    serviceCertificatePem: unused,
    genesisConfiguration: unused,
    viewHistory: () => [],
    commitEvidence: unused,
    isPrimary: () => true,
    holdsPrivateDomain: () => true,
    requestSignature: () => void signaturesAsked++,
    ledgerBytesAfter: () => ledgerBytes,
    requestEvidence: unused,
    snapshotWriter: { write: unused, close: () => {} },
    snapshotWriterKind: 'inline',
  };
  return {
    snapshots: new SnapshotManager(host),
    clock,
    logger,
    signaturesAsked: () => signaturesAsked,
    setLedgerBytes: (bytes: number) => void (ledgerBytes = bytes),
  };
}

test('several rapid snapshot:create requests make one snapshot: the later ones are coalesced with the pending one', () => {
  const { snapshots, signaturesAsked } = manager({ min_interval: '0s' });
  assert.equal(snapshots.requestByOperator(), 'requested');
  for (let i = 0; i < 25; i++) assert.equal(snapshots.requestByOperator(), 'coalesced');
  assert.equal(snapshots.request(), 'coalesced', 'trigger_snapshot too');
  assert.equal(signaturesAsked(), 1, 'one signature asked for');
  assert.equal(snapshots.dueAt(5), true, 'the next signature is the snapshot point');
  // Its snapshot is not written yet: still pending, still coalesced.
  assert.equal(snapshots.requestByOperator(), 'coalesced');
  assert.equal(snapshots.dueAt(6), false, 'only one snapshot point for all of them');
  // The snapshot point is rolled back: a new request is a new snapshot.
  snapshots.onRollback(4);
  assert.equal(snapshots.requestByOperator(), 'requested');
  assert.equal(snapshots.dueAt(7), true);
});

test('snapshot:create within snapshots.min_interval (default 10s) of the last is refused with 429 and Retry-After', () => {
  const { snapshots, clock, logger } = manager();
  assert.equal(snapshots.requestByOperator(), 'requested');
  assert.equal(snapshots.dueAt(5), true);
  snapshots.onRollback(4); // as if the snapshot were written: nothing pending any more
  clock.advance(2500);
  assert.throws(
    () => snapshots.requestByOperator(),
    (e: unknown) => isNodeError(e, 'TooManySnapshotRequests') && e.status === 429 && e.retryAfterSeconds === 8 && /min_interval/.test(e.message),
  );
  assert.ok(logger.entries.some((e) => /snapshot:create refused/.test(e.msg)), 'a log line says why');
  // trigger_snapshot is a governance decision: coalesced, never rate-limited.
  assert.equal(snapshots.request(), 'requested');
  assert.equal(snapshots.dueAt(6), true);
  snapshots.onRollback(5);
  clock.advance(7500);
  assert.equal(snapshots.requestByOperator(), 'requested', 'once the interval has passed');
});

/** A disk whose snapshots.directory holds files of these names and sizes. */
function diskWithSnapshots(files: Record<string, number>): MemoryDisk {
  const disk = new MemoryDisk();
  disk.ensureDirectory('/snapshots');
  for (const [name, sizeBytes] of Object.entries(files)) {
    const file = disk.createFile(`/snapshots/${name}`);
    file.append([new Uint8Array(sizeBytes)]);
    file.close();
  }
  return disk;
}

test('an automatic snapshot point waits until the ledger since the previous snapshot is min_ledger_fraction of its size; a request does not', () => {
  // The newest committed snapshot the node holds, at 4000: 1,000 bytes.
  const disk = diskWithSnapshots({ 'snapshot_4000_4002.committed': 1000, 'snapshot_2000_2002.committed': 10 });
  const { snapshots, logger, setLedgerBytes } = manager({ tx_count: 1000, min_ledger_fraction: 0.5 }, disk);
  snapshots.start();
  setLedgerBytes(499);
  assert.equal(snapshots.dueAt(1000), false, 'tx_count reached, half of the snapshot in ledger bytes not');
  assert.equal(snapshots.dueAt(1001), false);
  assert.equal(logger.entries.filter((e) => /snapshot deferred: 499 bytes .* once 500 are written \(snapshots.min_ledger_fraction 0.5\)/.test(e.msg)).length, 1, 'said once, not at every signature');
  assert.equal(snapshots.request(), 'requested');
  assert.equal(snapshots.dueAt(1002), true, 'a requested snapshot does not wait');
  snapshots.onRollback(1001);
  setLedgerBytes(500);
  // Measured again a tenth of tx_count after the deferral (at 1000), not at every signature.
  assert.equal(snapshots.dueAt(1003), false, 'not measured again yet');
  assert.equal(snapshots.dueAt(1101), true, 'due once the ledger since holds half the snapshot\'s size');
});

test('with min_ledger_fraction 0, or no snapshot held, tx_count alone decides', () => {
  const disk = diskWithSnapshots({ 'snapshot_4000_4002.committed': 1000 });
  const off = manager({ tx_count: 1000, min_ledger_fraction: 0 }, disk);
  off.snapshots.start();
  assert.equal(off.snapshots.dueAt(1000), true);
  const none = manager({ tx_count: 1000, min_ledger_fraction: 0.5 });
  none.snapshots.start();
  assert.equal(none.snapshots.dueAt(999), false, 'below tx_count');
  assert.equal(none.snapshots.dueAt(1000), true, 'no snapshot held: nothing to compare with');
});
