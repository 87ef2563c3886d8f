/**
 * What the floor's processes (floor-server.ts, floor-backup.ts) share: the entries file, appended
 * one `writev` per batch and started over past FILE_BYTES_MAX so that a long benchmark does not
 * fill the disk, and the kind of the frames they exchange.
 */
import { ftruncateSync, openSync, writevSync } from 'node:fs';

const FILE_BYTES_MAX = 256 * 1024 * 1024;

/** The kind byte of the floor's node-to-node frames (batches one way, acknowledgements the other). */
export const FLOOR_FRAME_KIND = 1;

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
