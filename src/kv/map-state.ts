/**
 * One map of the store's state (key → value bytes) as a persistent B+ tree ordered by the keys'
 * UTF-8 bytes (compareUtf8), from `sorted-btree`: each leaf holds up to MAP_NODE_ENTRIES_MAX keys
 * and values in two arrays, so a record costs two array slots and a share of its leaf, not an
 * object or two of its own (docs/kv.md, "Memory per record"); and iteration is in key order, so
 * snapshots and forEach read it without sorting.
 *
 * A MapState never changes once made: it is shared by readers, retained versions, snapshots being
 * written and rollbacks. The tree inside is private to this module and frozen; a changed map is a
 * new MapState, made by `with`/`without` (one write: the path to its leaf is copied) or by a
 * MapBuilder (many writes: the tree is cloned in O(1), each shared node copied once on its first
 * write, then changed in place), which can be finished only once. Nothing else in the store
 * touches the library.
 */
import btree from 'sorted-btree';
import { assert } from '../base/index.js';
import { compareUtf8 } from './key-order.js';

const BTree = btree.default;
type Tree = InstanceType<typeof BTree<string, Uint8Array>>;

/**
 * Entries (leaves) or children (inner nodes) per node of a map's tree. Larger leaves cost less per
 * record (a leaf's header and its arrays' spare capacity are shared by more entries) but a
 * one-write version copies its leaf's two arrays (and each inner node's on the path): 2 × 32 slots
 * a level. Measured with bench/store-memory.ts (docs/kv.md).
 */
export const MAP_NODE_ENTRIES_MAX = 32;

let wrap: (tree: Tree) => MapState;

/** A map of the state at one version: read-only, iterated in ascending UTF-8 order of keys. */
export class MapState {
  readonly #tree: Tree;

  static {
    wrap = (tree) => new MapState(tree);
  }

  private constructor(tree: Tree) {
    // The library's own guard: a mutation of a published tree throws instead of changing a version.
    tree.freeze();
    this.#tree = tree;
  }

  get size(): number {
    return this.#tree.size;
  }

  get(key: string): Uint8Array | undefined {
    return this.#tree.get(key);
  }

  has(key: string): boolean {
    return this.#tree.has(key);
  }

  /** Entries in ascending UTF-8 order of keys (a new pair array per entry). */
  entries(): IterableIterator<[string, Uint8Array]> {
    return this.#tree.entries();
  }

  /** All entries in ascending UTF-8 order of keys, as an array. */
  entriesArray(): [string, Uint8Array][] {
    return this.#tree.toArray();
  }

  /** This map with `key` set to `value`. */
  with(key: string, value: Uint8Array): MapState {
    // `overwrite` must be given: without it, `with` returns the old tree when the key was present.
    return new MapState(this.#tree.with(key, value, true));
  }

  /** This map without `key` (itself when the key is absent). */
  without(key: string): MapState {
    return this.#tree.has(key) ? new MapState(this.#tree.without(key)) : this;
  }

  /** A builder of a new map starting from this one's contents; this map stays as it is. */
  edit(): MapBuilder {
    return new MapBuilder(this.#tree.clone());
  }
}

/** Many writes to one new map, in place, then finished once into a MapState. */
export class MapBuilder {
  #tree: Tree | undefined;

  /** @internal made by MapState.edit */
  constructor(tree: Tree) {
    assert(!tree.isFrozen, 'a map builder needs a tree of its own');
    this.#tree = tree;
  }

  #open(): Tree {
    assert(this.#tree !== undefined, 'map builder used after finish');
    return this.#tree;
  }

  get size(): number {
    return this.#open().size;
  }

  set(key: string, value: Uint8Array): void {
    this.#open().set(key, value);
  }

  remove(key: string): void {
    this.#open().delete(key);
  }

  /** The map built; the builder cannot be used again (the map is shared from now on). */
  finish(): MapState {
    const tree = this.#open();
    this.#tree = undefined;
    return wrap(tree);
  }
}

/** The empty map. */
export const EMPTY_MAP: MapState = new MapBuilder(new BTree<string, Uint8Array>(undefined, compareUtf8, MAP_NODE_ENTRIES_MAX)).finish();
