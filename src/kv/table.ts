/**
 * A table's one declaration: its name and the codec of its values, and so their type. Every
 * reader and writer of the table takes the declaration whole (`tx.table(def)`,
 * `view.table(def)`), so that the value type is written once, where the table is declared, and
 * not cast at each use.
 */
import { jsonCodec, type Codec } from './codecs.js';

export interface TableDef<V> {
  readonly name: string;
  readonly codec: Codec<V>;
}

/** A table of JSON values of type V, keyed by strings. */
export function jsonTable<V>(name: string): TableDef<V> {
  return { name, codec: jsonCodec<V>() };
}
