/**
 * The worker-thread entry replayer (src/platform/worker-entry-replayer.ts) on real files: the
 * same answers as replaying inline, whichever thread serves a request; a failure comes back with
 * its code; it works again after release(), and not after close().
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ledger, replayedEntriesOf, type EntryReplayRequest } from '../../src/ledger/index.js';
import { FsDisk } from '../../src/platform/fs-disk.js';
import { WorkerEntryReplayer } from '../../src/platform/worker-entry-replayer.js';
import { ENTRIES, SECRETS, writePrivateLedger } from '../ledger/private-ledger.js';

const codeOf = (e: unknown) => (e as { code?: string }).code;

test('ranges replayed on worker threads are the ranges replayed inline; failures keep their code; release and close', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-replay-'));
  const disk = new FsDisk();
  const replayer = new WorkerEntryReplayer({ threads: 2 });
  // The replayer's threads never keep a process alive (a node's server does): this test does.
  const keepAlive = setInterval(() => undefined, 1000);
  try {
    writePrivateLedger(disk, join(dir, 'ledger'));
    const ledger = new Ledger({ disk, directory: join(dir, 'ledger') });
    ledger.open();
    const requestOf = (first: number, last: number, secrets = SECRETS): EntryReplayRequest => ({ ...ledger.locateEntries(first, last), secrets });
    const ranges: [number, number][] = [[1, 100], [101, 249], [250, 250], [251, ENTRIES], [1, ENTRIES]];
    const answers = await Promise.all(ranges.map(([first, last]) => replayer.replayOf(requestOf(first, last))));
    ranges.forEach(([first, last], i) => {
      const inline = replayedEntriesOf(requestOf(first, last), (path, at, length) => disk.read(path, at, length));
      assert.deepEqual(answers[i]!.bounds, inline.bounds, `bounds of ${first}..${last}`);
      assert.equal(Buffer.compare(answers[i]!.packed, inline.packed), 0, `entries ${first}..${last}`);
      assert.equal(answers[i]!.frameBytes, inline.frameBytes);
    });
    const wrong = [SECRETS[0]!, { fromSeqno: 250, secret: new Uint8Array(32).fill(9) }];
    await assert.rejects(replayer.replayOf(requestOf(240, 260, wrong)), (e) => codeOf(e) === 'LedgerDecryptionFailed');
    replayer.release();
    const again = await replayer.replayOf(requestOf(1, 10));
    assert.equal(again.bounds.length, 21, 'a request after release starts the threads again');
    replayer.close();
    await assert.rejects(replayer.replayOf(requestOf(1, 10)), (e) => codeOf(e) === 'EntryReplayerClosed');
    ledger.close();
  } finally {
    clearInterval(keepAlive);
    replayer.close();
    disk.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
