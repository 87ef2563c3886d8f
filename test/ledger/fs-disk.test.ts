import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { CHUNK_HEADER_BYTES, decodeEntry, DiskError, Ledger, LedgerError } from '../../src/ledger/index.js';
import { FsDisk } from '../../src/platform/fs-disk.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { entries, entry, withTempDir } from './helpers.js';

test('FsDisk appends, reads, renames, truncates and lists', () => {
  withTempDir('ledger', (dir) => {
    const disk = new FsDisk();
    const sub = disk.join(dir, 'a/b');
    disk.ensureDirectory(sub);
    const p = disk.join(sub, 'f');
    const file = disk.createFile(p);
    assert.throws(() => disk.createFile(p), (e: unknown) => e instanceof DiskError && e.code === 'DiskIoFailed');
    // More parts than one writev takes, to exercise the grouping.
    const parts = Array.from({ length: 2500 }, (_, i) => new Uint8Array([i & 0xff, (i >> 8) & 0xff]));
    file.append(parts);
    file.sync();
    assert.equal(file.sizeBytes(), 5000);
    assert.equal(disk.sizeBytes(p), 5000);
    assert.deepEqual([...disk.read(p, 2 * 1234, 2)], [1234 & 0xff, 1234 >> 8]);
    assert.equal(disk.read(p, 4990, 100).byteLength, 10, 'short read at end of file');
    disk.rename(p, disk.join(sub, 'g'));
    // The open handle follows the rename.
    file.append([new Uint8Array([7])]);
    file.close();
    assert.deepEqual(disk.listDirectory(sub), ['g']);
    assert.equal(disk.readAll(disk.join(sub, 'g'))[5000], 7);
    disk.truncate(disk.join(sub, 'g'), 10);
    const again = disk.openForAppend(disk.join(sub, 'g'));
    assert.equal(again.sizeBytes(), 10);
    again.append([new Uint8Array([9])]);
    again.close();
    assert.equal(disk.sizeBytes(disk.join(sub, 'g')), 11);
    disk.syncDirectory(sub);
    disk.remove(disk.join(sub, 'g'));
    assert.equal(disk.exists(disk.join(sub, 'g')), false);
    assert.throws(() => disk.readAll(disk.join(sub, 'g')), (e: unknown) => e instanceof DiskError && /no such file|ENOENT/.test(e.message));
  });
});

test('a ledger on the real disk survives reopening and matches the in-memory disk byte for byte', () => {
  withTempDir('ledger', (dir) => {
    const disk = new FsDisk();
    const directory = disk.join(dir, 'ledger');
    const ledger = new Ledger({ disk, directory });
    ledger.open();
    const all = entries(1, 40, [10, 25, 33]);
    ledger.append(all.slice(0, 17));
    ledger.append(all.slice(17));
    ledger.commit(30);
    ledger.sync();
    ledger.close();
    assert.deepEqual(fs.readdirSync(directory).sort(), ['ledger_1-10.committed', 'ledger_11-25.committed', 'ledger_26-33', 'ledger_34']);

    const memory = new MemoryDisk();
    const twin = new Ledger({ disk: memory, directory: '/l' });
    twin.open();
    twin.append(all);
    twin.commit(30);
    for (const name of fs.readdirSync(directory)) {
      assert.deepEqual(new Uint8Array(fs.readFileSync(path.join(directory, name))), memory.readAll(`/l/${name}`), name);
    }

    const again = new Ledger({ disk, directory });
    const report = again.open();
    assert.equal(report.lastSeqno, 40);
    assert.equal(report.committedSeqno, 25);
    assert.deepEqual(again.getEntries(1, 40), all);
    again.close();
  });
});

test('a truncated file on the real disk is recovered to its last whole entry', () => {
  withTempDir('ledger', (dir) => {
    const disk = new FsDisk();
    const directory = disk.join(dir, 'ledger');
    const ledger = new Ledger({ disk, directory });
    ledger.open();
    ledger.append(entries(1, 8, [4]));
    ledger.close();
    const last = path.join(directory, 'ledger_5');
    const size = fs.statSync(last).size;
    fs.truncateSync(last, size - 7);
    const again = new Ledger({ disk, directory });
    const report = again.open();
    assert.equal(again.lastSeqno, 7);
    assert.equal(report.tornTail?.file, 'ledger_5');
    assert.equal(report.tornTail?.reason, 'TruncatedLedgerEntry');
    assert.equal(fs.statSync(last).size, CHUNK_HEADER_BYTES + [5, 6, 7].reduce((n, s) => n + entry(s).byteLength, 0));
    again.append([entry(8)]);
    assert.equal(decodeEntry(again.getEntry(8)).seqno, 8);
    again.close();
  });
});

test('a damaged committed file on the real disk is reported with its name and offset', () => {
  withTempDir('ledger', (dir) => {
    const disk = new FsDisk();
    const directory = disk.join(dir, 'ledger');
    const ledger = new Ledger({ disk, directory });
    ledger.open();
    ledger.append(entries(1, 4, [4]));
    ledger.commit(4);
    ledger.close();
    const file = path.join(directory, 'ledger_1-4.committed');
    const bytes = fs.readFileSync(file);
    bytes[bytes.byteLength - 2]! ^= 0x55;
    fs.writeFileSync(file, bytes);
    const offset = CHUNK_HEADER_BYTES + [1, 2, 3].reduce((n, s) => n + entry(s).byteLength, 0);
    assert.throws(
      () => new Ledger({ disk, directory }).open(),
      (e: unknown) => e instanceof LedgerError && e.code === 'LedgerCorrupted' && e.file === 'ledger_1-4.committed' && e.offsetBytes === offset,
    );
  });
});

test('FsDisk reads never come from a stale descriptor after a rename or removal', () => {
  withTempDir('ledger', (dir) => {
    const disk = new FsDisk();
    const a = disk.join(dir, 'a');
    const b = disk.join(dir, 'b');
    const write = (target: string, byte: number) => {
      const f = disk.createFile(target);
      f.append([new Uint8Array([byte, byte])]);
      f.close();
    };
    write(a, 1);
    assert.deepEqual([...disk.read(a, 0, 2)], [1, 1]);
    disk.rename(a, b);
    write(a, 2);
    assert.deepEqual([...disk.read(a, 0, 2)], [2, 2]);
    assert.deepEqual([...disk.read(b, 0, 2)], [1, 1]);
    disk.remove(a);
    write(a, 3);
    assert.deepEqual([...disk.read(a, 0, 2)], [3, 3]);
    // More files than descriptors kept open: every read still answers from the right file.
    for (let i = 0; i < 40; i++) write(disk.join(dir, `f${i}`), i);
    for (let i = 0; i < 40; i++) assert.equal(disk.read(disk.join(dir, `f${i}`), 1, 1)[0], i);
    disk.close();
  });
});

test('FsDisk syncAsync ends later, off the caller; closing the file meanwhile keeps its descriptor until the sync ends', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'covenant-ledger-'));
  try {
    const timings: number[] = [];
    const disk = new FsDisk({ timings: { append: () => undefined, sync: (seconds) => timings.push(seconds) } });
    const p = disk.join(dir, 'f');
    const file = disk.createFile(p);
    file.append([new Uint8Array([1, 2, 3])]);
    let ended = false;
    const done = new Promise<DiskError | undefined>((resolve) =>
      file.syncAsync((error) => {
        ended = true;
        resolve(error);
      }),
    );
    assert.equal(ended, false, 'never within the call');
    file.close();
    assert.equal(await done, undefined, 'the sync ends well although the file was closed under it');
    assert.equal(timings.length, 1);
    assert.deepEqual([...disk.readAll(p)], [1, 2, 3]);
    assert.throws(() => file.syncAsync(() => undefined), (e: unknown) => e instanceof DiskError);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
