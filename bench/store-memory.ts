/**
 * Where a store's memory goes, per record:
 * `node --expose-gc dist/bench/store-memory.js [--records N] [--objects] [--overwrites M] [--overwrite-rounds R]`.
 *
 * Fills a store as the logging application does (one transaction per record into the private map
 * `records`, key String(id), value the JSON {"msg": <200 characters>} through jsonCodec, compacted
 * as it goes, as a node's commits compact it) and prints one JSON line: heap, external memory and
 * RSS per record after a full collection; then, each built alone and measured the same way, what
 * its parts cost: the values' bytes (carved out of shared slabs), the Uint8Array object per value,
 * the key strings, the persistent map's structure; the size of the store's snapshot; and, for
 * comparison, the same records with values held as strings.
 *
 * Every figure is bytes per record, the growth of process.memoryUsage() over the empty process
 * after global.gc(), less the holding array (8 bytes per element) where one is used.
 *
 * With the filled store alive it also times (medians, milliseconds or microseconds): a full
 * collection (global.gc()), the write path per transaction (one put, apply, and compaction every
 * thousand versions as commits do) while filling and then, in each of `--overwrite-rounds R`
 * rounds (default 3; a list, since a round may hold a major collection), `--overwrites M` (default
 * 100,000) overwrites of random existing keys, and the snapshot: serializeSnapshot in one call, packing the
 * state (snapshotPacker) and encoding the packed state. `--objects` adds heap objects per record
 * (the node count of a V8 heap snapshot, before and after filling; slow at a million records).
 */
import { getHeapSnapshot } from 'node:v8';
import btree from 'sorted-btree';
import { LedgerEncryptor, Store, utf8Value } from '../src/kv/index.js';
import { compareUtf8 } from '../src/kv/key-order.js';
import { EMPTY_MAP, MAP_NODE_ENTRIES_MAX } from '../src/kv/map-state.js';
import { encodePackedSnapshot } from '../src/kv/snapshot-stream.js';
import { numberArg } from './args.js';
import { fillLoggingStore, LOGGING_MESSAGE, loggingCodec } from './logging-store.js';

interface Usage {
  readonly heap: number;
  readonly external: number;
  readonly rss: number;
}

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (collect === undefined) throw new Error('run with node --expose-gc');
  for (let i = 0; i < 3; i++) collect();
}

function usage(): Usage {
  gc();
  const m = process.memoryUsage();
  // external includes arrayBuffers (the slabs and every other buffer).
  return { heap: m.heapUsed, external: m.external, rss: m.rss };
}

function perRecord(before: Usage, after: Usage, records: number, holderBytes = 0): { heap: number; external: number; total: number; rss: number } {
  const heap = Math.round((after.heap - before.heap - holderBytes) / records);
  const external = Math.round((after.external - before.external) / records);
  return { heap, external, total: heap + external, rss: Math.round((after.rss - before.rss) / records) };
}

/** Objects on the V8 heap: the node count in the header of a heap snapshot (taken after a full collection). */
async function heapObjects(): Promise<number> {
  gc();
  const stream = getHeapSnapshot();
  let head = '';
  for await (const chunk of stream) {
    head += String(chunk);
    const found = /"node_count":(\d+)/.exec(head);
    if (found !== null) {
      stream.destroy();
      return Number(found[1]);
    }
  }
  throw new Error('no node_count in the heap snapshot');
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[sorted.length >> 1]!;
}

function timeMs(run: () => void): number {
  const start = process.hrtime.bigint();
  run();
  return Number(process.hrtime.bigint() - start) / 1e6;
}

/** What a measurement holds while it is measured (a module variable: an optimised function would drop a dead local early). */
let _held: unknown;

/** Bytes per record that `build`'s result takes while held. */
function measure(records: number, holderBytes: number, build: () => unknown): ReturnType<typeof perRecord> {
  const before = usage();
  _held = build();
  const result = perRecord(before, usage(), records, holderBytes);
  _held = undefined;
  return result;
}

const MESSAGE = LOGGING_MESSAGE;
const codec = loggingCodec;

/** One put per transaction, compacted every thousand versions; returns the store and µs per write. */
function fillStore(records: number): { store: Store; writeUs: number } {
  let store: Store | undefined;
  const ms = timeMs(() => {
    store = fillLoggingStore(records);
  });
  return { store: store!, writeUs: (ms * 1000) / records };
}

/** µs per transaction overwriting one random existing key (a fixed-seed sequence), compacted as fillStore does. */
let seed = 12345;

function overwrite(store: Store, records: number, count: number): number {
  const ms = timeMs(() => {
    for (let i = 0; i < count; i++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      const tx = store.beginTx();
      tx.map('records', codec).put(String(seed % records), { msg: MESSAGE });
      tx.apply();
      if (i % 1000 === 999) store.compact(store.version);
    }
    store.compact(store.version);
  });
  return (ms * 1000) / count;
}

function overwriteRounds(store: Store, records: number, count: number, rounds: number): number[] {
  return Array.from({ length: rounds }, () => Math.round(overwrite(store, records, count) * 100) / 100);
}

/** Full-collection and snapshot timings with the filled store alive. */
function timings(store: Store, out: Record<string, unknown>): void {
  out['gc_full_ms'] = Math.round(median(Array.from({ length: 5 }, () => timeMs(gc) / 3)) * 10) / 10;
  const encryptor = new LedgerEncryptor(new Uint8Array(32).fill(1));
  out['snapshot_serialize_ms'] = Math.round(median(Array.from({ length: 3 }, () => timeMs(() => store.serializeSnapshot(encryptor, 1)))));
  const packMs: number[] = [];
  const encodeMs: number[] = [];
  for (let i = 0; i < 3; i++) {
    const packer = store.snapshotPacker(1);
    packMs.push(timeMs(() => {
      while (!packer.step(10_000)) {
        // one slice of 10,000 entries a call, as a node packs between turns
      }
    }));
    encodeMs.push(timeMs(() => encodePackedSnapshot(packer.result(), encryptor)));
  }
  out['snapshot_pack_ms'] = Math.round(median(packMs));
  out['snapshot_encode_packed_ms'] = Math.round(median(encodeMs));
}

async function main(): Promise<void> {
  const records = numberArg('--records', 200_000);
  const overwrites = numberArg('--overwrites', 100_000);
  const objects = process.argv.includes('--objects');
  const valueBytes = codec.encode({ msg: MESSAGE }).byteLength;
  const holder = 8 * records;
  const out: Record<string, unknown> = { bench: 'store-memory', records, value_bytes: valueBytes, key_chars_max: String(records - 1).length };

  const objectsBefore = objects ? await heapObjects() : 0;
  const base = usage();
  let fill: { store: Store; writeUs: number } | undefined = fillStore(records);
  let store: Store | undefined = fill.store;
  const writeUs = fill.writeUs;
  // Only `store` holds it from here on, so that dropping it frees it.
  fill = undefined;
  void fill;
  const filled = usage();
  out['store'] = perRecord(base, filled, records);
  if (objects) out['store_heap_objects_per_record'] = Math.round(((await heapObjects()) - objectsBefore) / records * 100) / 100;
  out['write_fill_us'] = Math.round(writeUs * 100) / 100;
  timings(store, out);
  out['write_overwrite_us'] = overwriteRounds(store, records, overwrites, numberArg('--overwrite-rounds', 3));
  // The size S of its snapshot (a node writing one holds about 2 S more meanwhile: docs/kv.md).
  let snapshot: Uint8Array | undefined = store.serializeSnapshot(new LedgerEncryptor(new Uint8Array(32).fill(1)), 1);
  out['snapshot_bytes_per_record'] = Math.round(snapshot.byteLength / records);
  store = undefined;
  void store;

  // The same state loaded from its snapshot (as a node that starts or joins from one).
  const bytes = snapshot;
  snapshot = undefined;
  void snapshot;
  out['store_from_snapshot'] = measure(records, 0, () => Store.fromSnapshot(bytes, new LedgerEncryptor(new Uint8Array(32).fill(1))));

  out['values_in_slabs'] = measure(records, holder, () => Array.from({ length: records }, () => utf8Value(JSON.stringify({ msg: MESSAGE }))));
  out['keys'] = measure(records, holder, () => Array.from({ length: records }, (_, i) => String(i)));
  // The map's structure alone: every key maps to one shared value.
  out['map_structure_and_keys'] = measure(records, 0, () => {
    const shared = new Uint8Array(valueBytes);
    const builder = EMPTY_MAP.edit();
    for (let i = 0; i < records; i++) builder.set(String(i), shared);
    return builder.finish();
  });
  // One object per value without its bytes: an empty view of one shared buffer.
  out['view_objects'] = measure(records, holder, () => {
    const buffer = new ArrayBuffer(valueBytes);
    return Array.from({ length: records }, () => new Uint8Array(buffer, 0, valueBytes));
  });
  // The alternative: values as one-byte strings (no view object, no external bytes), in the same tree.
  out['map_of_string_values'] = measure(records, 0, () => {
    const strings = new btree.default<string, string>(undefined, compareUtf8, MAP_NODE_ENTRIES_MAX);
    // Flat one-byte strings (JSON.stringify's own result can be a tree of pieces).
    for (let i = 0; i < records; i++) strings.set(String(i), Buffer.from(JSON.stringify({ msg: `${MESSAGE.slice(1)}${i % 10}` })).toString('latin1'));
    return strings;
  });

  console.log(JSON.stringify(out));
}

await main();
