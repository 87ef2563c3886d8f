/**
 * End to end: files_cleanup on a real node process. max_snapshots keeps the newest committed
 * snapshots; max_committed_ledger_chunks deletes a committed chunk only with an identical copy in
 * a read-only ledger directory and only when it ends before the newest committed snapshot (or
 * when there is no committed snapshot at all); deleted chunks are still served from the copy.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseChunkName, parseSnapshotFileName } from '../../src/ledger/index.js';
import { removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { until } from '../../src/testing/network.js';

const FAST = {
  ledger_signatures: { delay: '10ms' },
  ledger: { chunk_size: '2KB', read_only_directories: ['ledger-ro'] },
};

async function write(node: StartedNode, id: number): Promise<void> {
  const answer = await node.client.request('POST', '/app/log/public', { body: { id, msg: `retained ${id} ${'x'.repeat(100)}` }, identity: node.user });
  assert.equal(answer.status, 200, answer.text);
}

function committedSnapshots(node: StartedNode): number[] {
  const dir = join(node.dir, 'snapshots');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .map((f) => parseSnapshotFileName(f))
    .filter((p) => p?.committed)
    .map((p) => p!.seqno)
    .sort((a, b) => a - b);
}

function committedChunks(node: StartedNode): { name: string; first: number; last: number }[] {
  return readdirSync(join(node.dir, 'ledger'))
    .filter((f) => f.startsWith('ledger_') && f.endsWith('.committed'))
    .map((name) => {
      const parsed = parseChunkName(name);
      return { name, first: parsed.first, last: parsed.last! };
    })
    .sort((a, b) => a.first - b.first);
}

function logCount(node: StartedNode, pattern: RegExp): number {
  return node.output().split('\n').filter((l) => pattern.test(l)).length;
}

describe('files cleanup', () => {
  const nodes: StartedNode[] = [];
  after(async () => {
    for (const n of nodes) {
      await n.stop();
      removeDir(n.dir);
    }
  });

  test('max_snapshots keeps the newest; chunks go only with an identical read-only copy and before the newest snapshot', async () => {
    const node = await startNode({
      configPatch: { ...FAST, snapshots: { tx_count: 15 }, files_cleanup: { interval: '100ms', max_snapshots: 2, max_committed_ledger_chunks: 2 } },
    });
    nodes.push(node);
    mkdirSync(join(node.dir, 'ledger-ro'), { recursive: true });
    // A snapshot point waits until the previous snapshot is written and its evidence recorded, so
    // how many 80 writes make depends on the machine's speed: write on (one write a look) until three were committed.
    let written = 0;
    for (; written < 80; written++) await write(node, written);
    await until('snapshots cleaned down to two', async () => {
      const taken = logCount(node, /snapshot at \d+ committed/);
      if (taken > 2 && committedSnapshots(node).length === 2 && /files cleanup: deleted snapshots \[snapshot/.test(node.output())) return true;
      if (taken <= 2) await write(node, written++);
      return undefined;
    }, 60_000, 50);
    const kept = committedSnapshots(node);
    const all = [...node.output().matchAll(/snapshot at (\d+) committed/g)].map((m) => Number(m[1]));
    assert.deepEqual(kept, all.sort((a, b) => a - b).slice(-2), 'the two newest snapshots are kept');

    // The same cycles ran over the chunks: without read-only copies none was deleted.
    let before = committedChunks(node);
    assert.ok(before.length > 2, `more committed chunks (${before.length}) than the limit`);
    assert.ok(!/ledger chunks \[ledger_/.test(node.output()), 'no chunk deleted without an identical copy');

    // Copy every committed chunk to the read-only directory, one of them altered, once no snapshot is in progress.
    await until('no snapshot in progress', async () =>
      readdirSync(join(node.dir, 'snapshots')).some((f) => parseSnapshotFileName(f)?.committed === false) ? undefined : true,
    );
    before = committedChunks(node);
    const altered = before[0]!;
    for (const chunk of before) {
      const bytes = readFileSync(join(node.dir, 'ledger', chunk.name));
      if (chunk === altered) bytes[bytes.length - 1]! ^= 1;
      writeFileSync(join(node.dir, 'ledger-ro', chunk.name), bytes);
    }
    // Each deletion names the newest committed snapshot it was checked against (later ones may follow).
    const deleted = await until('chunks deleted', async () => {
      const found = [...node.output().matchAll(/ledger chunks \[(ledger_[^\]]*)\] \(newest committed snapshot (\d+)\)/g)].flatMap((m) =>
        m[1]!.split(', ').map((name) => ({ name, newestSnapshot: Number(m[2]) })),
      );
      return found.length > 0 ? found : undefined;
    });
    const snapshotsTaken = [...node.output().matchAll(/snapshot at (\d+) committed/g)].map((m) => Number(m[1]));
    for (const { name, newestSnapshot } of deleted) {
      assert.ok(snapshotsTaken.includes(newestSnapshot), `${newestSnapshot} is a snapshot this node took`);
      const parsed = parseChunkName(name);
      assert.ok(parsed.last! < newestSnapshot, `${name} ends before the newest snapshot ${newestSnapshot}`);
      assert.notEqual(name, altered.name, 'a chunk whose copy differs is kept');
      assert.ok(!existsSync(join(node.dir, 'ledger', name)));
    }
    assert.ok(existsSync(join(node.dir, 'ledger', altered.name)));
    const newestSnapshot = Math.max(...committedSnapshots(node));
    const protectedChunks = committedChunks(node).filter((c) => c.last >= newestSnapshot);
    assert.ok(protectedChunks.length > 0, 'chunks at or after the newest snapshot stay');

    // A deleted chunk is still served from its read-only copy, and the node keeps working.
    const first = deleted[0]!.name;
    const chunkOf = parseChunkName(first);
    const download = await node.client.request('GET', `/node/ledger_chunk/${first}`);
    assert.equal(download.status, 200);
    assert.equal(Number(download.headers['content-length']), readFileSync(join(node.dir, 'ledger-ro', first)).length);
    assert.ok(chunkOf.first >= 1);
    for (let i = 100; i < 110; i++) await write(node, i);
  });

  test('with no committed snapshot, chunks with identical copies are deleted down to the limit', async () => {
    const node = await startNode({ configPatch: { ...FAST, files_cleanup: { interval: '100ms', max_committed_ledger_chunks: 3 } } });
    nodes.push(node);
    mkdirSync(join(node.dir, 'ledger-ro'), { recursive: true });
    // Chunks end at the first signature past 2KB, so how many writes make six depends on timing:
    // write until there are.
    let id = 0;
    const chunks = await until('several committed chunks', async () => {
      await write(node, id++);
      const c = committedChunks(node);
      return c.length > 5 ? c : undefined;
    });
    for (const chunk of chunks) copyFileSync(join(node.dir, 'ledger', chunk.name), join(node.dir, 'ledger-ro', chunk.name));
    await until('chunks deleted down to the limit', async () => (committedChunks(node).length === 3 ? true : undefined));
    const remaining = committedChunks(node);
    const deleted = chunks.filter((c) => !remaining.some((r) => r.name === c.name));
    assert.ok(deleted.length >= chunks.length - 3, 'deleted down to the limit');
    assert.ok(deleted.every((d) => d.last < remaining[0]!.first), 'the oldest are deleted first');
    assert.equal(committedSnapshots(node).length, 0);
  });
});
