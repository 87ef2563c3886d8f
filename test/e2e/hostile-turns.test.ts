/**
 * End to end: 64 connections pipelining committed writes (64 in flight each) against one real
 * node. Node's HTTP server hands it every request it parsed in one pass; one event-loop turn
 * starts at most 256 of them, the rest wait for later turns, and between two batches the node keeps
 * committing: a normal client's committed writes go through and the flood's are answered.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { normalClientInWorker, pipelineFlood } from '../../src/testing/hostile-clients.js';
import { until } from '../../src/testing/network.js';

const CONNECTIONS = 64;
const DEPTH = 64;

describe('a node under a flood of pipelined committed writes', () => {
  let node: StartedNode;
  let host: string;
  let port: number;

  before(async () => {
    node = await startNode({
      configPatch: {
        rpc_interfaces: { primary: { max_pipelined_requests: DEPTH, max_requests_per_second_per_address: 1_000_000 } },
      },
    });
    const i = node.address.lastIndexOf(':');
    host = node.address.slice(0, i);
    port = Number(node.address.slice(i + 1));
  });

  after(async () => {
    const code = await node.stop();
    assert.equal(code, 0, `node stops cleanly on SIGTERM:\n${node.output()}`);
    removeDir(node.dir);
  });

  test('one turn starts at most 256 requests, the rest run in later turns; commits go on and a normal client is served', { timeout: 120_000 }, async (t) => {
    const body = JSON.stringify({ id: 8, msg: 'flood' });
    const write = Buffer.from(
      `POST /app/log/private HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nx-covenant-consistency: committed\r\n\r\n${body}`,
    );
    const user = { cert: node.user.certificatePem, key: node.user.privateKeyPem };
    const flood = pipelineFlood({ host, port, ca: node.serviceCertificatePem, ...user }, { connections: CONNECTIONS, depth: DEPTH, request: write, localAddresses: ['127.0.0.2', '127.0.0.4'] });
    const commitBefore = (await node.client.request('GET', '/node/commit')).body.transaction_id as string;
    try {
      const client = normalClientInWorker(
        { host, port, ca: node.serviceCertificatePem, ...user, localAddress: '127.0.0.3' },
        { method: 'POST', path: '/app/log/private', headers: { 'content-type': 'application/json', 'x-covenant-consistency': 'committed' }, body: JSON.stringify({ id: 9, msg: 'normal' }), expected: 200 },
        50,
      );
      await until(
        'requests deferred to later turns',
        async () => ((await node.client.request('GET', '/node/metrics')).body.request_turns.deferred >= 1000 ? true : undefined),
        90_000,
        200,
      );
      const seen = await client.stop();
      const counts = flood.counts();
      const turns = (await node.client.request('GET', '/node/metrics')).body.request_turns;
      t.diagnostic(`turns: ${JSON.stringify(turns)}; normal client: ${JSON.stringify(seen)}; attackers: ${JSON.stringify(counts.statuses)}`);
      assert.equal(turns.requests_per_turn_max, 256);
      assert.ok(turns.peak_per_turn <= 256, `at most 256 requests started in one turn: ${JSON.stringify(turns)}`);
      assert.ok(turns.peak_waiting > 0);
      assert.ok((counts.statuses['200'] ?? 0) > 0, 'the flood\u2019s writes were committed and answered');
      assert.ok(seen.answered > 0, `the normal client's committed writes went through: ${JSON.stringify(seen)}`);
    } finally {
      flood.stop();
    }
    const commitAfter = (await node.client.request('GET', '/node/commit')).body.transaction_id as string;
    assert.ok(Number(commitAfter.split('.')[1]) > Number(commitBefore.split('.')[1]), 'the commit advanced');
    assert.equal((await node.client.request('GET', '/node/consensus')).body.current_view, 1, 'the node kept its view');
  });
});
