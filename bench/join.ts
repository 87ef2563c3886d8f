/**
 * Time for a node to join a network holding N committed transactions, replicating the whole
 * ledger versus starting from a committed snapshot (only the suffix after it is replicated).
 * Prints one JSON object.
 *
 *   node dist/bench/join.js [--transactions N] [--concurrency C]
 *   node dist/bench/join.js --transactions 1000000     (the large case; takes long)
 */
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseSnapshotFileName } from '../src/ledger/index.js';
import { joinOptionsOf, removeDir, startJoiningNode, startNode, type StartedNode } from '../src/testing/node-process.js';
import { until } from '../src/testing/network.js';

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

const transactions = flag('transactions', 20_000);
const concurrency = flag('concurrency', 64);
const CONFIG = { snapshots: { tx_count: 100_000_000 }, ledger_signatures: { tx_count: 5000, delay: '20ms' } };

async function load(node: StartedNode): Promise<void> {
  let next = 0;
  const worker = async () => {
    for (;;) {
      const id = next++;
      if (id >= transactions) return;
      const answer = await node.client.request('POST', '/app/log/private', { body: { id, msg: `join bench ${id}` }, identity: node.user });
      if (answer.status !== 200) throw new Error(`write ${id}: ${answer.status} ${answer.text}`);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
}

async function lastCommitted(node: StartedNode): Promise<number> {
  const commit = await node.client.request('GET', '/node/commit');
  return Number(String(commit.body.transaction_id).split('.')[1]);
}

/**
 * Starts a joiner and measures until its commit reaches `target`. The joiner keeps running: it is
 * a trusted member of the configuration now, and stopping it would leave the network without a
 * majority for the next join.
 */
async function timeJoin(origin: StartedNode, dir: string, target: number): Promise<{ seconds: number; startupSeqno: number; joiner: StartedNode }> {
  const started = process.hrtime.bigint();
  const joiner = await startJoiningNode({
    ...joinOptionsOf(origin),
    dir,
    configPatch: CONFIG,
    readyTimeoutMs: 3_600_000,
  });
  await until('the joiner to catch up', async () => ((await lastCommitted(joiner)) >= target ? true : undefined), 3_600_000, 50);
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const state = await joiner.client.request('GET', '/node/state');
  return { seconds, startupSeqno: state.body.startup_seqno as number, joiner };
}

async function main(): Promise<void> {
  const origin = await startNode({ configPatch: CONFIG });
  const joiners: StartedNode[] = [];
  try {
    const loadStarted = process.hrtime.bigint();
    await load(origin);
    const loadSeconds = Number(process.hrtime.bigint() - loadStarted) / 1e9;
    // A snapshot of everything written, then a short suffix after it.
    const create = await origin.client.request('POST', '/node/snapshot:create');
    if (create.status !== 204) throw new Error(`snapshot:create answered ${create.status}`);
    await origin.client.request('POST', '/app/log/private', { body: { id: transactions, msg: 'suffix' }, identity: origin.user });
    const snapshotsDir = join(origin.dir, 'snapshots');
    const snapshot = await until(
      'a committed snapshot',
      async () => (existsSync(snapshotsDir) ? readdirSync(snapshotsDir).find((f) => parseSnapshotFileName(f)?.committed) : undefined),
      600_000,
      50,
    );
    const target = await lastCommitted(origin);

    const withoutSnapshot = await timeJoin(origin, mkdtempSync(join(tmpdir(), 'covenant-bench-join-')), target);
    joiners.push(withoutSnapshot.joiner);
    const dir = mkdtempSync(join(tmpdir(), 'covenant-bench-join-'));
    mkdirSync(join(dir, 'snapshots'));
    copyFileSync(join(snapshotsDir, snapshot), join(dir, 'snapshots', snapshot));
    const withSnapshot = await timeJoin(origin, dir, target);
    joiners.push(withSnapshot.joiner);

    process.stdout.write(
      JSON.stringify({
        bench: 'join',
        committed_transactions: target,
        load_seconds: Number(loadSeconds.toFixed(2)),
        snapshot: snapshot,
        join_without_snapshot_seconds: Number(withoutSnapshot.seconds.toFixed(2)),
        join_with_snapshot_seconds: Number(withSnapshot.seconds.toFixed(2)),
        with_snapshot_startup_seqno: withSnapshot.startupSeqno,
      }) + '\n',
    );
  } finally {
    for (const node of [...joiners, origin]) {
      await node.stop();
      removeDir(node.dir);
    }
  }
}

await main();
