/**
 * Linearizable reads on three real nodes (x-covenant-consistency: linearizable): any node answers
 * (a backup forwards to the primary), the answer reflects every write committed before the read
 * began and names committed state; a primary frozen while the others elect a new one and commit
 * never answers such a read with what it held before.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseTxId } from '../../src/base/ids.js';
import { startNetwork, until } from '../../src/testing/network.js';
import type { StartedNode } from '../../src/testing/node-process.js';

const LINEARIZABLE = { 'x-covenant-consistency': 'linearizable' };

async function writeCommitted(node: StartedNode, id: number, msg: string): Promise<string> {
  const answer = await node.client.request('POST', '/app/log/private', { body: { id, msg }, identity: node.user, headers: { 'x-covenant-consistency': 'committed' } });
  assert.equal(answer.status, 200, answer.text);
  return String(answer.headers['x-covenant-transaction-id']);
}

test('a linearizable read on any node sees the last committed write at once, from committed state; bad values are refused', async () => {
  const network = await startNetwork(3);
  try {
    const primary = await network.primary();
    for (let round = 0; round < 3; round++) {
      const written = parseTxId(await writeCommitted(primary, 3, `round ${round}`))!;
      // Straight after the write's answer, on every node, backups included (no waiting for replication).
      for (const node of network.nodes) {
        const read = await node.client.request('GET', '/app/log/private?id=3', { identity: node.user, headers: LINEARIZABLE });
        assert.equal(read.status, 200, read.text);
        assert.equal(read.body.msg, `round ${round}`);
        const readId = String(read.headers['x-covenant-transaction-id']);
        assert.ok(parseTxId(readId)!.seqno >= written.seqno, `read at ${readId} covers the write ${written.view}.${written.seqno}`);
        // It read committed state: the primary says so at once.
        assert.equal((await primary.client.request('GET', `/app/tx?transaction_id=${readId}`)).body.status, 'Committed');
      }
    }
    const missing = await network.nodes[1]!.client.request('GET', '/app/log/public?id=404', { identity: network.nodes[1]!.user, headers: LINEARIZABLE });
    assert.equal(missing.status, 404);
    assert.match(String(missing.headers['x-covenant-transaction-id']), /^\d+\.\d+$/);
    // On a write, linearizable means committed: answered once committed.
    const write = await primary.client.request('POST', '/app/log/public', { body: { id: 1, msg: 'x' }, identity: primary.user, headers: LINEARIZABLE });
    assert.equal(write.status, 200, write.text);
    assert.equal((await primary.client.request('GET', `/app/tx?transaction_id=${String(write.headers['x-covenant-transaction-id'])}`)).body.status, 'Committed');
    const bad = await primary.client.request('GET', '/app/log/private?id=3', { identity: primary.user, headers: { 'x-covenant-consistency': 'committed' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'InvalidHeaderValue');
  } finally {
    await network.stopAll();
  }
});

test('a primary frozen while a new one commits never answers a linearizable read with its old state', async () => {
  const network = await startNetwork(3);
  try {
    const old = await network.primary();
    const oldId = (await old.client.request('GET', '/node/consensus')).body.primary_id as string;
    await writeCommitted(old, 9, 'before the freeze');
    old.process.kill('SIGSTOP');
    try {
      const others = network.nodes.filter((n) => n !== old);
      const newPrimary = await until('a new primary while the old one is frozen', async () => {
        for (const node of others) {
          const c = await node.client.request('GET', '/node/consensus', { timeoutMs: 1000 });
          if (c.body.role === 'Primary' && c.body.primary_id !== oldId) return node;
        }
        return undefined;
      });
      const after = parseTxId(await writeCommitted(newPrimary, 9, 'after the freeze'))!;
      // Sent while the old primary is frozen: it finds the read waiting when it resumes, with the
      // new view's messages. It still believes it leads, and holds the old value.
      const pending = old.client.request('GET', '/app/log/private?id=9', { identity: old.user, headers: LINEARIZABLE, timeoutMs: 20_000 });
      const stale = old.client.request('GET', '/app/log/private?id=9', { identity: old.user, timeoutMs: 20_000 });
      old.process.kill('SIGCONT');
      const [answer, defaultRead] = await Promise.all([pending, stale]);
      if (answer.status === 200) {
        assert.equal(answer.body.msg, 'after the freeze', 'a linearizable read answered 200 reflects the write committed before it');
        assert.ok(parseTxId(String(answer.headers['x-covenant-transaction-id']))!.seqno >= after.seqno);
      } else {
        // Refused, retryable: it could not confirm that it still leads.
        assert.equal(answer.status, 503, answer.text);
        assert.ok(['ReadNotConfirmed', 'NotPrimary', 'NoPrimary'].includes(answer.body.error.code), answer.text);
        assert.ok(answer.headers['retry-after'] !== undefined || answer.body.error.code !== 'ReadNotConfirmed');
      }
      // The default read is served at once from whatever the node holds (possibly the old value).
      assert.ok(defaultRead.status === 200, defaultRead.text);
      // Retried, the read through the deposed node is forwarded to the new primary and sees the new value.
      const retried = await until('a linearizable read through the deposed node', async () => {
        const r = await old.client.request('GET', '/app/log/private?id=9', { identity: old.user, headers: LINEARIZABLE });
        return r.status === 200 ? r : undefined;
      });
      assert.equal(retried.body.msg, 'after the freeze');
    } finally {
      old.process.kill('SIGCONT');
    }
  } finally {
    await network.stopAll();
  }
});
