/**
 * A restarting node's long work in slices of one turn each (docs/snapshots.md, "Loading"): reading
 * and checking its startup snapshot's file, and replaying its ledger after it. The server answers
 * requests (GET /node/state) and the event loop stays responsive meanwhile; the outcome is the one
 * the one-call paths give (verifySnapshotFile, Replica.replay): the same store, tree and commit,
 * and the same error for the same damage.
 */
import type { Clock } from '../base/clock.js';
import { errorMessage } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import { snapshotEvidenceCoveredBytes, type Disk } from '../ledger/index.js';
import { replaySliceEntriesMax, snapshotDigestSliceBytes, snapshotFileReadSliceBytes, snapshotSliceMs } from './limits.js';
import type { Replica } from './replica.js';
import { digestInSlices } from './snapshot-loading.js';
import { listCommittedSnapshots, verifySnapshotFile, type StartupSnapshot } from './snapshots.js';

/** Runs `step` once per turn (the clock's defer) until it returns true; false when `stopped` said so first. */
export function inTurns(clock: Clock, step: () => boolean, stopped: () => boolean = () => false): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const turn = (): void => {
      if (stopped()) {
        resolve(false);
        return;
      }
      try {
        if (step()) resolve(true);
        else clock.defer(turn);
      } catch (e) {
        reject(e as Error);
      }
    };
    clock.defer(turn);
  });
}

/**
 * Replays the ledger after `fromSeqno` into the replica, up to replaySliceEntriesMax entries or
 * snapshotSliceMs a turn (the clock is looked at after each entry: one entry is a few µs to a few
 * ms, a large write), compacting what is committed after each slice. False when the node stopped
 * meanwhile.
 */
export async function replayInSlices(clock: Clock, replica: Replica, fromSeqno: number, stopped: () => boolean = () => false, entriesMax = replaySliceEntriesMax): Promise<boolean> {
  const startedMs = clock.monotonicMs();
  const last = replica.ledger.lastSeqno;
  let next = fromSeqno + 1;
  let turns = 0;
  const done = await inTurns(
    clock,
    () => {
      turns++;
      const sliceStartMs = clock.monotonicMs();
      const end = Math.min(last, next + entriesMax - 1);
      while (next <= end) {
        replica.replayEntries(next, next);
        next++;
        if (clock.monotonicMs() - sliceStartMs >= snapshotSliceMs) break;
      }
      replica.compactReplayed();
      return next > last;
    },
    stopped,
  );
  if (done) replica.finishReplay(fromSeqno, startedMs, turns);
  return done;
}

/** A file's bytes, read snapshotFileReadSliceBytes a turn; undefined when the node stopped meanwhile. */
export async function readFileInSlices(clock: Clock, disk: Disk, path: string, stopped: () => boolean = () => false): Promise<Uint8Array | undefined> {
  const size = disk.sizeBytes(path);
  // A buffer of its own (not a slice of the shared pool, which a small store section would keep alive).
  const bytes = Buffer.allocUnsafeSlow(size);
  let offset = 0;
  const done = await inTurns(
    clock,
    () => {
      const piece = disk.read(path, offset, Math.min(snapshotFileReadSliceBytes, size - offset));
      // A file that shrank while it was read is damaged as one cut short would be.
      if (piece.byteLength === 0) return true;
      bytes.set(piece, offset);
      offset += piece.byteLength;
      return offset >= size;
    },
    stopped,
  );
  if (!done) return undefined;
  return offset === size ? bytes : bytes.subarray(0, offset);
}

/**
 * verifySnapshotFile of the file at `path`, read and hashed over several turns: what is left for one
 * turn is the parse of its sections and the receipt's check (no pass over the store section).
 * Throws what verifySnapshotFile throws for the same bytes; undefined when the node stopped.
 */
export async function verifySnapshotFileInSlices(
  clock: Clock,
  disk: Disk,
  name: string,
  path: string,
  serviceCertificatePem: string,
  stopped: () => boolean = () => false,
): Promise<StartupSnapshot | undefined> {
  const bytes = await readFileInSlices(clock, disk, path, stopped);
  if (bytes === undefined) return undefined;
  let covered: number;
  try {
    covered = snapshotEvidenceCoveredBytes(bytes);
  } catch {
    // A header too damaged to say what its evidence covers: the one-call check says why.
    return verifySnapshotFile(name, bytes, serviceCertificatePem);
  }
  const digest = await digestInSlices(clock, bytes.subarray(0, Math.min(covered, bytes.byteLength)));
  if (stopped()) return undefined;
  return { ...verifySnapshotFile(name, bytes, serviceCertificatePem, digest), path };
}

/** Where a restarting node looks for its startup snapshot, and what it logs. */
export interface StartupSnapshotSearch {
  readonly clock: Clock;
  readonly disk: Disk;
  readonly logger: Logger;
  /** snapshots.directory (invalid files there are deleted) and snapshots.read_only_directory. */
  readonly directory: string;
  readonly readOnlyDirectory: string | undefined;
  readonly stopped: () => boolean;
}

export interface StartupSnapshotSearchOptions {
  /** Which candidates to consider, by their names' seqnos (none other is read). */
  readonly accept?: (seqno: number) => boolean;
  readonly oldestFirst?: boolean;
  /** Leaves an invalid file in snapshots.directory rather than deleting it. */
  readonly keepInvalid?: boolean;
}

/**
 * SnapshotManager.findStartupSnapshot over several turns: the newest (or oldest) committed
 * snapshot that verifies; an invalid one in snapshots.directory is deleted and the next tried.
 * Undefined when none verifies or the node stopped. Use as
 * `startupSnapshotAtOnce(s, pem)?.snapshot ?? (await findStartupSnapshotInSlices(s, pem))` when the
 * outcome of the first may be undefined: see startupSnapshotAtOnce.
 */
export async function findStartupSnapshotInSlices(search: StartupSnapshotSearch, serviceCertificatePem: string, options: StartupSnapshotSearchOptions = {}): Promise<StartupSnapshot | undefined> {
  const { clock, disk, stopped } = search;
  for (const candidate of candidatesOf(search, options)) {
    const path = disk.join(candidate.directory, candidate.name);
    try {
      return await verifySnapshotFileInSlices(clock, disk, candidate.name, path, serviceCertificatePem, stopped);
    } catch (e) {
      dropInvalid(search, candidate.directory, path, e, options);
    }
  }
  return undefined;
}

/**
 * The search of findStartupSnapshotInSlices done in this turn, while every candidate it must read
 * is at most snapshotDigestSliceBytes (one slice of a digest: a young service's snapshots, the
 * simulator's): `{ snapshot }`, the outcome (undefined: none verifies). Undefined as soon as a
 * larger one must be read: the caller searches in slices instead. A start-up flow thus continues
 * without yielding when its snapshots are small.
 */
export function startupSnapshotAtOnce(search: StartupSnapshotSearch, serviceCertificatePem: string, options: StartupSnapshotSearchOptions = {}): { snapshot: StartupSnapshot | undefined } | undefined {
  const { disk } = search;
  for (const candidate of candidatesOf(search, options)) {
    const path = disk.join(candidate.directory, candidate.name);
    if (disk.sizeBytes(path) > snapshotDigestSliceBytes) return undefined;
    try {
      return { snapshot: { ...verifySnapshotFile(candidate.name, disk.readAll(path), serviceCertificatePem), path } };
    } catch (e) {
      dropInvalid(search, candidate.directory, path, e, options);
    }
  }
  return { snapshot: undefined };
}

function candidatesOf(search: StartupSnapshotSearch, options: StartupSnapshotSearchOptions): { name: string; directory: string; seqno: number }[] {
  const { disk, directory, readOnlyDirectory } = search;
  const candidates = listCommittedSnapshots(disk, readOnlyDirectory === undefined ? [directory] : [directory, readOnlyDirectory]);
  if (options.oldestFirst === true) candidates.reverse();
  return options.accept === undefined ? candidates : candidates.filter((c) => options.accept!(c.seqno));
}

function dropInvalid(search: StartupSnapshotSearch, directory: string, path: string, e: unknown, options: StartupSnapshotSearchOptions): void {
  search.logger.fail(`invalid snapshot ${path}: ${errorMessage(e)}`);
  if (directory === search.directory && options.keepInvalid !== true) search.disk.remove(path);
}
