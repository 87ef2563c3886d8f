/**
 * What writing one snapshot holds in memory on top of the packed state:
 * `node --expose-gc dist/bench/snapshot-memory.js [--records N] [--piece-bytes B]`.
 *
 * Fills a store as the logging application does (as bench/store-memory.ts: the private map
 * `records`, key String(id), a 210-byte JSON value), packs its state as a node does before handing
 * it to the snapshot writer, and then runs the writer's job (writeSnapshotJob, what the worker
 * thread runs) into a temporary folder. Prints one JSON line: the snapshot's size S, the peak RSS
 * while the job ran above the RSS with the packed state held (VmHWM, reset through
 * /proc/self/clear_refs just before the job), that peak in units of S, and the job's time.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { writeSnapshotJob } from '../src/ledger/index.js';
import { FsDisk } from '../src/platform/fs-disk.js';
import { snapshotWritePieceBytes } from '../src/node/limits.js';
import { numberArg } from './args.js';
import { fillLoggingStore } from './logging-store.js';

const MB = 1024 * 1024;

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) throw new Error('run with node --expose-gc');
  for (let i = 0; i < 3; i++) collect();
}

function statusKb(field: string): number {
  const line = fs
    .readFileSync('/proc/self/status', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${field}:`));
  if (line === undefined) throw new Error(`no ${field} in /proc/self/status`);
  return Number(line.split(/\s+/)[1]);
}

function main(): void {
  const records = numberArg('--records', 300_000);
  const pieceBytes = numberArg('--piece-bytes', snapshotWritePieceBytes);
  const store = fillLoggingStore(records);
  const packer = store.snapshotPacker(1);
  while (!packer.step(8192));
  const job = {
    packed: packer.result(),
    secret: new Uint8Array(32).fill(1),
    meta: { seqno: store.version, view: 1, view_history: [1], configurations: [], service_certificate: '', tree: { size: store.version, compaction_point: 0, block_hashes: '', leaves: '' } },
    path: '',
    pieceBytes,
  };
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'covenant-snapshot-memory-'));
  try {
    const disk = new FsDisk();
    const target = path.join(dir, 'snapshot_1.v1.uncommitted');
    gc();
    const baseRssKb = statusKb('VmRSS');
    // Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0 and later).
    fs.writeFileSync('/proc/self/clear_refs', '5');
    const startedMs = performance.now();
    const result = writeSnapshotJob({ ...job, path: target }, disk);
    const elapsedMs = performance.now() - startedMs;
    const peakKb = statusKb('VmHWM');
    const sizeMb = result.sizeBytes / MB;
    const aboveMb = (peakKb - baseRssKb) / 1024;
    console.log(
      JSON.stringify({
        bench: 'snapshot-memory',
        records,
        piece_bytes: pieceBytes,
        snapshot_mb: Number(sizeMb.toFixed(1)),
        rss_with_packed_state_mb: Math.round(baseRssKb / 1024),
        peak_above_packed_state_mb: Math.round(aboveMb),
        peak_above_in_s: Number((aboveMb / sizeMb).toFixed(2)),
        write_ms: Math.round(elapsedMs),
      }),
    );
    disk.close();
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

main();
