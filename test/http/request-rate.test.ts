/**
 * The request rate of one client address: the token bucket on its own (a stepped clock), and an
 * RPC interface over real TLS on loopback refusing an address beyond its rate with 429
 * TooManyRequests and Retry-After, not reading its connection meanwhile, while other addresses
 * and exempt ones are served.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import tls from 'node:tls';
import { nullLogger } from '../../src/base/log.js';
import { createSelfSignedCertificate, generateEcKeyPair } from '../../src/crypto/index.js';
import { Router } from '../../src/http/router.js';
import { json, type Route } from '../../src/http/route.js';
import { RpcInterface, type Authenticator } from '../../src/http/server.js';
import { RequestPipeline } from '../../src/http/pipeline.js';
import { RequestRateLimiter, plainAddress, type RequestRateLimits } from '../../src/http/request-rate.js';
import { requestRateLimitsOf } from '../../src/http/request-rate-config.js';
import os from 'node:os';
import { deepMerge, MINIMAL_NODE_CONFIG_INPUT, parseNodeConfig } from '../../src/config/index.js';

/** The minimal configuration with `primaryInterface` merged into its RPC interface. */
const loadNodeConfigFromObject = (primaryInterface: Record<string, unknown>) =>
  parseNodeConfig(deepMerge(MINIMAL_NODE_CONFIG_INPUT as unknown, { rpc_interfaces: { primary: primaryInterface } }), os.tmpdir());

test('a bucket admits its burst at once, then its rate; Retry-After is the time to the next token', () => {
  let now = 0;
  const limiter = new RequestRateLimiter({ perSecond: 10, burst: 3, addressesMax: 8, exemptAddresses: [] }, () => now);
  assert.deepEqual([limiter.take('10.0.0.1'), limiter.take('10.0.0.1'), limiter.take('10.0.0.1')], [0, 0, 0]);
  assert.equal(limiter.take('10.0.0.1'), 100, 'one token comes back after 100 ms at 10/s');
  now = 50;
  assert.equal(limiter.take('10.0.0.1'), 50);
  assert.equal(limiter.take('10.0.0.2'), 0, 'another address has its own bucket');
  now = 150;
  assert.equal(limiter.take('10.0.0.1'), 0, 'refilled at the rate');
  now = 100_000;
  assert.deepEqual([limiter.take('10.0.0.1'), limiter.take('10.0.0.1'), limiter.take('10.0.0.1'), limiter.take('10.0.0.1') > 0], [0, 0, 0, true], 'never more than the burst');
  const m = limiter.metrics();
  assert.equal(m.refused, 3);
  assert.equal(m.refused_addresses, 2, 'two refusal episodes of 10.0.0.1');
});

test('exempt addresses are never refused, in either spelling of an IPv4 address; unknown addresses share one bucket', () => {
  const limiter = new RequestRateLimiter({ perSecond: 1, burst: 1, addressesMax: 8, exemptAddresses: ['127.0.0.1', '::1'] }, () => 0);
  for (let i = 0; i < 100; i++) {
    assert.equal(limiter.take('127.0.0.1'), 0);
    assert.equal(limiter.take('::ffff:127.0.0.1'), 0);
    assert.equal(limiter.take('::1'), 0);
  }
  assert.equal(limiter.take(undefined), 0);
  assert.ok(limiter.take(undefined) > 0);
  assert.equal(plainAddress('::ffff:10.1.2.3'), '10.1.2.3');
  assert.equal(plainAddress('::ffff'), '::ffff');
  assert.equal(limiter.metrics().tracked_addresses, 1, 'exempt addresses take no place in the table');
});

test('the table of addresses is bounded: the least recently seen is forgotten, a flooding one stays', () => {
  const limiter = new RequestRateLimiter({ perSecond: 1, burst: 1, addressesMax: 4, exemptAddresses: [] }, () => 0);
  assert.equal(limiter.take('10.0.0.9'), 0);
  for (let i = 0; i < 1000; i++) {
    assert.ok(limiter.take('10.0.0.9') > 0, 'the flooding address stays refused while others come and go');
    limiter.take(`10.1.${i >> 8}.${i & 255}`);
    assert.ok(limiter.metrics().tracked_addresses <= 4);
  }
});

test('the configuration gives the defaults: 1000 per second, a burst of two seconds, loopback exempt', () => {
  const config = loadNodeConfigFromObject({});
  const limits = requestRateLimitsOf(config.rpc_interfaces.primary!);
  assert.deepEqual(limits, { perSecond: 1000, burst: 2000, addressesMax: 4096, exemptAddresses: ['127.0.0.1', '::1'] });
  const set = requestRateLimitsOf(
    loadNodeConfigFromObject({ max_requests_per_second_per_address: 2.5, max_request_burst_per_address: 4, request_rate_exempt_addresses: [] }).rpc_interfaces.primary!,
  );
  assert.deepEqual(set, { perSecond: 2.5, burst: 4, addressesMax: 4096, exemptAddresses: [] });
  assert.throws(() => loadNodeConfigFromObject({ request_rate_exempt_addresses: ['localhost'] }), /not an IP address/);
  assert.throws(() => loadNodeConfigFromObject({ max_requests_per_second_per_address: 0 }));
});

const anyone: Authenticator = { authenticate: () => ({ kind: 'anonymous' }) };
const routes: Route[] = [{ method: 'GET', path: '/sync', summary: 'answers at once', handler: () => json(200, { answer: 'sync' }) }];

async function rateLimitedInterface(limits: RequestRateLimits) {
  const keyPair = generateEcKeyPair('P-384');
  const cert = await createSelfSignedCertificate({ keyPair, subjectCommonName: 'rate', subjectAltNames: ['iPAddress:127.0.0.1'], validityDays: 1, isCa: false });
  const iface = new RpcInterface({
    name: 'rate',
    host: '127.0.0.1',
    port: 0,
    tls: { keyPem: keyPair.privateKeyPem, certificatePem: cert },
    pipeline: new RequestPipeline({ router: new Router(routes), authenticator: anyone, logger: nullLogger, failStop: (e) => { throw e; } }),
    enabledFeatures: [],
    maxBodySizeBytes: 64,
    logger: nullLogger,
    requestRate: limits,
    maxPipelinedRequests: 64,
  });
  const port = (await iface.listen()).port;
  return { iface, port, cert };
}

interface Answer {
  readonly status: number;
  readonly retryAfter?: string;
  readonly code?: string;
}

/** One keep-alive connection from `localAddress`; send(n) writes n GET /sync at once and resolves with their answers, in order. */
async function pipelinedConnection(port: number, ca: string, localAddress: string) {
  const socket = tls.connect({ host: '127.0.0.1', port, ca, ...({ localAddress } as tls.ConnectionOptions) });
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', () => resolve());
    socket.once('error', reject);
  });
  socket.setEncoding('utf8');
  let buffer = '';
  const answers: Answer[] = [];
  let wake: (() => void) | undefined;
  socket.on('data', (chunk: string) => {
    buffer += chunk;
    for (;;) {
      const end = buffer.indexOf('\r\n\r\n');
      if (end === -1) break;
      const head = buffer.slice(0, end);
      const length = Number(/content-length: (\d+)/i.exec(head)?.[1] ?? 0);
      if (buffer.length < end + 4 + length) break;
      const body = buffer.slice(end + 4, end + 4 + length);
      buffer = buffer.slice(end + 4 + length);
      const retryAfter = /retry-after: (\d+)/i.exec(head)?.[1];
      const code = /"code":"(\w+)"/.exec(body)?.[1];
      answers.push({ status: Number(head.slice(9, 12)), ...(retryAfter ? { retryAfter } : {}), ...(code ? { code } : {}) });
    }
    wake?.();
  });
  return {
    async send(count: number): Promise<Answer[]> {
      answers.length = 0;
      socket.write('GET /sync HTTP/1.1\r\nhost: x\r\n\r\n'.repeat(count));
      while (answers.length < count) {
        if (socket.destroyed) throw new Error('the connection was closed');
        await new Promise<void>((resolve) => (wake = resolve));
      }
      return [...answers];
    },
    close: () => socket.destroy(),
  };
}

function getOnce(port: number, ca: string, localAddress: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: '/sync', ca, localAddress, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    req.on('error', reject);
    req.end();
  });
}

test('beyond its rate an address gets 429 TooManyRequests with Retry-After and its connection is not read for that long; other and exempt addresses are served', { timeout: 30_000 }, async () => {
  const { iface, port, cert } = await rateLimitedInterface({ perSecond: 4, burst: 5, addressesMax: 16, exemptAddresses: ['127.0.0.1'] });
  try {
    const connection = await pipelinedConnection(port, cert, '127.0.0.2');
    const answers = await connection.send(6);
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200, 200, 200, 429],
      'the burst, then a refusal',
    );
    assert.equal(answers[5]!.code, 'TooManyRequests');
    assert.equal(answers[5]!.retryAfter, '1');
    // Sent at once after the refusal: had the connection been read at once, the bucket would
    // still be empty and the request refused. It is read once a token came back, and served.
    assert.deepEqual((await connection.send(1)).map((a) => a.status), [200], 'the connection was not read before its bucket refilled');
    connection.close();
    assert.equal(await getOnce(port, cert, '127.0.0.3'), 200, 'another address has its own bucket');
    for (let i = 0; i < 20; i++) assert.equal(await getOnce(port, cert, '127.0.0.1'), 200, 'an exempt address is never refused');
    const rate = iface.sessionMetrics().request_rate!;
    assert.ok(rate.refused >= 1);
    assert.equal(rate.per_second_per_address, 4);
    assert.equal(rate.tracked_addresses, 2);
  } finally {
    await iface.close();
  }
});
