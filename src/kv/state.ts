/**
 * The store's state as a value: a persistent map (map name → key → value bytes), and the ways
 * write sets are applied to it. An empty map is always dropped, so that equal contents mean
 * equal states.
 */
import { Map as ImmutableMap } from 'immutable';
import { compareUtf8 } from './key-order.js';
import type { Write, WriteSet } from './write-set.js';

export type MapState = ImmutableMap<string, Uint8Array>;
export type KvState = ImmutableMap<string, MapState>;

export const EMPTY_STATE: KvState = ImmutableMap<string, MapState>();
export const EMPTY_MAP: MapState = ImmutableMap<string, Uint8Array>();

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
      map = value === null ? map.remove(key) : map.set(key, value);
    }
    state = map.size === 0 ? state.remove(name) : state.set(name, map);
  }
  return state;
}

/**
 * The retained writes of the versions log[from..to) applied to `state`, in order. Over several
 * versions each changed map is copied once and changed in place (immutable's withMutations)
 * instead of once per write: equal contents to applying them one by one (iteration order may
 * differ; readers sort).
 */
export function foldFlats(state: KvState, log: readonly FlatWrites[], from: number, to: number): KvState {
  if (to - from <= 1) return to === from ? state : applyFlat(state, log[from]!);
  const touched = new Map<string, MapState>();
  for (let v = from; v < to; v++) {
    const flat = log[v]!;
    for (let i = 0; i < flat.length; i += 3) {
      const name = flat[i] as string;
      let map = touched.get(name);
      if (map === undefined) {
        map = (state.get(name) ?? EMPTY_MAP).asMutable();
        touched.set(name, map);
      }
      const value = flat[i + 2] as Write;
      if (value === null) map.remove(flat[i + 1] as string);
      else map.set(flat[i + 1] as string, value);
    }
  }
  return state.withMutations((s) => {
    // An empty map is dropped so that equal contents mean equal states (as applyToState).
    touched.forEach((map, name) => (map.size === 0 ? s.remove(name) : s.set(name, map.asImmutable())));
  });
}

export function applyToState(state: KvState, writes: WriteSet): KvState {
  for (const [name, mapWrites] of writes) {
    let map = state.get(name) ?? EMPTY_MAP;
    if (mapWrites.size > 8) {
      map = map.withMutations((m) => {
        for (const [key, value] of mapWrites) {
          if (value === null) m.remove(key);
          else m.set(key, value);
        }
      });
    } else {
      for (const [key, value] of mapWrites) map = value === null ? map.remove(key) : map.set(key, value);
    }
    // An empty map is dropped so that equal contents mean equal states (and equal snapshots).
    state = map.size === 0 ? state.remove(name) : state.set(name, map);
  }
  return state;
}

export function sortedEntriesOf(map: MapState): [string, Uint8Array][] {
  const entries: [string, Uint8Array][] = [];
  for (const entry of map.entries()) entries.push(entry);
  return entries.sort((a, b) => compareUtf8(a[0], b[0]));
}
