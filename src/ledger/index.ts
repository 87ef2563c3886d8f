/** Public face of the ledger: entry frames, chunk files, and offline reading of ledger directories. */
export { DiskError, type Disk, type DiskErrorCode, type DiskFile } from './disk.js';
export { LedgerError, isLedgerError, type LedgerErrorCode, type LedgerErrorDetails } from './errors.js';
export {
  checkEntry,
  decodeEntry,
  DIGEST_BYTES,
  encodeEntry,
  ENTRY_FORMAT_VERSION,
  ENTRY_FRAME_BYTES_MAX,
  ENTRY_HEADER_BYTES,
  ENTRY_OVERHEAD_BYTES,
  EntryFlags,
  hasFlag,
  peekFrameSizeBytes,
  entryWriteSets,
  writeSetDigest,
  type DecodedEntry,
  type EntryFields,
  type EntryHeader,
} from './entry.js';
export { CHUNK_FORMAT_VERSION, CHUNK_HEADER_BYTES, CHUNK_MAGIC, chunkFileHeader } from './chunk-file.js';
export { formatChunkName, isChunkFileName, parseChunkName, type ChunkName } from './chunk-name.js';
export { Ledger } from './ledger.js';
export {
  DEFAULT_INDEX_CACHE_ENTRIES_MAX,
  shouldEndChunk,
  type ChunkListing,
  type LedgerOpenOptions,
  type LedgerOpenReport,
  type LedgerOptions,
  type TornTail,
} from './ledger-types.js';
export {
  ENTRY_LEAVES_READ_WINDOW_BYTES,
  inlineEntryLeafReader,
  leavesOfEntries,
  type EntryLeafReader,
  type EntryLeavesRequest,
  type EntrySpan,
  type ReadFileRange,
} from './entry-leaves.js';
export { replayedEntriesOf, type EntryReplayer, type EntryReplayRequest, type ReplayedEntries } from './entry-replay.js';
export { readLedgerDirectories, type LedgerDirectoryEntry, type ReadLedgerDirectoriesOptions } from './read-directory.js';
export {
  encodeSnapshotFile,
  encodeSnapshotReceipt,
  formatSnapshotFileName,
  parseSnapshotFile,
  snapshotEvidenceCoveredBytes,
  parseSnapshotFileName,
  SNAPSHOT_FILE_FORMAT,
  type SnapshotFileName,
  type SnapshotFileParts,
  type SnapshotMeta,
} from './snapshot-file.js';
export {
  EntryFraming,
  entryLeaf,
  inlineEntryFramer,
  InlineEntryFramer,
  framedEntryBytes,
  type EntryFramer,
  type EntryFramerFactory,
  type FrameCompletion,
  type FramedEntry,
  type FrameJob,
} from './framing.js';
export {
  inlineSnapshotWriter,
  snapshotFileBytesOf,
  snapshotWritingPath,
  SNAPSHOT_WRITING_SUFFIX,
  writeSnapshotJob,
  type SnapshotWriteJob,
  type SnapshotWriteResult,
  type SnapshotWriter,
} from './snapshot-writer.js';
