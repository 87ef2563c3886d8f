/**
 * A snapshot loaded in slices: the store Store.fromSnapshot builds in one call, built instead over
 * as many calls as the caller likes (a node makes one slice per turn of its event loop, so that a
 * joining or restarting node keeps answering while it loads a large state).
 *
 * The work, in the order Store.fromSnapshot does it (so the same input fails the same way):
 *   1. the header, then SHA-256 of the body against the header's digest, `bytesMax` bytes a call;
 *   2. the public section decoded, `entriesMax` entries a call, into the state's persistent maps;
 *   3. the private section deciphered (AES-256-GCM, `bytesMax` bytes a call, the tag checked at
 *      the end) — only with an encryptor;
 *   4. the private section decoded as the public one.
 * Each map is built as a mutable persistent map that nothing else can see until it is finished
 * (then frozen into the state); the store exists only once everything checked out. The decoder
 * checks the canonical layout as decodeWriteSet does (the same rules and messages), and the state
 * holds the same keys and values as the one-turn load (tested: equal contents, equal snapshots).
 */
import { createHash, type Hash } from 'node:crypto';
import { assert, bytesEqual, type Seqno, type View } from '../base/index.js';
import { malformedSnapshot, malformedWriteSet } from './errors.js';
import { isPublicMapName } from './key-order.js';
import { asSnapshotError, readSnapshotHeader, snapshotBody, snapshotSections, type SnapshotHeader, type SnapshotSections } from './snapshot.js';
import { EMPTY_MAP, type MapBuilder } from './map-state.js';
import { EMPTY_STATE, type KvState } from './state.js';
import { RESTORE_STATE, Store, type StoreOptions } from './store.js';
import { copyValue } from './value-bytes.js';
import { compareSpans, Reader, TAG_VALUE, WRITE_SET_FORMAT, type Domain } from './write-set.js';
import type { IncrementalOpening, LedgerEncryptor } from './encryption.js';

type Phase = 'digest' | 'public' | 'decrypt' | 'private' | 'done';

/** Decodes one write-set part of values only (a snapshot section) into maps, a bounded number of entries per call. */
class SectionDecoder {
  readonly #r: Reader;
  readonly #domain: Domain;
  #mapsLeft = -1;
  #previousName: [number, number] | undefined;
  #name = '';
  #map: MapBuilder | undefined;
  #writesLeft = 0;
  #previousKey: [number, number] | undefined;

  constructor(bytes: Uint8Array, domain: Domain) {
    this.#r = new Reader(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
    this.#domain = domain;
    if (bytes.byteLength === 0) this.#mapsLeft = 0;
  }

  /** Decodes at most `entriesMax` more entries into `state`; returns the state and whether the section is done. */
  step(state: KvState, entriesMax: number): { state: KvState; done: boolean } {
    const r = this.#r;
    if (this.#mapsLeft === -1) this.#start();
    let budget = entriesMax;
    while (budget > 0) {
      if (this.#map === undefined) {
        if (this.#mapsLeft === 0) {
          if (r.remaining !== 0) throw malformedWriteSet(`${r.remaining} trailing bytes`);
          return { state, done: true };
        }
        this.#beginMap();
      }
      this.#entry(this.#map!);
      budget--;
      if (--this.#writesLeft === 0) {
        state = state.set(this.#name, this.#map!.finish());
        this.#map = undefined;
        this.#mapsLeft--;
      }
    }
    return { state, done: false };
  }

  #start(): void {
    const r = this.#r;
    const format = r.u8('format');
    if (format !== WRITE_SET_FORMAT) throw malformedWriteSet(`unknown format ${format}`);
    const mapCount = r.u32('map count');
    if (mapCount === 0 || mapCount > r.remaining / 13) throw malformedWriteSet(`impossible map count ${mapCount}`);
    this.#mapsLeft = mapCount;
  }

  #beginMap(): void {
    const r = this.#r;
    const [name, nameStart, nameEnd] = r.utf8('map name');
    if (name.length === 0) throw malformedWriteSet('empty map name');
    const nameSpan: [number, number] = [nameStart, nameEnd];
    if (this.#previousName !== undefined && compareSpans(r.buf, this.#previousName, nameSpan) >= 0) {
      throw malformedWriteSet(`map "${name.slice(0, 64)}" out of order`);
    }
    this.#previousName = nameSpan;
    if ((isPublicMapName(name) ? 'public' : 'private') !== this.#domain) throw malformedWriteSet(`map "${name.slice(0, 64)}" in the ${this.#domain} part`);
    const writeCount = r.u32('write count');
    if (writeCount === 0 || writeCount > r.remaining / 5) throw malformedWriteSet(`impossible write count ${writeCount}`);
    this.#name = name;
    this.#writesLeft = writeCount;
    this.#previousKey = undefined;
    this.#map = EMPTY_MAP.edit();
  }

  #entry(map: MapBuilder): void {
    const r = this.#r;
    const [key, keyStart, keyEnd] = r.utf8('key');
    const keySpan: [number, number] = [keyStart, keyEnd];
    if (this.#previousKey !== undefined && compareSpans(r.buf, this.#previousKey, keySpan) >= 0) {
      throw malformedWriteSet(`key out of order in map "${this.#name.slice(0, 64)}"`);
    }
    this.#previousKey = keySpan;
    const tag = r.u8('write tag');
    if (tag !== TAG_VALUE) throw malformedWriteSet(`bad write tag ${tag}`);
    const [start, end] = r.span('value');
    // A copy: the state outlives the (large) snapshot buffer.
    map.set(key, copyValue(r.buf.subarray(start, end)));
  }
}

export class SnapshotLoader {
  readonly #bytes: Uint8Array;
  readonly #encryptor: LedgerEncryptor | undefined;
  readonly #options: StoreOptions;
  readonly #header: SnapshotHeader;
  readonly #body: Buffer;
  #phase: Phase = 'digest';
  #hash: Hash | undefined = createHash('sha256');
  #hashed = 0;
  #sections: SnapshotSections | undefined;
  #decoder: SectionDecoder | undefined;
  #opening: IncrementalOpening | undefined;
  #state: KvState = EMPTY_STATE;
  #slices = 0;
  #store: Store | undefined;

  /** Reads the header at once (MalformedSnapshot). */
  constructor(bytes: Uint8Array, encryptor: LedgerEncryptor | undefined, options: StoreOptions = {}) {
    this.#bytes = bytes;
    this.#encryptor = encryptor;
    this.#options = options;
    this.#header = readSnapshotHeader(bytes);
    this.#body = snapshotBody(bytes);
  }

  get version(): Seqno {
    return this.#header.seqno;
  }

  get view(): View {
    return this.#header.view;
  }

  /** Turns the load was spread over (beginSlice calls). */
  get slices(): number {
    return this.#slices;
  }

  get done(): boolean {
    return this.#phase === 'done';
  }

  /** Counts a new slice (a turn), whose work may take several calls of load. */
  beginSlice(): void {
    this.#slices++;
  }

  /**
   * Does at most `entriesMax` entries' decoding, or hashes or deciphers at most `bytesMax` bytes,
   * within the current slice; true once the store is built. Throws MalformedSnapshot or
   * LedgerDecryptionFailed (the loader is then finished with: call it no more).
   */
  load(entriesMax: number, bytesMax: number): boolean {
    assert(Number.isSafeInteger(entriesMax) && entriesMax > 0 && Number.isSafeInteger(bytesMax) && bytesMax > 0, 'bad load budget');
    switch (this.#phase) {
      case 'digest':
        this.#digest(bytesMax);
        break;
      case 'public':
      case 'private':
        this.#decode(entriesMax);
        break;
      case 'decrypt':
        if (this.#opening!.step(bytesMax)) {
          this.#decoder = new SectionDecoder(this.#opening!.result(), 'private');
          this.#opening = undefined;
          this.#phase = 'private';
        }
        break;
      case 'done':
        break;
    }
    return this.#phase === 'done';
  }

  /** The store (once load returned true): at the snapshot's version, that version committed. */
  result(): Store {
    assert(this.#store !== undefined, 'the snapshot is not loaded yet');
    return this.#store;
  }

  #digest(bytesMax: number): void {
    const end = Math.min(this.#body.byteLength, this.#hashed + bytesMax);
    this.#hash!.update(this.#body.subarray(this.#hashed, end));
    this.#hashed = end;
    if (end < this.#body.byteLength) return;
    const digest = this.#hash!.digest();
    this.#hash = undefined;
    if (!bytesEqual(digest, this.#header.bodyDigest)) throw malformedSnapshot('body digest does not match the header');
    this.#sections = snapshotSections(this.#bytes);
    this.#decoder = new SectionDecoder(this.#sections.publicPart, 'public');
    this.#phase = 'public';
  }

  #decode(entriesMax: number): void {
    const { state, done } = asSnapshotError(() => this.#decoder!.step(this.#state, entriesMax));
    this.#state = state;
    if (!done) return;
    this.#decoder = undefined;
    if (this.#phase === 'public' && this.#encryptor !== undefined) {
      const { privateEncrypted, aad } = this.#sections!;
      this.#opening = this.#encryptor.openSnapshotIncrementally(this.#header.view, this.#header.seqno, privateEncrypted, aad);
      this.#phase = 'decrypt';
      return;
    }
    this.#store = Store[RESTORE_STATE](this.#header.seqno, this.#state, this.#options);
    this.#state = EMPTY_STATE;
    this.#sections = undefined;
    this.#phase = 'done';
  }
}

/** Loads a whole snapshot in one call (tests, tools). */
export function loadSnapshotAtOnce(bytes: Uint8Array, encryptor: LedgerEncryptor | undefined, options: StoreOptions = {}): Store {
  const loader = new SnapshotLoader(bytes, encryptor, options);
  loader.beginSlice();
  while (!loader.load(Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER)) {
    // Each call finishes one phase with this budget.
  }
  return loader.result();
}
