/**
 * End to end: a second `covenant node` process on a running node's configuration is refused. It
 * exits with status 2 naming the process that holds the node's directories, having written
 * nothing; the running node keeps serving (writes commit) and its files are as they were. After a
 * crash (SIGKILL) the lock it left is stale, and the node started again resumes. For a Start node
 * and for a node that joined.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { LOCK_FILE_NAME, type LockHolder } from '../../src/platform/directory-lock.js';
import { restartNode, spawnNode, waitForExit, type StartedNode } from '../../src/testing/node-process.js';
import { startNetwork, until, waitCommitted } from '../../src/testing/network.js';

const FAST = { ledger_signatures: { delay: '20ms' }, consensus: { election_timeout: '500ms', message_timeout: '50ms' } };

/** The files of the node's folder outside its ledger and snapshots, by name: what a second process used to rewrite. */
function nodeFiles(node: StartedNode): Map<string, string> {
  const files = new Map<string, string>();
  for (const name of readdirSync(node.dir)) {
    if (statSync(join(node.dir, name)).isDirectory()) continue;
    files.set(name, readFileSync(join(node.dir, name), 'utf8'));
  }
  return files;
}

async function writeCommitted(primary: StartedNode, id: number, msg: string): Promise<string> {
  const write = await primary.client.request('POST', '/app/log/private', { body: { id, msg }, identity: primary.user });
  assert.equal(write.status, 200, write.text);
  const txId = write.headers['x-covenant-transaction-id'] as string;
  await waitCommitted(primary, txId);
  return txId;
}

/** Runs the node's configuration a second time: it must exit 2 naming the running process, the node's files untouched. */
async function secondProcessRefused(node: StartedNode): Promise<void> {
  const before = nodeFiles(node);
  const ledgerBefore = readdirSync(join(node.dir, 'ledger')).sort();
  const second = spawnNode(node.configPath, node.dir);
  const exited = waitForExit(second.process);
  // Without the lock the second process runs on (and takes the node over): stop it, and fail.
  const outcome = await Promise.race([exited, until('the second process to exit or to listen', async () => (/listening on/.test(second.output()) ? 'running' : undefined), 60_000)]);
  if (outcome === 'running') {
    second.process.kill('SIGKILL');
    await exited;
    assert.fail(`a second process on the node's configuration ran:\n${second.output()}`);
  }
  assert.equal(outcome, 2, second.output());
  assert.match(second.output(), new RegExp(`covenant node: the (ledger directory|node state folder|snapshots directory) \\S+ is in use by another covenant node, process ${node.process.pid} `));
  assert.doesNotMatch(second.output(), /listening|RPC interface/, 'it stopped before doing anything');
  assert.deepEqual(nodeFiles(node), before, 'node state, addresses, pid and certificates untouched');
  const holder = JSON.parse(readFileSync(join(node.dir, 'ledger', LOCK_FILE_NAME), 'utf8')) as LockHolder;
  assert.equal(holder.pid, node.process.pid, 'the lock is still the running node\'s');
  // The running node's ledger only grows: no file of it was removed or replaced by the second process.
  for (const name of ledgerBefore) {
    if (name.endsWith('.committed')) assert.ok(readdirSync(join(node.dir, 'ledger')).includes(name), name);
  }
}

test('a second process on a running node is refused with status 2 and the node keeps serving; after SIGKILL the node restarts and resumes', async () => {
  const network = await startNetwork(2, FAST);
  let [start, joiner] = network.nodes as [StartedNode, StartedNode];
  try {
    const first = await writeCommitted(start, 1, 'before the second process');

    for (const node of [start, joiner]) {
      await secondProcessRefused(node);
      // The running node was not orphaned: it is part of the network and commits what is written.
      const written = await writeCommitted(await network.primary(), 2, `after a second process on ${node.address}`);
      await waitCommitted(node, written);
      const state = await node.client.request('GET', '/node/state');
      assert.equal(state.body.state, 'PartOfNetwork', 'the running node is still part of the network');
    }
    const third = await writeCommitted(await network.primary(), 3, 'replicated');

    // A crash leaves the lock file behind, stale: the node started again takes it over and resumes.
    await joiner.kill();
    assert.equal((JSON.parse(readFileSync(join(joiner.dir, 'ledger', LOCK_FILE_NAME), 'utf8')) as LockHolder).pid, joiner.process.pid, 'the crashed process\'s lock is still there');
    joiner = await restartNode(joiner);
    network.nodes[1] = joiner;
    await waitCommitted(joiner, third);
    await start.kill();
    start = await restartNode(start);
    network.nodes[0] = start;
    await waitCommitted(start, first);
    assert.equal((await start.client.request('GET', '/app/log/private?id=1', { identity: start.user })).body.msg, 'before the second process');
    const primary = await network.primary();
    await writeCommitted(primary, 4, 'after the restarts');
    // Stopped cleanly, a node leaves no lock behind.
    assert.equal(await joiner.stop(), 0);
    assert.equal(readdirSync(join(joiner.dir, 'ledger')).includes(LOCK_FILE_NAME), false);
  } finally {
    await network.stopAll();
  }
});
