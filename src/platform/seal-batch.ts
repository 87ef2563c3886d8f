/**
 * The wire format between the request thread and the sealing worker: a batch of jobs, and the
 * batch of sealed entries that answers it, each packed into one transferable ArrayBuffer (one
 * copy of the write sets in, one of the frames out; no structured clone of many small objects).
 * A large part (a write set or a frame of TRANSFERRED_PART_BYTES or more that is a whole
 * ArrayBuffer of its own) is not copied: it travels beside the packed buffer, transferred, and
 * the packed buffer only records its length. The sender's view of a transferred part is detached.
 *
 * Job:    view f64 | seqno f64 | flags u32 | public length u32 | private length u32 |
 *         transferred u32 (bit 0 public, bit 1 private) | claims digest (32) |
 *         public bytes (unless transferred) | private bytes in clear (unless transferred)
 * Sealed: frame length u32 (bit 31: the frame is transferred) | leaf (32) | frame bytes (unless transferred)
 * All numbers little-endian. Transferred parts follow the order in which the packed buffer names them.
 */
import { assert } from '../base/assert.js';
import type { SealJob, SealedEntry } from '../ledger/index.js';

const JOB_HEADER_BYTES = 64;
const SEALED_HEADER_BYTES = 36;
const DIGEST_BYTES = 32;
const PUBLIC_TRANSFERRED = 1;
const PRIVATE_TRANSFERRED = 2;
const FRAME_TRANSFERRED = 0x8000_0000;

/**
 * From this size on a part travels as its own transferred buffer: copying a 32 MB write set into
 * the batch, and its frame back, costs each thread tens of milliseconds (mostly faulting in fresh
 * pages), which the request thread would spend blocked when a signature drains the pipeline.
 */
export const TRANSFERRED_PART_BYTES = 256 * 1024;

/** A packed batch and the buffers that travel beside it (all of them in the transfer list). */
export interface PackedBatch {
  readonly packed: ArrayBuffer;
  readonly transferred: ArrayBuffer[];
}

/**
 * The buffer of `bytes` when it may travel transferred: large, all of its own buffer, and not
 * already in this batch's transfer list (the same bytes given twice are copied the second time).
 */
function transferable(bytes: Uint8Array, taken: readonly ArrayBuffer[]): ArrayBuffer | undefined {
  const buffer = bytes.buffer;
  if (bytes.byteLength < TRANSFERRED_PART_BYTES || !(buffer instanceof ArrayBuffer)) return undefined;
  if (bytes.byteOffset !== 0 || bytes.byteLength !== buffer.byteLength) return undefined;
  return taken.includes(buffer) ? undefined : buffer;
}

/** Packs jobs; their large parts are transferred with the batch (and detached here once posted). */
export function packJobs(jobs: readonly SealJob[]): PackedBatch {
  const transferred: ArrayBuffer[] = [];
  // Per job, its public then its private part's transferred buffer (undefined: copied).
  const moved: (ArrayBuffer | undefined)[] = [];
  let total = 0;
  for (const job of jobs) {
    const publicBuffer = transferable(job.publicBytes, transferred);
    if (publicBuffer) transferred.push(publicBuffer);
    const privateBuffer = transferable(job.privatePlain, transferred);
    if (privateBuffer) transferred.push(privateBuffer);
    moved.push(publicBuffer, privateBuffer);
    total += JOB_HEADER_BYTES + (publicBuffer ? 0 : job.publicBytes.byteLength) + (privateBuffer ? 0 : job.privatePlain.byteLength);
  }
  const buffer = new ArrayBuffer(total);
  const bytes = new Uint8Array(buffer);
  const view = new DataView(buffer);
  let at = 0;
  for (let i = 0; i < jobs.length; i++) {
    const job = jobs[i]!;
    assert(job.claimsDigest.byteLength === DIGEST_BYTES, 'a claims digest has 32 bytes');
    const publicBuffer = moved[2 * i];
    const privateBuffer = moved[2 * i + 1];
    view.setFloat64(at, job.view, true);
    view.setFloat64(at + 8, job.seqno, true);
    view.setUint32(at + 16, job.flags, true);
    view.setUint32(at + 20, job.publicBytes.byteLength, true);
    view.setUint32(at + 24, job.privatePlain.byteLength, true);
    view.setUint32(at + 28, (publicBuffer ? PUBLIC_TRANSFERRED : 0) | (privateBuffer ? PRIVATE_TRANSFERRED : 0), true);
    bytes.set(job.claimsDigest, at + 32);
    at += JOB_HEADER_BYTES;
    if (!publicBuffer) {
      bytes.set(job.publicBytes, at);
      at += job.publicBytes.byteLength;
    }
    if (!privateBuffer) {
      bytes.set(job.privatePlain, at);
      at += job.privatePlain.byteLength;
    }
  }
  return { packed: buffer, transferred };
}

/** Takes the next transferred buffer, which must hold exactly `length` bytes. */
function nextTransferred(batch: PackedBatch, index: number, length: number): Uint8Array {
  const buffer = batch.transferred[index];
  assert(buffer !== undefined && buffer.byteLength === length, 'a transferred part is present, with its recorded length');
  return new Uint8Array(buffer);
}

/** The jobs of a packed batch, as views of its buffers. */
export function unpackJobs(batch: PackedBatch): SealJob[] {
  const { packed } = batch;
  const view = new DataView(packed);
  const jobs: SealJob[] = [];
  let at = 0;
  let taken = 0;
  while (at < packed.byteLength) {
    assert(at + JOB_HEADER_BYTES <= packed.byteLength, 'a job header is complete');
    const publicLength = view.getUint32(at + 20, true);
    const privateLength = view.getUint32(at + 24, true);
    const moved = view.getUint32(at + 28, true);
    const header = at;
    at += JOB_HEADER_BYTES;
    let publicBytes: Uint8Array;
    if ((moved & PUBLIC_TRANSFERRED) !== 0) {
      publicBytes = nextTransferred(batch, taken++, publicLength);
    } else {
      assert(at + publicLength <= packed.byteLength, 'a job body is complete');
      publicBytes = new Uint8Array(packed, at, publicLength);
      at += publicLength;
    }
    let privatePlain: Uint8Array;
    if ((moved & PRIVATE_TRANSFERRED) !== 0) {
      privatePlain = nextTransferred(batch, taken++, privateLength);
    } else {
      assert(at + privateLength <= packed.byteLength, 'a job body is complete');
      privatePlain = new Uint8Array(packed, at, privateLength);
      at += privateLength;
    }
    jobs.push({
      view: view.getFloat64(header, true),
      seqno: view.getFloat64(header + 8, true),
      flags: view.getUint32(header + 16, true),
      claimsDigest: new Uint8Array(packed, header + 32, DIGEST_BYTES),
      publicBytes,
      privatePlain,
    });
  }
  assert(taken === batch.transferred.length, 'every transferred part belongs to a job');
  return jobs;
}

/** Packs sealed entries; large frames are transferred with the batch. */
export function packSealed(entries: readonly SealedEntry[]): PackedBatch {
  const transferred: ArrayBuffer[] = [];
  const moved: (ArrayBuffer | undefined)[] = [];
  let total = 0;
  for (const entry of entries) {
    const frameBuffer = transferable(entry.bytes, transferred);
    if (frameBuffer) transferred.push(frameBuffer);
    moved.push(frameBuffer);
    total += SEALED_HEADER_BYTES + (frameBuffer ? 0 : entry.bytes.byteLength);
  }
  const buffer = new ArrayBuffer(total);
  const bytes = new Uint8Array(buffer);
  const view = new DataView(buffer);
  let at = 0;
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]!;
    assert(entry.leaf.byteLength === DIGEST_BYTES, 'a leaf has 32 bytes');
    assert(entry.bytes.byteLength < FRAME_TRANSFERRED, 'a frame is shorter than 2 GiB');
    const frameBuffer = moved[i];
    view.setUint32(at, entry.bytes.byteLength | (frameBuffer ? FRAME_TRANSFERRED : 0), true);
    bytes.set(entry.leaf, at + 4);
    at += SEALED_HEADER_BYTES;
    if (!frameBuffer) {
      bytes.set(entry.bytes, at);
      at += entry.bytes.byteLength;
    }
  }
  return { packed: buffer, transferred };
}

/** The sealed entries of a packed batch, as views of its buffers (which the entries then share). */
export function unpackSealed(batch: PackedBatch): SealedEntry[] {
  const { packed } = batch;
  const view = new DataView(packed);
  const entries: SealedEntry[] = [];
  let at = 0;
  let taken = 0;
  while (at < packed.byteLength) {
    assert(at + SEALED_HEADER_BYTES <= packed.byteLength, 'a sealed entry header is complete');
    const word = view.getUint32(at, true);
    const length = word & ~FRAME_TRANSFERRED;
    const leaf = new Uint8Array(packed, at + 4, DIGEST_BYTES);
    at += SEALED_HEADER_BYTES;
    if ((word & FRAME_TRANSFERRED) !== 0) {
      entries.push({ leaf, bytes: nextTransferred(batch, taken++, length) });
    } else {
      assert(at + length <= packed.byteLength, 'a sealed entry is complete');
      entries.push({ leaf, bytes: new Uint8Array(packed, at, length) });
      at += length;
    }
  }
  assert(taken === batch.transferred.length, 'every transferred frame belongs to an entry');
  return entries;
}
