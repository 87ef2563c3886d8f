/**
 * Offline reading of ledger directories (for `covenant ledger` tools and audits): every entry
 * of a set of directories in seqno order, each with the file and offset it came from so that an
 * error can be pointed at. Reading is strict: any damage, including a torn tail, is reported as
 * LedgerCorrupted with the file and offset. One chunk file is held in memory at a time.
 */
import type { Seqno } from '../base/index.js';
import { scanChunk } from './chunk-file.js';
import { isChunkFileName, parseChunkName, type ChunkName } from './chunk-name.js';
import type { Disk } from './disk.js';
import { decodeEntry, EntryFlags, hasFlag, type DecodedEntry } from './entry.js';
import { LedgerError } from './errors.js';

export interface ReadLedgerDirectoriesOptions {
  /** Only `.committed` chunks. */
  committedOnly?: boolean;
  /** Also `.recovery` chunks (left out by default: a node discards them at start). */
  includeRecovery?: boolean;
  /** Skip entries below this seqno (whole files before it are not read). */
  fromSeqno?: Seqno;
  /** Accept missing seqnos between files (a node that started from a snapshot has them). */
  allowGaps?: boolean;
}

export interface LedgerDirectoryEntry {
  entry: DecodedEntry;
  /** Path of the chunk file. */
  file: string;
  /** Where the frame starts in the file. */
  offsetBytes: number;
}

interface FoundChunk extends ChunkName {
  name: string;
  path: string;
}

export function* readLedgerDirectories(
  disk: Disk,
  directories: readonly string[],
  options: ReadLedgerDirectoriesOptions = {},
): Generator<LedgerDirectoryEntry, void, undefined> {
  const byName = new Map<string, FoundChunk>();
  for (const directory of directories) {
    for (const name of disk.listDirectory(directory).sort()) {
      if (!isChunkFileName(name) || byName.has(name)) continue;
      const parsed = parseChunkName(name);
      if (parsed.recovery && !options.includeRecovery) continue;
      if (options.committedOnly && !parsed.committed) continue;
      byName.set(name, { ...parsed, name, path: disk.join(directory, name) });
    }
  }
  const chunks = [...byName.values()].sort((a, b) => a.first - b.first);
  const fromSeqno = options.fromSeqno ?? 0;
  let expected: Seqno | undefined;
  let before: FoundChunk | undefined;
  for (const chunk of chunks) {
    if (before !== undefined && (before.last === undefined || chunk.first <= before.last)) {
      throw new LedgerError('LedgerFilesInconsistent', `${chunk.path} overlaps ${before.path}`, { file: chunk.path });
    }
    before = chunk;
    if (chunk.last !== undefined && chunk.last < fromSeqno) continue;
    if (expected !== undefined && chunk.first !== expected && !options.allowGaps) {
      throw new LedgerError('LedgerFilesInconsistent', `${chunk.path} starts at ${chunk.first}, expected ${expected}`, { file: chunk.path });
    }

    const bytes = disk.readAll(chunk.path);
    const scan = scanChunk(bytes, chunk.path);
    const fail = (offsetBytes: number, message: string) =>
      new LedgerError('LedgerCorrupted', `${chunk.path} at offset ${offsetBytes}: ${message}`, { file: chunk.path, offsetBytes });
    if (scan.damage !== undefined) throw fail(scan.damage.offsetBytes, scan.damage.message);
    const index = scan.index;
    if (index === undefined) throw fail(scan.validBytes, 'no entries');
    if (index.first !== chunk.first) throw fail(index.offsetOf(index.first), `starts with seqno ${index.first}`);
    if (chunk.last !== undefined) {
      if (index.last !== chunk.last) throw fail(index.endBytes, `ends with seqno ${index.last}, its name says ${chunk.last}`);
      if (!hasFlag(scan.lastFlags, EntryFlags.SIGNATURE)) throw fail(index.offsetOf(index.last), 'does not end on a signature');
    }
    for (let seqno = Math.max(index.first, fromSeqno); seqno <= index.last; seqno++) {
      const offsetBytes = index.offsetOf(seqno);
      yield { entry: decodeEntry(bytes, offsetBytes), file: chunk.path, offsetBytes };
    }
    expected = index.last + 1;
  }
}
