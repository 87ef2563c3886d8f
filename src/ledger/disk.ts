/**
 * The file-system seam of the ledger. Everything under src/ledger reaches files only through
 * this interface: production wires src/platform/fs-disk.ts, tests and the simulator wire
 * src/testing/memory-disk.ts (which can tear unsynced writes on a simulated crash).
 *
 * The interface is synchronous on purpose, with one exception: the node batches appends so a few
 * large syscalls per batch are cheap, and a synchronous seam keeps the simulator deterministic.
 * The exception is DiskFile.syncAsync, the durability point of the write path, which runs off the
 * event loop (the simulator's disk completes it on its own clock, with seeded delays).
 *
 * Failures are thrown as `DiskError` (a CovenantError with code `DiskIoFailed`, or `DiskFull`
 * when the device has no space left), never as raw platform errors.
 */
import { CovenantError } from '../base/index.js';

/** A file opened for appending. Appends go to the end; bytes are durable only after `sync()`. */
export interface DiskFile {
  /** Current size, including appended bytes not yet synced. */
  sizeBytes(): number;
  /** Appends the parts in order, as one logical write. */
  append(parts: readonly Uint8Array[]): void;
  /**
   * Overwrites bytes already appended, from `positionBytes` (the range must end at or before the
   * file's size): a header whose content depends on what follows it is written last.
   */
  writeAt(positionBytes: number, bytes: Uint8Array): void;
  /** Makes every appended byte durable (fdatasync on a real disk). */
  sync(): void;
  /**
   * Starts making every byte appended so far durable without holding the caller (fdatasync on
   * libuv's thread pool on a real disk); `done` runs later, never within this call, once they are
   * (or with the failure). Bytes appended meanwhile may or may not be covered. Closing the file
   * while a sync is under way is allowed: the descriptor stays open until the sync ends.
   */
  syncAsync(done: (error: DiskError | undefined) => void): void;
  close(): void;
}

export interface Disk {
  /** Joins a directory and a file name into a path this disk understands. */
  join(directory: string, name: string): string;
  exists(path: string): boolean;
  /** Creates the directory and its parents when missing. */
  ensureDirectory(directory: string): void;
  /** Names (not paths) of the regular files in a directory, in no particular order. */
  listDirectory(directory: string): string[];
  sizeBytes(path: string): number;
  /** Reads up to `lengthBytes` from `positionBytes`; fewer bytes come back at end of file. */
  read(path: string, positionBytes: number, lengthBytes: number): Uint8Array;
  readAll(path: string): Uint8Array;
  /** Creates a new empty file for appending; fails when the path exists. */
  createFile(path: string): DiskFile;
  /** Opens an existing file for appending at its end. */
  openForAppend(path: string): DiskFile;
  /** Atomic rename within one directory; an open DiskFile stays valid and follows the file. */
  rename(fromPath: string, toPath: string): void;
  remove(path: string): void;
  truncate(path: string, lengthBytes: number): void;
  /** Makes creations, renames and removals in the directory durable. */
  syncDirectory(directory: string): void;
}

export type DiskErrorCode = 'DiskIoFailed' | 'DiskFull';

export class DiskError extends CovenantError {
  constructor(code: DiskErrorCode, operation: string, path: string, cause: string) {
    super(code, `disk ${operation} failed for ${path}: ${cause}`, code === 'DiskFull' ? 507 : 500, { operation, path, cause });
    this.name = 'DiskError';
  }
}
