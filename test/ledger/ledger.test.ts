import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { InvariantError } from '../../src/base/index.js';
import { CHUNK_HEADER_BYTES, decodeEntry, Ledger, LedgerError, shouldEndChunk, type Disk } from '../../src/ledger/index.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { END, entries, entry, SIG } from './helpers.js';

const DIR = '/node/ledger';

function openLedger(disk: Disk, options: { recoverySuffix?: boolean; readOnlyDirectories?: string[]; indexCacheEntriesMax?: number } = {}) {
  const ledger = new Ledger({ disk, directory: DIR, ...options });
  const report = ledger.open();
  return { ledger, report };
}

function names(ledger: Ledger): string[] {
  return ledger.listChunks().map((c) => c.name);
}

function files(disk: Disk, dir = DIR): string[] {
  return disk.listDirectory(dir).sort((a, b) => parseInt(a.slice(7)) - parseInt(b.slice(7)));
}

test('shouldEndChunk ends chunks only on signatures', () => {
  assert.equal(shouldEndChunk({ chunkBytesSoFar: 10, chunkSizeBytes: 5, isSignature: true, forced: false }), true);
  assert.equal(shouldEndChunk({ chunkBytesSoFar: 10, chunkSizeBytes: 5, isSignature: false, forced: true }), false);
  assert.equal(shouldEndChunk({ chunkBytesSoFar: 1, chunkSizeBytes: 5, isSignature: true, forced: false }), false);
  assert.equal(shouldEndChunk({ chunkBytesSoFar: 1, chunkSizeBytes: 5, isSignature: true, forced: true }), true);
  assert.equal(shouldEndChunk({ chunkBytesSoFar: 5, chunkSizeBytes: 5, isSignature: true, forced: false }), true);
});

test('chunks are cut exactly at CHUNK_END entries and named by the spec', () => {
  const disk = new MemoryDisk();
  const { ledger, report } = openLedger(disk);
  assert.equal(report.lastSeqno, 0);
  assert.equal(ledger.firstSeqno, 1);
  // 3 is a plain signature: it does not cut. 4 and 9 carry CHUNK_END.
  ledger.append(entries(1, 6, [4], [3]));
  assert.deepEqual(names(ledger), ['ledger_1-4', 'ledger_5']);
  ledger.append(entries(7, 9, [9]));
  assert.deepEqual(names(ledger), ['ledger_1-4', 'ledger_5-9']);
  ledger.append([entry(10)]);
  assert.deepEqual(files(disk), ['ledger_1-4', 'ledger_5-9', 'ledger_10']);
  assert.equal(ledger.lastSeqno, 10);
  const listing = ledger.listChunks();
  assert.deepEqual(
    listing.map((c) => [c.first, c.last, c.committed, c.complete]),
    [
      [1, 4, false, true],
      [5, 9, false, true],
      [10, 10, false, false],
    ],
  );
  assert.equal(listing[0]!.sizeBytes, disk.sizeBytes(listing[0]!.path));
  // Every entry reads back as written, whichever chunk holds it.
  for (let s = 1; s <= 10; s++) assert.deepEqual(ledger.getEntry(s), entry(s, s === 4 || s === 9 ? END : s === 3 ? SIG : 0));
  assert.deepEqual(ledger.getEntries(3, 10).map((f) => decodeEntry(f).seqno), [3, 4, 5, 6, 7, 8, 9, 10]);
  // A chunk file starts with the header, then the frames back to back.
  const file = disk.readAll(listing[0]!.path);
  assert.equal(new TextDecoder().decode(file.subarray(0, 4)), 'CVLG');
  assert.equal(file[4], 1);
  assert.equal(decodeEntry(file, CHUNK_HEADER_BYTES).seqno, 1);
});

test('commit renames completed chunks at or below the commit seqno', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 12, [4, 9]));
  ledger.commit(6);
  assert.deepEqual(names(ledger), ['ledger_1-4.committed', 'ledger_5-9', 'ledger_10']);
  ledger.commit(5); // going back is a no-op
  ledger.commit(12); // the chunk being written is not complete: it keeps its name
  assert.deepEqual(files(disk), ['ledger_1-4.committed', 'ledger_5-9.committed', 'ledger_10']);
  assert.deepEqual(ledger.findCommittedChunk(7)?.name, 'ledger_5-9.committed');
  assert.equal(ledger.findCommittedChunk(11), undefined);
  assert.equal(ledger.findCommittedChunk(99), undefined);
  // A chunk completing after its commit is committed at the next commit call.
  ledger.append(entries(13, 14, [14]));
  ledger.commit(14);
  assert.deepEqual(files(disk).at(-1), 'ledger_10-14.committed');
  // Committing beyond the ledger is a programmer error.
  assert.throws(() => ledger.commit(15), InvariantError);
  // Committed chunks were made durable before their rename.
  assert.equal(disk.unsyncedBytes(`${DIR}/ledger_1-4.committed`), 0);
});

test('two ledgers fed the same entries in different batches write byte-identical files', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 60 }),
      fc.uniqueArray(fc.integer({ min: 1, max: 60 }), { maxLength: 8 }),
      fc.array(fc.integer({ min: 1, max: 10 }), { minLength: 1, maxLength: 20 }),
      (count, ends, batchSizes) => {
        const all = entries(1, count, ends);
        const a = new MemoryDisk();
        const b = new MemoryDisk();
        const la = openLedger(a).ledger;
        const lb = openLedger(b).ledger;
        la.append(all);
        for (let i = 0, k = 0; i < all.length; k++) {
          const n = batchSizes[k % batchSizes.length]!;
          lb.append(all.slice(i, i + n));
          i += n;
          if (k % 3 === 0) lb.sync();
        }
        la.commit(count);
        lb.commit(count);
        assert.deepEqual(files(a), files(b));
        for (const name of files(a)) assert.deepEqual(a.readAll(`${DIR}/${name}`), b.readAll(`${DIR}/${name}`), name);
      },
    ),
    { numRuns: 100 },
  );
});

test('truncate drops an uncommitted suffix, reopening a completed chunk if needed', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 14, [4, 9]));
  ledger.commit(4);
  ledger.truncate(7);
  assert.equal(ledger.lastSeqno, 7);
  assert.deepEqual(files(disk), ['ledger_1-4.committed', 'ledger_5']);
  assert.throws(() => ledger.getEntry(8), (e: unknown) => e instanceof LedgerError && e.code === 'LedgerEntryNotFound');
  // The ledger continues from the truncation point, on another branch (a new view).
  ledger.append(entries(8, 10, [10], [], 2));
  assert.deepEqual(files(disk), ['ledger_1-4.committed', 'ledger_5-10']);
  assert.equal(decodeEntry(ledger.getEntry(8)).view, 2);
  assert.equal(decodeEntry(ledger.getEntry(7)).view, 1);
  // Truncating at a chunk end keeps that chunk complete; the next entry starts a new one.
  ledger.append(entries(11, 12, [], [], 2));
  ledger.truncate(10);
  assert.deepEqual(files(disk), ['ledger_1-4.committed', 'ledger_5-10']);
  ledger.append([entry(11, 0, 3)]);
  assert.deepEqual(files(disk), ['ledger_1-4.committed', 'ledger_5-10', 'ledger_11']);
  // Views may not go back and seqnos must follow.
  assert.throws(() => ledger.append([entry(12, 0, 2)]), (e: unknown) => e instanceof LedgerError && e.code === 'LedgerEntryOutOfOrder');
  assert.throws(() => ledger.append([entry(13, 0, 3)]), (e: unknown) => e instanceof LedgerError && e.code === 'LedgerEntryOutOfOrder');
  assert.equal(ledger.lastSeqno, 11, 'a refused batch writes nothing');
  // Never below the commit.
  assert.throws(() => ledger.truncate(3), InvariantError);
  ledger.truncate(4);
  assert.deepEqual(files(disk), ['ledger_1-4.committed']);
  assert.equal(ledger.lastSeqno, 4);
});

test('append refuses malformed frames and CHUNK_END on a non-signature', () => {
  const { ledger } = openLedger(new MemoryDisk());
  const bad = entry(1);
  bad[30] = bad[30]! ^ 1;
  assert.throws(() => ledger.append([bad]), (e: unknown) => e instanceof LedgerError && e.code === 'MalformedLedgerEntry');
  assert.throws(() => ledger.append([entry(1, 2)]), /CHUNK_END but is not a signature/);
  assert.throws(() => ledger.append([entry(2)]), (e: unknown) => e instanceof LedgerError && e.code === 'LedgerEntryOutOfOrder');
  assert.equal(ledger.lastSeqno, 0);
});

test('append with crcChecked skips only the crc: every other check of the frames still holds', () => {
  const { ledger } = openLedger(new MemoryDisk());
  // The caller vouches for the crc (it decoded the frame already, or made it).
  const flipped = entry(1);
  flipped[30] = flipped[30]! ^ 1;
  assert.throws(() => ledger.append([flipped]), (e: unknown) => e instanceof LedgerError && e.code === 'MalformedLedgerEntry');
  ledger.append([flipped], { crcChecked: true });
  assert.equal(ledger.lastSeqno, 1);
  assert.throws(() => ledger.append([entry(3)], { crcChecked: true }), (e: unknown) => e instanceof LedgerError && e.code === 'LedgerEntryOutOfOrder');
  assert.throws(() => ledger.append([entry(2, 2)], { crcChecked: true }), /CHUNK_END but is not a signature/);
  const trailing = new Uint8Array(entry(2).byteLength + 1);
  trailing.set(entry(2));
  assert.throws(() => ledger.append([trailing], { crcChecked: true }), /trailing bytes/);
  const wrongVersion = entry(2);
  wrongVersion[4] = 9;
  assert.throws(() => ledger.append([wrongVersion], { crcChecked: true }), /unsupported format version/);
  assert.equal(ledger.lastSeqno, 1);
});

test('reopening finds the same state', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 20, [5, 12, 18], [3]));
  ledger.commit(12);
  ledger.close();
  const before = disk.listDirectory(DIR).sort();
  const { ledger: again, report } = openLedger(disk);
  assert.deepEqual(disk.listDirectory(DIR).sort(), before);
  assert.equal(report.lastSeqno, 20);
  assert.equal(report.committedSeqno, 12);
  assert.equal(report.tornTail, undefined);
  assert.equal(again.lastView, 1);
  assert.deepEqual(names(again), ['ledger_1-5.committed', 'ledger_6-12.committed', 'ledger_13-18', 'ledger_19']);
  for (let s = 1; s <= 20; s++) assert.deepEqual(again.getEntry(s), ledger === again ? undefined : entry(s, [5, 12, 18].includes(s) ? END : s === 3 ? SIG : 0));
  again.append(entries(21, 22, [22]));
  assert.deepEqual(files(disk).slice(-1), ['ledger_19-22']);
  // A ledger ending on a committed chunk reopens with that chunk's last entry.
  again.commit(22);
  again.close();
  const third = openLedger(disk);
  assert.equal(third.report.lastSeqno, 22);
  assert.equal(third.report.committedSeqno, 22);
  assert.throws(() => third.ledger.truncate(21), InvariantError);
});

test('a chunk whose CHUNK_END entry was written but not yet renamed is completed at open', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 4, [4]));
  ledger.close();
  disk.rename(`${DIR}/ledger_1-4`, `${DIR}/ledger_1`);
  const { ledger: again, report } = openLedger(disk);
  assert.deepEqual(report.completedChunks, ['ledger_1-4']);
  assert.deepEqual(files(disk), ['ledger_1-4']);
  again.append([entry(5)]);
  assert.deepEqual(files(disk), ['ledger_1-4', 'ledger_5']);
});

test('after a crash the ledger reopens on a prefix that keeps every synced entry', () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ count: fc.integer({ min: 1, max: 6 }), sync: fc.boolean(), end: fc.boolean() }), { minLength: 1, maxLength: 12 }),
      fc.array(fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }), { minLength: 1, maxLength: 8 }),
      (batches, tears) => {
        const disk = new MemoryDisk();
        const { ledger } = openLedger(disk);
        let seqno = 0;
        let synced = 0;
        const written: Uint8Array[] = [];
        for (const batch of batches) {
          const frames: Uint8Array[] = [];
          for (let i = 0; i < batch.count; i++) {
            seqno++;
            frames.push(entry(seqno, batch.end && i === batch.count - 1 ? END : 0));
          }
          ledger.append(frames);
          written.push(...frames);
          if (batch.sync) {
            ledger.sync();
            synced = seqno;
          }
        }
        let t = 0;
        disk.crash((_path, unsynced) => Math.floor(tears[t++ % tears.length]! * (unsynced + 1)));
        const { ledger: again, report } = openLedger(disk);
        assert.ok(again.lastSeqno >= synced, `lost synced entries: ${again.lastSeqno} < ${synced}`);
        assert.ok(again.lastSeqno <= seqno);
        if (again.lastSeqno < seqno) assert.ok(report.tornTail !== undefined || again.lastSeqno === 0 || true);
        for (let s = 1; s <= again.lastSeqno; s++) assert.deepEqual(again.getEntry(s), written[s - 1]);
        // Files are well formed again: names agree with contents, one chunk being written at most.
        const chunks = again.listChunks();
        for (let i = 0; i < chunks.length; i++) {
          const c = chunks[i]!;
          if (i > 0) assert.equal(c.first, chunks[i - 1]!.last + 1);
          if (i < chunks.length - 1) assert.ok(c.complete);
        }
        // And the ledger continues.
        again.append([entry(again.lastSeqno + 1, END)]);
        again.close();
        const third = openLedger(disk);
        assert.equal(third.report.tornTail, undefined);
        assert.equal(third.ledger.lastSeqno, again.lastSeqno);
      },
    ),
    { numRuns: 200 },
  );
});

test('a torn tail is cut back to the last whole entry and reported', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 3));
  ledger.sync();
  ledger.append(entries(4, 9, [6]));
  // Keep 10 bytes past the sync in ledger_1-6 (entry 4 cut), all of ledger_7.
  disk.crash((path, unsynced) => (path.endsWith('ledger_1-6') ? 10 : unsynced));
  const { ledger: again, report } = openLedger(disk);
  assert.equal(again.lastSeqno, 3);
  assert.ok(report.tornTail);
  assert.equal(report.tornTail.file, 'ledger_1-6');
  assert.equal(report.tornTail.reason, 'TruncatedLedgerEntry');
  assert.equal(report.tornTail.droppedBytes, 10);
  assert.deepEqual(report.tornTail.droppedFiles, ['ledger_7']);
  assert.equal(report.tornTail.keptLastSeqno, 3);
  assert.deepEqual(files(disk), ['ledger_1']);
});

test('a zero-filled tail (length extended, data lost) counts as torn in an uncommitted chunk', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 3));
  ledger.close();
  const path = `${DIR}/ledger_1`;
  const end = disk.sizeBytes(path);
  const tail = disk.read(path, end - 40, 40);
  disk.truncate(path, end - 40);
  const file = disk.openForAppend(path);
  file.append([new Uint8Array(tail.byteLength)]);
  file.close();
  const { ledger: again, report } = openLedger(disk);
  assert.equal(again.lastSeqno, 2);
  assert.equal(report.tornTail?.reason, 'MalformedLedgerEntry');
});

test('bytes after the CHUNK_END entry of a completed, uncommitted chunk are cut; the chunk is kept whole', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 6, [6]));
  ledger.close();
  const path = `${DIR}/ledger_1-6`;
  const whole = disk.sizeBytes(path);
  const file = disk.openForAppend(path);
  file.append([new TextEncoder().encode('garbage after the last entry')]);
  file.close();
  const { ledger: again, report } = openLedger(disk);
  assert.equal(again.lastSeqno, 6);
  assert.equal(report.tornTail?.file, 'ledger_1-6');
  assert.equal(disk.sizeBytes(path), whole);
  assert.deepEqual(files(disk), ['ledger_1-6']);
  again.append(entries(7, 8, [8]));
  assert.deepEqual(files(disk), ['ledger_1-6', 'ledger_7-8']);
});

test('corruption inside a committed chunk is reported with the file and offset', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 10, [5, 10]));
  ledger.commit(10);
  ledger.close();
  const path = `${DIR}/ledger_1-5.committed`;
  const second = CHUNK_HEADER_BYTES + entry(1).byteLength;
  disk.corrupt(path, second + 40);
  const isCorruption = (e: unknown) =>
    e instanceof LedgerError && e.code === 'LedgerCorrupted' && e.file === 'ledger_1-5.committed' && e.offsetBytes === second;
  // Found when the chunk is first read...
  const { ledger: again } = openLedger(disk);
  assert.deepEqual(again.getEntry(7), entry(7));
  assert.throws(() => again.getEntry(1), isCorruption);
  assert.throws(() => again.getEntries(1, 3), isCorruption);
  // ...and at open when asked to verify committed chunks.
  assert.throws(() => new Ledger({ disk, directory: DIR }).open({ verifyCommittedChunks: true }), isCorruption);
  // A committed file cut short is corruption, not a torn write.
  disk.corrupt(path, second + 40);
  disk.truncate(`${DIR}/ledger_6-10.committed`, disk.sizeBytes(`${DIR}/ledger_6-10.committed`) - 3);
  assert.throws(
    () => new Ledger({ disk, directory: DIR }).open(),
    (e: unknown) => e instanceof LedgerError && e.code === 'LedgerCorrupted' && e.file === 'ledger_6-10.committed',
  );
});

test('a crc-valid entry out of sequence in an uncommitted chunk is corruption, not a tear', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 2));
  ledger.close();
  const file = disk.openForAppend(`${DIR}/ledger_1`);
  file.append([entry(5)]);
  file.close();
  assert.throws(
    () => openLedger(disk),
    (e: unknown) => e instanceof LedgerError && e.code === 'LedgerCorrupted' && e.file === 'ledger_1' && e.offsetBytes === CHUNK_HEADER_BYTES + entry(1).byteLength + entry(2).byteLength,
  );
});

test('file names are validated at open', () => {
  for (const bad of ['ledger_0', 'ledger_5-3', 'ledger_1.committed', 'ledger_x', 'ledger_01-2']) {
    const disk = new MemoryDisk();
    disk.ensureDirectory(DIR);
    disk.createFile(`${DIR}/${bad}`).close();
    assert.throws(() => openLedger(disk), (e: unknown) => e instanceof LedgerError && e.code === 'InvalidLedgerFileName' && e.file === bad, bad);
  }
  const disk = new MemoryDisk();
  disk.ensureDirectory(DIR);
  disk.createFile(`${DIR}/README`).close();
  assert.equal(openLedger(disk).report.lastSeqno, 0, 'files not named ledger_* are left alone');
});

test('leftover .recovery files are discarded at open', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 4, [4]));
  ledger.commit(4);
  ledger.close();
  const recovering = openLedger(disk, { recoverySuffix: true }).ledger;
  recovering.append(entries(5, 9, [7]));
  recovering.commit(7);
  assert.deepEqual(files(disk), ['ledger_1-4.committed', 'ledger_5-7.committed.recovery', 'ledger_8.recovery']);
  recovering.close();
  const { ledger: again, report } = openLedger(disk);
  assert.deepEqual(report.discardedRecoveryFiles.sort(), ['ledger_5-7.committed.recovery', 'ledger_8.recovery']);
  assert.deepEqual(files(disk), ['ledger_1-4.committed']);
  assert.equal(again.lastSeqno, 4);
});

test('in recovery mode new files carry .recovery until completeRecovery', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 6, [4], [6]));
  ledger.commit(4);
  ledger.close();
  const { ledger: recovering } = openLedger(disk, { recoverySuffix: true });
  // The recovering node never writes into the old ledger's chunk: it is closed as it stands.
  recovering.append(entries(7, 10, [9]));
  assert.deepEqual(files(disk), ['ledger_1-4.committed', 'ledger_5-6', 'ledger_7-9.recovery', 'ledger_10.recovery']);
  recovering.commit(9);
  recovering.completeRecovery();
  assert.equal(recovering.recoveryMode, false);
  assert.deepEqual(files(disk), ['ledger_1-4.committed', 'ledger_5-6.committed', 'ledger_7-9.committed', 'ledger_10']);
  recovering.append(entries(11, 12, [12]));
  assert.deepEqual(files(disk).slice(-1), ['ledger_10-12']);
  for (let s = 1; s <= 12; s++) assert.equal(decodeEntry(recovering.getEntry(s)).seqno, s);
});

test('startAt resumes after a snapshot: the first chunk starts above 1', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.startAt(100);
  assert.equal(ledger.lastSeqno, 100);
  assert.equal(ledger.firstSeqno, 101);
  assert.equal(ledger.committedSeqno, 100);
  assert.throws(() => ledger.append([entry(1)]), (e: unknown) => e instanceof LedgerError && e.code === 'LedgerEntryOutOfOrder');
  ledger.append(entries(101, 105, [103]));
  assert.deepEqual(files(disk), ['ledger_101-103', 'ledger_104']);
  assert.throws(() => ledger.getEntry(100), (e: unknown) => e instanceof LedgerError && e.code === 'LedgerEntryNotFound');
  assert.throws(() => ledger.truncate(99), InvariantError);
  ledger.close();
  const { ledger: again, report } = openLedger(disk);
  assert.equal(report.firstSeqno, 101);
  assert.equal(report.lastSeqno, 105);
  assert.equal(report.committedSeqno, 100);
  assert.throws(() => again.truncate(99), InvariantError);
  // A later, newer snapshot: uncommitted leftovers are dropped, committed chunks stay readable.
  again.commit(103);
  again.startAt(500);
  assert.deepEqual(files(disk), ['ledger_101-103.committed']);
  assert.equal(again.firstSeqno, 501);
  again.append([entry(501)]);
  assert.deepEqual(decodeEntry(again.getEntry(102)).seqno, 102);
  assert.throws(() => again.startAt(400), InvariantError);
});

test('committed chunks in read-only directories are readable; same names are not duplicated', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 12, [4, 9]));
  ledger.commit(9);
  ledger.close();
  disk.ensureDirectory('/archive');
  disk.rename(`${DIR}/ledger_1-4.committed`, '/archive/ledger_1-4.committed');
  // An uncommitted file in a read-only directory is not ours to read.
  disk.createFile('/archive/ledger_50').close();
  const { ledger: again } = openLedger(disk, { readOnlyDirectories: ['/archive', '/missing'] });
  assert.deepEqual(names(again), ['ledger_1-4.committed', 'ledger_5-9.committed', 'ledger_10']);
  assert.equal(again.listChunks()[0]!.path, '/archive/ledger_1-4.committed');
  assert.deepEqual(again.getEntry(2), entry(2));
  assert.equal(again.findCommittedChunk(3)?.path, '/archive/ledger_1-4.committed');
});

test('overlapping files are refused at open', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 9, [4, 9]));
  ledger.commit(9);
  ledger.close();
  disk.ensureDirectory('/archive');
  disk.createFile('/archive/ledger_3-6.committed').close();
  assert.throws(
    () => openLedger(disk, { readOnlyDirectories: ['/archive'] }),
    (e: unknown) => e instanceof LedgerError && e.code === 'LedgerFilesInconsistent',
  );
});

test('a failed write is rolled back and the ledger keeps working', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 3));
  disk.failWrites(1);
  assert.throws(() => ledger.append(entries(4, 6)), (e: unknown) => e instanceof LedgerError || (e as { code?: string }).code === 'DiskFull');
  assert.equal(ledger.lastSeqno, 3);
  ledger.append(entries(4, 6, [6]));
  // A failure while creating a new chunk leaves no file behind.
  disk.failWrites(1);
  assert.throws(() => ledger.append(entries(7, 8)), /injected failure/);
  assert.deepEqual(files(disk), ['ledger_1-6']);
  ledger.append(entries(7, 8));
  ledger.close();
  const { ledger: again, report } = openLedger(disk);
  assert.equal(report.tornTail, undefined);
  assert.equal(again.lastSeqno, 8);
  for (let s = 1; s <= 8; s++) assert.equal(decodeEntry(again.getEntry(s)).seqno, s);
});

test('the index cache stays within its bound while every entry stays readable', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk, { indexCacheEntriesMax: 50 });
  const count = 3000;
  const ends: number[] = [];
  for (let s = 20; s <= count; s += 20) ends.push(s);
  for (let s = 1; s <= count; s += 500) ledger.append(entries(s, Math.min(count, s + 499), ends));
  ledger.commit(count);
  for (let s = 1; s <= count; s += 7) assert.equal(decodeEntry(ledger.getEntry(s)).seqno, s);
  assert.ok(ledger.cachedIndexEntries <= 50, `cache holds ${ledger.cachedIndexEntries}`);
  const all = ledger.getEntries(1, count);
  assert.equal(all.length, count);
  assert.equal(decodeEntry(all[count - 1]!).seqno, count);
  assert.ok(ledger.cachedIndexEntries <= 50);
});

test('getEntries stops at maxBytes but returns at least one entry', () => {
  const { ledger } = openLedger(new MemoryDisk());
  ledger.append(entries(1, 10, [5]));
  const size = entry(1).byteLength;
  const some = ledger.getEntries(1, 10, size * 2 + 5);
  assert.ok(some.length >= 1 && some.length <= 3);
  assert.deepEqual(some.map((f) => decodeEntry(f).seqno), [1, 2, 3].slice(0, some.length));
  assert.equal(ledger.getEntries(4, 10, 1).length, 1);
  assert.equal(ledger.getEntries(4, 10).length, 7);
});

test('sync makes appended bytes durable and a crash after sync loses nothing', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 7, [3]));
  ledger.sync();
  assert.equal(disk.unsyncedBytes(`${DIR}/ledger_1-3`), 0);
  assert.equal(disk.unsyncedBytes(`${DIR}/ledger_4`), 0);
  disk.crash(() => 0);
  assert.equal(openLedger(disk).ledger.lastSeqno, 7);
});

test('reads of an evicted chunk go through its sparse index and still detect damage', () => {
  const disk = new MemoryDisk();
  const { ledger } = openLedger(disk, { indexCacheEntriesMax: 100 });
  ledger.append(entries(1, 400, [200, 400]));
  ledger.commit(400);
  // Reading the second chunk whole evicts the first one's full index.
  assert.equal(ledger.getEntries(201, 400).length, 200);
  assert.equal(ledger.cachedIndexEntries, 200, 'only the last chunk read stays cached');
  assert.deepEqual(ledger.getEntry(130), entry(130));
  let offset = CHUNK_HEADER_BYTES;
  for (let s = 1; s < 150; s++) offset += entry(s).byteLength;
  disk.corrupt(`${DIR}/ledger_1-200.committed`, offset + 100);
  assert.throws(
    () => ledger.getEntry(150),
    (e: unknown) => e instanceof LedgerError && e.code === 'LedgerCorrupted' && e.file === 'ledger_1-200.committed' && e.offsetBytes === offset,
  );
  assert.deepEqual(ledger.getEntry(151), entry(151));
});

test('syncAsync: a chunk completed while a sync of it was under way stays open, so its commit syncs it before the rename (no torn committed chunk)', () => {
  const disk = new MemoryDisk({ random: () => 0 });
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 2, [], [2]));
  disk.holdSyncs();
  let synced = 0;
  ledger.syncAsync((error) => {
    assert.equal(error, undefined);
    synced++;
  });
  // The chunk's CHUNK_END entry is written after the sync began: the sync does not cover it.
  ledger.append([entry(3, END)]);
  assert.deepEqual(names(ledger), ['ledger_1-3']);
  assert.equal(disk.releaseSyncs(), 1);
  assert.equal(synced, 1);
  ledger.commit(3);
  assert.deepEqual(files(disk), ['ledger_1-3.committed']);
  assert.equal(disk.unsyncedBytes(`${DIR}/ledger_1-3.committed`), 0, 'committed only once all of it is durable');
  disk.crash();
  const reopened = openLedger(disk).ledger;
  assert.equal(reopened.lastSeqno, 3);
  assert.equal(reopened.committedSeqno, 3);
});

test('syncAsync makes the appends before it durable when it ends, not those after it; a crash cancels a sync under way', () => {
  const disk = new MemoryDisk({ random: () => 0 });
  const { ledger } = openLedger(disk);
  ledger.append(entries(1, 2, [], [2]));
  disk.holdSyncs();
  ledger.syncAsync(() => undefined);
  ledger.append(entries(3, 4, [], [4]));
  disk.releaseSyncs();
  ledger.syncAsync(() => assert.fail('a sync under way when the power went never ends'));
  disk.crash();
  assert.equal(disk.releaseSyncs(), 0);
  assert.equal(openLedger(disk).ledger.lastSeqno, 2);
});

test('a chunk an earlier run completed but never synced is synced by the next sync and before its commit renames it', () => {
  const disk = new MemoryDisk({ random: () => 0 });
  // A run completes ledger_1-3 and writes on, then stops before any sync (its writes stay in the
  // page cache): the next run opens the same files.
  openLedger(disk).ledger.append(entries(1, 5, [3]));
  const { ledger } = openLedger(disk);
  assert.deepEqual(names(ledger), ['ledger_1-3', 'ledger_4']);
  assert.ok(disk.unsyncedBytes(`${DIR}/ledger_1-3`) > 0);
  ledger.sync();
  assert.equal(disk.unsyncedBytes(`${DIR}/ledger_1-3`), 0, 'a sync covers every entry the node holds, not only those it appended');

  openLedger(disk).ledger.append(entries(6, 8, [8]));
  const again = openLedger(disk).ledger;
  assert.ok(disk.unsyncedBytes(`${DIR}/ledger_4-8`) > 0);
  again.commit(8);
  assert.equal(disk.unsyncedBytes(`${DIR}/ledger_4-8.committed`), 0, 'committed only once all of it is durable');
  disk.crash();
  const afterPowerCut = openLedger(disk).ledger;
  assert.equal(afterPowerCut.committedSeqno, 8);
  assert.equal(afterPowerCut.lastSeqno, 8);
});
