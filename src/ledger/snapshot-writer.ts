/**
 * Writing a snapshot file from a packed state (src/kv/snapshot-slices.ts): the encoding of the
 * store (sorting, write-set layout, encryption), the file's sections, its SHA-256 (the evidence)
 * and the durable write. For a large state each of these takes long: a node process does them on
 * a worker thread (src/platform/worker-snapshot-writer.ts) so its event loop keeps turning; the
 * simulator and tests do them inline through their Disk. Both run writeSnapshotJob, so the bytes
 * do not depend on where they were made.
 *
 * The file is written as a stream (docs/snapshots.md, "Generation"): the store snapshot's body is
 * encoded, enciphered and written one piece at a time, the packed chunks dropped as their entries
 * are written, so that a snapshot of size S holds about S (the chunks) and one piece rather than
 * the chunks and the whole encoded store. The store header's digest covers the body that follows
 * it: the header is written last, in its place, and the file is then read back, a piece at a
 * time, for its SHA-256. It is written under a temporary name and renamed once synced, so that no
 * half-written snapshot is ever seen under its name.
 */
import { assert } from '../base/index.js';
import { createHasher } from '../crypto/index.js';
import { encodePackedSnapshotStreamed, LedgerEncryptor, PackedSnapshotEncoder, SNAPSHOT_HEADER_BYTES, type PackedSnapshot } from '../kv/index.js';
import type { Disk } from './disk.js';
import { encodeSnapshotFile, snapshotFileFrame, type SnapshotMeta } from './snapshot-file.js';

export interface SnapshotWriteJob {
  readonly packed: PackedSnapshot;
  /** The ledger secret that applies at packed.version (the snapshot key is derived from it). */
  readonly secret: Uint8Array;
  readonly meta: SnapshotMeta;
  /** The file to write (replaced when it exists), synced before the job answers. */
  readonly path: string;
  /** Largest piece encoded, written and read back at a time (limits.ts, snapshotWritePieceBytes). */
  readonly pieceBytes: number;
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

/** The suffix of a snapshot file while it is written (snapshotWritingPath). */
export const SNAPSHOT_WRITING_SUFFIX = '.writing';

/** Where a job's file is while it is written: renamed to job.path once complete and synced. */
export function snapshotWritingPath(path: string): string {
  return `${path}${SNAPSHOT_WRITING_SUFFIX}`;
}

/** The bytes of the file a job writes, in one buffer (tests): the packed chunks are left to the caller. */
export function snapshotFileBytesOf(job: Pick<SnapshotWriteJob, 'packed' | 'secret' | 'meta' | 'pieceBytes'>): Uint8Array {
  return encodeSnapshotFile(encodePackedSnapshotStreamed(job.packed, new LedgerEncryptor(job.secret), job.pieceBytes), job.meta);
}

/**
 * Runs a job through `disk`: encodes, writes, syncs, and only then gives the file its name. The
 * job's packed chunks are consumed (dropped as they are written). Throws what the disk throws,
 * after removing the partial file.
 */
export function writeSnapshotJob(job: SnapshotWriteJob, disk: Disk): SnapshotWriteResult {
  const encoder = new PackedSnapshotEncoder(job.packed, new LedgerEncryptor(job.secret), { pieceBytes: job.pieceBytes, consumeChunks: true });
  const { head, tail } = snapshotFileFrame(encoder.byteLength, job.meta);
  const writing = snapshotWritingPath(job.path);
  if (disk.exists(writing)) disk.remove(writing);
  const file = disk.createFile(writing);
  let sizeBytes: number;
  try {
    // The store header's place, filled once the body (which its digest covers) is written.
    file.append([head, new Uint8Array(SNAPSHOT_HEADER_BYTES)]);
    encoder.encodeBody((piece) => file.append([piece]));
    file.append([tail]);
    file.writeAt(head.byteLength, encoder.header());
    file.sync();
    sizeBytes = file.sizeBytes();
  } catch (e) {
    file.close();
    removeQuietly(disk, writing);
    throw e;
  }
  file.close();
  assert(sizeBytes === head.byteLength + encoder.byteLength + tail.byteLength, 'the snapshot file has the size its frame announced');
  let digest: Uint8Array;
  try {
    digest = digestOf(disk, writing, sizeBytes, job.pieceBytes);
    // Renaming over an older file of the same name replaces it at once (never a moment without either).
    disk.rename(writing, job.path);
  } catch (e) {
    removeQuietly(disk, writing);
    throw e;
  }
  return { digest, sizeBytes };
}

/** SHA-256 of the first `sizeBytes` of a file, read `pieceBytes` at a time. */
function digestOf(disk: Disk, path: string, sizeBytes: number, pieceBytes: number): Uint8Array {
  const hasher = createHasher('sha-256');
  for (let position = 0; position < sizeBytes; ) {
    const piece = disk.read(path, position, Math.min(pieceBytes, sizeBytes - position));
    assert(piece.byteLength > 0, `${path} ends before the ${sizeBytes} bytes just written`);
    hasher.update(piece);
    position += piece.byteLength;
  }
  return hasher.digest();
}

/** Removes a partial file after a failure; a failure to remove it must not hide the first one. */
function removeQuietly(disk: Disk, path: string): void {
  try {
    if (disk.exists(path)) disk.remove(path);
  } catch {
    // The first failure is what the caller reports; the node removes the leftover at its next start.
  }
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
