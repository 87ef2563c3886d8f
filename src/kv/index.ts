/**
 * The key-value store: versioned persistent state, synchronous transactions, the write-set
 * codec, the encryption of the private domain, and snapshots.
 */
export { KvErrorCode } from './errors.js';
export { jsonTable, type TableDef } from './table.js';
export {
  jsonCodec,
  stringCodec,
  bytesCodec,
  uint64Codec,
  stringKeyCodec,
  uint64KeyCodec,
  uintKeyCodec,
  type Codec,
  type KeyCodec,
} from './codecs.js';
export { compareUtf8, isPublicMapName, PUBLIC_MAP_PREFIX } from './key-order.js';
export { copyValue, utf8Value, SLAB_BYTES, MAX_CARVED_BYTES } from './value-bytes.js';
export {
  encodeWriteSet,
  decodeWriteSet,
  mergeWriteSets,
  decodeWriteSetParts,
  WRITE_SET_FORMAT,
  type Write,
  type WriteSet,
  type EncodedWriteSet,
  type Domain,
  type DecodeOptions,
} from './write-set.js';
export {
  LedgerSecrets,
  LedgerEncryptor,
  LEDGER_SECRET_BYTES,
  AES_GCM_IV_BYTES,
  AES_GCM_TAG_BYTES,
  type LedgerSecret,
} from './encryption.js';
export { readSnapshotHeader, SNAPSHOT_FORMAT, SNAPSHOT_HEADER_BYTES, type SnapshotHeader } from './snapshot.js';
export {
  SnapshotPacker,
  packSnapshot,
  PACKED_CHUNK_BYTES,
  type PackedSnapshot,
  type PackedMap,
} from './snapshot-slices.js';
export { PackedSnapshotEncoder, encodePackedSnapshot, encodePackedSnapshotStreamed, type SnapshotStreamOptions } from './snapshot-stream.js';
export { SnapshotLoader, loadSnapshotAtOnce } from './snapshot-loading.js';
export {
  Store,
  Tx,
  StoreView,
  DEFAULT_UNCOMMITTED_VERSIONS_MAX,
  type StoreOptions,
  type AppliedTx,
  type AppliedListener,
  type MapAppliedListener,
  type RollbackListener,
  type MapReader,
  type TxMap,
} from './store.js';
