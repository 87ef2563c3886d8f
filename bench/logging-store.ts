/**
 * A store filled as the logging application fills it, for the in-process memory and snapshot
 * benches: one transaction per record into the private map `records`, key String(id), value the
 * JSON {"msg": <200 characters>} (210 bytes), compacted every thousand versions as commits do.
 */
import { jsonCodec, Store } from '../src/kv/index.js';

export const LOGGING_MESSAGE = 'x'.repeat(200);
export const loggingCodec = jsonCodec<{ msg: string }>();

/** Records 0..records-1 written into a new store, one transaction each. */
export function fillLoggingStore(records: number): Store {
  const store = new Store();
  for (let id = 0; id < records; id++) {
    const tx = store.beginTx();
    tx.map('records', loggingCodec).put(String(id), { msg: LOGGING_MESSAGE });
    tx.apply();
    if (id % 1000 === 999) store.compact(store.version);
  }
  store.compact(store.version);
  return store;
}
