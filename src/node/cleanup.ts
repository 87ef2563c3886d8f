/**
 * Retention of snapshot and ledger files (spec Limits: files_cleanup.*, rules 1-3).
 *
 * - files_cleanup.max_snapshots (default 10): committed snapshots beyond the limit are deleted
 *   from snapshots.directory, lowest seqno first. A limit always applies: each snapshot is a whole
 *   state, and an unbounded directory would fill the disk.
 * - files_cleanup.max_committed_ledger_chunks: while ledger.directory holds more committed chunks
 *   than the limit, the oldest chunk is deleted if an identical copy (same SHA-256) is in a
 *   read-only ledger directory and its entries end before the newest committed snapshot (with no
 *   committed snapshot that rule protects nothing). The ledger reads it from the copy afterwards.
 * - One cycle at a time: a cycle yields between files, and a timer that fires while the previous
 *   cycle is unfinished skips its cycle with a failure-level log line.
 */
import { bytesEqual } from '../base/bytes.js';
import { errorMessage } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { Clock, TimerHandle } from '../base/clock.js';
import type { NodeConfig } from '../config/index.js';
import { sha256 } from '../crypto/index.js';
import { type Disk, parseChunkName } from '../ledger/index.js';
import { listCommittedSnapshots } from './snapshots.js';

export interface CleanupHost {
  readonly config: Pick<NodeConfig, 'ledger' | 'snapshots' | 'files_cleanup'>;
  readonly disk: Disk;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The ledger reads committed chunk `name` from `directory` from now on. */
  relocateChunk(name: string, directory: string): void;
  /** Lets other work run between files (a long cycle must not stall the node). */
  yieldControl(): Promise<void>;
}

export interface CleanupReport {
  deletedSnapshots: string[];
  deletedChunks: string[];
  /** The newest committed snapshot the chunk rule was checked against (none: no snapshot yet). */
  newestSnapshotSeqno?: number;
}

export class FilesCleanup {
  readonly #host: CleanupHost;
  #timer: TimerHandle | undefined;
  #running = false;
  #stopped = false;
  /** Completed cycles (tests wait on it). */
  cycles = 0;

  constructor(host: CleanupHost) {
    this.#host = host;
  }

  /** Starts the periodic cycle (max_snapshots always applies). */
  start(): void {
    const { interval } = this.#host.config.files_cleanup;
    if (this.#timer !== undefined || interval <= 0) return;
    const fire = () => {
      if (this.#stopped) return;
      this.tick();
      this.#timer = this.#host.clock.setTimer(interval, fire);
    };
    this.#timer = this.#host.clock.setTimer(interval, fire);
  }

  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
  }

  /** One timer firing: runs a cycle unless the previous one is still running (spec rule 2). */
  tick(): Promise<CleanupReport> | undefined {
    if (this.#running) {
      this.#host.logger.fail('files cleanup: the previous cycle is still running; this cycle is skipped');
      return undefined;
    }
    this.#running = true;
    return this.runCycle().finally(() => {
      this.#running = false;
      this.cycles++;
    });
  }

  async runCycle(): Promise<CleanupReport> {
    const report: CleanupReport = { deletedSnapshots: [], deletedChunks: [] };
    try {
      await this.#cleanSnapshots(report);
      await this.#cleanChunks(report);
    } catch (e) {
      this.#host.logger.fail(`files cleanup failed: ${errorMessage(e)}`);
    }
    if (report.deletedSnapshots.length + report.deletedChunks.length > 0) {
      const against = report.deletedChunks.length > 0 && report.newestSnapshotSeqno !== undefined ? ` (newest committed snapshot ${report.newestSnapshotSeqno})` : '';
      this.#host.logger.info(`files cleanup: deleted snapshots [${report.deletedSnapshots.join(', ')}], ledger chunks [${report.deletedChunks.join(', ')}]${against}`);
    }
    return report;
  }

  async #cleanSnapshots(report: CleanupReport): Promise<void> {
    const max = this.#host.config.files_cleanup.max_snapshots;
    const directory = this.#host.config.snapshots.directory;
    const committed = listCommittedSnapshots(this.#host.disk, [directory]).reverse();
    for (const snapshot of committed.slice(0, Math.max(0, committed.length - max))) {
      if (this.#stopped) return;
      this.#host.disk.remove(this.#host.disk.join(directory, snapshot.name));
      report.deletedSnapshots.push(snapshot.name);
      await this.#host.yieldControl();
    }
  }

  async #cleanChunks(report: CleanupReport): Promise<void> {
    const { ledger, snapshots, files_cleanup: cleanup } = this.#host.config;
    const max = cleanup.max_committed_ledger_chunks;
    if (max === undefined) return;
    const disk = this.#host.disk;
    const chunks = disk
      .listDirectory(ledger.directory)
      .filter((name) => name.startsWith('ledger_') && name.endsWith('.committed'))
      .map((name) => ({ name, ...parseChunkName(name) }))
      .sort((a, b) => a.first - b.first);
    if (chunks.length <= max) return;
    const snapshotDirectories = snapshots.read_only_directory === undefined ? [snapshots.directory] : [snapshots.directory, snapshots.read_only_directory];
    const newestSnapshot = listCommittedSnapshots(disk, snapshotDirectories)[0];
    if (newestSnapshot !== undefined) report.newestSnapshotSeqno = newestSnapshot.seqno;
    let count = chunks.length;
    for (const chunk of chunks) {
      if (count <= max || this.#stopped) break;
      if (newestSnapshot !== undefined && !(chunk.last! < newestSnapshot.seqno)) continue;
      const copy = await this.#identicalCopy(chunk.name);
      if (copy === undefined) continue;
      this.#host.relocateChunk(chunk.name, copy);
      disk.remove(disk.join(ledger.directory, chunk.name));
      report.deletedChunks.push(chunk.name);
      count--;
    }
    if (report.deletedChunks.length > 0) disk.syncDirectory(ledger.directory);
  }

  /** A read-only ledger directory holding a byte-identical copy of chunk `name` (by SHA-256). */
  async #identicalCopy(name: string): Promise<string | undefined> {
    const { ledger } = this.#host.config;
    const disk = this.#host.disk;
    let digest: Uint8Array | undefined;
    for (const directory of ledger.read_only_directories) {
      const path = disk.join(directory, name);
      if (!disk.exists(path)) continue;
      digest ??= sha256(disk.readAll(disk.join(ledger.directory, name)));
      await this.#host.yieldControl();
      const copyDigest = sha256(disk.readAll(path));
      await this.#host.yieldControl();
      if (bytesEqual(digest, copyDigest)) return directory;
    }
    return undefined;
  }
}
