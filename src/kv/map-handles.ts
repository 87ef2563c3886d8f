/**
 * Handles on one map of the store: a reader over a state, and within a transaction a reader
 * that sees the transaction's own writes and buffers new ones.
 */
import { invalidKey } from './errors.js';
import type { Codec, KeyCodec } from './codecs.js';
import { compareUtf8, isWellFormedKey } from './key-order.js';
import type { MapState } from './map-state.js';
import type { Write } from './write-set.js';

// Kv-private access between a transaction and its map handles.
export const TX_WRITES = Symbol('writes');
export const TX_WRITE = Symbol('write');

/** The side of a transaction that its map handles use. */
export interface TxWrites {
  readonly [TX_WRITES]: Map<string, Map<string, Write>> | undefined;
  [TX_WRITE](name: string, key: string, value: Write): void;
}

/** Read access to one map. Iteration is in ascending order of the keys' UTF-8 bytes. */
export interface MapReader<K, V> {
  readonly name: string;
  get(key: K): V | undefined;
  has(key: K): boolean;
  /** Visits every entry in key order; the callback returns false to stop early. */
  forEach(callback: (value: V, key: K) => boolean | void): void;
  readonly size: number;
}

/** Read-write access to one map within a transaction. */
export interface TxMap<K, V> extends MapReader<K, V> {
  put(key: K, value: V): void;
  /** Removes the key; returns whether it was present (as the transaction sees it). */
  remove(key: K): boolean;
}

export function checkMapName(name: string): void {
  if (name.length === 0 || !isWellFormedKey(name)) throw invalidKey(`invalid map name "${name.slice(0, 64)}"`);
}

export function sortedKeys(keys: Iterable<string>): string[] {
  return Array.from(keys).sort(compareUtf8);
}

export class MapReaderImpl<K, V> implements MapReader<K, V> {
  constructor(
    readonly name: string,
    protected readonly base: MapState,
    protected readonly keyCodec: KeyCodec<K>,
    protected readonly valueCodec: Codec<V>,
  ) {}

  /** The transaction's writes to this map, if any. */
  protected writes(): Map<string, Write> | undefined {
    return undefined;
  }

  protected raw(key: string): Uint8Array | undefined {
    const written = this.writes()?.get(key);
    if (written !== undefined) return written ?? undefined;
    return this.base.get(key);
  }

  get(key: K): V | undefined {
    const bytes = this.raw(this.keyCodec.toKey(key));
    return bytes === undefined ? undefined : this.valueCodec.decode(bytes);
  }

  has(key: K): boolean {
    return this.raw(this.keyCodec.toKey(key)) !== undefined;
  }

  forEach(callback: (value: V, key: K) => boolean | void): void {
    // The base is in key order; the keys the transaction wrote so far are sorted and merged in.
    // Each value is looked up when visited, so writes made by the callback are seen as before.
    const written = sortedKeys(this.writes()?.keys() ?? []);
    let w = 0;
    const visit = (key: string, baseValue: Uint8Array | undefined): boolean => {
      const write = this.writes()?.get(key);
      const bytes = write === undefined ? baseValue : write;
      return bytes === undefined || bytes === null || callback(this.valueCodec.decode(bytes), this.keyCodec.fromKey(key)) !== false;
    };
    for (const [key, value] of this.base.entries()) {
      for (; w < written.length && compareUtf8(written[w]!, key) < 0; w++) if (!visit(written[w]!, undefined)) return;
      if (w < written.length && written[w] === key) w++;
      if (!visit(key, value)) return;
    }
    for (; w < written.length; w++) if (!visit(written[w]!, undefined)) return;
  }

  get size(): number {
    let size = this.base.size;
    const writes = this.writes();
    if (writes !== undefined) {
      for (const [key, value] of writes) {
        const inBase = this.base.has(key);
        if (value === null && inBase) size--;
        else if (value !== null && !inBase) size++;
      }
    }
    return size;
  }
}

export class TxMapImpl<K, V> extends MapReaderImpl<K, V> implements TxMap<K, V> {
  constructor(
    private readonly tx: TxWrites,
    name: string,
    base: MapState,
    keyCodec: KeyCodec<K>,
    valueCodec: Codec<V>,
  ) {
    super(name, base, keyCodec, valueCodec);
  }

  protected override writes(): Map<string, Write> | undefined {
    return this.tx[TX_WRITES]?.get(this.name);
  }

  put(key: K, value: V): void {
    const k = this.keyCodec.toKey(key);
    if (!isWellFormedKey(k)) throw invalidKey(`key of map "${this.name}" has no UTF-8 form`);
    this.tx[TX_WRITE](this.name, k, this.valueCodec.encode(value));
  }

  remove(key: K): boolean {
    const k = this.keyCodec.toKey(key);
    const had = this.raw(k) !== undefined;
    if (!isWellFormedKey(k)) throw invalidKey(`key of map "${this.name}" has no UTF-8 form`);
    this.tx[TX_WRITE](this.name, k, null);
    return had;
  }
}
