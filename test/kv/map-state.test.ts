// A map of the state (a persistent B+ tree) against a plain Map: random sequences of single writes,
// batches through a builder and whole write sets folded into a state must hold what the Map holds,
// iterate in the order of the keys' UTF-8 bytes, and leave every earlier version as it was.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { InvariantError } from '../../src/base/index.js';
import { EMPTY_MAP, MAP_NODE_ENTRIES_MAX, type MapState } from '../../src/kv/map-state.js';
import { applyToState, EMPTY_STATE, flatten, foldFlats, type FlatWrites, type KvState } from '../../src/kv/state.js';
import type { Write, WriteSet } from '../../src/kv/write-set.js';

/** The reference order, independent of compareUtf8: the keys' UTF-8 bytes. */
function byUtf8(a: string, b: string): number {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8'));
}

function value(n: number): Uint8Array {
  return Uint8Array.of(n & 0xff, (n >> 8) & 0xff);
}

function contents(map: MapState): [string, number[]][] {
  return [...map.entries()].map(([k, v]) => [k, [...v]]);
}

function expected(reference: ReadonlyMap<string, Uint8Array>): [string, number[]][] {
  return [...reference].sort((a, b) => byUtf8(a[0], b[0])).map(([k, v]) => [k, [...v]]);
}

function assertEqual(map: MapState, reference: ReadonlyMap<string, Uint8Array>): void {
  const want = expected(reference);
  assert.deepEqual(contents(map), want);
  assert.deepEqual(map.entriesArray().map(([k, v]) => [k, [...v]]), want);
  assert.equal(map.size, reference.size);
  for (const [key, bytes] of reference) {
    assert.equal(map.get(key), bytes);
    assert.ok(map.has(key));
  }
}

// Keys from a small alphabet that has code points on both sides of the surrogates (where UTF-16
// order and UTF-8 order differ), so that keys collide often and sort differently by code unit.
const keyArb = fc.string({ unit: fc.constantFrom('a', 'b', 'é', '\uffff', '\u{1f600}', '\ue000', '0'), maxLength: 4 });

type Op = { op: 'set'; key: string; value: number } | { op: 'delete'; key: string } | { op: 'batch'; writes: [string, number | null][] } | { op: 'fill'; from: number; count: number };

const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('set' as const), key: keyArb, value: fc.nat(0xffff) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('delete' as const), key: keyArb }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('batch' as const), writes: fc.array(fc.tuple(keyArb, fc.option(fc.nat(0xffff))), { maxLength: 40 }) }) },
  // Many keys at once, so that trees grow several levels and shrink again.
  { weight: 1, arbitrary: fc.record({ op: fc.constant('fill' as const), from: fc.nat(500), count: fc.nat(3 * MAP_NODE_ENTRIES_MAX * MAP_NODE_ENTRIES_MAX) }) },
);

test('a map equals a reference Map under random writes, iterates in UTF-8 order, and its old versions never change', () => {
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 40 }), (ops) => {
      let map = EMPTY_MAP;
      let reference = new Map<string, Uint8Array>();
      const versions: [MapState, Map<string, Uint8Array>][] = [[map, new Map(reference)]];
      for (const op of ops) {
        reference = new Map(reference);
        if (op.op === 'set') {
          const bytes = value(op.value);
          map = map.with(op.key, bytes);
          reference.set(op.key, bytes);
        } else if (op.op === 'delete') {
          map = map.without(op.key);
          reference.delete(op.key);
        } else {
          const builder = map.edit();
          const numbers: [string, number | null][] = op.op === 'batch' ? op.writes : Array.from({ length: op.count }, (_, i) => [`k${op.from + i}`, i % 3 === 0 ? null : i]);
          const writes = numbers.map(([key, n]): [string, Uint8Array | null] => [key, n === null ? null : value(n)]);
          for (const [key, bytes] of writes) {
            if (bytes === null) builder.remove(key);
            else builder.set(key, bytes);
          }
          map = builder.finish();
          for (const [key, bytes] of writes) {
            if (bytes === null) reference.delete(key);
            else reference.set(key, bytes);
          }
        }
        assertEqual(map, reference);
        versions.push([map, reference]);
      }
      for (const [version, held] of versions) assertEqual(version, held);
    }),
    { numRuns: 150 },
  );
});

test('a builder changes only the new map: the map it started from keeps every entry', () => {
  const builder = EMPTY_MAP.edit();
  for (let i = 0; i < 5000; i++) builder.set(`key${i}`, value(i));
  const v1 = builder.finish();
  const before = contents(v1);
  const next = v1.edit();
  for (let i = 0; i < 5000; i += 2) next.set(`key${i}`, value(i + 1));
  for (let i = 1; i < 5000; i += 4) next.remove(`key${i}`);
  next.set('new', value(7));
  const v2 = next.finish();
  assert.deepEqual(contents(v1), before);
  assert.equal(v1.size, 5000);
  assert.equal(v2.size, 5000 - 1250 + 1);
  assert.deepEqual([...v2.get('key0')!], [...value(1)]);
  assert.deepEqual([...v1.get('key0')!], [...value(0)]);
  // One-write versions of v1 share its nodes and still leave it alone.
  const v3 = v1.with('key1', value(99)).without('key3');
  assert.deepEqual(contents(v1), before);
  assert.deepEqual([...v3.get('key1')!], [...value(99)]);
  assert.equal(v3.has('key3'), false);
  assert.equal(v1.without('absent'), v1);
});

test('a finished builder cannot be used again', () => {
  const builder = EMPTY_MAP.edit();
  builder.set('a', value(1));
  const map = builder.finish();
  assert.throws(() => builder.set('b', value(2)), InvariantError);
  assert.throws(() => builder.remove('a'), InvariantError);
  assert.throws(() => builder.finish(), InvariantError);
  assert.deepEqual(contents(map), [['a', [1, 0]]]);
});

const MAPS = ['m', 'public:p', 'z'];

const writeSetArb: fc.Arbitrary<WriteSet> = fc
  .array(fc.tuple(fc.constantFrom(...MAPS), keyArb, fc.option(fc.nat(0xffff))), { maxLength: 30 })
  .map((writes) => {
    const set = new Map<string, Map<string, Write>>();
    for (const [name, key, n] of writes) {
      let map = set.get(name);
      if (map === undefined) set.set(name, (map = new Map()));
      map.set(key, n === null ? null : value(n));
    }
    return set as WriteSet;
  });

function dump(state: KvState): Record<string, [string, number[]][]> {
  const out: Record<string, [string, number[]][]> = {};
  for (const name of [...state.keys()].sort()) out[name] = contents(state.get(name)!);
  return out;
}

test('folding write sets over several versions equals applying them one by one, and leaves the states folded from unchanged', () => {
  fc.assert(
    fc.property(fc.array(writeSetArb, { minLength: 1, maxLength: 12 }), fc.nat(), (writeSets, cut) => {
      const states: KvState[] = [EMPTY_STATE];
      for (const writes of writeSets) states.push(applyToState(states.at(-1)!, writes));
      const dumps = states.map(dump);
      const log: FlatWrites[] = writeSets.map(flatten);
      const from = cut % writeSets.length;
      const folded = foldFlats(states[from]!, log, from, writeSets.length);
      assert.deepEqual(dump(folded), dumps.at(-1));
      // An empty map is dropped, as one by one.
      for (const name of folded.keys()) assert.ok(folded.get(name)!.size > 0);
      assert.deepEqual(states.map(dump), dumps);
      // The reference: a plain Map per map name.
      const reference = new Map<string, Map<string, Uint8Array>>();
      for (const writes of writeSets) {
        for (const [name, mapWrites] of writes) {
          const map = reference.get(name) ?? new Map<string, Uint8Array>();
          for (const [key, bytes] of mapWrites) {
            if (bytes === null) map.delete(key);
            else map.set(key, bytes);
          }
          if (map.size === 0) reference.delete(name);
          else reference.set(name, map);
        }
      }
      assert.deepEqual([...folded.keys()].sort(), [...reference.keys()].sort());
      for (const [name, map] of reference) assertEqual(folded.get(name)!, map);
    }),
    { numRuns: 200 },
  );
});
