/**
 * End to end: receipts of large early entries, whose Merkle block the node has compacted, are
 * built while the node keeps answering other clients. The node's leaf-reading worker answers
 * late (COVENANT_BUGGIFY_LEAF_READ_DELAY_MS), so that the re-read is still under way while a
 * normal client polls GET /node/commit; the test counts answers, it never measures time.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { verifyCoseReceipt, verifyReceipt } from '../../src/merkle/index.js';
import { removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const seqnoOf = (txId: string) => Number(txId.split('.')[1]);
const LARGE_WRITES = 24;
const LARGE_BYTES = 256 * 1024;

describe('receipts of large compacted entries', () => {
  let node: StartedNode;
  const large: string[] = [];

  before(async () => {
    node = await startNode({
      configPatch: {
        rpc_interfaces: { primary: { max_body_size: '512KB' } },
        ledger_signatures: { tx_count: 100, delay: '50ms' },
      },
      env: { COVENANT_BUGGIFY_LEAF_READ_DELAY_MS: '1000' },
    });
    const write = async (id: number, msg: string) => {
      const answer = await node.client.request('POST', '/app/log/public', { body: { id, msg }, identity: node.user, timeoutMs: 30_000 });
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      return answer.headers['x-covenant-transaction-id'] as string;
    };
    const msg = 'L'.repeat(LARGE_BYTES);
    for (let i = 0; i < LARGE_WRITES; i++) large.push(await write(i, msg));
    // Small writes until the first block (1024 seqnos) is complete and behind the commit: compacted.
    let last = large.at(-1)!;
    for (let batch = 0; seqnoOf(last) < 1100; batch++) {
      const txIds = await Promise.all(Array.from({ length: 32 }, (_, k) => write(10_000 + batch * 32 + k, 'small')));
      for (const txId of txIds) if (seqnoOf(txId) > seqnoOf(last)) last = txId;
    }
    for (;;) {
      if ((await node.client.request('GET', `/app/tx?transaction_id=${last}`)).body.status === 'Committed') break;
      await sleep(25);
    }
  });

  after(async () => {
    const code = await node.stop();
    assert.equal(code, 0, `node stops cleanly on SIGTERM:\n${node.output()}`);
    removeDir(node.dir);
  });

  test('GET /node/commit keeps being answered while the block is re-read; the receipts verify; the COSE receipt too', async () => {
    let settled = 0;
    const receipts = large.slice(2, 5).map((txId) =>
      node.client.request('GET', `/node/receipt?transaction_id=${txId}`, { timeoutMs: 60_000 }).finally(() => settled++),
    );
    let answeredMeanwhile = 0;
    while (settled < receipts.length) {
      const commit = await node.client.request('GET', '/node/commit', { timeoutMs: 5_000 });
      assert.equal(commit.status, 200);
      if (settled === 0) answeredMeanwhile++;
      await sleep(20);
    }
    assert.ok(answeredMeanwhile >= 3, `GET /node/commit answered ${answeredMeanwhile} times while the receipts waited for the re-read`);
    for (const answer of await Promise.all(receipts)) {
      assert.equal(answer.status, 200, JSON.stringify(answer.body));
      verifyReceipt(answer.body.receipt, node.serviceCertificatePem);
    }

    // Another transaction of the same block, now cached (test/node/receipts.test.ts checks that no
    // second re-read happens): its COSE receipt verifies too.
    const cose = await node.client.request('GET', `/node/receipt/cose?transaction_id=${large[10]}`);
    assert.equal(cose.status, 200);
    verifyCoseReceipt(new Uint8Array(cose.bytes), node.serviceCertificatePem);
  });
});
