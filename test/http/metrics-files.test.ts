/**
 * The scrape's figures of the ledger and snapshot folders, on real files in a temp folder: right
 * after every change a node makes (a chunk grows, is committed, removed; a snapshot is committed),
 * while a folder is listed again only when it changed and a committed chunk is stat'ed once.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LedgerFolderStats, SnapshotFolderStats } from '../../src/http/metrics-files.js';

test('ledger chunks: counted and sized as they are written, committed and removed; a committed chunk is stat\u2019ed once', () => {
  const root = mkdtempSync(join(tmpdir(), 'covenant-metrics-files-'));
  try {
    const dir = join(root, 'ledger');
    const stats = new LedgerFolderStats(dir);
    assert.deepEqual(stats.read(), { chunks: 0, sizeBytes: 0 }, 'no folder yet');
    mkdirSync(dir);
    writeFileSync(join(dir, 'ledger_1-10.committed'), Buffer.alloc(100));
    writeFileSync(join(dir, 'ledger_11'), Buffer.alloc(10));
    writeFileSync(join(dir, 'ledger_11.tmp-other'), Buffer.alloc(1));
    writeFileSync(join(dir, 'not-a-chunk'), Buffer.alloc(1000));
    assert.deepEqual(stats.read(), { chunks: 3, sizeBytes: 111 });
    appendFileSync(join(dir, 'ledger_11'), Buffer.alloc(5));
    assert.deepEqual(stats.read(), { chunks: 3, sizeBytes: 116 }, 'the open chunk grew: seen without a new listing');
    // A committed chunk never changes: its size is not read again (this write is one no node makes).
    appendFileSync(join(dir, 'ledger_1-10.committed'), Buffer.alloc(50));
    assert.deepEqual(stats.read(), { chunks: 3, sizeBytes: 116 }, 'a committed chunk\u2019s size is read once');
    renameSync(join(dir, 'ledger_11'), join(dir, 'ledger_11-20.committed'));
    rmSync(join(dir, 'ledger_11.tmp-other'));
    assert.deepEqual(stats.read(), { chunks: 2, sizeBytes: 115 }, 'renamed and removed: listed again');
    rmSync(join(dir, 'ledger_1-10.committed'));
    assert.deepEqual(stats.read(), { chunks: 1, sizeBytes: 15 });
    rmSync(dir, { recursive: true });
    assert.deepEqual(stats.read(), { chunks: 0, sizeBytes: 0 });
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('the newest committed snapshot: found again when one is committed or removed, not before', () => {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-metrics-snapshots-'));
  try {
    const stats = new SnapshotFolderStats(dir);
    assert.equal(stats.newest(), undefined);
    writeFileSync(join(dir, 'snapshot_100_101.committed'), Buffer.alloc(30));
    writeFileSync(join(dir, 'snapshot_200_201'), Buffer.alloc(40));
    assert.equal(stats.newest()?.seqno, 100, 'an uncommitted snapshot does not count');
    assert.equal(stats.newest()?.sizeBytes, 30);
    renameSync(join(dir, 'snapshot_200_201'), join(dir, 'snapshot_200_201.committed'));
    assert.deepEqual([stats.newest()?.seqno, stats.newest()?.sizeBytes], [200, 40]);
    rmSync(join(dir, 'snapshot_200_201.committed'));
    assert.equal(stats.newest()?.seqno, 100);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
