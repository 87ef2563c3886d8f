/**
 * The checks of the ledger's files and of what is appended to them: which chunk files a ledger
 * holds and whether their names fit together, what a scan of a non-committed chunk says about a
 * torn tail, and whether a batch of frames may follow the ledger's last entry.
 */
import type { Seqno, View } from '../base/index.js';
import { CHUNK_HEADER_BYTES, type ChunkScan } from './chunk-file.js';
import { isChunkFileName, parseChunkName, RECOVERY_SUFFIX } from './chunk-name.js';
import { chunkFromName, type Chunk } from './chunk-reader.js';
import type { Disk } from './disk.js';
import { checkEntry, EntryFlags, hasFlag } from './entry.js';
import { LedgerError } from './errors.js';
import type { LedgerOpenReport, TornTail } from './ledger-types.js';

/**
 * The chunk files of the ledger directory and the read-only ones, committed and pending, each in
 * seqno order, with their names checked for overlaps and gaps. Leftover recovery files are
 * removed (and listed in the report).
 */
export function listChunkFiles(
  disk: Disk,
  directory: string,
  readOnlyDirectories: readonly string[],
  report: LedgerOpenReport,
): { committed: Chunk[]; pending: Chunk[] } {
  const committedByName = new Map<string, Chunk>();
  const pending: Chunk[] = [];
  for (const name of disk.listDirectory(directory).sort()) {
    if (!isChunkFileName(name)) continue;
    if (name.endsWith(RECOVERY_SUFFIX)) {
      disk.remove(disk.join(directory, name));
      report.discardedRecoveryFiles.push(name);
      continue;
    }
    const chunk = chunkFromName(directory, name, parseChunkName(name));
    if (chunk.committed) committedByName.set(name, chunk);
    else pending.push(chunk);
  }
  for (const readOnly of readOnlyDirectories) {
    if (!disk.exists(readOnly)) continue;
    for (const name of disk.listDirectory(readOnly).sort()) {
      if (!isChunkFileName(name) || name.endsWith(RECOVERY_SUFFIX)) continue;
      const parsed = parseChunkName(name);
      // Operators move only committed chunks to read-only directories; anything else there is not ours.
      if (!parsed.committed || committedByName.has(name)) continue;
      committedByName.set(name, chunkFromName(readOnly, name, parsed));
    }
  }

  const committed = [...committedByName.values()].sort((a, b) => a.first - b.first);
  for (let i = 1; i < committed.length; i++) {
    const before = committed[i - 1]!;
    const after = committed[i]!;
    if (after.first <= before.last!) {
      throw new LedgerError('LedgerFilesInconsistent', `committed chunks ${before.name} and ${after.name} overlap`, {
        file: after.name,
      });
    }
  }
  pending.sort((a, b) => a.first - b.first);
  checkPendingNames(pending, committed.at(-1));
  return { committed, pending };
}

function checkPendingNames(pending: Chunk[], lastCommitted: Chunk | undefined): void {
  for (let i = 0; i < pending.length; i++) {
    const chunk = pending[i]!;
    if (i === 0) {
      if (lastCommitted !== undefined && chunk.first <= lastCommitted.last!) {
        throw new LedgerError('LedgerFilesInconsistent', `${chunk.name} overlaps committed ${lastCommitted.name}`, { file: chunk.name });
      }
      continue;
    }
    const before = pending[i - 1]!;
    if (before.last === undefined) {
      throw new LedgerError('LedgerFilesInconsistent', `${before.name} is being written but ${chunk.name} follows it`, { file: before.name });
    }
    if (chunk.first !== before.last + 1) {
      throw new LedgerError('LedgerFilesInconsistent', `${chunk.name} does not continue ${before.name}`, { file: chunk.name });
    }
  }
}

/**
 * What the scan of a non-committed chunk says: the last entry it holds whole, whether that entry
 * ends the chunk, and whether the file is torn. Damage that a torn write cannot produce throws.
 */
export function checkPendingScan(chunk: Chunk, scan: ChunkScan): { lastHeld: Seqno; endsChunk: boolean; torn: boolean } {
  const index = scan.index;
  if (index !== undefined && index.first !== chunk.first) {
    throw new LedgerError('LedgerCorrupted', `${chunk.name} at offset ${CHUNK_HEADER_BYTES}: starts with seqno ${index.first}`, {
      file: chunk.name,
      offsetBytes: CHUNK_HEADER_BYTES,
    });
  }
  const lastHeld = index?.last ?? chunk.first - 1;
  if (chunk.last !== undefined && lastHeld > chunk.last) {
    throw new LedgerError('LedgerCorrupted', `${chunk.name} holds entries up to ${lastHeld}`, { file: chunk.name, offsetBytes: index!.offsetOf(chunk.last + 1) });
  }
  const endsChunk = hasFlag(scan.lastFlags, EntryFlags.CHUNK_END);
  const torn = scan.damage !== undefined || (chunk.last !== undefined && lastHeld < chunk.last);
  if (!torn && chunk.last !== undefined && !hasFlag(scan.lastFlags, EntryFlags.SIGNATURE)) {
    throw new LedgerError('LedgerCorrupted', `${chunk.name} does not end on a signature`, { file: chunk.name, offsetBytes: index!.offsetOf(chunk.last) });
  }
  // Bytes after a whole CHUNK_END entry that ends the chunk as named (an append whose data never
  // reached the disk, say) lose nothing when cut: that is a torn tail too. A CHUNK_END anywhere
  // else in a torn chunk cannot come from our writer.
  if (torn && chunk.last !== undefined && endsChunk && lastHeld !== chunk.last) {
    throw new LedgerError('LedgerCorrupted', `${chunk.name} has a CHUNK_END entry at ${lastHeld}`, { file: chunk.name, offsetBytes: index!.offsetOf(lastHeld) });
  }
  return { lastHeld, endsChunk, torn };
}

/**
 * Checks a batch of frames to append after (lastView, lastSeqno): each frame decodes whole,
 * seqnos continue, views never go back, CHUNK_END only on signatures. Returns each frame's flags.
 */
export function checkAppendBatch(frames: readonly Uint8Array[], lastSeqno: Seqno, lastView: View, verifyCrc: boolean): Uint8Array {
  const flagsOf = new Uint8Array(frames.length);
  let expected = lastSeqno + 1;
  let view = lastView;
  for (let i = 0; i < frames.length; i++) {
    const frame = frames[i]!;
    const entry = checkEntry(frame, 0, verifyCrc);
    if (entry.frameSizeBytes !== frame.byteLength) {
      throw new LedgerError('MalformedLedgerEntry', `appended frame has ${frame.byteLength - entry.frameSizeBytes} trailing bytes`, {
        seqno: entry.seqno,
      });
    }
    if (entry.seqno !== expected || entry.view < view) {
      throw new LedgerError(
        'LedgerEntryOutOfOrder',
        `appended entry ${entry.view}.${entry.seqno} does not follow ${view}.${expected - 1}`,
        { seqno: entry.seqno, expectedSeqno: expected },
      );
    }
    if (hasFlag(entry.flags, EntryFlags.CHUNK_END) && !hasFlag(entry.flags, EntryFlags.SIGNATURE)) {
      throw new LedgerError('MalformedLedgerEntry', `entry ${entry.seqno} has CHUNK_END but is not a signature`, { seqno: entry.seqno });
    }
    flagsOf[i] = entry.flags;
    view = entry.view;
    expected++;
  }
  return flagsOf;
}

/** What the open report says of a torn write found in `file` (`fileBytes` long) by `scan`. */
export function tornTailOf(file: string, scan: ChunkScan, fileBytes: number, droppedFiles: string[], keptLastSeqno: Seqno): TornTail {
  return {
    file,
    offsetBytes: scan.validBytes,
    reason: scan.damage?.reason ?? 'ShorterThanName',
    droppedBytes: fileBytes - scan.validBytes,
    droppedFiles,
    keptLastSeqno,
  };
}
