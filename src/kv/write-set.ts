/**
 * Write sets: what a transaction changed, and their deterministic binary form. A transaction's
 * writes are split by domain: the public part goes into the ledger in clear, the private part is
 * encrypted (see encryption.ts). Both parts use the same layout, described in docs/kv.md:
 *
 *   part   = empty (no writes in this domain) | format:u8=1 mapCount:u32 map{mapCount}
 *   map    = nameLength:u32 name:utf8 writeCount:u32 write{writeCount}
 *   write  = keyLength:u32 key:utf8 (0x00 | 0x01 valueLength:u32 value)
 *
 * Integers are little-endian. Maps are in strictly ascending order of their names' UTF-8 bytes,
 * keys likewise within a map, and no map is empty, so that a set of writes has exactly one
 * encoding: decoding rejects anything else.
 */
import { isUtf8 } from 'node:buffer';
import { assert } from '../base/index.js';
import { compareUtf8, isPublicMapName } from './key-order.js';
import { malformedWriteSet } from './errors.js';
import { copyValue } from './value-bytes.js';

/** The new value of a key, or null when the transaction removed the key. */
export type Write = Uint8Array | null;

/**
 * The writes of one transaction: map name → key → write. Iteration order is canonical (ascending
 * UTF-8 bytes at both levels) for write sets made by the store or by decodeWriteSet.
 */
export type WriteSet = ReadonlyMap<string, ReadonlyMap<string, Write>>;

export type Domain = 'public' | 'private';

export interface EncodedWriteSet {
  /** Writes to `public:` maps; empty when there are none. */
  readonly publicBytes: Uint8Array;
  /** Writes to private maps, in plaintext; empty when there are none. Encrypt before it leaves the node. */
  readonly privateBytes: Uint8Array;
}

export const WRITE_SET_FORMAT = 1;

export const TAG_REMOVE = 0;
export const TAG_VALUE = 1;
const EMPTY = new Uint8Array(0);
const EMPTY_WRITE_SET: WriteSet = new Map();

/** The empty write set (shared, never mutated). */
export function emptyWriteSet(): WriteSet {
  return EMPTY_WRITE_SET;
}

function sortedEntries<V>(map: ReadonlyMap<string, V>): [string, V][] {
  return [...map].sort((a, b) => compareUtf8(a[0], b[0]));
}

// isCanonical and encodeSortedPart run for every write: they visit Maps with forEach and
// module-level callbacks and state (both are synchronous and not re-entered), so that a visit
// allocates neither a [key, value] array per entry nor closures.
let canonicalSoFar = true;
let previousName: string | undefined;
let previousKey: string | undefined;

function checkKeyOrder(_value: Write, key: string): void {
  if (previousKey !== undefined && compareUtf8(previousKey, key) >= 0) canonicalSoFar = false;
  previousKey = key;
}

function checkMapOrder(mapWrites: ReadonlyMap<string, Write>, name: string): void {
  if (previousName !== undefined && compareUtf8(previousName, name) >= 0) canonicalSoFar = false;
  previousName = name;
  previousKey = undefined;
  mapWrites.forEach(checkKeyOrder);
}

/** Whether names, and keys within each map, are in strictly ascending UTF-8 order. */
function isCanonical(writes: WriteSet): boolean {
  canonicalSoFar = true;
  previousName = undefined;
  writes.forEach(checkMapOrder);
  previousName = previousKey = undefined;
  return canonicalSoFar;
}

/** The writes of one map in canonical key order: a map (as the store makes them) or an array. */
type SortedWrites = ReadonlyMap<string, Write> | readonly (readonly [string, Write])[];

function countOf(writes: SortedWrites): number {
  return Array.isArray(writes) ? writes.length : (writes as ReadonlyMap<string, Write>).size;
}

const ANY_MAP = (): boolean => true;
const PRIVATE_MAP = (name: string): boolean => !isPublicMapName(name);

/** Encodes the writes of one domain. Maps without writes are left out. */
export function encodeWriteSetPart(maps: readonly (readonly [string, ReadonlyMap<string, Write>])[]): Uint8Array {
  const sorted: [string, [string, Write][]][] = [];
  for (const [name, writes] of maps) sorted.push([name, sortedEntries(writes)]);
  return encodeSortedPart(sorted.sort((a, b) => compareUtf8(a[0], b[0])));
}

/**
 * Encodes maps and writes that are already in canonical order (the caller guarantees it; decoding
 * would reject anything else), keeping the maps whose names `include` accepts. Used directly by
 * snapshots, whose entries come out of the state, and by encodeWriteSet for each domain.
 */
export function encodeSortedPart(maps: Iterable<readonly [string, SortedWrites]>, include: (name: string) => boolean = ANY_MAP): Uint8Array {
  // First pass: exact size, so that the part is written into one allocation.
  const size = sortedPartBytes(maps, include);
  if (size === 0) return EMPTY;
  const out = Buffer.allocUnsafe(size);
  writeSortedPart(maps, out, 0, include);
  return out;
}

/** The size encodeSortedPart's result would have (0 for a part with no maps). */
export function sortedPartBytes(maps: Iterable<readonly [string, SortedWrites]>, include: (name: string) => boolean = ANY_MAP): number {
  encodeInclude = include;
  encodeSize = 5;
  encodeMapCount = 0;
  visitMaps(maps, sizeMap);
  encodeInclude = ANY_MAP;
  return encodeMapCount === 0 ? 0 : encodeSize;
}

/**
 * Writes what encodeSortedPart returns into `out` at `offset` (exactly sortedPartBytes bytes, which
 * must be more than 0): a large part (a snapshot section) is then written where it belongs, not copied there.
 */
export function writeSortedPart(maps: Iterable<readonly [string, SortedWrites]>, out: Buffer, offset: number, include: (name: string) => boolean = ANY_MAP): void {
  const size = sortedPartBytes(maps, include);
  assert(size > 0 && offset + size <= out.byteLength, 'a part with maps fits where it is written');
  encodeInclude = include;
  out[offset] = WRITE_SET_FORMAT;
  out.writeUInt32LE(encodeMapCount, offset + 1);
  encodeOut = out;
  encodeOffset = offset + 5;
  visitMaps(maps, writeMap);
  const end = encodeOffset;
  encodeOut = EMPTY_BUFFER;
  encodeInclude = ANY_MAP;
  assert(end === offset + size, () => `write-set size: wrote ${end - offset} of ${size} bytes`);
}

// The state of the encodeSortedPart in progress (see isCanonical for why it is module-level).
const EMPTY_BUFFER = Buffer.alloc(0);
let encodeInclude: (name: string) => boolean = ANY_MAP;
let encodeSize = 0;
let encodeMapCount = 0;
let encodeOut: Buffer = EMPTY_BUFFER;
let encodeOffset = 0;

function visitMaps(maps: Iterable<readonly [string, SortedWrites]>, visit: (writes: SortedWrites, name: string) => void): void {
  if (maps instanceof Map) (maps as ReadonlyMap<string, SortedWrites>).forEach(visit);
  else for (const [name, writes] of maps) visit(writes, name);
}

function visitWrites(writes: SortedWrites, visit: (value: Write, key: string) => void): void {
  if (Array.isArray(writes)) {
    const pairs = writes as readonly (readonly [string, Write])[];
    for (let i = 0; i < pairs.length; i++) visit(pairs[i]![1], pairs[i]![0]);
  } else (writes as ReadonlyMap<string, Write>).forEach(visit);
}

function sizeWrite(value: Write, key: string): void {
  encodeSize += 5 + Buffer.byteLength(key, 'utf8');
  if (value !== null) encodeSize += 4 + value.byteLength;
}

function sizeMap(writes: SortedWrites, name: string): void {
  if (countOf(writes) === 0 || !encodeInclude(name)) return;
  encodeMapCount++;
  encodeSize += 8 + Buffer.byteLength(name, 'utf8');
  visitWrites(writes, sizeWrite);
}

function writeWrite(value: Write, key: string): void {
  const out = encodeOut;
  let offset = encodeOffset;
  const keyLength = out.write(key, offset + 4, 'utf8');
  out.writeUInt32LE(keyLength, offset);
  offset += 4 + keyLength;
  if (value === null) {
    out[offset++] = TAG_REMOVE;
  } else {
    out[offset++] = TAG_VALUE;
    out.writeUInt32LE(value.byteLength, offset);
    out.set(value, offset + 4);
    offset += 4 + value.byteLength;
  }
  encodeOffset = offset;
}

function writeMap(writes: SortedWrites, name: string): void {
  const count = countOf(writes);
  if (count === 0 || !encodeInclude(name)) return;
  const out = encodeOut;
  const nameLength = out.write(name, encodeOffset + 4, 'utf8');
  out.writeUInt32LE(nameLength, encodeOffset);
  encodeOffset += 4 + nameLength;
  out.writeUInt32LE(count, encodeOffset);
  encodeOffset += 4;
  visitWrites(writes, writeWrite);
}

/**
 * Splits a write set by domain and encodes both parts. A write set from the store is already in
 * canonical order and is encoded as it is; any other is sorted first.
 */
export function encodeWriteSet(writes: WriteSet): EncodedWriteSet {
  const canonical = isCanonical(writes) ? writes : new Map(sortedEntries(writes).map(([name, mapWrites]) => [name, new Map(sortedEntries(mapWrites))]));
  return { publicBytes: encodeSortedPart(canonical, isPublicMapName), privateBytes: encodeSortedPart(canonical, PRIVATE_MAP) };
}

/** Reads a write-set part, failing MalformedWriteSet on any overrun (also used by snapshot-loading.ts). */
export class Reader {
  offset = 0;
  constructor(readonly buf: Buffer) {}

  get remaining(): number {
    return this.buf.byteLength - this.offset;
  }

  u8(what: string): number {
    if (this.remaining < 1) throw malformedWriteSet(`truncated at ${what} (offset ${this.offset})`);
    return this.buf[this.offset++]!;
  }

  u32(what: string): number {
    if (this.remaining < 4) throw malformedWriteSet(`truncated at ${what} (offset ${this.offset})`);
    const value = this.buf.readUInt32LE(this.offset);
    this.offset += 4;
    return value;
  }

  /** Returns [start, end) of a length-prefixed byte string. */
  span(what: string): [number, number] {
    const length = this.u32(`${what} length`);
    if (length > this.remaining) {
      throw malformedWriteSet(`${what} of ${length} bytes overruns the input (offset ${this.offset})`);
    }
    const start = this.offset;
    this.offset += length;
    return [start, this.offset];
  }

  utf8(what: string): [string, number, number] {
    const [start, end] = this.span(what);
    const bytes = this.buf.subarray(start, end);
    if (!isUtf8(bytes)) throw malformedWriteSet(`${what} at offset ${start} is not UTF-8`);
    return [bytes.toString('utf8'), start, end];
  }
}

export function compareSpans(buf: Buffer, a: [number, number], b: [number, number]): number {
  return buf.compare(buf, b[0], b[1], a[0], a[1]);
}

export interface DecodeOptions {
  /** When given, every map must belong to this domain. */
  domain?: Domain;
  /** Reject removals (snapshot sections hold only values). */
  valuesOnly?: boolean;
  /**
   * The caller hands `bytes` over (a buffer of its own, such as a decrypted write set, that it
   * will not change): values are views of it instead of copies. Without it each value is copied,
   * since the state outlives the (possibly large) buffer it was decoded from.
   */
  viewValues?: boolean;
}

/**
 * Decodes one part. Throws a CovenantError with code MalformedWriteSet on any deviation from the
 * canonical layout; every loop is bounded by the input length.
 */
export function decodeWriteSet(bytes: Uint8Array, options: DecodeOptions = {}): WriteSet {
  if (bytes.byteLength === 0) return EMPTY_WRITE_SET;
  const r = new Reader(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength));
  const format = r.u8('format');
  if (format !== WRITE_SET_FORMAT) throw malformedWriteSet(`unknown format ${format}`);
  const mapCount = r.u32('map count');
  // Each map takes at least 8 bytes of lengths plus one write of 5: a cheap bound before looping.
  if (mapCount === 0 || mapCount > r.remaining / 13) throw malformedWriteSet(`impossible map count ${mapCount}`);
  const out = new Map<string, Map<string, Write>>();
  let previousName: [number, number] | undefined;
  for (let m = 0; m < mapCount; m++) {
    const [name, nameStart, nameEnd] = r.utf8('map name');
    if (name.length === 0) throw malformedWriteSet('empty map name');
    const nameSpan: [number, number] = [nameStart, nameEnd];
    if (previousName !== undefined && compareSpans(r.buf, previousName, nameSpan) >= 0) {
      throw malformedWriteSet(`map "${name.slice(0, 64)}" out of order`);
    }
    previousName = nameSpan;
    if (options.domain !== undefined && (isPublicMapName(name) ? 'public' : 'private') !== options.domain) {
      throw malformedWriteSet(`map "${name.slice(0, 64)}" in the ${options.domain} part`);
    }
    const writeCount = r.u32('write count');
    if (writeCount === 0 || writeCount > r.remaining / 5) throw malformedWriteSet(`impossible write count ${writeCount}`);
    const writes = new Map<string, Write>();
    let previousKey: [number, number] | undefined;
    for (let w = 0; w < writeCount; w++) {
      const [key, keyStart, keyEnd] = r.utf8('key');
      const keySpan: [number, number] = [keyStart, keyEnd];
      if (previousKey !== undefined && compareSpans(r.buf, previousKey, keySpan) >= 0) {
        throw malformedWriteSet(`key out of order in map "${name.slice(0, 64)}"`);
      }
      previousKey = keySpan;
      const tag = r.u8('write tag');
      if (tag === TAG_VALUE) {
        const [start, end] = r.span('value');
        writes.set(key, options.viewValues === true ? new Uint8Array(r.buf.buffer, r.buf.byteOffset + start, end - start) : copyValue(r.buf.subarray(start, end)));
      } else if (tag === TAG_REMOVE && options.valuesOnly !== true) {
        writes.set(key, null);
      } else {
        throw malformedWriteSet(`bad write tag ${tag}`);
      }
    }
    out.set(name, writes);
  }
  if (r.remaining !== 0) throw malformedWriteSet(`${r.remaining} trailing bytes`);
  return out;
}

/**
 * The writes of a transaction from its two encoded parts (the private one in clear); without the
 * private part, the public domain alone. MalformedWriteSet as decodeWriteSet. Public values are
 * copies (the public part is a view of a larger entry or message); private values are views of
 * `privatePlainBytes`, the caller's own decrypted buffer of just this write set, which it hands
 * over and must not change afterwards.
 */
export function decodeWriteSetParts(publicBytes: Uint8Array, privatePlainBytes?: Uint8Array): WriteSet {
  const publicWrites = decodeWriteSet(publicBytes, { domain: 'public' });
  return privatePlainBytes === undefined
    ? publicWrites
    : mergeWriteSets(publicWrites, decodeWriteSet(privatePlainBytes, { domain: 'private', viewValues: true }));
}

/** Merges two write sets of disjoint maps (e.g. the public and private parts) in canonical order. */
export function mergeWriteSets(a: WriteSet, b: WriteSet): WriteSet {
  if (b.size === 0) return a;
  if (a.size === 0) return b;
  const entries = [...a, ...b].sort((x, y) => compareUtf8(x[0], y[0]));
  const out = new Map<string, ReadonlyMap<string, Write>>();
  for (const [name, writes] of entries) {
    if (out.has(name)) throw malformedWriteSet(`map "${name.slice(0, 64)}" in both parts`);
    out.set(name, writes);
  }
  return out;
}
