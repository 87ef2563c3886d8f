/**
 * Making a ledger's appended bytes durable, at once or off the event loop (docs/ledger.md,
 * "Ledger operations"). A chunk's file stays open after its last append until a sync has made it durable;
 * then a completed chunk's file is closed.
 */
import type { Chunk } from './chunk-reader.js';
import type { DiskError } from './disk.js';

/** fdatasync of every open chunk file, now; completed chunks' files are closed once durable. */
export function syncChunksNow(chunks: readonly Chunk[], writing: Chunk | undefined): void {
  for (const chunk of chunks) {
    if (chunk.file === undefined) continue;
    chunk.file.sync();
    if (chunk !== writing) {
      chunk.file.close();
      chunk.file = undefined;
    }
  }
}

/**
 * One fdatasync per open chunk file, on the disk's own time; `done` runs once every byte appended
 * before this call is durable (or with the first failure). `writing()` names the chunk being
 * written when a sync ends.
 */
export function syncChunksAsync(chunks: readonly Chunk[], writing: () => Chunk | undefined, done: (error: DiskError | undefined) => void): void {
  const open = chunks.filter((chunk) => chunk.file !== undefined);
  let left = open.length;
  let failure: DiskError | undefined;
  if (left === 0) return done(undefined);
  for (const chunk of open) {
    const file = chunk.file!;
    const coveredBytes = file.sizeBytes();
    file.syncAsync((error) => {
      failure ??= error;
      // A completed chunk's file is closed once durable (as syncChunksNow does): not if it was still
      // being written when the sync began and grew since (commit() syncs it before its rename).
      if (error === undefined && chunk.file === file && chunk !== writing() && file.sizeBytes() === coveredBytes) {
        file.close();
        chunk.file = undefined;
      }
      if (--left === 0) done(failure);
    });
  }
}
