/**
 * Where a store's memory goes, per record: `node --expose-gc dist/bench/store-memory.js [--records N]`.
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
 */
import { Map as ImmutableMap } from 'immutable';
import { jsonCodec, LedgerEncryptor, Store, utf8Value } from '../src/kv/index.js';

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

const MESSAGE = 'x'.repeat(200);
const codec = jsonCodec<{ msg: string }>();

function fillStore(records: number): Store {
  const store = new Store();
  for (let id = 0; id < records; id++) {
    const tx = store.beginTx();
    tx.map('records', codec).put(String(id), { msg: MESSAGE });
    tx.apply();
    if (id % 1000 === 999) store.compact(store.version);
  }
  store.compact(store.version);
  return store;
}

function main(): void {
  const at = process.argv.indexOf('--records');
  const records = at === -1 ? 200_000 : Number(process.argv[at + 1]);
  const valueBytes = codec.encode({ msg: MESSAGE }).byteLength;
  const holder = 8 * records;
  const out: Record<string, unknown> = { bench: 'store-memory', records, value_bytes: valueBytes, key_chars_max: String(records - 1).length };

  let base = usage();
  let store: Store | undefined = fillStore(records);
  const filled = usage();
  out['store'] = perRecord(base, filled, records);
  // The size S of its snapshot (a node writing one holds about 2 S more meanwhile: docs/kv.md).
  const snapshot = store.serializeSnapshot(new LedgerEncryptor(new Uint8Array(32).fill(1)), 1);
  out['snapshot_bytes_per_record'] = Math.round(snapshot.byteLength / records);
  store = undefined;
  void store;

  base = usage();
  let values: Uint8Array[] | undefined = Array.from({ length: records }, () => utf8Value(JSON.stringify({ msg: MESSAGE })));
  out['values_in_slabs'] = perRecord(base, usage(), records, holder);
  values = undefined;
  void values;

  base = usage();
  let keys: string[] | undefined = Array.from({ length: records }, (_, i) => String(i));
  out['keys'] = perRecord(base, usage(), records, holder);
  keys = undefined;
  void keys;

  // The map's structure alone: every key maps to one shared value.
  base = usage();
  const shared = new Uint8Array(valueBytes);
  let structure: ImmutableMap<string, Uint8Array> | undefined = ImmutableMap<string, Uint8Array>().withMutations((m) => {
    for (let i = 0; i < records; i++) m.set(String(i), shared);
  });
  out['map_structure_and_keys'] = perRecord(base, usage(), records);
  structure = undefined;
  void structure;

  // One object per value without its bytes: an empty view of one shared buffer.
  base = usage();
  const buffer = new ArrayBuffer(valueBytes);
  let views: Uint8Array[] | undefined = Array.from({ length: records }, () => new Uint8Array(buffer, 0, valueBytes));
  out['view_objects'] = perRecord(base, usage(), records, holder);
  views = undefined;
  void views;

  // The alternative: values as one-byte strings (no view object, no external bytes).
  base = usage();
  let strings: ImmutableMap<string, string> | undefined = ImmutableMap<string, string>().withMutations((m) => {
    // Flat one-byte strings (JSON.stringify's own result can be a tree of pieces).
    for (let i = 0; i < records; i++) m.set(String(i), Buffer.from(JSON.stringify({ msg: `${MESSAGE.slice(1)}${i % 10}` })).toString('latin1'));
  });
  out['map_of_string_values'] = perRecord(base, usage(), records);
  strings = undefined;
  void strings;

  console.log(JSON.stringify(out));
}

main();
