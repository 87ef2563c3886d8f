/**
 * The session cap shared out among client addresses, over real TLS on loopback (127.0.0.0/8 gives
 * each test client its own source address): when attackers on several addresses hold every
 * session, a client on another address takes the place of the oldest idle session of the address
 * holding the most, rather than being refused; an address already holding as many as the most is
 * still refused.
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

const anyone: Authenticator = { authenticate: () => ({ kind: 'anonymous' }) };
const routes: Route[] = [{ method: 'GET', path: '/sync', summary: 'answers at once', handler: () => json(200, { answer: 'sync' }) }];

/** A kept-alive session from `localAddress` that sent one request and was answered; `closed` resolves when the server closes it. */
function heldSession(port: number, ca: string, localAddress: string): Promise<{ closed: Promise<void>; isClosed: () => boolean; status: number }> {
  return new Promise((resolve, reject) => {
    let isClosed = false;
    const socket = tls.connect({ host: '127.0.0.1', port, ca, ...({ localAddress } as tls.ConnectionOptions) }, () => {
      socket.write('GET /sync HTTP/1.1\r\nhost: x\r\n\r\n');
    });
    const closed = new Promise<void>((done) =>
      socket.once('close', () => {
        isClosed = true;
        done();
      }),
    );
    socket.once('data', (chunk: Buffer) => resolve({ closed, isClosed: () => isClosed, status: Number(chunk.toString('latin1').slice(9, 12)) }));
    socket.on('error', () => undefined);
    socket.once('close', () => reject(new Error('closed before an answer')));
  });
}

function getOnce(port: number, ca: string, localAddress: string): Promise<{ status: number; code?: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, path: '/sync', ca, localAddress, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code: string } };
        resolve(body.error ? { status: res.statusCode!, code: body.error.code } : { status: res.statusCode! });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

test('attackers on two addresses holding every session: a client on a third address is served in place of the oldest idle session of the address holding the most; the holders are not', { timeout: 30_000 }, async () => {
  const keyPair = generateEcKeyPair('P-384');
  const cert = await createSelfSignedCertificate({ keyPair, subjectCommonName: 'fair', subjectAltNames: ['iPAddress:127.0.0.1'], validityDays: 1, isCa: false });
  const iface = new RpcInterface({
    name: 'fair',
    host: '127.0.0.1',
    port: 0,
    tls: { keyPem: keyPair.privateKeyPem, certificatePem: cert },
    pipeline: new RequestPipeline({ router: new Router(routes), authenticator: anyone, logger: nullLogger, failStop: (e) => { throw e; } }),
    enabledFeatures: [],
    maxBodySizeBytes: 64,
    maxOpenSessions: 6,
    maxSessionsPerAddress: 4,
    firstRequestTimeoutMs: 60_000,
    logger: nullLogger,
  });
  const port = (await iface.listen()).port;
  try {
    const first = [];
    for (let i = 0; i < 3; i++) first.push(await heldSession(port, cert, '127.0.0.2'));
    const second = [];
    for (let i = 0; i < 3; i++) second.push(await heldSession(port, cert, '127.0.0.3'));
    assert.deepEqual([...first, ...second].map((s) => s.status), [200, 200, 200, 200, 200, 200]);
    assert.equal(iface.sessionMetrics().active, 6, 'every session is taken');

    // An address holding as many as the most takes nobody's place.
    assert.deepEqual(await getOnce(port, cert, '127.0.0.2'), { status: 503, code: 'SessionCapExhausted' });
    assert.ok(first.every((s) => !s.isClosed()) && second.every((s) => !s.isClosed()), 'no session was closed for it');

    // A client on another address is served; the oldest session of a holder of three is closed for it.
    assert.deepEqual(await getOnce(port, cert, '127.0.0.1'), { status: 200 });
    await Promise.race([first[0]!.closed, second[0]!.closed]);
    assert.equal([...first, ...second].filter((s) => s.isClosed()).length, 1, 'exactly one session made room');
    assert.ok(first[0]!.isClosed() || second[0]!.isClosed(), 'the oldest of its address');
    assert.equal(iface.sessionMetrics().evicted, 1);
    assert.ok(iface.sessionMetrics().active <= 6, `the cap holds: ${JSON.stringify(iface.sessionMetrics())}`);
  } finally {
    await iface.close();
  }
});
