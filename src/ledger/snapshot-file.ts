/**
 * Snapshot files (layout in docs/snapshots.md): the store at a signature's seqno, what a node
 * needs to continue from it (Merkle tree, view history, configurations, service identity), and,
 * once the evidence is committed, a receipt that makes the file verifiable on its own.
 *
 *   file     = magic "CVSF" format:u8=1 zero:u8*3 payloadLength:u64 payload [receipt]
 *   payload  = kvLength:u64 kv-snapshot metaLength:u32 meta-json
 *   receipt  = magic "CVSR" receiptLength:u32 receipt-json
 *
 * The evidence is SHA-256 over everything before the receipt section (the file as written before
 * its evidence committed): the receipt is added afterwards, so it cannot be part of what it proves.
 * This module only lays bytes out; checking the KV snapshot and the receipt needs the layers above.
 */
import { bytesEqual, CovenantError, utf8 } from '../base/index.js';
import { sha256 } from '../crypto/index.js';

export const SNAPSHOT_FILE_MAGIC = new Uint8Array([0x43, 0x56, 0x53, 0x46]); // "CVSF"
export const SNAPSHOT_RECEIPT_MAGIC = new Uint8Array([0x43, 0x56, 0x53, 0x52]); // "CVSR"
export const SNAPSHOT_FILE_FORMAT = 1;
const FILE_HEADER_BYTES = 16;
const RECEIPT_HEADER_BYTES = 8;
/** Bound on the JSON sections, so a hostile file cannot make a reader allocate without limit. */
const JSON_SECTION_BYTES_MAX = 64 * 1024 * 1024;

/** What a node needs besides the store to continue from a snapshot (JSON, fixed key order). */
export interface SnapshotMeta {
  readonly seqno: number;
  /** View of the signature entry at seqno. */
  readonly view: number;
  /** view_history[v - 1] is the first seqno of view v, for views up to `view`. */
  readonly view_history: readonly number[];
  /** Configurations in force at seqno (one: the signature at seqno commits every earlier one). */
  readonly configurations: readonly { readonly seqno: number; readonly nodes: readonly string[] }[];
  readonly service_certificate: string;
  /** HistoryTree state of `seqno` leaves, canonical: every whole block below the last one compacted. */
  readonly tree: { readonly size: number; readonly compaction_point: number; readonly block_hashes: string; readonly leaves: string };
}

export interface SnapshotFileParts {
  /** Bytes of the KV snapshot (src/kv snapshot format). */
  readonly kv: Uint8Array;
  readonly meta: SnapshotMeta;
  /** The receipt JSON, when the file is committed. */
  readonly receipt: unknown;
  /** SHA-256 of the evidence-covered prefix. */
  readonly digest: Uint8Array;
  /** Length of the evidence-covered prefix. */
  readonly evidenceCoveredBytes: number;
}

function malformed(message: string): CovenantError {
  return new CovenantError('MalformedSnapshotFile', `malformed snapshot file: ${message}`, 400);
}

function writeU64(out: Buffer, value: number, offset: number): void {
  out.writeUInt32LE(value % 0x1_0000_0000, offset);
  out.writeUInt32LE(Math.floor(value / 0x1_0000_0000), offset + 4);
}

function readU64(buf: Buffer, offset: number): number {
  return buf.readUInt32LE(offset) + buf.readUInt32LE(offset + 4) * 0x1_0000_0000;
}

/** The file as first written (no receipt): its SHA-256 is the evidence. */
export function encodeSnapshotFile(kv: Uint8Array, meta: SnapshotMeta): Uint8Array {
  return Buffer.concat(encodeSnapshotFileParts(kv, meta));
}

/**
 * encodeSnapshotFile as the pieces that follow one another in the file: what comes before the
 * store's bytes, the store's bytes themselves (not copied: they are most of a large snapshot), and
 * the metadata section.
 */
export function encodeSnapshotFileParts(kv: Uint8Array, meta: SnapshotMeta): [Uint8Array, Uint8Array, Uint8Array] {
  const { head, tail } = snapshotFileFrame(kv.byteLength, meta);
  return [head, kv, tail];
}

/**
 * What surrounds a store snapshot of `kvBytes` bytes in its file: the bytes before it (file
 * header, store length) and after it (the metadata section). A writer streaming the store's bytes
 * writes head, the store, then tail.
 */
export function snapshotFileFrame(kvBytes: number, meta: SnapshotMeta): { head: Uint8Array; tail: Uint8Array } {
  const metaBytes = utf8.encode(JSON.stringify(meta));
  const payloadLength = 8 + kvBytes + 4 + metaBytes.byteLength;
  const head = Buffer.alloc(FILE_HEADER_BYTES + 8);
  head.set(SNAPSHOT_FILE_MAGIC, 0);
  head[4] = SNAPSHOT_FILE_FORMAT;
  writeU64(head, payloadLength, 8);
  writeU64(head, kvBytes, FILE_HEADER_BYTES);
  const tail = Buffer.alloc(4 + metaBytes.byteLength);
  tail.writeUInt32LE(metaBytes.byteLength, 0);
  tail.set(metaBytes, 4);
  return { head, tail };
}

/** The section appended to a snapshot once its evidence is committed. */
export function encodeSnapshotReceipt(receipt: unknown): Uint8Array {
  const json = utf8.encode(JSON.stringify(receipt));
  const out = Buffer.alloc(RECEIPT_HEADER_BYTES + json.byteLength);
  out.set(SNAPSHOT_RECEIPT_MAGIC, 0);
  out.writeUInt32LE(json.byteLength, 4);
  out.set(json, RECEIPT_HEADER_BYTES);
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

function parseJson(bytes: Uint8Array, what: string): unknown {
  try {
    return JSON.parse(utf8.decode(bytes)) as unknown;
  } catch {
    throw malformed(`${what} is not JSON`);
  }
}

/**
 * How many of a snapshot file's first bytes its evidence digest covers (header and payload), from
 * its header alone: a caller may hash them in slices and hand the digest to parseSnapshotFile.
 * Throws MalformedSnapshotFile.
 */
export function snapshotEvidenceCoveredBytes(bytes: Uint8Array): number {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.byteLength < FILE_HEADER_BYTES) throw malformed(`${buf.byteLength} bytes is shorter than the header`);
  const covered = FILE_HEADER_BYTES + readU64(buf, 8);
  if (!Number.isSafeInteger(covered) || covered > buf.byteLength) throw malformed('payload overruns the file');
  return covered;
}

/**
 * Splits a snapshot file into its sections. Throws MalformedSnapshotFile; checks nothing
 * cryptographic but the digest it computes — or takes `evidenceDigest`, the SHA-256 of the
 * snapshotEvidenceCoveredBytes first bytes, from a caller that hashed them in slices.
 */
export function parseSnapshotFile(bytes: Uint8Array, evidenceDigest?: Uint8Array): SnapshotFileParts {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (buf.byteLength < FILE_HEADER_BYTES) throw malformed(`${buf.byteLength} bytes is shorter than the header`);
  if (!bytesEqual(buf.subarray(0, 4), SNAPSHOT_FILE_MAGIC)) throw malformed('not a Covenant snapshot file (bad magic)');
  if (buf[4] !== SNAPSHOT_FILE_FORMAT) throw malformed(`unknown format ${buf[4]}`);
  const payloadLength = readU64(buf, 8);
  const covered = FILE_HEADER_BYTES + payloadLength;
  if (!Number.isSafeInteger(payloadLength) || covered > buf.byteLength) throw malformed('payload overruns the file');
  if (payloadLength < 12) throw malformed('payload too short');
  const kvLength = readU64(buf, FILE_HEADER_BYTES);
  const kvStart = FILE_HEADER_BYTES + 8;
  if (!Number.isSafeInteger(kvLength) || kvStart + kvLength + 4 > covered) throw malformed('store section overruns the payload');
  // The store section is most of a large file: a view of it (a copy of hundreds of megabytes would
  // hold the event loop for 0.1 s and more); a copy of a small one, which then keeps no larger buffer alive.
  const kvView = buf.subarray(kvStart, kvStart + kvLength);
  const kv = kvLength >= buf.byteLength / 2 ? new Uint8Array(kvView.buffer, kvView.byteOffset, kvView.byteLength) : new Uint8Array(kvView);
  const metaLength = buf.readUInt32LE(kvStart + kvLength);
  const metaStart = kvStart + kvLength + 4;
  if (metaStart + metaLength !== covered || metaLength > JSON_SECTION_BYTES_MAX) throw malformed('metadata section length does not match the payload');
  const meta = parseJson(buf.subarray(metaStart, covered), 'metadata') as SnapshotMeta;
  if (typeof meta !== 'object' || meta === null || !Number.isSafeInteger(meta.seqno) || typeof meta.tree !== 'object' || meta.tree === null) {
    throw malformed('metadata lacks seqno or tree');
  }
  let receipt: unknown;
  if (buf.byteLength > covered) {
    const rest = buf.subarray(covered);
    if (rest.byteLength < RECEIPT_HEADER_BYTES || !bytesEqual(rest.subarray(0, 4), SNAPSHOT_RECEIPT_MAGIC)) throw malformed('trailing bytes are not a receipt section');
    const receiptLength = rest.readUInt32LE(4);
    if (receiptLength !== rest.byteLength - RECEIPT_HEADER_BYTES || receiptLength > JSON_SECTION_BYTES_MAX) throw malformed('receipt section length does not match the file');
    receipt = parseJson(rest.subarray(RECEIPT_HEADER_BYTES), 'receipt');
  }
  return { kv, meta, receipt, digest: evidenceDigest ?? sha256(buf.subarray(0, covered)), evidenceCoveredBytes: covered };
}

export interface SnapshotFileName {
  readonly seqno: number;
  readonly evidenceSeqno: number;
  readonly committed: boolean;
}

const SNAPSHOT_FILE_NAME = /^snapshot_(0|[1-9]\d{0,15})_(0|[1-9]\d{0,15})(\.committed)?$/;

export function formatSnapshotFileName(name: SnapshotFileName): string {
  return `snapshot_${name.seqno}_${name.evidenceSeqno}${name.committed ? '.committed' : ''}`;
}

/** Parses `snapshot_<seqno>_<evidence_seqno>[.committed]`; undefined for anything else. */
export function parseSnapshotFileName(fileName: string): SnapshotFileName | undefined {
  const m = SNAPSHOT_FILE_NAME.exec(fileName);
  if (!m) return undefined;
  const seqno = Number(m[1]);
  const evidenceSeqno = Number(m[2]);
  if (!Number.isSafeInteger(seqno) || !Number.isSafeInteger(evidenceSeqno) || evidenceSeqno <= seqno) return undefined;
  return { seqno, evidenceSeqno, committed: m[3] !== undefined };
}
