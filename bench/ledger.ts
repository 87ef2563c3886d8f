/**
 * Ledger file throughput on the real disk, in a temporary directory removed afterwards.
 * Run: node --import tsx bench/ledger.ts [entries]
 * Prints one JSON object per measurement.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { encodeEntry, EntryFlags, Ledger, shouldEndChunk } from '../src/ledger/index.js';
import { FsDisk } from '../src/platform/fs-disk.js';

const ENTRY_COUNT = Number(process.argv[2] ?? 200_000);
const PAYLOAD_BYTES = 200;
const BATCH_ENTRIES = 1000;
const SIGNATURE_EVERY_ENTRIES = 5000;
const CHUNK_SIZE_BYTES = 5 * 1024 * 1024;

function report(name: string, entries: number, bytes: number, ms: number): void {
  console.log(
    JSON.stringify({
      bench: `ledger.${name}`,
      entries,
      ms: Math.round(ms),
      entriesPerSecond: Math.round((entries / ms) * 1000),
      megabytesPerSecond: Number(((bytes / ms) * 1000 / 1024 / 1024).toFixed(1)),
    }),
  );
}

/** Encodes the whole run up front, cutting chunks the way a primary does. */
function makeFrames(count: number): { frames: Uint8Array[]; bytes: number; ms: number } {
  const digest = new Uint8Array(32).fill(7);
  const payload = new Uint8Array(PAYLOAD_BYTES).fill(0x5a);
  const noPrivateBytes = new Uint8Array(0);
  const frames: Uint8Array[] = [];
  let chunkBytes = 0;
  let bytes = 0;
  const start = performance.now();
  for (let seqno = 1; seqno <= count; seqno++) {
    const isSignature = seqno % SIGNATURE_EVERY_ENTRIES === 0;
    let flags = isSignature ? EntryFlags.SIGNATURE : 0;
    if (shouldEndChunk({ chunkBytesSoFar: chunkBytes, chunkSizeBytes: CHUNK_SIZE_BYTES, isSignature, forced: false })) flags |= EntryFlags.CHUNK_END;
    const frame = encodeEntry({ view: 2, seqno, flags, claimsDigest: digest, commitEvidenceDigest: digest, publicBytes: payload, privateBytes: noPrivateBytes });
    chunkBytes = (flags & EntryFlags.CHUNK_END) !== 0 ? 0 : chunkBytes + frame.byteLength;
    bytes += frame.byteLength;
    frames.push(frame);
  }
  return { frames, bytes, ms: performance.now() - start };
}

function appendRun(directory: string, frames: Uint8Array[], syncEachBatch: boolean): number {
  const ledger = new Ledger({ disk: new FsDisk(), directory });
  ledger.open();
  const start = performance.now();
  for (let i = 0; i < frames.length; i += BATCH_ENTRIES) {
    ledger.append(frames.slice(i, i + BATCH_ENTRIES));
    if (syncEachBatch) ledger.sync();
  }
  ledger.commit(frames.length);
  ledger.sync();
  const ms = performance.now() - start;
  ledger.close();
  return ms;
}

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'covenant-bench-ledger-'));
try {
  const { frames, bytes, ms: encodeMs } = makeFrames(ENTRY_COUNT);
  report('encode', frames.length, bytes, encodeMs);
  report('append', frames.length, bytes, appendRun(path.join(root, 'nosync'), frames, false));
  report('append_sync_per_batch', frames.length, bytes, appendRun(path.join(root, 'sync'), frames, true));

  // Sequential read from a freshly opened ledger: chunk indexes are built on first use.
  const ledger = new Ledger({ disk: new FsDisk(), directory: path.join(root, 'nosync') });
  ledger.open();
  let start = performance.now();
  let read = 0;
  let readBytes = 0;
  for (let from = 1; from <= ENTRY_COUNT; from += BATCH_ENTRIES) {
    for (const frame of ledger.getEntries(from, Math.min(ENTRY_COUNT, from + BATCH_ENTRIES - 1))) {
      read++;
      readBytes += frame.byteLength;
    }
  }
  report('read_sequential', read, readBytes, performance.now() - start);

  ledger.close();

  // Random single reads, with every index cached and with a cache of 1/16 of the entries
  // (evicted chunks keep a sparse index, so a miss costs one short read).
  for (const indexCacheEntriesMax of [ENTRY_COUNT, Math.ceil(ENTRY_COUNT / 16)]) {
    const random = new Ledger({ disk: new FsDisk(), directory: path.join(root, 'nosync'), indexCacheEntriesMax });
    random.open();
    for (let from = 1; from <= ENTRY_COUNT; from += BATCH_ENTRIES) random.getEntries(from, Math.min(ENTRY_COUNT, from + BATCH_ENTRIES - 1));
    const reads = 20_000;
    let seqno = 1;
    let bytesRead = 0;
    start = performance.now();
    for (let i = 0; i < reads; i++) {
      seqno = ((seqno * 7919) % ENTRY_COUNT) + 1;
      bytesRead += random.getEntry(seqno).byteLength;
    }
    report(`read_random_single_cache_${indexCacheEntriesMax}`, reads, bytesRead, performance.now() - start);
    console.log(
      JSON.stringify({
        bench: 'ledger.memory',
        indexCacheEntriesMax,
        cachedIndexEntries: random.cachedIndexEntries,
        heapUsedMegabytes: Math.round(process.memoryUsage().heapUsed / 1024 / 1024),
      }),
    );
    random.close();
  }
} finally {
  fs.rmSync(root, { recursive: true, force: true });
}
