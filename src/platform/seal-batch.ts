/**
 * The wire format between the request thread and the sealing worker: a batch of jobs, and the
 * batch of sealed entries that answers it, each packed into one transferable ArrayBuffer (one
 * copy of the write sets in, one of the frames out; no structured clone of many small objects).
 *
 * Job:    view f64 | seqno f64 | flags u32 | public length u32 | private length u32 | pad u32 |
 *         claims digest (32) | public bytes | private bytes (in clear)
 * Sealed: frame length u32 | leaf (32) | frame bytes
 * All numbers little-endian.
 */
import { assert } from '../base/assert.js';
import type { SealJob, SealedEntry } from '../ledger/index.js';

const JOB_HEADER_BYTES = 64;
const SEALED_HEADER_BYTES = 36;
const DIGEST_BYTES = 32;

export function packJobs(jobs: readonly SealJob[]): ArrayBuffer {
  let total = 0;
  for (const job of jobs) total += JOB_HEADER_BYTES + job.publicBytes.byteLength + job.privatePlain.byteLength;
  const buffer = new ArrayBuffer(total);
  const bytes = new Uint8Array(buffer);
  const view = new DataView(buffer);
  let at = 0;
  for (const job of jobs) {
    assert(job.claimsDigest.byteLength === DIGEST_BYTES, 'a claims digest has 32 bytes');
    view.setFloat64(at, job.view, true);
    view.setFloat64(at + 8, job.seqno, true);
    view.setUint32(at + 16, job.flags, true);
    view.setUint32(at + 20, job.publicBytes.byteLength, true);
    view.setUint32(at + 24, job.privatePlain.byteLength, true);
    bytes.set(job.claimsDigest, at + 32);
    at += JOB_HEADER_BYTES;
    bytes.set(job.publicBytes, at);
    at += job.publicBytes.byteLength;
    bytes.set(job.privatePlain, at);
    at += job.privatePlain.byteLength;
  }
  return buffer;
}

/** The jobs of a packed batch, as views of the buffer. */
export function unpackJobs(buffer: ArrayBuffer): SealJob[] {
  const view = new DataView(buffer);
  const jobs: SealJob[] = [];
  let at = 0;
  while (at < buffer.byteLength) {
    assert(at + JOB_HEADER_BYTES <= buffer.byteLength, 'a job header is complete');
    const publicLength = view.getUint32(at + 20, true);
    const privateLength = view.getUint32(at + 24, true);
    const start = at + JOB_HEADER_BYTES;
    assert(start + publicLength + privateLength <= buffer.byteLength, 'a job body is complete');
    jobs.push({
      view: view.getFloat64(at, true),
      seqno: view.getFloat64(at + 8, true),
      flags: view.getUint32(at + 16, true),
      claimsDigest: new Uint8Array(buffer, at + 32, DIGEST_BYTES),
      publicBytes: new Uint8Array(buffer, start, publicLength),
      privatePlain: new Uint8Array(buffer, start + publicLength, privateLength),
    });
    at = start + publicLength + privateLength;
  }
  return jobs;
}

export function packSealed(entries: readonly SealedEntry[]): ArrayBuffer {
  let total = 0;
  for (const entry of entries) total += SEALED_HEADER_BYTES + entry.bytes.byteLength;
  const buffer = new ArrayBuffer(total);
  const bytes = new Uint8Array(buffer);
  const view = new DataView(buffer);
  let at = 0;
  for (const entry of entries) {
    assert(entry.leaf.byteLength === DIGEST_BYTES, 'a leaf has 32 bytes');
    view.setUint32(at, entry.bytes.byteLength, true);
    bytes.set(entry.leaf, at + 4);
    bytes.set(entry.bytes, at + SEALED_HEADER_BYTES);
    at += SEALED_HEADER_BYTES + entry.bytes.byteLength;
  }
  return buffer;
}

/** The sealed entries of a packed batch, as views of the buffer (which the entries then share). */
export function unpackSealed(buffer: ArrayBuffer): SealedEntry[] {
  const view = new DataView(buffer);
  const entries: SealedEntry[] = [];
  let at = 0;
  while (at < buffer.byteLength) {
    assert(at + SEALED_HEADER_BYTES <= buffer.byteLength, 'a sealed entry header is complete');
    const length = view.getUint32(at, true);
    assert(at + SEALED_HEADER_BYTES + length <= buffer.byteLength, 'a sealed entry is complete');
    entries.push({ leaf: new Uint8Array(buffer, at + 4, DIGEST_BYTES), bytes: new Uint8Array(buffer, at + SEALED_HEADER_BYTES, length) });
    at += SEALED_HEADER_BYTES + length;
  }
  return entries;
}
