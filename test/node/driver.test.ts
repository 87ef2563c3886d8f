/** The consensus driver does what one Ready asks for in one fixed order (persist before send, commit after persist). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import type { Entry, Ready } from '../../src/consensus/index.js';
import { ConsensusDriver, type DriverHost } from '../../src/node/driver.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

function recordingHost(calls: string[], state: { storeVersion: number; ledgerLast: number; commit: number; primary: boolean }): DriverHost {
  return {
    logger: new MemoryLogger(),
    clock: new ManualClock(),
    storeVersion: () => state.storeVersion,
    ledgerLastSeqno: () => state.ledgerLast,
    commitSeqno: () => state.commit,
    forgetProposals: () => calls.push('forgetProposals'),
    abandonIfDeposed: () => calls.push('abandonIfDeposed'),
    rollbackTo: (seqno) => {
      calls.push(`rollbackTo ${seqno}`);
      state.storeVersion = seqno;
    },
    applyReplicated: (entry) => {
      calls.push(`apply ${entry.seqno}`);
      state.storeVersion = entry.seqno;
    },
    persistEntries: (frames, truncate) => {
      calls.push(`persist ${frames.length} after truncating at ${truncate}`);
      state.ledgerLast = (truncate ?? state.ledgerLast) + frames.length;
    },
    durableSeqno: () => state.ledgerLast,
    persistHardState: (view, votedFor) => calls.push(`hardState ${view} ${votedFor}`),
    send: (to) => calls.push(`send ${to}`),
    advanceCommit: (seqno) => calls.push(`commit ${seqno}`),
    onRoleChange: (change) => calls.push(`role ${change.role}`),
    settleReads: (confirmed, abandoned) => calls.push(`reads ${confirmed.map((r) => `${r.readId}@${r.seqno}`).join()} abandoned ${abandoned.join()}`),
    reportSnapshotsNeeded: (ids) => calls.push(`snapshotsNeeded ${ids.join()}`),
    isPrimary: () => state.primary,
    emitSignature: () => calls.push('signature'),
    recordRetirements: (ids) => calls.push(`retirements ${ids.join()}`),
    afterPump: () => calls.push('afterPump'),
    entryAt: () => undefined,
  };
}

const entry = (seqno: number): Entry => ({ view: 3, seqno, kind: 'normal', bytes: new Uint8Array([seqno]), configuration: undefined, retiredCommitted: undefined, sidecar: undefined });

test('one Ready with every kind of work: rollback, apply, persist, hard state, send, commit, role change, reads, reports, signature, retirements — in that order', () => {
  const calls: string[] = [];
  const state = { storeVersion: 12, ledgerLast: 12, commit: 8, primary: true };
  const driver = new ConsensusDriver(recordingHost(calls, state));
  const ready: Ready = {
    truncateAfterSeqno: 10,
    entriesToPersist: [entry(11), entry(12)],
    hardState: { view: 3, votedFor: 'b', commitSeqno: 8 },
    messages: [{ type: 'AppendResponse', from: 'a', to: 'b', view: 3 } as unknown as Ready['messages'][number]],
    committedSeqno: 20,
    roleChange: { role: 'Primary', view: 3, primaryId: 'a' },
    signatureRequested: true,
    retirementsToRecord: ['c'],
    snapshotsNeeded: ['d'],
    retirementStage: undefined,
    readsConfirmed: [{ readId: 4, seqno: 12 }],
    readsAbandoned: [3],
  };
  driver.handleReady(ready);
  assert.deepEqual(calls, [
    'forgetProposals',
    'rollbackTo 10',
    'apply 11',
    'apply 12',
    'persist 2 after truncating at 10',
    'hardState 3 b',
    'send b',
    // Commit never passes what this node has persisted.
    'commit 12',
    'role Primary',
    // After commit: a confirmed read runs on committed state.
    'reads 4@12 abandoned 3',
    'snapshotsNeeded d',
    'signature',
    'retirements c',
  ]);
});

test('an unchanged hard state is not persisted again; a backup neither signs nor records retirements; a truncation alone cuts the ledger', () => {
  const calls: string[] = [];
  const state = { storeVersion: 5, ledgerLast: 7, commit: 5, primary: false };
  const driver = new ConsensusDriver(recordingHost(calls, state));
  const base: Ready = {
    truncateAfterSeqno: undefined,
    entriesToPersist: [],
    hardState: { view: 2, votedFor: undefined, commitSeqno: 5 },
    messages: [],
    committedSeqno: 5,
    roleChange: undefined,
    signatureRequested: true,
    retirementsToRecord: ['x'],
    snapshotsNeeded: [],
    retirementStage: undefined,
    readsConfirmed: [],
    readsAbandoned: [],
  };
  driver.handleReady(base);
  driver.handleReady(base);
  driver.handleReady({ ...base, hardState: undefined, truncateAfterSeqno: 6 });
  assert.deepEqual(calls, ['hardState 2 undefined', 'forgetProposals', 'persist 0 after truncating at 6']);
});
