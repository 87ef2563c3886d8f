/** The joiner's side: a 429 or 503 answer is waited out (Retry-After or join.retry_timeout, the longer), not a refusal. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import { requestJoin, type JoinerHost } from '../../src/node/join/joiner.js';
import type { JoinClient, JoinRequest } from '../../src/node/join.js';

const REQUEST = {} as JoinRequest;

function host(sleeps: number[]): JoinerHost {
  return {
    logger: new MemoryLogger(),
    nodeId: 'n1',
    retryTimeoutMs: 100,
    mayFetchSnapshot: false,
    resuming: false,
    stopped: () => false,
    sleep: async (ms) => void sleeps.push(ms),
    onPending: () => undefined,
    onServiceStatus: () => undefined,
    fetchSnapshot: async () => undefined,
  };
}

test('TooManyJoinRequests (429) and TooManyPendingNodes (503) are retried after Retry-After, or retry_timeout when longer', async () => {
  const answers = [
    { status: 429, body: { error: { code: 'TooManyJoinRequests', message: 'later' } }, retryAfterMs: 1000 },
    { status: 503, body: { error: { code: 'TooManyPendingNodes', message: 'later' } }, retryAfterMs: 60_000 },
    { status: 429, body: { error: { code: 'TooManyJoinRequests', message: 'later' } } },
    { status: 200, body: { node_id: 'n1', node_status: 'Trusted', network_info: { peers: [] } } },
  ];
  const client: JoinClient = { postJoin: async () => answers.shift()! };
  const sleeps: number[] = [];
  const joined = await requestJoin(host(sleeps), client, '127.0.0.1:1', REQUEST);
  assert.equal(joined?.attempts, 4);
  assert.deepEqual(sleeps, [1000, 60_000, 100]);
});
