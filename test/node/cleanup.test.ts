/**
 * files_cleanup cycles (spec Limits rule 2): only one cycle runs at a time; a timer firing while
 * the previous cycle is unfinished skips its cycle with a failure-level log line.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import type { Clock } from '../../src/base/clock.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { FilesCleanup } from '../../src/node/cleanup.js';
import { defaultNodeConfig } from '../../src/config/index.js';

const clock: Clock = {
  nowMs: () => 0,
  monotonicMs: () => 0,
  setTimer: () => ({ cancel: () => undefined }),
  defer: (fn) => queueMicrotask(fn),
};

function writeSnapshots(disk: MemoryDisk, directory: string, seqnos: readonly number[]): void {
  disk.ensureDirectory(directory);
  for (const seqno of seqnos) {
    const file = disk.createFile(disk.join(directory, `snapshot_${seqno}_${seqno + 1}.committed`));
    file.append([new Uint8Array([1])]);
    file.sync();
    file.close();
  }
}

test('with no max_snapshots configured, committed snapshots beyond the default of 10 are deleted, oldest first', async () => {
  const config = defaultNodeConfig({ snapshots: { directory: 'snapshots' } }, '/');
  assert.equal(config.files_cleanup.max_snapshots, 10);
  const disk = new MemoryDisk();
  const directory = config.snapshots.directory;
  const seqnos = Array.from({ length: 13 }, (_, i) => (i + 1) * 10);
  writeSnapshots(disk, directory, seqnos);
  const cleanup = new FilesCleanup({ config, disk, logger: new MemoryLogger(), clock, relocateChunk: () => undefined, yieldControl: async () => undefined });
  const report = await cleanup.runCycle();
  assert.deepEqual(report.deletedSnapshots, ['snapshot_10_11.committed', 'snapshot_20_21.committed', 'snapshot_30_31.committed']);
  assert.equal(disk.listDirectory(directory).length, 10);
});

test('a cycle that is still running makes the next one skip, with a failure-level log line', async () => {
  const disk = new MemoryDisk();
  disk.ensureDirectory('snapshots');
  for (const seqno of [10, 20, 30]) {
    const file = disk.createFile(disk.join('snapshots', `snapshot_${seqno}_${seqno + 1}.committed`));
    file.append([new Uint8Array([1])]);
    file.sync();
    file.close();
  }
  const logger = new MemoryLogger();
  let release: () => void = () => undefined;
  const cleanup = new FilesCleanup({
    config: { ledger: { directory: 'ledger', read_only_directories: [], chunk_size: 1, durability: 'Synced' }, snapshots: { directory: 'snapshots', tx_count: 1, time_interval: 0, min_tx_count: 1, min_interval: 0, min_ledger_fraction: 0 }, files_cleanup: { interval: 1, max_snapshots: 1 } },
    disk,
    logger,
    clock,
    relocateChunk: () => undefined,
    // The first yield blocks until released: the cycle is unfinished when the timer fires again.
    yieldControl: () => new Promise<void>((resolve) => (release = resolve)),
  });
  const first = cleanup.tick();
  assert.ok(first !== undefined);
  assert.equal(cleanup.tick(), undefined, 'the second firing is skipped');
  assert.ok(logger.entries.some((e) => e.level === 'fail' && /previous cycle is still running/.test(e.msg)));
  // Let the first cycle finish: the lowest seqnos go first, down to max_snapshots.
  for (let i = 0; i < 4; i++) {
    release();
    await new Promise((r) => setImmediate(r));
  }
  const report = await first;
  assert.deepEqual(report.deletedSnapshots, ['snapshot_10_11.committed', 'snapshot_20_21.committed']);
  assert.deepEqual(disk.listDirectory('snapshots'), ['snapshot_30_31.committed']);
  assert.ok(cleanup.tick() !== undefined, 'once finished, the next cycle runs');
});
