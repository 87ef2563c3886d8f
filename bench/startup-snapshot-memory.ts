/**
 * What a node that started from a snapshot holds of its file after the start:
 * `node --expose-gc dist/bench/startup-snapshot-memory.js [--records N]`.
 *
 * Writes the snapshot of a store filled as bench/store-memory.ts does (the private map `records`,
 * 210-byte values) to a temporary file (in a child process, so that the filling leaves nothing in
 * this one's heap), then starts from it as a node does: reads the file, splits
 * it into its sections (parseSnapshotFile) and loads the store from the store section. Prints one
 * JSON line: the file's size, and the RSS after full collections with the loaded store and the
 * parsed file held (as a node kept its startup snapshot for a later recovery) and then with the
 * file's store bytes dropped (withoutStoreBytes, as a node now does once started).
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { LedgerEncryptor, loadSnapshotAtOnce, Store } from '../src/kv/index.js';
import { encodeSnapshotFile, parseSnapshotFile } from '../src/ledger/index.js';
import type { StartupSnapshot } from '../src/node/snapshots.js';
import { withoutStoreBytes } from '../src/node/startup-snapshot-store.js';
import { FsDisk } from '../src/platform/fs-disk.js';
import { systemClock } from '../src/platform/clock.js';
import { fillLoggingStore } from './logging-store.js';

const MB = 1024 * 1024;

function rssMb(): number {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) throw new Error('run with node --expose-gc');
  for (let i = 0; i < 3; i++) collect();
  return Math.round(process.memoryUsage().rss / MB);
}

function writeSnapshot(records: number, file: string, encryptor: LedgerEncryptor): void {
  const store = fillLoggingStore(records);
  const meta = { seqno: store.version, view: 1, view_history: [1], configurations: [], service_certificate: '', tree: { size: store.version, compaction_point: 0, block_hashes: '', leaves: '' } };
  fs.writeFileSync(file, encodeSnapshotFile(store.serializeSnapshot(encryptor, 1), meta));
}

/** As a node starts from a snapshot file: its sections, and the store loaded from the store section. */
function startFrom(file: string, encryptor: LedgerEncryptor): { snapshot: StartupSnapshot; store: Store; sizeBytes: number } {
  const bytes = fs.readFileSync(file);
  const parts = parseSnapshotFile(bytes);
  const snapshot: StartupSnapshot = { name: path.basename(file), seqno: parts.meta.seqno, evidenceSeqno: parts.meta.seqno + 1, parts, serviceEndorsements: [], path: file };
  return { snapshot, store: loadSnapshotAtOnce(parts.kv, encryptor), sizeBytes: bytes.byteLength };
}

/**
 * In a function of its own: a frame still running (main's) may keep the values it passed as
 * arguments in its registers, which the collector treats as live.
 */
function dropStoreBytes(start: { snapshot: StartupSnapshot }): void {
  start.snapshot = withoutStoreBytes(start.snapshot, { clock: systemClock, disk: new FsDisk(), stopped: () => false });
}

async function main(): Promise<void> {
  const at = process.argv.indexOf('--records');
  const records = at === -1 ? 300_000 : Number(process.argv[at + 1]);
  const encryptor = new LedgerEncryptor(new Uint8Array(32).fill(1));
  const writeTo = process.argv.indexOf('--write-to');
  if (writeTo !== -1) {
    writeSnapshot(records, process.argv[writeTo + 1]!, encryptor);
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'covenant-startup-snapshot-'));
  try {
    const file = path.join(dir, 'snapshot_1_2.committed');
    execFileSync(process.execPath, [fileURLToPath(import.meta.url), '--records', String(records), '--write-to', file], { stdio: 'inherit' });
    const baseMb = rssMb();
    const start = startFrom(file, encryptor);
    const heldMb = rssMb();
    dropStoreBytes(start);
    const droppedMb = rssMb();
    console.log(
      JSON.stringify({
        bench: 'startup-snapshot-memory',
        records,
        snapshot_mb: Number((start.sizeBytes / MB).toFixed(1)),
        rss_before_start_mb: baseMb,
        rss_started_file_held_mb: heldMb,
        rss_started_store_bytes_dropped_mb: droppedMb,
        store_version: start.store.version,
        kept_kv_bytes: start.snapshot.parts.kv.byteLength,
      }),
    );
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

await main();
