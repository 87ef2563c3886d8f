/**
 * Snapshot requests (POST /node/snapshot:create, trigger_snapshot): a request while one is pending
 * is coalesced with it; operator requests are limited to one per snapshots.min_interval (429
 * TooManySnapshotRequests with Retry-After beyond). Time comes from a manual clock.
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

function manager(snapshots: { min_interval?: string } = {}) {
  const clock = new ManualClock();
  const logger = new MemoryLogger();
  const store = new Store();
  let signaturesAsked = 0;
  const unused = (): never => assert.fail('not used by snapshot requests');
  const host: SnapshotHost = {
    config: defaultNodeConfig({ snapshots: { tx_count: 1000, ...snapshots } }, '/'),
    disk: new MemoryDisk(),
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
    requestEvidence: unused,
    snapshotWriter: { write: unused, close: () => {} },
    snapshotWriterKind: 'inline',
  };
  return { snapshots: new SnapshotManager(host), clock, logger, signaturesAsked: () => signaturesAsked };
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
