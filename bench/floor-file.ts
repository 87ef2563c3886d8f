/**
 * The entries file of the floor's processes (floor-server.ts, floor-backup.ts): appended one
 * `writev` per batch, and started over past FILE_BYTES_MAX so that a long benchmark does not fill
 * the disk.
 */
import { ftruncateSync, openSync, writevSync } from 'node:fs';

const FILE_BYTES_MAX = 256 * 1024 * 1024;

export class EntriesFile {
  readonly #fd: number;
  #position = 0;

  constructor(path: string) {
    this.#fd = openSync(path, 'w');
  }

  append(frames: readonly Uint8Array[]): void {
    if (frames.length === 0) return;
    if (this.#position > FILE_BYTES_MAX) {
      ftruncateSync(this.#fd, 0);
      this.#position = 0;
    }
    this.#position += writevSync(this.#fd, frames as Uint8Array[], this.#position);
  }
}
