/**
 * The joiner's side: a 429 or 503 answer is waited out (Retry-After or join.retry_timeout, the
 * longer), not a refusal; the same snapshot failure is retried a bounded number of times.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import { requestJoin, type JoinerHost, type SnapshotFetchOutcome } from '../../src/node/join/joiner.js';
import { joinIdenticalFailuresMax } from '../../src/node/limits.js';
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
    fetchSnapshot: async () => ({ failure: 'no snapshot' }),
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

const OLD = { status: 400, body: { error: { code: 'StartupSeqnoIsOld', message: 'join with a recent snapshot' } } };

test('a joiner that fetches the same invalid snapshot again and again stops with the reason (JoinRetriesExhausted)', async () => {
  const sleeps: number[] = [];
  let fetches = 0;
  const fetching: JoinerHost = {
    ...host(sleeps),
    mayFetchSnapshot: true,
    fetchSnapshot: async () => {
      fetches++;
      return { failure: 'snapshot snapshot_28_29.committed fetched from 127.0.0.1:1 is invalid: cert is not endorsed' };
    },
  };
  const client: JoinClient = { postJoin: async () => OLD, fetchSnapshot: async () => undefined };
  await assert.rejects(requestJoin(fetching, client, '127.0.0.1:1', REQUEST), (e: Error & { code?: string }) => {
    assert.equal(e.code, 'JoinRetriesExhausted');
    assert.match(e.message, new RegExp(`failed ${joinIdenticalFailuresMax} times in a row the same way, giving up: snapshot snapshot_28_29\\.committed .* is invalid`));
    return true;
  });
  assert.equal(fetches, joinIdenticalFailuresMax);
});

test('changing snapshot failures, or a success between them, do not count as the same failure', async () => {
  const outcomes: SnapshotFetchOutcome[] = [];
  for (let i = 0; i < 3 * joinIdenticalFailuresMax; i++) {
    outcomes.push(i % joinIdenticalFailuresMax === joinIdenticalFailuresMax - 1 ? { startupSeqno: 10 } : { failure: 'download failed: 503' });
  }
  outcomes.push({ failure: 'a' }, { failure: 'b' });
  const answers: unknown[] = outcomes.map(() => OLD);
  answers.push({ status: 200, body: { node_id: 'n1', node_status: 'Trusted', network_info: { peers: [] } } });
  const fetching: JoinerHost = { ...host([]), mayFetchSnapshot: true, fetchSnapshot: async () => outcomes.shift()! };
  const client: JoinClient = { postJoin: async () => answers.shift() as never, fetchSnapshot: async () => undefined };
  const joined = await requestJoin(fetching, client, '127.0.0.1:1', REQUEST);
  assert.equal(joined?.attempts, 3 * joinIdenticalFailuresMax + 3);
});
