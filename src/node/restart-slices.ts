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
import { replaySliceEntriesMax, snapshotFileReadSliceBytes, snapshotSliceMs } from './limits.js';
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
  const bytes = Buffer.allocUnsafe(size);
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

/**
 * SnapshotManager.findStartupSnapshot over several turns: the newest committed snapshot that
 * verifies; an invalid one in snapshots.directory is deleted and the next tried. `accept` narrows
 * the candidates by their names' seqnos (none is read otherwise). Undefined when none verifies or
 * the node stopped.
 */
export async function findStartupSnapshotInSlices(
  search: StartupSnapshotSearch,
  serviceCertificatePem: string,
  options: { readonly accept?: (seqno: number) => boolean; readonly oldestFirst?: boolean; readonly keepInvalid?: boolean } = {},
): Promise<StartupSnapshot | undefined> {
  const { clock, disk, logger, directory, readOnlyDirectory, stopped } = search;
  const candidates = listCommittedSnapshots(disk, readOnlyDirectory === undefined ? [directory] : [directory, readOnlyDirectory]);
  if (options.oldestFirst === true) candidates.reverse();
  for (const candidate of candidates) {
    if (options.accept !== undefined && !options.accept(candidate.seqno)) continue;
    const path = disk.join(candidate.directory, candidate.name);
    try {
      const found = await verifySnapshotFileInSlices(clock, disk, candidate.name, path, serviceCertificatePem, stopped);
      if (found === undefined) return undefined;
      return found;
    } catch (e) {
      logger.fail(`invalid snapshot ${path}: ${errorMessage(e)}`);
      if (candidate.directory === directory && options.keepInvalid !== true) disk.remove(path);
    }
  }
  return undefined;
}
