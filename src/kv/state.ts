/**
 * The store's state as a value: map name → map (a persistent `immutable` map of the few map
 * names), each map a persistent B+ tree of key → value bytes in UTF-8 key order (map-state.ts);
 * and the ways write sets are applied to it. An empty map is always dropped, so that equal
 * contents mean equal states.
 */
import { Map as ImmutableMap } from 'immutable';
import { compareUtf8 } from './key-order.js';
import { EMPTY_MAP, type MapBuilder, type MapState } from './map-state.js';
import type { Write, WriteSet } from './write-set.js';

export { EMPTY_MAP, MapState } from './map-state.js';
export type KvState = ImmutableMap<string, MapState>;

export const EMPTY_STATE: KvState = ImmutableMap<string, MapState>();

export function sortedMap<V>(map: Map<string, V>): Map<string, V> {
  let previous: string | undefined;
  for (const key of map.keys()) {
    if (previous !== undefined && compareUtf8(previous, key) >= 0) {
      return new Map([...map].sort((a, b) => compareUtf8(a[0], b[0])));
    }
    previous = key;
  }
  return map;
}

/** The writes of one retained version, flat: map name, key, write, map name, key, write, ... */
export type FlatWrites = readonly (string | Write)[];

export function flatten(writes: WriteSet): FlatWrites {
  const flat: (string | Write)[] = [];
  for (const [name, mapWrites] of writes) for (const [key, value] of mapWrites) flat.push(name, key, value);
  return flat;
}

/** applyToState for retained writes (grouped by map, as flatten leaves them). */
function applyFlat(state: KvState, flat: FlatWrites): KvState {
  let i = 0;
  while (i < flat.length) {
    const name = flat[i] as string;
    let map = state.get(name) ?? EMPTY_MAP;
    for (; i < flat.length && flat[i] === name; i += 3) {
      const key = flat[i + 1] as string;
      const value = flat[i + 2] as Write;
      map = value === null ? map.without(key) : map.with(key, value);
    }
    state = map.size === 0 ? state.remove(name) : state.set(name, map);
  }
  return state;
}

/**
 * The retained writes of the versions log[from..to) applied to `state`, in order. Over several
 * versions each changed map is edited in place (a MapBuilder: each shared node copied once)
 * instead of path-copied once per write: equal contents to applying them one by one.
 */
export function foldFlats(state: KvState, log: readonly FlatWrites[], from: number, to: number): KvState {
  if (to - from <= 1) return to === from ? state : applyFlat(state, log[from]!);
  const touched = new Map<string, MapBuilder>();
  for (let v = from; v < to; v++) {
    const flat = log[v]!;
    for (let i = 0; i < flat.length; i += 3) {
      const name = flat[i] as string;
      let map = touched.get(name);
      if (map === undefined) {
        map = (state.get(name) ?? EMPTY_MAP).edit();
        touched.set(name, map);
      }
      const value = flat[i + 2] as Write;
      if (value === null) map.remove(flat[i + 1] as string);
      else map.set(flat[i + 1] as string, value);
    }
  }
  return state.withMutations((s) => {
    // An empty map is dropped so that equal contents mean equal states (as applyToState).
    touched.forEach((map, name) => (map.size === 0 ? s.remove(name) : s.set(name, map.finish())));
  });
}

export function applyToState(state: KvState, writes: WriteSet): KvState {
  for (const [name, mapWrites] of writes) {
    let map = state.get(name) ?? EMPTY_MAP;
    if (mapWrites.size > 8) {
      const builder = map.edit();
      for (const [key, value] of mapWrites) {
        if (value === null) builder.remove(key);
        else builder.set(key, value);
      }
      map = builder.finish();
    } else {
      for (const [key, value] of mapWrites) map = value === null ? map.without(key) : map.with(key, value);
    }
    // An empty map is dropped so that equal contents mean equal states (and equal snapshots).
    state = map.size === 0 ? state.remove(name) : state.set(name, map);
  }
  return state;
}
