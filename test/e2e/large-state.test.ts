/**
 * End to end: snapshots of a growing state taken while clients write, on three real node
 * processes with the default election timeout. Every node packs each snapshot over many turns of
 * its event loop and has it written by its worker thread, the snapshots are byte-identical on all
 * nodes (evidence recorded some transactions after the snapshot point), and no election happens
 * while they are taken: no view change, no write refused. GET /node/metrics reports the
 * event-loop delay and the snapshot generation. A backup restarted on that ledger replays it over
 * many turns, answering GET /node/state meanwhile, catches up, and verifies and acknowledges the
 * primary's signatures again.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { toHex } from '../../src/base/bytes.js';
import { sha256 } from '../../src/crypto/index.js';
import { parseSnapshotFileName } from '../../src/ledger/index.js';
import { startNetwork, until, type TestNetwork } from '../../src/testing/network.js';
import { spawnNode, startedNode, type StartedNode } from '../../src/testing/node-process.js';
import { HttpsClient } from '../../src/platform/https-client.js';
import { snapshotSliceEntriesMax } from '../../src/node/limits.js';

/** Records written; several slices' worth, so that every snapshot past the first few is sliced. */
const RECORDS = 20_000;
/** A snapshot taken past this seqno holds more records than one slice packs at most. */
const LARGE_SEQNO = 12_000;
const CONCURRENCY = 32;
const MESSAGE = 'x'.repeat(200);

interface Metrics {
  event_loop: { resolution_ms: number; since_start: { max_ms: number; p99_ms: number; samples: number }; recent: { max_ms: number } };
  snapshots: { written: number; in_progress: number; writer: string; last?: { seqno: number; size_bytes: number; slices: number; entries_per_slice_max: number } };
}

async function metricsOf(node: StartedNode): Promise<Metrics> {
  const answer = await node.client.request('GET', '/node/metrics', { timeoutMs: 10_000 });
  assert.equal(answer.status, 200, answer.text);
  return answer.body as Metrics;
}

async function viewOf(node: StartedNode): Promise<number> {
  const answer = await node.client.request('GET', '/node/consensus', { timeoutMs: 10_000 });
  assert.equal(answer.status, 200, answer.text);
  return (answer.body as { current_view: number }).current_view;
}

function committedSnapshots(node: StartedNode): string[] {
  const dir = join(node.dir, 'snapshots');
  if (!existsSync(dir)) return [];
  return readdirSync(dir).filter((f) => parseSnapshotFileName(f)?.committed === true);
}

describe('a growing state', () => {
  let network: TestNetwork | undefined;
  after(async () => {
    await network?.stopAll();
  });

  test('snapshots taken under writes are sliced and written off the event loop; no election, no write refused', async () => {
    // A snapshot every 3,000 transactions whatever the ledger since (min_ledger_fraction 0): several
    // snapshots of a state large enough to be sliced.
    network = await startNetwork(3, { snapshots: { tx_count: 3000, min_interval: '0s', min_ledger_fraction: 0 }, ledger: { chunk_size: '64MB' } });
    const primary = await network.primary();
    const viewBefore = await viewOf(primary);
    let next = 0;
    const refused: string[] = [];
    const writer = async () => {
      for (let id = next++; id < RECORDS; id = next++) {
        const answer = await primary.client.request('POST', '/app/log/private', { body: { id, msg: MESSAGE }, identity: primary.user, timeoutMs: 30_000 });
        if (answer.status !== 200) refused.push(`${id}: ${answer.status} ${answer.text}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, writer));
    assert.deepEqual(refused.slice(0, 5), [], `${refused.length} writes refused`);

    // Every node wrote the snapshots of the larger states over many slices, on its worker thread.
    for (const node of network.nodes) {
      const metrics = await until(`a snapshot of the full state on ${node.address}`, async () => {
        const m = await metricsOf(node);
        return m.snapshots.last !== undefined && m.snapshots.last.seqno > LARGE_SEQNO && m.snapshots.in_progress === 0 ? m : undefined;
      }, 60_000);
      assert.equal(metrics.snapshots.writer, 'worker');
      assert.ok(metrics.snapshots.written >= 3, `${metrics.snapshots.written} snapshots written`);
      const last = metrics.snapshots.last!;
      assert.equal(last.entries_per_slice_max, snapshotSliceEntriesMax);
      assert.ok(LARGE_SEQNO * 0.9 > snapshotSliceEntriesMax, 'the test writes more records than one slice packs');
      assert.ok(last.slices >= 2, `the last snapshot was packed in ${last.slices} slices`);
      assert.ok(last.size_bytes > RECORDS * MESSAGE.length, `${last.size_bytes} bytes`);
      assert.equal(metrics.event_loop.resolution_ms, 10);
      assert.ok(metrics.event_loop.since_start.samples > 0 && Number.isFinite(metrics.event_loop.since_start.max_ms));
      // No election while the snapshots were taken.
      assert.equal(await viewOf(node), viewBefore, `view on ${node.address}`);
    }
    // The committed snapshots are byte-identical on every node, named by where their evidence landed.
    const names = await until('a committed snapshot of the full state on every node', async () => {
      const lists = network!.nodes.map((n) => new Set(committedSnapshots(n)));
      const common = [...lists[0]!].filter((name) => lists.every((l) => l.has(name)) && parseSnapshotFileName(name)!.seqno > LARGE_SEQNO);
      return common.length > 0 ? common : undefined;
    }, 60_000);
    for (const name of names) {
      const digests: string[] = network.nodes.map((n: StartedNode) => toHex(sha256(readFileSync(join(n.dir, 'snapshots', name)))));
      assert.equal(new Set(digests).size, 1, `${name} differs between nodes`);
    }
  });

  test('a backup restarted on that ledger answers GET /node/state while it replays it, then catches up', async () => {
    assert.ok(network !== undefined, 'the network of the test before');
    const primary = await network.primary();
    const index = network.nodes.findIndex((n) => n !== primary);
    const backup = network.nodes[index]!;
    assert.equal(await backup.stop(), 0);
    const addressesFile = join(backup.dir, 'rpc_addresses.json');
    rmSync(addressesFile, { force: true });
    const spawned = spawnNode(backup.configPath, backup.dir);
    // Stopped by the network's stopAll from here on.
    network.nodes[index] = startedNode({ ...backup, spawned });
    const address = await until('the restarted node\'s RPC address', async () => (existsSync(addressesFile) ? Object.values(JSON.parse(readFileSync(addressesFile, 'utf8')) as Record<string, string>)[0] : undefined), 60_000, 5);
    const client = new HttpsClient(address, backup.serviceCertificatePem);
    // Every state the node reports from its first answer until it is part of the network again.
    const states: string[] = [];
    try {
      await until('the restarted node to be part of the network', async () => {
        const answer = await client.request('GET', '/node/state', { timeoutMs: 30_000 }).catch(() => undefined);
        if (answer?.status === 200) states.push(answer.body.state as string);
        return states.at(-1) === 'PartOfNetwork' ? true : undefined;
      }, 120_000, 5);
    } finally {
      client.close();
    }
    // The ledger holds ~20,000 entries to replay: the node answered while it did (one turn would
    // have replayed them all before the server could answer anything but PartOfNetwork).
    const before = states.filter((s) => s !== 'PartOfNetwork');
    assert.ok(before.length >= 1, `states reported during the restart: ${states.join(', ')}`);
    assert.deepEqual([...new Set(before)], ['Initialized']);
    const restarted = startedNode({ ...backup, address, spawned });
    network.nodes[index] = restarted;
    const commit = async (node: StartedNode) => Number(String((await node.client.request('GET', '/node/commit', { timeoutMs: 10_000 })).body.transaction_id).split('.')[1]);
    const target = await commit(primary);
    assert.ok(target > RECORDS);
    await until('the restarted backup to catch up', async () => ((await commit(restarted)) >= target ? true : undefined), 60_000);
    assert.equal(await viewOf(primary), await viewOf(restarted));

    // Restarted on a ledger after snapshots, the backup verifies the primary's signatures beside its
    // syncs again, and acknowledges them: a committed write is held by both backups.
    const written = await primary.client.request('POST', '/app/log/private', {
      body: { id: RECORDS, msg: MESSAGE },
      identity: primary.user,
      headers: { 'x-covenant-consistency': 'committed' },
      timeoutMs: 30_000,
    });
    assert.equal(written.status, 200, written.text);
    const seqno = Number(String(written.headers['x-covenant-transaction-id']).split('.')[1]);
    await until('both backups to acknowledge the committed write', async () => {
      const acks = (await primary.client.request('GET', '/node/consensus', { timeoutMs: 10_000 })).body.acks as Record<string, { seqno: number }>;
      return Object.values(acks).length === 2 && Object.values(acks).every((a) => a.seqno >= seqno) ? true : undefined;
    });
    const verified = (await restarted.client.request('GET', '/node/consensus', { timeoutMs: 10_000 })).body.signatures_verified;
    assert.ok(verified.while_syncing >= 1, `the restarted backup verified signatures while syncing (${JSON.stringify(verified)})`);
  });
});
