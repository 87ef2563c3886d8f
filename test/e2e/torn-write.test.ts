/**
 * End to end: a backup killed with SIGKILL whose last ledger file is then torn (cut short by a few
 * bytes, or followed by garbage) restarts, drops the torn tail, and catches up from the primary.
 * Damage to a committed file is not a torn write: the node reports the file and offset and stops.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { appendFileSync, readdirSync, readFileSync, statSync, truncateSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parseChunkName } from '../../src/ledger/index.js';
import { joinOptionsOf, startJoiningNode, type StartedNode } from '../../src/testing/node-process.js';
import { startNetwork, until, type TestNetwork } from '../../src/testing/network.js';

const FAST = {
  ledger_signatures: { delay: '20ms' },
  consensus: { election_timeout: '500ms', message_timeout: '50ms' },
  ledger: { chunk_size: '4KB' },
};

async function write(node: StartedNode, id: number): Promise<void> {
  const answer = await node.client.request('POST', '/app/log/private', { body: { id, msg: `torn ${id} ${'y'.repeat(80)}` }, identity: node.user });
  assert.equal(answer.status, 200, answer.text);
}

/** The ledger file written last (the chunk in progress). */
function lastLedgerFile(node: StartedNode): string {
  const dir = join(node.dir, 'ledger');
  const files = readdirSync(dir)
    .filter((f) => f.startsWith('ledger_'))
    .sort((a, b) => parseChunkName(a).first - parseChunkName(b).first);
  return join(dir, files.at(-1)!);
}

async function restart(network: TestNetwork, index: number): Promise<StartedNode> {
  const old = network.nodes[index]!;
  const first = network.nodes[0]!;
  const restarted = await startJoiningNode({
    ...joinOptionsOf(first),
    dir: old.dir,
    configPatch: FAST,
  });
  network.nodes[index] = restarted;
  return restarted;
}

async function catchesUp(network: TestNetwork, node: StartedNode, id: number): Promise<void> {
  const primary = await network.primary();
  await write(primary, id);
  await until(`${node.address} reads write ${id}`, async () => {
    const read = await node.client.request('GET', `/app/log/private?id=${id}`, { identity: node.user });
    return read.status === 200 ? true : undefined;
  });
}

/**
 * Kills the backup at `index` at a moment when its last ledger file is a chunk in progress: if the
 * last entry it got happened to end a chunk that then committed, there is no such file, so the
 * backup is restarted, given one more write, and killed again.
 */
async function killWithChunkInProgress(network: TestNetwork, index: number, id: number): Promise<{ backup: StartedNode; last: string }> {
  for (let attempt = 0; ; attempt++) {
    const backup = network.nodes[index]!;
    await catchesUp(network, backup, id + attempt);
    await backup.kill();
    const last = lastLedgerFile(backup);
    if (!last.endsWith('.committed')) return { backup, last };
    assert.ok(attempt < 10, 'a chunk in progress within ten writes');
    await restart(network, index);
  }
}

describe('torn writes', () => {
  let network: TestNetwork | undefined;
  after(async () => {
    await network?.stopAll();
  });

  test('a backup recovers from a cut tail and from trailing garbage, and refuses a damaged committed file', async () => {
    network = await startNetwork(3, FAST);
    const primary = network.nodes[0]!;
    for (let i = 0; i < 40; i++) await write(primary, i);

    // Cut the last few bytes of the backup's last ledger file after a crash.
    const cut = await killWithChunkInProgress(network, 1, 100);
    truncateSync(cut.last, statSync(cut.last).size - 5);
    let backup = await restart(network, 1);
    assert.match(backup.output(), /torn tail cut at .*ledger_\d+/);
    await catchesUp(network, backup, 120);
    for (let i = 200; i < 210; i++) await write(primary, i);

    // Garbage after the last entry (a write that never completed).
    const garbage = await killWithChunkInProgress(network, 1, 130);
    appendFileSync(garbage.last, Buffer.from('garbage after the last entry, never synced'));
    backup = await restart(network, 1);
    assert.match(backup.output(), /torn tail cut at/);
    await catchesUp(network, backup, 150);

    // A committed file is never torn: damage there is reported with the file and offset.
    await backup.kill();
    const committed = readdirSync(join(backup.dir, 'ledger')).filter((f) => f.endsWith('.committed')).sort((a, b) => parseChunkName(a).first - parseChunkName(b).first)[0]!;
    const path = join(backup.dir, 'ledger', committed);
    const bytes = readFileSync(path);
    bytes[200]! ^= 0xff;
    writeFileSync(path, bytes);
    await assert.rejects(restart(network, 1), (e: Error) => {
      assert.match(e.message, new RegExp(`${committed.replace('.', '\\.')}.*offset \\d+`));
      return true;
    });
  });
});
