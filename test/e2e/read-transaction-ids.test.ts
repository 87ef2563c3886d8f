/**
 * Reads say which state they read: every answer of a read endpoint carries
 * x-covenant-transaction-id, the id of the last transaction applied before the read, so that a
 * client can tell a read of committed state (GET /app/tx says Committed) from a read of a write
 * that may still be rolled back.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { parseTxId } from '../../src/base/ids.js';
import { startNetwork, until, waitCommitted } from '../../src/testing/network.js';

test('reads on the primary and on a backup carry the id of the state they read, 404s included', async () => {
  const network = await startNetwork(3);
  try {
    const primary = await network.primary();
    const backup = network.nodes.find((n) => n !== primary)!;
    const write = await primary.client.request('POST', '/app/log/private', { body: { id: 7, msg: 'seven' }, identity: primary.user });
    assert.equal(write.status, 200, write.text);
    const written = parseTxId(String(write.headers['x-covenant-transaction-id']))!;

    // On the primary, right after the write: the read reads at least that transaction.
    const own = await primary.client.request('GET', '/app/log/private?id=7', { identity: primary.user });
    assert.equal(own.status, 200);
    const ownId = parseTxId(String(own.headers['x-covenant-transaction-id']));
    assert.ok(ownId && ownId.seqno >= written.seqno && ownId.view === written.view, `read at ${own.headers['x-covenant-transaction-id']}, wrote ${written.view}.${written.seqno}`);

    // On a backup: once the record is there, the read's id covers the write, and becomes Committed.
    const replicated = await until('the record on a backup', async () => {
      const answer = await backup.client.request('GET', '/app/log/private?id=7', { identity: backup.user });
      return answer.status === 200 ? answer : undefined;
    });
    assert.equal(replicated.body.msg, 'seven');
    const readId = String(replicated.headers['x-covenant-transaction-id']);
    assert.ok(parseTxId(readId)!.seqno >= written.seqno);
    await waitCommitted(backup, readId);

    const missing = await backup.client.request('GET', '/app/log/public?id=999', { identity: backup.user });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.error.code, 'ResourceNotFound');
    assert.match(String(missing.headers['x-covenant-transaction-id']), /^\d+\.\d+$/, 'a read that finds nothing says what it read too');
  } finally {
    await network.stopAll();
  }
});

test('a write that asks for it is answered only once committed, through a backup too; a bad value is refused', async () => {
  const network = await startNetwork(3);
  try {
    const primary = await network.primary();
    const backup = network.nodes.find((n) => n !== primary)!;
    for (const node of [primary, backup]) {
      const write = await node.client.request('POST', '/app/log/public', {
        body: { id: 11, msg: `committed through ${node === primary ? 'the primary' : 'a backup'}` },
        identity: node.user,
        headers: { 'x-covenant-consistency': 'committed' },
      });
      assert.equal(write.status, 200, write.text);
      const txId = String(write.headers['x-covenant-transaction-id']);
      // Already committed when answered: the primary's status says so at once.
      assert.equal((await primary.client.request('GET', `/app/tx?transaction_id=${txId}`)).body.status, 'Committed');
    }
    const bad = await primary.client.request('POST', '/app/log/public', { body: { id: 12, msg: 'x' }, identity: primary.user, headers: { 'x-covenant-consistency': 'eventually' } });
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'InvalidHeaderValue');
    assert.equal((await primary.client.request('GET', '/app/log/public?id=12', { identity: primary.user })).status, 404, 'nothing written');
  } finally {
    await network.stopAll();
  }
});
