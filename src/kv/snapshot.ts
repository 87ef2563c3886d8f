/**
 * Snapshot bytes: the whole state at one version (layout in docs/kv.md).
 *
 *   header = magic "CVKS" format:u8=1 seqno:u64 view:u32 bodyDigest:32 (SHA-256 of body)
 *   body   = publicLength:u64 publicPart privateLength:u64 privateEncrypted
 *
 * publicPart and the plaintext of privateEncrypted are write-set parts (write-set.ts) holding only
 * values: the writes that build the state from empty. privateEncrypted is AES-256-GCM under the
 * snapshot key of the ledger secret for seqno, IV from (view, seqno), with the first 17 header
 * bytes as additional data. The body digest lets anyone check integrity without the secret.
 */
import { createHash } from 'node:crypto';
import { assert, bytesEqual, CovenantError, type Seqno, type View } from '../base/index.js';
import { KvErrorCode, malformedSnapshot } from './errors.js';
import { decodeWriteSet, sortedPartBytes, writeSortedPart, type WriteSet } from './write-set.js';
import { AES_GCM_TAG_BYTES, type LedgerEncryptor } from './encryption.js';

export const SNAPSHOT_MAGIC = new Uint8Array([0x43, 0x56, 0x4b, 0x53]); // "CVKS"
export const SNAPSHOT_FORMAT = 1;
/** The header bytes the private section is bound to (magic, format, seqno, view). */
export const SNAPSHOT_AAD_BYTES = 17;
export const SNAPSHOT_HEADER_BYTES = SNAPSHOT_AAD_BYTES + 32;

export interface SnapshotHeader {
  readonly format: number;
  /** The version (seqno) of the state in the snapshot. */
  readonly seqno: Seqno;
  /** The view whose IV encrypted the private section. */
  readonly view: View;
  /** SHA-256 of the body, as recorded in the header. */
  readonly bodyDigest: Uint8Array;
}

export interface SnapshotInput {
  readonly version: Seqno;
  readonly view: View;
  /** Sorted as the write-set format requires. */
  readonly publicMaps: readonly (readonly [string, readonly (readonly [string, Uint8Array])[]])[];
  readonly privateMaps: readonly (readonly [string, readonly (readonly [string, Uint8Array])[]])[];
}

export interface SnapshotMaps {
  readonly version: Seqno;
  readonly view: View;
  readonly publicMaps: WriteSet;
  /** Undefined when no encryptor was given. */
  readonly privateMaps: WriteSet | undefined;
}

function writeU64(out: Buffer, value: number, offset: number): void {
  out.writeUInt32LE(value % 0x1_0000_0000, offset);
  out.writeUInt32LE(Math.floor(value / 0x1_0000_0000), offset + 4);
}

function readU64(buf: Buffer, offset: number, what: string): number {
  const value = buf.readUInt32LE(offset) + buf.readUInt32LE(offset + 4) * 0x1_0000_0000;
  if (!Number.isSafeInteger(value)) throw malformedSnapshot(`${what} ${value} is out of range`);
  return value;
}

/** Writes the header's fields before the body digest (the additional data of the private section) at the start of `out`. */
function writeHeaderFields(out: Buffer, version: Seqno, view: View): void {
  assert(Number.isSafeInteger(version) && version >= 0, `bad snapshot version ${version}`);
  assert(Number.isInteger(view) && view >= 0 && view <= 0xffff_ffff, `bad snapshot view ${view}`);
  out.set(SNAPSHOT_MAGIC, 0);
  out[4] = SNAPSHOT_FORMAT;
  writeU64(out, version, 5);
  out.writeUInt32LE(view, 13);
}

export function encodeSnapshot(input: SnapshotInput, encryptor: LedgerEncryptor): Uint8Array {
  // Each section is encoded where it belongs in the one output buffer, and the private one
  // encrypted there in place: a large snapshot is held once while it is made, not three times.
  const publicBytes = sortedPartBytes(input.publicMaps);
  const privateBytes = sortedPartBytes(input.privateMaps);
  const encryptedBytes = privateBytes === 0 ? 0 : privateBytes + AES_GCM_TAG_BYTES;
  const out = Buffer.allocUnsafe(SNAPSHOT_HEADER_BYTES + 16 + publicBytes + encryptedBytes);
  writeHeaderFields(out, input.version, input.view);
  const aad = out.subarray(0, SNAPSHOT_AAD_BYTES);
  let offset = SNAPSHOT_HEADER_BYTES;
  writeU64(out, publicBytes, offset);
  if (publicBytes > 0) writeSortedPart(input.publicMaps, out, offset + 8);
  offset += 8 + publicBytes;
  writeU64(out, encryptedBytes, offset);
  offset += 8;
  if (privateBytes > 0) {
    writeSortedPart(input.privateMaps, out, offset);
    encryptor.encryptSnapshotInPlace(input.view, input.version, out.subarray(offset, offset + privateBytes), out.subarray(offset + privateBytes, offset + encryptedBytes), aad);
  }
  const digest = createHash('sha256').update(out.subarray(SNAPSHOT_HEADER_BYTES)).digest();
  out.set(digest, SNAPSHOT_AAD_BYTES);
  return out;
}

/** The header of a snapshot at `version`, with `bodyDigest` (zeros when undefined: for the additional data only). */
export function encodeSnapshotHeader(version: Seqno, view: View, bodyDigest: Uint8Array | undefined): Buffer {
  assert(bodyDigest === undefined || bodyDigest.byteLength === 32, 'a SHA-256 body digest');
  const out = Buffer.alloc(SNAPSHOT_HEADER_BYTES);
  writeHeaderFields(out, version, view);
  if (bodyDigest !== undefined) out.set(bodyDigest, SNAPSHOT_AAD_BYTES);
  return out;
}

/** Reads and checks the header (not the body digest). Throws MalformedSnapshot. */
export function readSnapshotHeader(bytes: Uint8Array): SnapshotHeader {
  if (bytes.byteLength < SNAPSHOT_HEADER_BYTES) throw malformedSnapshot(`${bytes.byteLength} bytes is shorter than the header`);
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (!bytesEqual(buf.subarray(0, 4), SNAPSHOT_MAGIC)) throw malformedSnapshot('not a Covenant KV snapshot (bad magic)');
  const format = buf[4]!;
  if (format !== SNAPSHOT_FORMAT) throw malformedSnapshot(`unknown format ${format}`);
  return {
    format,
    seqno: readU64(buf, 5, 'seqno'),
    view: buf.readUInt32LE(13),
    bodyDigest: new Uint8Array(buf.subarray(SNAPSHOT_AAD_BYTES, SNAPSHOT_HEADER_BYTES)),
  };
}

/** A snapshot's body split into its sections (after its digest was checked). Throws MalformedSnapshot. */
export interface SnapshotSections {
  readonly publicPart: Buffer;
  readonly privateEncrypted: Buffer;
  /** The additional data the private section is bound to (the first header bytes). */
  readonly aad: Buffer;
}

export function snapshotSections(bytes: Uint8Array): SnapshotSections {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const body = buf.subarray(SNAPSHOT_HEADER_BYTES);
  if (body.byteLength < 8) throw malformedSnapshot('truncated public section length');
  const publicLength = readU64(body, 0, 'public section length');
  if (publicLength > body.byteLength - 16) throw malformedSnapshot('public section overruns the body');
  const publicPart = body.subarray(8, 8 + publicLength);
  const privateLength = readU64(body, 8 + publicLength, 'private section length');
  if (privateLength !== body.byteLength - 16 - publicLength) throw malformedSnapshot('private section length does not match the body');
  return { publicPart, privateEncrypted: body.subarray(16 + publicLength), aad: buf.subarray(0, SNAPSHOT_AAD_BYTES) };
}

/** The body of a snapshot whose header was read (readSnapshotHeader): what bodyDigest covers. */
export function snapshotBody(bytes: Uint8Array): Buffer {
  return Buffer.from(bytes.buffer, bytes.byteOffset + SNAPSHOT_HEADER_BYTES, bytes.byteLength - SNAPSHOT_HEADER_BYTES);
}

/** Checks the digest and decodes the maps; the private maps only when an encryptor is given. */
export function decodeSnapshot(bytes: Uint8Array, encryptor: LedgerEncryptor | undefined): SnapshotMaps {
  const header = readSnapshotHeader(bytes);
  if (!bytesEqual(createHash('sha256').update(snapshotBody(bytes)).digest(), header.bodyDigest)) {
    throw malformedSnapshot('body digest does not match the header');
  }
  const { publicPart, privateEncrypted, aad } = snapshotSections(bytes);
  const publicMaps = asSnapshotError(() => decodeWriteSet(publicPart, { domain: 'public', valuesOnly: true }));
  let privateMaps: WriteSet | undefined;
  if (encryptor !== undefined) {
    const plain = encryptor.decryptSnapshot(header.view, header.seqno, privateEncrypted, aad);
    privateMaps = asSnapshotError(() => decodeWriteSet(plain, { domain: 'private', valuesOnly: true }));
  }
  return { version: header.seqno, view: header.view, publicMaps, privateMaps };
}

/** Runs a decode, its MalformedWriteSet reported as MalformedSnapshot. */
export function asSnapshotError<T>(decode: () => T): T {
  try {
    return decode();
  } catch (e) {
    if (e instanceof CovenantError && e.code === KvErrorCode.MalformedWriteSet) throw malformedSnapshot(e.message);
    throw e;
  }
}
