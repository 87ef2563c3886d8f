/**
 * A snapshot written in slices: the state at one version is copied out, a bounded number of
 * entries per call, into flat chunks that can cross to another thread; the encoding proper
 * (sorting each map's keys, the write-set layout, encryption, digest) is then done piece by piece
 * by PackedSnapshotEncoder (snapshot-stream.ts) wherever the chunks went.
 *
 * Why it is safe to spread over many turns: the state is a persistent (immutable) map, so the
 * version being packed never changes whatever the store commits meanwhile, and an iterator over
 * it stays valid across turns. Why the bytes are those of Store.serializeSnapshot: the maps are
 * visited in the same order, each map's entries are sorted with the same comparison, and
 * written in the same layout (snapshot-stream.ts).
 *
 * Chunk layout, little-endian, maps one after another in ascending name order:
 *   entry = keyLength:u32 keyUtf8 valueLength:u32 value
 * an entry never straddles two chunks.
 */
import { assert, type Seqno, type View } from '../base/index.js';
import { sortedKeys } from './map-handles.js';
import type { KvState } from './state.js';

/** Size of one chunk of packed entries (an entry larger than this gets a chunk of its own size). */
export const PACKED_CHUNK_BYTES = 1 << 20;

/** A map of the packed state: its name and how many entries follow for it. */
export interface PackedMap {
  readonly name: string;
  readonly count: number;
}

/** The state at one version, copied out; plain data that a worker thread can receive. */
export interface PackedSnapshot {
  readonly version: Seqno;
  readonly view: View;
  /** In ascending UTF-8 order of names; their entries follow one another in `chunks`. */
  readonly maps: readonly PackedMap[];
  /**
   * Each chunk's own ArrayBuffer (from offset 0): transferable. An encoder that takes them
   * (PackedSnapshotEncoder's consumeChunks) empties this array.
   */
  readonly chunks: Uint8Array[];
}

export class SnapshotPacker {
  readonly #state: KvState;
  readonly #version: Seqno;
  readonly #view: View;
  readonly #names: string[];
  readonly #maps: PackedMap[] = [];
  readonly #chunks: Uint8Array[] = [];
  #nameIndex = 0;
  #entries: Iterator<[string, Uint8Array]> | undefined;
  #count = 0;
  #chunk: Buffer = Buffer.alloc(0);
  #offset = 0;
  #slices = 0;
  #done = false;

  constructor(state: KvState, version: Seqno, view: View) {
    this.#state = state;
    this.#version = version;
    this.#view = view;
    this.#names = sortedKeys(state.keys());
  }

  /** How many calls of step packed entries so far. */
  get slices(): number {
    return this.#slices;
  }

  get done(): boolean {
    return this.#done;
  }

  /** Packs at most `entriesMax` more entries in a slice of its own; true once the whole state is packed. */
  step(entriesMax: number): boolean {
    this.beginSlice();
    return this.pack(entriesMax);
  }

  /** Counts a new slice (a turn), whose packing may take several calls of pack. */
  beginSlice(): void {
    this.#slices++;
  }

  /** Packs at most `entriesMax` more entries within the current slice; true once the whole state is packed. */
  pack(entriesMax: number): boolean {
    assert(Number.isSafeInteger(entriesMax) && entriesMax > 0, `bad slice size ${entriesMax}`);
    if (this.#done) return true;
    let budget = entriesMax;
    while (budget > 0) {
      if (this.#entries === undefined) {
        if (this.#nameIndex === this.#names.length) {
          this.#finish();
          return true;
        }
        const name = this.#names[this.#nameIndex]!;
        const map = this.#state.get(name);
        assert(map !== undefined, `map ${name} is in the state it was listed from`);
        this.#entries = map.entries();
        this.#count = 0;
      }
      const next = this.#entries.next();
      if (next.done === true) {
        this.#maps.push({ name: this.#names[this.#nameIndex]!, count: this.#count });
        this.#nameIndex++;
        this.#entries = undefined;
        continue;
      }
      this.#pack(next.value[0], next.value[1]);
      this.#count++;
      budget--;
    }
    return false;
  }

  /** The packed state (once step returned true). */
  result(): PackedSnapshot {
    assert(this.#done, 'the snapshot is not packed yet');
    return { version: this.#version, view: this.#view, maps: this.#maps, chunks: this.#chunks };
  }

  #pack(key: string, value: Uint8Array): void {
    const keyBytes = Buffer.byteLength(key, 'utf8');
    const need = 8 + keyBytes + value.byteLength;
    if (this.#offset + need > this.#chunk.byteLength) this.#newChunk(need);
    const chunk = this.#chunk;
    chunk.writeUInt32LE(keyBytes, this.#offset);
    chunk.write(key, this.#offset + 4, keyBytes, 'utf8');
    this.#offset += 4 + keyBytes;
    chunk.writeUInt32LE(value.byteLength, this.#offset);
    chunk.set(value, this.#offset + 4);
    this.#offset += 4 + value.byteLength;
  }

  #newChunk(need: number): void {
    this.#closeChunk();
    // allocUnsafeSlow: a buffer of its own (never a view of the shared pool), so it can be transferred.
    this.#chunk = Buffer.allocUnsafeSlow(Math.max(PACKED_CHUNK_BYTES, need));
    this.#offset = 0;
  }

  #closeChunk(): void {
    if (this.#offset > 0) this.#chunks.push(new Uint8Array(this.#chunk.buffer, 0, this.#offset));
  }

  #finish(): void {
    this.#closeChunk();
    this.#chunk = Buffer.alloc(0);
    this.#offset = 0;
    this.#done = true;
  }
}

/** Packs the whole state in one call (tests, and callers with a small state). */
export function packSnapshot(state: KvState, version: Seqno, view: View): PackedSnapshot {
  const packer = new SnapshotPacker(state, version, view);
  while (!packer.step(Number.MAX_SAFE_INTEGER)) {
    // step packs everything in one call with this budget.
  }
  return packer.result();
}
