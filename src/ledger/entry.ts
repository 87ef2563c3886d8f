/**
 * The ledger entry frame: one replicated transaction as it is written to chunk files and sent
 * to backups. The layout is versioned and self-describing (docs/ledger.md has the table):
 *
 *   off size field
 *   0   4    frame_length: bytes that follow this field, crc included
 *   4   1    format_version = 1
 *   5   1    flags (EntryFlags)
 *   6   2    reserved = 0
 *   8   8    view (u64)
 *   16  8    seqno (u64)
 *   24  32   claims_digest
 *   56  32   commit_evidence_digest
 *   88  4    public_length
 *   92  4    private_length
 *   96  ..   public write set, then private write set
 *   end-4 4  crc32 over bytes [4, end-4)
 *
 * All integers are little-endian. The crc only detects torn writes; integrity proper comes from
 * the Merkle tree over the entries.
 */
import { createHash } from 'node:crypto';
import { crc32 } from 'node:zlib';
import type { Seqno, View } from '../base/index.js';
import { LedgerError } from './errors.js';
import { sha256 } from '../crypto/index.js';

export const ENTRY_FORMAT_VERSION = 1;
export const ENTRY_HEADER_BYTES = 96;
export const ENTRY_CRC_BYTES = 4;
/** Bytes of a frame besides the two write sets. */
export const ENTRY_OVERHEAD_BYTES = ENTRY_HEADER_BYTES + ENTRY_CRC_BYTES;
export const DIGEST_BYTES = 32;
/**
 * Upper bound of one frame. A frame is held in memory whole, so a bound keeps a corrupt length
 * field from turning into a huge allocation.
 */
export const ENTRY_FRAME_BYTES_MAX = 1024 * 1024 * 1024;

export const EntryFlags = {
  /** The entry is a signature transaction. */
  SIGNATURE: 1,
  /** The primary decided that this entry ends its chunk (only ever set on a signature). */
  CHUNK_END: 2,
  RECONFIGURATION: 4,
  SNAPSHOT_EVIDENCE: 8,
} as const;
const KNOWN_FLAGS = 0x0f;

/** Largest integer written as u64: seqnos and views are JS numbers, so 2^53 - 1. */
const U64_HIGH_MAX = 0x1f_ffff;

export interface EntryFields {
  view: View;
  seqno: Seqno;
  /** A bit set of EntryFlags. */
  flags: number;
  claimsDigest: Uint8Array;
  commitEvidenceDigest: Uint8Array;
  publicBytes: Uint8Array;
  /** AES-GCM ciphertext‖tag of the private write set; empty when there is none. */
  privateBytes: Uint8Array;
}

export interface DecodedEntry extends EntryFields {
  /** The whole frame, length field and crc included (a subarray of the input). */
  frameBytes: Uint8Array;
  /** frameBytes.byteLength: where the next frame starts, relative to this one. */
  frameSizeBytes: number;
}

function checkU64(value: number, name: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new TypeError(`${name} must be a safe non-negative integer, got ${value}`);
}

function checkDigest(value: Uint8Array, name: string): void {
  if (value.byteLength !== DIGEST_BYTES) throw new TypeError(`${name} must be ${DIGEST_BYTES} bytes, got ${value.byteLength}`);
}

/**
 * Frames are carved from shared slabs: allocating one small ArrayBuffer per entry costs more
 * than encoding it. A slab only ever holds frames, so a frame's backing buffer exposes nothing
 * but other (already public or encrypted) ledger frames; a slab stays alive while any of its
 * frames does.
 */
const SLAB_BYTES = 1024 * 1024;
const SLAB_FRAME_BYTES_MAX = 64 * 1024;
let slab = new ArrayBuffer(SLAB_BYTES);
let slabUsedBytes = 0;

function allocateFrame(sizeBytes: number): Uint8Array {
  if (sizeBytes > SLAB_FRAME_BYTES_MAX) return new Uint8Array(sizeBytes);
  if (slabUsedBytes + sizeBytes > SLAB_BYTES) {
    slab = new ArrayBuffer(SLAB_BYTES);
    slabUsedBytes = 0;
  }
  const out = new Uint8Array(slab, slabUsedBytes, sizeBytes);
  slabUsedBytes += sizeBytes;
  return out;
}

function writeU32(out: Uint8Array, at: number, value: number): void {
  out[at] = value;
  out[at + 1] = value >>> 8;
  out[at + 2] = value >>> 16;
  out[at + 3] = value >>> 24;
}

function readU32(bytes: Uint8Array, at: number): number {
  return (bytes[at]! | (bytes[at + 1]! << 8) | (bytes[at + 2]! << 16) | (bytes[at + 3]! << 24)) >>> 0;
}

/**
 * Serialises one entry. On the primary's hot path: one slab carve, no intermediate copies.
 * `into`, when given, receives the frame instead of a slab carve and must be exactly its size
 * (the framing worker encodes each frame straight into the batch it answers with).
 */
export function encodeEntry(fields: EntryFields, into?: Uint8Array): Uint8Array {
  const { view, seqno, flags, claimsDigest, commitEvidenceDigest, publicBytes, privateBytes } = fields;
  checkU64(view, 'view');
  checkU64(seqno, 'seqno');
  if (!Number.isInteger(flags) || (flags & ~KNOWN_FLAGS) !== 0) throw new TypeError(`unknown entry flags 0x${flags.toString(16)}`);
  checkDigest(claimsDigest, 'claimsDigest');
  checkDigest(commitEvidenceDigest, 'commitEvidenceDigest');
  const totalBytes = ENTRY_OVERHEAD_BYTES + publicBytes.byteLength + privateBytes.byteLength;
  if (totalBytes > ENTRY_FRAME_BYTES_MAX) throw new RangeError(`entry of ${totalBytes} bytes exceeds ${ENTRY_FRAME_BYTES_MAX}`);

  if (into !== undefined && into.byteLength !== totalBytes) throw new RangeError(`entry of ${totalBytes} bytes given ${into.byteLength} bytes to fill`);
  const out = into ?? allocateFrame(totalBytes);
  writeU32(out, 0, totalBytes - 4);
  out[4] = ENTRY_FORMAT_VERSION;
  out[5] = flags;
  out[6] = 0;
  out[7] = 0;
  writeU32(out, 8, view >>> 0);
  writeU32(out, 12, Math.floor(view / 0x1_0000_0000));
  writeU32(out, 16, seqno >>> 0);
  writeU32(out, 20, Math.floor(seqno / 0x1_0000_0000));
  out.set(claimsDigest, 24);
  out.set(commitEvidenceDigest, 56);
  writeU32(out, 88, publicBytes.byteLength);
  writeU32(out, 92, privateBytes.byteLength);
  out.set(publicBytes, ENTRY_HEADER_BYTES);
  out.set(privateBytes, ENTRY_HEADER_BYTES + publicBytes.byteLength);
  const crcEnd = totalBytes - ENTRY_CRC_BYTES;
  writeU32(out, crcEnd, crc32(out.subarray(4, crcEnd)));
  return out;
}

function malformed(message: string, offsetBytes: number): LedgerError {
  return new LedgerError('MalformedLedgerEntry', `malformed ledger entry at offset ${offsetBytes}: ${message}`, { offsetBytes, problem: message });
}

function readU64(bytes: Uint8Array, at: number, name: string, offsetBytes: number): number {
  const low = readU32(bytes, at);
  const high = readU32(bytes, at + 4);
  if (high > U64_HIGH_MAX) throw malformed(`${name} exceeds 2^53`, offsetBytes);
  return high * 0x1_0000_0000 + low;
}

/**
 * Size of the frame starting at `offset` as its length field claims, after checking only that
 * field; throws TruncatedLedgerEntry when the length field itself is cut.
 */
/** The view of an already-validated frame, read from its header without decoding it. */
export function peekFrameView(frame: Uint8Array): number {
  const dv = new DataView(frame.buffer, frame.byteOffset, frame.byteLength);
  return dv.getUint32(12, true) * 0x1_0000_0000 + dv.getUint32(8, true);
}

export function peekFrameSizeBytes(bytes: Uint8Array, offset = 0): number {
  if (bytes.byteLength - offset < 4) {
    const problem = 'no room for the length field';
    throw new LedgerError('TruncatedLedgerEntry', `truncated ledger entry at offset ${offset}: ${problem}`, { offsetBytes: offset, problem });
  }
  return readU32(bytes, offset) + 4;
}

/** The fixed-size facts of a frame, without the views decodeEntry makes. */
export interface EntryHeader {
  view: View;
  seqno: Seqno;
  flags: number;
  publicLength: number;
  frameSizeBytes: number;
}

/**
 * Checks the frame at `offset` whole (crc included unless a caller that already checked this
 * very file opts out) and returns its header fields. The work is
 * bounded by the input size whatever the input; any inconsistency throws MalformedLedgerEntry
 * or TruncatedLedgerEntry naming the offset.
 */
export function checkEntry(bytes: Uint8Array, offset = 0, verifyCrc = true): EntryHeader {
  const frameSizeBytes = peekFrameSizeBytes(bytes, offset);
  if (frameSizeBytes < ENTRY_OVERHEAD_BYTES) throw malformed(`frame length ${frameSizeBytes - 4} is below the minimum`, offset);
  if (frameSizeBytes > ENTRY_FRAME_BYTES_MAX) throw malformed(`frame length ${frameSizeBytes - 4} exceeds the maximum`, offset);
  const available = bytes.byteLength - offset;
  if (available < frameSizeBytes) {
    const problem = `frame needs ${frameSizeBytes} bytes, ${available} available`;
    throw new LedgerError('TruncatedLedgerEntry', `truncated ledger entry at offset ${offset}: ${problem}`, {
      offsetBytes: offset,
      problem,
    });
  }
  const crcEnd = offset + frameSizeBytes - ENTRY_CRC_BYTES;
  // The crc first: a torn or garbage frame is reported as such, not as whichever field broke.
  if (verifyCrc && crc32(bytes.subarray(offset + 4, crcEnd)) !== readU32(bytes, crcEnd)) throw malformed('crc mismatch', offset);
  const version = bytes[offset + 4]!;
  if (version !== ENTRY_FORMAT_VERSION) throw malformed(`unsupported format version ${version}`, offset);
  const flags = bytes[offset + 5]!;
  if ((flags & ~KNOWN_FLAGS) !== 0) throw malformed(`unknown flags 0x${flags.toString(16)}`, offset);
  if (bytes[offset + 6] !== 0 || bytes[offset + 7] !== 0) throw malformed('reserved bytes are not zero', offset);
  const view = readU64(bytes, offset + 8, 'view', offset);
  const seqno = readU64(bytes, offset + 16, 'seqno', offset);
  const publicLength = readU32(bytes, offset + 88);
  const privateLength = readU32(bytes, offset + 92);
  if (ENTRY_OVERHEAD_BYTES + publicLength + privateLength !== frameSizeBytes) {
    throw malformed(`write set lengths ${publicLength}+${privateLength} do not match the frame length`, offset);
  }
  return { view, seqno, flags, publicLength, frameSizeBytes };
}

/**
 * Decodes and checks the frame at `offset` (crc included). Returns subarrays of `bytes`, no
 * copies. Errors as checkEntry.
 */
export function decodeEntry(bytes: Uint8Array, offset = 0): DecodedEntry {
  const { view, seqno, flags, publicLength, frameSizeBytes } = checkEntry(bytes, offset);
  const frameBytes = bytes.subarray(offset, offset + frameSizeBytes);
  const privateStart = ENTRY_HEADER_BYTES + publicLength;
  return {
    view,
    seqno,
    flags,
    claimsDigest: frameBytes.subarray(24, 56),
    commitEvidenceDigest: frameBytes.subarray(56, 88),
    publicBytes: frameBytes.subarray(ENTRY_HEADER_BYTES, privateStart),
    privateBytes: frameBytes.subarray(privateStart, frameSizeBytes - ENTRY_CRC_BYTES),
    frameBytes,
    frameSizeBytes,
  };
}

/** The public and private write sets of a frame this process encoded (views, no checks, no copy). */
export function entryWriteSets(frame: Uint8Array): Pick<EntryFields, 'publicBytes' | 'privateBytes'> {
  const publicLength = readU32(frame, 88);
  const privateLength = readU32(frame, 92);
  const privateStart = ENTRY_HEADER_BYTES + publicLength;
  return {
    publicBytes: frame.subarray(ENTRY_HEADER_BYTES, privateStart),
    privateBytes: frame.subarray(privateStart, privateStart + privateLength),
  };
}

/** Digest of a write set, the first input of the Merkle leaf: SHA-256(public ‖ private). */
export function writeSetDigest(entry: Pick<EntryFields, 'publicBytes' | 'privateBytes'>): Uint8Array {
  const { publicBytes, privateBytes } = entry;
  // In a decoded frame the two write sets are adjacent: hash them as one view, without a copy.
  if (publicBytes.buffer === privateBytes.buffer && publicBytes.byteOffset + publicBytes.byteLength === privateBytes.byteOffset) {
    const both = new Uint8Array(publicBytes.buffer, publicBytes.byteOffset, publicBytes.byteLength + privateBytes.byteLength);
    return sha256(both);
  }
  const digest = createHash('sha256').update(publicBytes).update(privateBytes).digest();
  return new Uint8Array(digest.buffer, digest.byteOffset, digest.byteLength);
}

export function hasFlag(flags: number, flag: number): boolean {
  return (flags & flag) !== 0;
}
