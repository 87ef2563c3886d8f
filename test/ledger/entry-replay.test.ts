/**
 * A recovery's private replay read off the request thread (src/ledger/entry-replay.ts): each
 * entry's public write set and its private one decrypted under the secret of its seqno (across a
 * rekey), packed; a wrong secret or a damaged entry stops it with its error.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Ledger, replayedEntriesOf, type Disk, type EntryReplayRequest } from '../../src/ledger/index.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { ENTRIES, SECRETS, writePrivateLedger } from './private-ledger.js';

function requestOf(disk: Disk, first: number, last: number, secrets = SECRETS): EntryReplayRequest {
  const ledger = new Ledger({ disk, directory: 'ledger' });
  ledger.open();
  try {
    return { ...ledger.locateEntries(first, last), secrets };
  } finally {
    ledger.close();
  }
}

test('entries are replayed with their public write set and their private one decrypted under the secret of their seqno', () => {
  const disk = new MemoryDisk();
  const written = writePrivateLedger(disk, 'ledger');
  for (const [first, last] of [[1, ENTRIES], [1, 1], [240, 260], [250, 250], [399, 400]] as const) {
    const { packed, bounds, frameBytes } = replayedEntriesOf(requestOf(disk, first, last), (path, at, length) => disk.read(path, at, length));
    assert.equal(bounds.length, 2 * (last - first + 1) + 1);
    assert.ok(frameBytes > packed.byteLength, 'frames are larger than the write sets they carry');
    for (let seqno = first, i = 0; seqno <= last; seqno++, i += 2) {
      assert.equal(Buffer.compare(packed.subarray(bounds[i]!, bounds[i + 1]!), written[seqno - 1]!.publicBytes), 0, `public write set of ${seqno}`);
      assert.equal(Buffer.compare(packed.subarray(bounds[i + 1]!, bounds[i + 2]!), written[seqno - 1]!.privatePlain), 0, `private write set of ${seqno}`);
      assert.equal(bounds[i + 2]! > bounds[i + 1]!, seqno % 5 !== 0, `entry ${seqno} wrote a private map`);
    }
  }
});

test('a wrong secret, or a damaged entry, stops the replay with its error', () => {
  const disk = new MemoryDisk();
  writePrivateLedger(disk, 'ledger');
  const read = (path: string, at: number, length: number) => disk.read(path, at, length);
  const wrong = [SECRETS[0]!, { fromSeqno: 250, secret: new Uint8Array(32).fill(9) }];
  assert.throws(() => replayedEntriesOf(requestOf(disk, 200, 300, wrong), read), (e: unknown) => (e as { code?: string }).code === 'LedgerDecryptionFailed' && /3\.251/.test((e as Error).message));
  const request = requestOf(disk, 1, ENTRIES);
  const span = request.spans[0]!;
  const damaged = (path: string, at: number, length: number) => {
    const bytes = new Uint8Array(disk.read(path, at, length));
    if (path === span.path && at <= span.startBytes + 5000 && at + bytes.byteLength > span.startBytes + 5000) bytes[span.startBytes + 5000 - at]! ^= 0xff;
    return bytes;
  };
  assert.throws(() => replayedEntriesOf(request, damaged), (e: unknown) => (e as { code?: string }).code === 'LedgerCorrupted');
});
