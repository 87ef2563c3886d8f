// Shared by the kv tests: a plain-object dump of a store view, to compare states structurally.
import { bytesCodec, type StoreView } from '../../src/kv/index.js';
import { toHex } from '../../src/base/index.js';

export type Dump = Record<string, Record<string, string>>;

/** Every map and key in the view, values as hex, in the store's own iteration order. */
export function dumpView(view: StoreView): Dump {
  const out: Dump = {};
  for (const name of view.mapNames()) {
    const entries: Record<string, string> = {};
    view.map(name, bytesCodec).forEach((value, key) => {
      entries[key] = toHex(value);
    });
    out[name] = entries;
  }
  return out;
}

export function secret(fill: number): Uint8Array {
  return new Uint8Array(32).fill(fill);
}
