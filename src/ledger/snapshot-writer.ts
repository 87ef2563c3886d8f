/**
 * Writing a snapshot file from a packed state (src/kv/snapshot-slices.ts): the encoding of the
 * store (sorting, write-set layout, encryption), the file's sections, its SHA-256 (the evidence)
 * and the durable write. For a large state each of these takes long: a node process does them on
 * a worker thread (src/platform/worker-snapshot-writer.ts) so its event loop keeps turning; the
 * simulator and tests do them inline through their Disk. Both run writeSnapshotJob, so the bytes
 * do not depend on where they were made.
 */
import { createHasher } from '../crypto/index.js';
import { encodePackedSnapshot, LedgerEncryptor, type PackedSnapshot } from '../kv/index.js';
import type { Disk } from './disk.js';
import { encodeSnapshotFileParts, type SnapshotMeta } from './snapshot-file.js';

export interface SnapshotWriteJob {
  readonly packed: PackedSnapshot;
  /** The ledger secret that applies at packed.version (the snapshot key is derived from it). */
  readonly secret: Uint8Array;
  readonly meta: SnapshotMeta;
  /** The file to write (replaced when it exists), synced before the job answers. */
  readonly path: string;
}

export interface SnapshotWriteResult {
  /** SHA-256 of the file as written (the snapshot's evidence digest). */
  readonly digest: Uint8Array;
  readonly sizeBytes: number;
}

/** Writes snapshot files, one job at a time in the order given. */
export interface SnapshotWriter {
  write(job: SnapshotWriteJob): Promise<SnapshotWriteResult>;
  close(): void;
}

/** The bytes of the file a job writes (its sections, without a receipt), as consecutive pieces (encodeSnapshotFileParts). */
export function snapshotFilePartsOf(job: Pick<SnapshotWriteJob, 'packed' | 'secret' | 'meta'>): Uint8Array[] {
  const kv = encodePackedSnapshot(job.packed, new LedgerEncryptor(job.secret));
  return encodeSnapshotFileParts(kv, job.meta);
}

/** The bytes of the file a job writes, in one buffer. */
export function snapshotFileBytesOf(job: Pick<SnapshotWriteJob, 'packed' | 'secret' | 'meta'>): Uint8Array {
  return Buffer.concat(snapshotFilePartsOf(job));
}

/** Runs a job through `disk`: encodes, writes, syncs. Throws what the disk throws. */
export function writeSnapshotJob(job: SnapshotWriteJob, disk: Disk): SnapshotWriteResult {
  // The pieces are hashed and written one after another: the store's bytes, most of the file, are held once.
  const parts = snapshotFilePartsOf(job);
  const hasher = createHasher('sha-256');
  for (const part of parts) hasher.update(part);
  const digest = hasher.digest();
  if (disk.exists(job.path)) disk.remove(job.path);
  const file = disk.createFile(job.path);
  try {
    file.append(parts);
    file.sync();
  } finally {
    file.close();
  }
  return { digest, sizeBytes: parts.reduce((sum, part) => sum + part.byteLength, 0) };
}

/** Writes on the caller's thread (the simulator's disk, tests): answers once written. */
export function inlineSnapshotWriter(disk: Disk): SnapshotWriter {
  return {
    write: (job) => {
      try {
        return Promise.resolve(writeSnapshotJob(job, disk));
      } catch (e) {
        return Promise.reject(e instanceof Error ? e : new Error(String(e)));
      }
    },
    close: () => {},
  };
}
