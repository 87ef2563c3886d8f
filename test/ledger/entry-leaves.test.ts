/**
 * Re-reading Merkle leaves of ledger entries (src/ledger/entry-leaves.ts): Ledger.locateEntries
 * says where the entries are without reading them, whatever the chunk's index state (held,
 * sparse after eviction, never built), and leavesOfEntries reads and checks them.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { decodeEntry, entryLeaf, inlineEntryLeafReader, Ledger, leavesOfEntries, LedgerError } from '../../src/ledger/index.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { generateSigningIdentities, writeSignedLedger } from '../../src/testing/signed-ledger.js';

const ENTRIES = 1500;
let disk: MemoryDisk;
const expected: Uint8Array[] = [];

before(async () => {
  disk = new MemoryDisk();
  writeSignedLedger({ disk, directory: 'ledger', identities: await generateSigningIdentities(), entries: ENTRIES, signatureEveryEntries: 50, chunkSizeBytes: 48 * 1024, payloadBytes: 700 });
  const ledger = new Ledger({ disk, directory: 'ledger' });
  ledger.open();
  for (let s = 1; s <= ENTRIES; s++) expected.push(entryLeaf(decodeEntry(ledger.getEntry(s))));
  ledger.close();
});

const RANGES: [number, number][] = [[1, 1024], [1, 1], [63, 65], [300, 1100], [1025, 1500], [1500, 1500]];

function checkRanges(ledger: Ledger, what: string): void {
  for (const [first, last] of RANGES) {
    const request = ledger.locateEntries(first, last);
    assert.ok(request.spans.length >= 1, what);
    const packed = leavesOfEntries(request, (path, at, length) => disk.read(path, at, length));
    assert.equal(packed.byteLength, (last - first + 1) * 32, `${what} ${first}..${last}`);
    for (let s = first; s <= last; s++) {
      assert.deepEqual(packed.subarray((s - first) * 32, (s - first + 1) * 32), expected[s - 1], `${what}: leaf of ${s}`);
    }
  }
}

test('leaves of any range, with chunk indexes never built, held, or evicted to their sparse form', async () => {
  // Opened, nothing read yet: the committed chunks have no index at all.
  const fresh = new Ledger({ disk, directory: 'ledger' });
  fresh.open();
  const unindexed = fresh.locateEntries(1, 1024);
  assert.equal(unindexed.spans[0]!.startBytes, 8, 'a chunk without an index is read from its header on');
  checkRanges(fresh, 'no index');
  for (let s = 1; s <= ENTRIES; s += 20) fresh.getEntry(s);
  checkRanges(fresh, 'indexes held');
  // A cache of 100 entries keeps at most a chunk or two: the rest are sparse.
  const small = new Ledger({ disk, directory: 'ledger', indexCacheEntriesMax: 100 });
  small.open();
  for (let s = 1; s <= ENTRIES; s += 20) small.getEntry(s);
  checkRanges(small, 'sparse indexes');
  const reader = inlineEntryLeafReader(disk);
  assert.deepEqual(await reader.leavesOf(small.locateEntries(5, 9)), new Uint8Array(Buffer.concat(expected.slice(4, 9))));
  reader.close();
  fresh.close();
  small.close();
});

test('a damaged frame or a missing entry is reported, naming the file and offset', () => {
  const ledger = new Ledger({ disk, directory: 'ledger' });
  ledger.open();
  // With the chunk's index held, the span is exactly the frames asked for.
  ledger.getEntry(10);
  const request = ledger.locateEntries(10, 20);
  const span = request.spans[0]!;
  const damaged = (path: string, at: number, length: number) => {
    const bytes = disk.read(path, at, length).slice();
    // A byte inside the frames asked for: their crc no longer matches.
    if (bytes.byteLength > 300) bytes[bytes.byteLength - 200]! ^= 0xff;
    return bytes;
  };
  assert.throws(
    () => leavesOfEntries(request, damaged),
    (e: unknown) => e instanceof LedgerError && e.code === 'LedgerCorrupted' && e.file === span.file && typeof e.offsetBytes === 'number',
  );
  // Spans that do not reach the last entry asked for.
  assert.throws(
    () => leavesOfEntries({ ...request, lastSeqno: request.lastSeqno + 1 }, (path, at, length) => disk.read(path, at, length)),
    (e: unknown) => e instanceof LedgerError && e.code === 'LedgerEntryNotFound',
  );
  ledger.close();
});
