/**
 * The wire format between the request thread and the framing worker: a batch of jobs, and the
 * batch of framed entries that answers it, each packed into one transferable ArrayBuffer (one
 * copy of the write sets in; the frames are framed in place in the answer; no structured clone of
 * many small objects).
 * A large part (a write set or a frame of TRANSFERRED_PART_BYTES or more that is a whole
 * ArrayBuffer of its own) is not copied: it travels beside the packed buffer, transferred, and
 * the packed buffer only records its length. The sender's view of a transferred part is detached.
 *
 * Job:    view f64 | seqno f64 | flags u32 | public length u32 | private length u32 |
 *         transferred u32 (bit 0 public, bit 1 private) | claims digest (32) |
 *         public bytes (unless transferred) | private bytes in clear (unless transferred)
 * Framed: frame length u32 (bit 31: the frame is transferred) | leaf (32) | frame bytes (unless transferred)
 * All numbers little-endian. Transferred parts follow the order in which the packed buffer names them.
 */
import { assert } from '../base/assert.js';
import { framedEntryBytes, type EntryFraming, type FrameJob, type FramedEntry } from '../ledger/index.js';

const JOB_HEADER_BYTES = 64;
const FRAMED_HEADER_BYTES = 36;
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
export function packJobs(jobs: readonly FrameJob[]): PackedBatch {
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
    at = place(bytes, at + JOB_HEADER_BYTES, job.publicBytes, publicBuffer);
    at = place(bytes, at, job.privatePlain, privateBuffer);
  }
  return { packed: buffer, transferred };
}

/** Copies `part` into the packed buffer at `at` unless it travels transferred; where the next part goes. */
function place(out: Uint8Array, at: number, part: Uint8Array, transferred: ArrayBuffer | undefined): number {
  if (transferred !== undefined) return at;
  out.set(part, at);
  return at + part.byteLength;
}

/** Reads a packed batch in order: headers and small parts in place, large ones from beside it. */
class BatchReader {
  readonly view: DataView;
  #at = 0;
  #taken = 0;

  constructor(private readonly batch: PackedBatch) {
    this.view = new DataView(batch.packed);
  }

  get done(): boolean {
    return this.#at >= this.batch.packed.byteLength;
  }

  /** Steps over a header of `bytes`; where it starts. */
  header(bytes: number, what: string): number {
    assert(this.#at + bytes <= this.batch.packed.byteLength, `${what} header is complete`);
    const start = this.#at;
    this.#at += bytes;
    return start;
  }

  /** The next part, `length` bytes: the next transferred buffer, or a view of the bytes in place. */
  part(transferred: boolean, length: number, what: string): Uint8Array {
    if (transferred) {
      const buffer = this.batch.transferred[this.#taken++];
      assert(buffer !== undefined && buffer.byteLength === length, 'a transferred part is present, with its recorded length');
      return new Uint8Array(buffer);
    }
    assert(this.#at + length <= this.batch.packed.byteLength, `${what} is complete`);
    const bytes = new Uint8Array(this.batch.packed, this.#at, length);
    this.#at += length;
    return bytes;
  }

  /** Checks that every transferred buffer was taken by a part. */
  finish(): void {
    assert(this.#taken === this.batch.transferred.length, 'every transferred part belongs to the batch');
  }
}

/** The jobs of a packed batch, as views of its buffers. */
export function unpackJobs(batch: PackedBatch): FrameJob[] {
  const reader = new BatchReader(batch);
  const { view } = reader;
  const jobs: FrameJob[] = [];
  while (!reader.done) {
    const at = reader.header(JOB_HEADER_BYTES, 'a job');
    const moved = view.getUint32(at + 28, true);
    jobs.push({
      view: view.getFloat64(at, true),
      seqno: view.getFloat64(at + 8, true),
      flags: view.getUint32(at + 16, true),
      claimsDigest: new Uint8Array(batch.packed, at + 32, DIGEST_BYTES),
      publicBytes: reader.part((moved & PUBLIC_TRANSFERRED) !== 0, view.getUint32(at + 20, true), 'a job body'),
      privatePlain: reader.part((moved & PRIVATE_TRANSFERRED) !== 0, view.getUint32(at + 24, true), 'a job body'),
    });
  }
  reader.finish();
  return jobs;
}

/**
 * Frames jobs straight into the batch that answers them: each frame is encoded in place in the
 * packed buffer (its size is known from the job, framedEntryBytes), so there is no frame of its
 * own to allocate and no copy into the batch. A frame of TRANSFERRED_PART_BYTES or more is framed
 * into a buffer of its own, transferred with the batch.
 */
export function framePacked(jobs: readonly FrameJob[], frame: EntryFraming): PackedBatch {
  const sizes: number[] = [];
  let total = 0;
  for (const job of jobs) {
    const size = framedEntryBytes(job.publicBytes.byteLength, job.privatePlain.byteLength);
    assert(size < FRAME_TRANSFERRED, 'a frame is shorter than 2 GiB');
    sizes.push(size);
    total += FRAMED_HEADER_BYTES + (size >= TRANSFERRED_PART_BYTES ? 0 : size);
  }
  const buffer = new ArrayBuffer(total);
  const bytes = new Uint8Array(buffer);
  const view = new DataView(buffer);
  const transferred: ArrayBuffer[] = [];
  let at = 0;
  for (let i = 0; i < jobs.length; i++) {
    const size = sizes[i]!;
    const moved = size >= TRANSFERRED_PART_BYTES;
    const frameAt = at + FRAMED_HEADER_BYTES;
    const into = moved ? new Uint8Array(size) : new Uint8Array(buffer, frameAt, size);
    const { leaf } = frame.frame(jobs[i]!, into);
    assert(leaf.byteLength === DIGEST_BYTES, 'a leaf has 32 bytes');
    view.setUint32(at, size | (moved ? FRAME_TRANSFERRED : 0), true);
    bytes.set(leaf, at + 4);
    if (moved) transferred.push(into.buffer as ArrayBuffer);
    at = moved ? frameAt : frameAt + size;
  }
  return { packed: buffer, transferred };
}

/** The framed entries of a packed batch, as views of its buffers (which the entries then share). */
export function unpackFramed(batch: PackedBatch): FramedEntry[] {
  const reader = new BatchReader(batch);
  const entries: FramedEntry[] = [];
  while (!reader.done) {
    const at = reader.header(FRAMED_HEADER_BYTES, 'a framed entry');
    const word = reader.view.getUint32(at, true);
    const leaf = new Uint8Array(batch.packed, at + 4, DIGEST_BYTES);
    entries.push({ leaf, bytes: reader.part((word & FRAME_TRANSFERRED) !== 0, word & ~FRAME_TRANSFERRED, 'a framed entry') });
  }
  reader.finish();
  return entries;
}
