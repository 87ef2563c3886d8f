/**
 * What the ledger-file worker threads (leaf-worker.ts, replay-worker.ts) share: a job over a range
 * of entries reads the chunk files through a disk of its own, closed after it (a chunk file may
 * be renamed or replaced between jobs, so nothing is kept across them), and an error that stops
 * it crosses back to the node's thread as a plain object, to become a CovenantError again.
 */
import { CovenantError, isCovenantError } from '../base/errors.js';
import type { ReadFileRange } from '../ledger/index.js';
import { FsDisk } from './fs-disk.js';

/** An error as a worker answers it. */
export interface WorkerErrorAnswer {
  readonly code: string;
  readonly message: string;
  readonly status: number;
}

/** Runs `job` over the ledger files; `doing` names it in the answer of an error that is not the ledger's own (e.g. "reading ledger entries 1..9"). */
export function runLedgerFileJob<T>(doing: string, job: (read: ReadFileRange) => T): { readonly value: T } | { readonly error: WorkerErrorAnswer } {
  const disk = new FsDisk();
  try {
    return { value: job((path, position, length) => disk.read(path, position, length)) };
  } catch (e) {
    if (isCovenantError(e)) return { error: { code: e.code, message: e.message, status: e.status } };
    return { error: { code: 'DiskIoFailed', message: `${doing}: ${e instanceof Error ? e.message : String(e)}`, status: 500 } };
  } finally {
    disk.close();
  }
}

/** The error a worker answered, on the node's thread. */
export function errorOfAnswer(error: WorkerErrorAnswer): CovenantError {
  return new CovenantError(error.code, error.message, error.status);
}
