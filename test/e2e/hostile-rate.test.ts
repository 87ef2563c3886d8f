/**
 * End to end: a flood at a high request rate and attackers on several addresses holding every
 * session, against one real node with small limits (50 requests per second per address, a burst
 * of 50, max_open_sessions 10 with 4 per address). Attackers connect from 127.0.0.2, .4 and .5,
 * the normal client from 127.0.0.3 (neither exempt from the rate); 127.0.0.1 is exempt (default).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import tls from 'node:tls';
import { removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { normalClientInWorker, pipelineFlood } from '../../src/testing/hostile-clients.js';
import { until } from '../../src/testing/network.js';

const RATE = 50;
const NORMAL = '127.0.0.3';

describe('a node under a request-rate flood and a session-cap flood from several addresses', () => {
  let node: StartedNode;
  let host: string;
  let port: number;

  before(async () => {
    node = await startNode({
      configPatch: {
        rpc_interfaces: {
          primary: {
            max_open_sessions: 10,
            max_sessions_per_address: 4,
            max_requests_per_second_per_address: RATE,
            max_request_burst_per_address: RATE,
          },
        },
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

  const metrics = async () => (await node.client.request('GET', '/node/metrics')).body.sessions.primary;

  /** One GET /node/commit on a new connection from `localAddress`. */
  const once = (localAddress: string) =>
    new Promise<{ status: number | 'reset'; code?: string; retryAfter?: string }>((resolve) => {
      const req = https.request({ host, port, path: '/node/commit', localAddress, ca: node.serviceCertificatePem, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const code = /"code":"(\w+)"/.exec(Buffer.concat(chunks).toString('utf8'))?.[1];
          const retryAfter = res.headers['retry-after'];
          resolve({ status: res.statusCode!, ...(code !== undefined ? { code } : {}), ...(retryAfter !== undefined ? { retryAfter } : {}) });
        });
      });
      req.on('error', () => resolve({ status: 'reset' }));
      req.end();
    });

  test('a flood of cheap requests beyond the address rate is answered 429 TooManyRequests and held back; a normal client on another address is never refused', { timeout: 120_000 }, async (t) => {
    const request = Buffer.from(`GET /node/commit HTTP/1.1\r\nhost: ${host}\r\n\r\n`);
    const flood = pipelineFlood({ host, port, ca: node.serviceCertificatePem }, { connections: 4, depth: 8, request, localAddresses: ['127.0.0.2'] });
    const started = performance.now();
    try {
      const client = normalClientInWorker({ host, port, ca: node.serviceCertificatePem, localAddress: NORMAL }, { method: 'GET', path: '/node/commit', expected: 200 }, 100);
      await until('refusals beyond the rate', async () => ((flood.counts().codes['TooManyRequests'] ?? 0) >= 20 ? true : undefined), 60_000);
      // A few seconds more of the flood, while the normal client goes on.
      await new Promise((r) => setTimeout(r, 2000));
      const seen = await client.stop();
      const counts = flood.counts();
      const seconds = (performance.now() - started) / 1000;
      t.diagnostic(`normal client: ${JSON.stringify(seen)}; attacker in ${seconds.toFixed(1)} s: ${JSON.stringify(counts.statuses)}`);
      assert.ok(seen.answered > 0, 'the normal client was served');
      assert.deepEqual(seen.failures, {}, 'and never refused: its address has its own bucket');
      // The attacker was served at most its burst and its rate, whatever it sent.
      const served = counts.statuses['200'] ?? 0;
      assert.ok(served <= RATE + RATE * (seconds + 1), `served ${served} in ${seconds.toFixed(1)} s at ${RATE}/s`);
      assert.ok(counts.sent > served + (counts.statuses['429'] ?? 0), 'the rest of what it sent was not even read');
      assert.match(counts.messages?.['TooManyRequests'] ?? '', /max_requests_per_second_per_address 50/);
      const rate = (await metrics()).request_rate;
      assert.equal(rate.per_second_per_address, RATE);
      assert.ok(rate.refused >= 20);
    } finally {
      flood.stop();
    }
    await until('the attacker\u2019s sessions to close', async () => ((await metrics()).active <= 1 ? true : undefined));
    const refused = await once('127.0.0.2');
    assert.ok(refused.status === 200 || (refused.status === 429 && refused.retryAfter === '1'), `a refusal says when to retry: ${JSON.stringify(refused)}`);
    // The loopback address 127.0.0.1 is exempt by default: a burst far beyond the rate is served.
    const statuses = new Set<number>();
    for (let i = 0; i < 3 * RATE; i++) statuses.add((await node.client.request('GET', '/node/commit')).status);
    assert.deepEqual([...statuses], [200]);
  });

  test('attackers on three addresses holding every session: a client on a fourth is served in place of an idle attacker session', { timeout: 60_000 }, async () => {
    /** A session that sent one request, was answered and is kept alive. */
    const hold = (localAddress: string) =>
      new Promise<{ socket: tls.TLSSocket; closed: Promise<void> } | undefined>((resolve) => {
        const socket = tls.connect({ host, port, ca: node.serviceCertificatePem, ...({ localAddress } as tls.ConnectionOptions) }, () =>
          socket.write(`GET /node/commit HTTP/1.1\r\nhost: ${host}\r\n\r\n`),
        );
        const closed = new Promise<void>((done) => socket.once('close', () => done()));
        socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1').startsWith('HTTP/1.1 200') ? { socket, closed } : undefined));
        socket.on('error', () => resolve(undefined));
        socket.once('close', () => resolve(undefined));
      });
    const held: { socket: tls.TLSSocket; closed: Promise<void>; isClosed: boolean }[] = [];
    try {
      for (const [address, count] of [['127.0.0.2', 4], ['127.0.0.4', 4], ['127.0.0.5', 2]] as const) {
        for (let i = 0; i < count; i++) {
          const session = await hold(address);
          if (session === undefined) continue;
          const entry = { ...session, isClosed: false };
          void session.closed.then(() => (entry.isClosed = true));
          held.push(entry);
        }
      }
      // Ten sessions, less the one this test's own client may still keep alive from 127.0.0.1.
      assert.ok(held.length >= 9, `the attackers hold the sessions: ${held.length}`);
      const closedBefore = held.filter((h) => h.isClosed).length;
      const answer = await once(NORMAL);
      assert.deepEqual(answer, { status: 200 }, 'a client on another address is served, not refused');
      await until('an attacker session to make room', async () => (held.filter((h) => h.isClosed).length > closedBefore ? true : undefined), 10_000);
      const after = await metrics();
      assert.ok(after.evicted >= 1, `an attacker session made room: ${JSON.stringify(after)}`);
      assert.ok(after.peak <= 10, 'the cap held');
    } finally {
      for (const h of held) h.socket.destroy();
    }
  });
});
