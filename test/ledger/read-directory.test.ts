import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CHUNK_HEADER_BYTES, Ledger, LedgerError, readLedgerDirectories } from '../../src/ledger/index.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { entries, entry } from './helpers.js';

function build(): MemoryDisk {
  const disk = new MemoryDisk();
  const ledger = new Ledger({ disk, directory: '/main' });
  ledger.open();
  ledger.append(entries(1, 12, [3, 8]));
  ledger.commit(8);
  ledger.close();
  disk.ensureDirectory('/archive');
  disk.rename('/main/ledger_1-3.committed', '/archive/ledger_1-3.committed');
  return disk;
}

test('entries of several directories come in seqno order with their file and offset', () => {
  const disk = build();
  const seen = [...readLedgerDirectories(disk, ['/main', '/archive'])];
  assert.deepEqual(
    seen.map((e) => e.entry.seqno),
    Array.from({ length: 12 }, (_, i) => i + 1),
  );
  assert.equal(seen[0]!.file, '/archive/ledger_1-3.committed');
  assert.equal(seen[0]!.offsetBytes, CHUNK_HEADER_BYTES);
  assert.equal(seen[1]!.offsetBytes, CHUNK_HEADER_BYTES + entry(1).byteLength);
  assert.equal(seen[3]!.file, '/main/ledger_4-8.committed');
  assert.deepEqual(seen[5]!.entry.frameBytes, entry(6));
  assert.deepEqual(
    [...readLedgerDirectories(disk, ['/main', '/archive'], { committedOnly: true, fromSeqno: 5 })].map((e) => e.entry.seqno),
    [5, 6, 7, 8],
  );
});

test('a gap between files is an error unless allowed', () => {
  const disk = build();
  // The first file may start anywhere (a ledger begun from a snapshot)...
  assert.equal([...readLedgerDirectories(disk, ['/main'])].length, 9);
  // ...but later files must continue the earlier ones.
  disk.remove('/main/ledger_4-8.committed');
  const dirs = ['/main', '/archive'];
  assert.throws(() => [...readLedgerDirectories(disk, dirs)], (e: unknown) => e instanceof LedgerError && e.code === 'LedgerFilesInconsistent');
  assert.deepEqual(
    [...readLedgerDirectories(disk, dirs, { allowGaps: true })].map((e) => e.entry.seqno),
    [1, 2, 3, 9, 10, 11, 12],
  );
});

test('damage is reported with the file and offset where it is', () => {
  const disk = build();
  const offset = CHUNK_HEADER_BYTES + entry(4).byteLength + entry(5).byteLength;
  disk.corrupt('/main/ledger_4-8.committed', offset + 50);
  const seen: number[] = [];
  assert.throws(
    () => {
      for (const e of readLedgerDirectories(disk, ['/main', '/archive'])) seen.push(e.entry.seqno);
    },
    (e: unknown) => e instanceof LedgerError && e.code === 'LedgerCorrupted' && e.file === '/main/ledger_4-8.committed' && e.offsetBytes === offset,
  );
  assert.deepEqual(seen, [1, 2, 3], 'entries before the damaged file were delivered');
});
