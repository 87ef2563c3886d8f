/**
 * One RPC interface over real TLS on loopback, with a small route table: every way a handler
 * can fail (throwing, rejecting, answering something that cannot be serialised) and every bad
 * body ends in the JSON error body with its status, and the interface keeps serving.
 */
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import tls from 'node:tls';
import { z } from 'zod';
import { CovenantError } from '../../src/base/errors.js';
import { nullLogger } from '../../src/base/log.js';
import { createSelfSignedCertificate, generateEcKeyPair } from '../../src/crypto/index.js';
import { Router } from '../../src/http/router.js';
import { integerQuery, json, type Route } from '../../src/http/route.js';
import { RpcInterface, type Authenticator } from '../../src/http/server.js';
import { RequestPipeline } from '../../src/http/pipeline.js';
import { InvariantError, assert as invariant } from '../../src/base/assert.js';
import { listenPreferring } from '../../src/http/service.js';
import net from 'node:net';

const anyone: Authenticator = { authenticate: () => ({ kind: 'anonymous' }) };

/** Invariants broken while executing a request, as the pipeline handed them to failStop. */
const failStops: InvariantError[] = [];

/** The route table in a request pipeline without a node (no forwarding, no consistency). */
function pipelineOf(table: Route[]): RequestPipeline {
  return new RequestPipeline({ router: new Router(table), authenticator: anyone, logger: nullLogger, failStop: (e) => failStops.push(e) });
}

const routes: Route[] = [
  { method: ['GET', 'HEAD'], path: '/sync', summary: 'answers at once', handler: () => json(200, { answer: 'sync' }, { 'x-extra': 'yes' }) },
  { method: 'GET', path: '/async', summary: 'answers later', handler: async () => json(201, { answer: 'async' }) },
  {
    method: 'GET',
    path: '/throws',
    summary: 'throws',
    handler: () => {
      throw new CovenantError('Teapot', 'this handler always throws', 418);
    },
  },
  { method: 'GET', path: '/rejects', summary: 'rejects', handler: () => Promise.reject(new CovenantError('Gone', 'this handler always rejects', 410)) },
  {
    method: 'GET',
    path: '/busy',
    summary: 'refuses for now',
    handler: () => Promise.reject(new CovenantError('Busy', 'come back later', 503, undefined, 2)),
  },
  { method: 'GET', path: '/bug', summary: 'fails unexpectedly', handler: () => Promise.reject(new TypeError('a bug')) },
  {
    method: 'GET',
    path: '/invariant',
    summary: 'breaks an invariant',
    handler: () => {
      invariant(false, 'a request found the store in a state it can never be in');
    },
  },
  {
    method: 'GET',
    path: '/invariant-later',
    summary: 'breaks an invariant later',
    handler: async () => {
      await Promise.resolve();
      invariant(false, 'broken after a turn');
    },
  },
  { method: 'GET', path: '/unserialisable', summary: 'answers a BigInt', handler: () => json(200, { big: 1n }) },
  { method: 'GET', path: '/items/{id}', summary: 'echoes the id', handler: ({ params }) => json(200, { id: params.id }) },
  { method: 'GET', path: '/seqno', summary: 'echoes since', query: z.object({ since: integerQuery }).strict(), handler: ({ query }) => json(200, query) },
  { method: 'POST', path: '/echo', summary: 'echoes n', body: z.object({ n: z.number() }).strict(), handler: ({ body }) => json(200, { n: (body as { n: number }).n }) },
];

let server: RpcInterface;
let port: number;
let ca: string;

before(async () => {
  const keyPair = generateEcKeyPair('P-384');
  ca = await createSelfSignedCertificate({ keyPair, subjectCommonName: 'test', subjectAltNames: ['iPAddress:127.0.0.1'], validityDays: 1, isCa: false });
  server = new RpcInterface({
    name: 'test',
    host: '127.0.0.1',
    port: 0,
    tls: { keyPem: keyPair.privateKeyPem, certificatePem: ca },
    pipeline: pipelineOf(routes),
    enabledFeatures: [],
    maxBodySizeBytes: 64,
    logger: nullLogger,
  });
  port = (await server.listen()).port;
});

after(() => server.close());

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: unknown;
}

function call(method: string, path: string, body?: string | Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: '127.0.0.1', port, method, path, ca, agent: false, headers: body === undefined ? {} : { 'content-type': 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        resolve({ status: res.statusCode!, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

test('synchronous and asynchronous handlers answer with their status, headers and JSON body', async () => {
  const sync = await call('GET', '/sync');
  assert.equal(sync.status, 200);
  assert.deepEqual(sync.body, { answer: 'sync' });
  assert.equal(sync.headers['x-extra'], 'yes');
  assert.equal(sync.headers['content-type'], 'application/json');
  assert.equal(Number(sync.headers['content-length']), JSON.stringify({ answer: 'sync' }).length);
  const head = await call('HEAD', '/sync');
  assert.equal(head.status, 200);
  assert.equal(head.body, undefined, 'HEAD answers the headers only');
  assert.equal(Number(head.headers['content-length']), JSON.stringify({ answer: 'sync' }).length);
  const later = await call('GET', '/async');
  assert.equal(later.status, 201);
  assert.deepEqual(later.body, { answer: 'async' });
});

test('a throwing, a rejecting, a busy and a buggy handler each get the JSON error body (Retry-After when it says when), and nothing more leaks', async () => {
  assert.deepEqual(await call('GET', '/throws').then((a) => [a.status, a.body]), [418, { error: { code: 'Teapot', message: 'this handler always throws' } }]);
  assert.deepEqual(await call('GET', '/rejects').then((a) => [a.status, a.body]), [410, { error: { code: 'Gone', message: 'this handler always rejects' } }]);
  const busy = await call('GET', '/busy');
  assert.deepEqual([busy.status, busy.body], [503, { error: { code: 'Busy', message: 'come back later' } }]);
  assert.equal(busy.headers['retry-after'], '2', 'an error that says when to come back sets Retry-After');
  assert.equal((await call('GET', '/rejects')).headers['retry-after'], undefined);
  const bug = await call('GET', '/bug');
  assert.equal(bug.status, 500);
  assert.equal((bug.body as { error: { code: string; message: string } }).error.code, 'InternalError');
  assert.doesNotMatch(JSON.stringify(bug.body), /a bug/, 'the internal reason stays in the log');
});

test('an answer that cannot be serialised is a 500, and the answers released with it still leave', async () => {
  const [broken, ...fine] = await Promise.all([call('GET', '/unserialisable'), call('GET', '/sync'), call('GET', '/sync'), call('GET', '/async')]);
  assert.equal(broken!.status, 500);
  assert.equal((broken!.body as { error: { code: string } }).error.code, 'InternalError');
  assert.deepEqual(
    fine.map((a) => a.status),
    [200, 200, 201],
  );
  assert.equal((await call('GET', '/sync')).status, 200, 'the interface still serves');
});

test('an invariant broken while executing a request is handed to failStop and never answered (no 500), thrown or rejected', async () => {
  failStops.length = 0;
  for (const path of ['/invariant', '/invariant-later']) {
    const outcome = await call('GET', path).then(
      (answer) => `answered ${answer.status}`,
      (e: NodeJS.ErrnoException) => e.code ?? e.message,
    );
    assert.equal(outcome, 'ECONNRESET', `${path}: the connection ends without an answer`);
  }
  assert.deepEqual(
    failStops.map((e) => e.message),
    ['invariant violated: a request found the store in a state it can never be in', 'invariant violated: broken after a turn'],
  );
});

test('bodies: valid, malformed JSON, wrong shape, over the limit; routing: unknown path and method', async () => {
  assert.deepEqual(await call('POST', '/echo', '{"n":5}').then((a) => [a.status, a.body]), [200, { n: 5 }]);
  const malformed = await call('POST', '/echo', '{"n":');
  assert.equal(malformed.status, 400);
  assert.equal((malformed.body as { error: { code: string } }).error.code, 'InvalidJsonBody');
  const wrong = await call('POST', '/echo', '{"n":"five"}');
  assert.equal(wrong.status, 400);
  assert.equal((wrong.body as { error: { code: string } }).error.code, 'InvalidInput');
  const large = await call('POST', '/echo', JSON.stringify({ n: 1, pad: 'x'.repeat(100) }));
  assert.equal(large.status, 413);
  assert.equal((large.body as { error: { code: string } }).error.code, 'RequestBodyTooLarge');
  const unknown = await call('GET', '/nowhere');
  assert.equal(unknown.status, 404);
  assert.equal((unknown.body as { error: { code: string } }).error.code, 'ResourceNotFound');
  const method = await call('DELETE', '/sync');
  assert.equal(method.status, 405);
  assert.equal(method.headers.allow, 'GET, HEAD');
  for (const other of ['OPTIONS', 'PATCH', 'PROPFIND']) {
    const answer = await call(other, '/sync');
    assert.equal(answer.status, 405, other);
    assert.equal(answer.headers.allow, 'GET, HEAD', `${other}: a 405 names the methods the path has`);
    assert.equal((await call(other, '/nowhere')).status, 404, other);
  }
  assert.equal((await call('POST', '/echo', '{"n":6}')).status, 200, 'the interface still serves');
});

test('a body that is not UTF-8 is a 400, not JSON with U+FFFD in place of its bytes', async () => {
  // {"n":"<0xff>"}: JSON.parse of its lossy decoding would succeed.
  const answer = await call('POST', '/echo', Buffer.concat([Buffer.from('{"n":"'), Buffer.from([0xff]), Buffer.from('"}')]));
  assert.equal(answer.status, 400);
  assert.deepEqual(answer.body, { error: { code: 'InvalidJsonBody', message: 'request body is not valid JSON: the body is not valid UTF-8' } });
  const accented = await call('POST', '/echo', Buffer.from('{"n":"é"}', 'utf8'));
  assert.equal((accented.body as { error: { code: string } }).error.code, 'InvalidInput', 'valid UTF-8 goes on to the schema check');
});

test('a query parameter given twice is a 400 naming it, even when both values agree', async () => {
  for (const query of ['since=1&since=2', 'since=2&since=2']) {
    const answer = await call('GET', `/seqno?${query}`);
    assert.equal(answer.status, 400, query);
    assert.deepEqual(answer.body, { error: { code: 'InvalidQueryParameterValue', message: 'query parameter "since" is given more than once' } });
  }
  assert.deepEqual((await call('GET', '/seqno?since=2')).body, { since: 2 });
});

test('path parameters are %-decoded; a malformed escape is a 400, not an internal error', async () => {
  assert.deepEqual((await call('GET', '/items/a%20b')).body, { id: 'a b' });
  const bad = await call('GET', '/items/%zz');
  assert.equal(bad.status, 400);
  assert.equal((bad.body as { error: { code: string } }).error.code, 'InvalidPathParameter');
});

test('integer query parameters: every safe integer is taken as itself; larger ones are a 400, never rounded or Infinity', async () => {
  assert.deepEqual((await call('GET', '/seqno?since=0')).body, { since: 0 });
  assert.deepEqual((await call('GET', `/seqno?since=${Number.MAX_SAFE_INTEGER}`)).body, { since: Number.MAX_SAFE_INTEGER });
  for (const since of ['9007199254740992', '1'.repeat(400), '-1', '1e3', '']) {
    const answer = await call('GET', `/seqno?since=${since}`);
    assert.equal(answer.status, 400, `since=${since}`);
    assert.equal((answer.body as { error: { code: string } }).error.code, 'InvalidQueryParameterValue');
  }
});

/** Sends raw bytes over TLS and returns everything the server answers before it closes. */
function raw(bytes: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca }, () => socket.end(bytes));
    const chunks: Buffer[] = [];
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    socket.on('error', reject);
  });
}

function parseRaw(text: string): { status: number; body: { error: { code: string } } } {
  const [head, body] = text.split('\r\n\r\n', 2) as [string, string];
  assert.match(head, /content-type: application\/json/i);
  return { status: Number(head.split(' ')[1]), body: JSON.parse(body) };
}

test('requests the HTTP parser refuses get the JSON error body too: 400 for garbage or a missing Host, 431 for oversized headers', async () => {
  const garbage = parseRaw(await raw('GARBAGE\r\n\r\n'));
  assert.equal(garbage.status, 400);
  assert.equal(garbage.body.error.code, 'MalformedRequest');
  const oversized = parseRaw(await raw(`GET /sync HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
  assert.equal(oversized.status, 431);
  assert.equal(oversized.body.error.code, 'RequestHeaderTooLarge');
  const hostless = parseRaw(await raw('GET /sync HTTP/1.1\r\nConnection: close\r\n\r\n'));
  assert.equal(hostless.status, 400);
  assert.equal(hostless.body.error.code, 'MissingHostHeader');
  assert.equal((await call('GET', '/sync')).status, 200, 'the interface still serves');
});

test('a preferred port (a restarted node\u2019s previous one) is bound when free; when taken, the configured address, with a logged reason', async () => {
  const keyPair = generateEcKeyPair('P-384');
  const certificatePem = await createSelfSignedCertificate({ keyPair, subjectCommonName: 'test', validityDays: 1, isCa: false });
  const make = () =>
    new RpcInterface({ name: 'again', host: '127.0.0.1', port: 0, tls: { keyPem: keyPair.privateKeyPem, certificatePem }, pipeline: pipelineOf(routes), enabledFeatures: [], maxBodySizeBytes: 64, logger: nullLogger });
  const blocker = net.createServer();
  await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve));
  const taken = (blocker.address() as net.AddressInfo).port;
  const reasons: string[] = [];
  const first = make();
  try {
    const bound = await listenPreferring(taken, (p) => first.listen(p), (r) => reasons.push(r));
    assert.notEqual(bound.port, taken);
    assert.match(reasons.join('\n'), new RegExp(`port ${taken}, bound before the restart, is taken`));
  } finally {
    await first.close();
  }
  await new Promise<void>((resolve) => blocker.close(() => resolve()));
  const second = make();
  try {
    assert.equal((await listenPreferring(taken, (p) => second.listen(p), (r) => reasons.push(r))).port, taken, 'free again: bound');
  } finally {
    await second.close();
  }
});

test('sessions beyond max_open_sessions are answered 503 SessionCapExhausted and closed; a freed session lets the next one in', async () => {
  const keyPair = generateEcKeyPair('P-384');
  const cert = await createSelfSignedCertificate({ keyPair, subjectCommonName: 'capped', subjectAltNames: ['iPAddress:127.0.0.1'], validityDays: 1, isCa: false });
  const capped = new RpcInterface({
    name: 'capped',
    host: '127.0.0.1',
    port: 0,
    tls: { keyPem: keyPair.privateKeyPem, certificatePem: cert },
    pipeline: pipelineOf(routes),
    enabledFeatures: [],
    maxBodySizeBytes: 64,
    maxOpenSessions: 2,
    logger: nullLogger,
  });
  const cappedPort = (await capped.listen()).port;
  // One keep-alive session per agent.
  const agents = Array.from({ length: 4 }, () => new https.Agent({ keepAlive: true, maxSockets: 1 }));
  const get = (agent: https.Agent) =>
    new Promise<Answer>((resolve, reject) => {
      const req = https.request({ host: '127.0.0.1', port: cappedPort, path: '/sync', ca: cert, agent }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) }));
      });
      req.on('error', reject);
      req.end();
    });
  try {
    assert.equal((await get(agents[0]!)).status, 200);
    assert.equal((await get(agents[1]!)).status, 200);
    const third = await get(agents[2]!);
    assert.equal(third.status, 503);
    assert.deepEqual(third.body, { error: { code: 'SessionCapExhausted', message: 'this interface serves at most 2 client sessions at once: retry shortly' } });
    assert.equal(third.headers['connection'], 'close');
    // The first two sessions stay served.
    assert.equal((await get(agents[0]!)).status, 200);
    agents[1]!.destroy();
    // Its close reaches the server a moment later.
    let fourth: Answer | undefined;
    for (let i = 0; i < 50 && fourth?.status !== 200; i++) {
      if (fourth !== undefined) await new Promise((resolve) => setTimeout(resolve, 20));
      fourth = await get(agents[3]!);
    }
    assert.equal(fourth?.status, 200, 'a session freed lets a new one in');
  } finally {
    for (const agent of agents) agent.destroy();
    await capped.close();
  }
});

test('HEAD is served wherever GET is, with the GET headers and no body; 405 lists HEAD with GET', async () => {
  const head = await call('HEAD', '/items/7');
  assert.equal(head.status, 200);
  assert.equal(head.body, undefined);
  assert.equal(head.headers['content-length'], String(Buffer.byteLength(JSON.stringify({ id: '7' }))));
  const refused = await call('DELETE', '/items/7');
  assert.equal(refused.status, 405);
  assert.equal(refused.headers['allow'], 'GET, HEAD');
});

test('two Host headers are a 400, another HTTP version a 505, CONNECT a 405, each with the error body', async () => {
  const twoHosts = parseRaw(await raw('GET /sync HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n'));
  assert.equal(twoHosts.status, 400);
  assert.equal(twoHosts.body.error.code, 'DuplicateHostHeader');
  for (const version of ['HTTP/1.2', 'HTTP/2.0', 'HTTP/3.1']) {
    const answer = parseRaw(await raw(`GET /sync ${version}\r\nHost: a\r\nConnection: close\r\n\r\n`));
    assert.equal(answer.status, 505, version);
    assert.equal(answer.body.error.code, 'HttpVersionNotSupported', version);
  }
  const connect = parseRaw(await raw('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'));
  assert.equal(connect.status, 405);
  assert.equal(connect.body.error.code, 'MethodNotAllowed');
  assert.equal((await call('GET', '/sync')).status, 200, 'the interface still serves');
});

/** An interface with small caps and short deadlines, for the connection tests. */
async function limitedInterface(limits: { maxOpenSessions: number; maxSessionsPerAddress?: number; timeoutsMs: number }) {
  const keyPair = generateEcKeyPair('P-384');
  const cert = await createSelfSignedCertificate({ keyPair, subjectCommonName: 'limited', subjectAltNames: ['iPAddress:127.0.0.1'], validityDays: 1, isCa: false });
  const iface = new RpcInterface({
    name: 'limited',
    host: '127.0.0.1',
    port: 0,
    tls: { keyPem: keyPair.privateKeyPem, certificatePem: cert },
    pipeline: pipelineOf(routes),
    enabledFeatures: [],
    maxBodySizeBytes: 64,
    maxOpenSessions: limits.maxOpenSessions,
    ...(limits.maxSessionsPerAddress !== undefined ? { maxSessionsPerAddress: limits.maxSessionsPerAddress } : {}),
    tlsHandshakeTimeoutMs: limits.timeoutsMs,
    firstRequestTimeoutMs: limits.timeoutsMs,
    logger: nullLogger,
  });
  const ifacePort = (await iface.listen()).port;
  /** One request on a new connection (from `localAddress`): its status and error code; 'reset' when the connection is refused. */
  const getOnce = (localAddress = '127.0.0.1') =>
    new Promise<{ status: number | 'reset'; code?: string; connection?: string }>((resolve) => {
      const req = https.request({ host: '127.0.0.1', port: ifacePort, localAddress, path: '/sync', ca: cert, agent: false }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: { code: string } };
          // Only the error's Connection header says anything: this client asks to close (agent: false).
          resolve(body.error ? { status: res.statusCode!, code: body.error.code, connection: String(res.headers.connection) } : { status: res.statusCode! });
        });
      });
      req.on('error', () => resolve({ status: 'reset' }));
      req.end();
    });
  /** A connection that completes the TLS handshake (or only TCP) and then sends nothing; resolves once open. */
  const idle = (kind: 'tcp' | 'tls', localAddress = '127.0.0.1') =>
    new Promise<{ closed: Promise<void> }>((resolve, reject) => {
      const socket =
        kind === 'tcp'
          ? net.connect({ host: '127.0.0.1', port: ifacePort, localAddress }, () => resolve({ closed }))
          : // tls.connect hands the socket options (localAddress) to net.connect; its type omits them.
            tls.connect({ host: '127.0.0.1', port: ifacePort, ca: cert, ...({ localAddress } as tls.ConnectionOptions) }, () => resolve({ closed }));
      const closed = new Promise<void>((done) => socket.once('close', () => done()));
      socket.on('error', (e) => reject(e));
      socket.on('data', () => undefined);
    });
  return { iface, getOnce, idle };
}

test('half-open connections (TCP, never TLS) beyond the session cap are closed at the handshake deadline; the count goes back down and clients are served', { timeout: 30_000 }, async () => {
  const { iface, getOnce, idle } = await limitedInterface({ maxOpenSessions: 4, timeoutsMs: 200 });
  try {
    // 4 sessions and 10 refusal slots: 20 connections take every slot and get some closed at accept.
    const opened = await Promise.allSettled(Array.from({ length: 20 }, () => idle('tcp')));
    const held = opened.filter((o) => o.status === 'fulfilled').map((o) => (o as PromiseFulfilledResult<{ closed: Promise<void> }>).value);
    assert.ok(iface.sessionMetrics().active + iface.sessionMetrics().refusing > 0);
    // The server closes each of them: before, it "ended" a socket that could never flush, and kept it.
    await Promise.all(held.map((h) => h.closed));
    await until(() => iface.sessionMetrics().active === 0 && iface.sessionMetrics().refusing === 0);
    assert.ok(iface.sessionMetrics().timed_out >= 1);
    assert.deepEqual(await getOnce(), { status: 200 });
  } finally {
    await iface.close();
  }
});

test('idle TLS sessions filling the cap: a client beyond it gets 503 SessionCapExhausted (not a reset), and is served once the idle ones miss their first-request deadline', { timeout: 30_000 }, async () => {
  const { iface, getOnce, idle } = await limitedInterface({ maxOpenSessions: 3, timeoutsMs: 300 });
  try {
    const idleSessions = await Promise.all(Array.from({ length: 3 }, () => idle('tls')));
    assert.equal(iface.sessionMetrics().active, 3);
    assert.deepEqual(await getOnce(), { status: 503, code: 'SessionCapExhausted', connection: 'close' });
    await Promise.all(idleSessions.map((s) => s.closed));
    await until(() => iface.sessionMetrics().active === 0);
    assert.deepEqual(await getOnce(), { status: 200 });
  } finally {
    await iface.close();
  }
});

test('one client address holds at most max_sessions_per_address; other addresses are still served', { timeout: 30_000 }, async () => {
  const { iface, getOnce, idle } = await limitedInterface({ maxOpenSessions: 6, maxSessionsPerAddress: 2, timeoutsMs: 60_000 });
  try {
    const hog = await Promise.all(Array.from({ length: 2 }, () => idle('tls', '127.0.0.2')));
    assert.equal(iface.sessionMetrics().per_address_cap, 2);
    assert.deepEqual(await getOnce('127.0.0.2'), { status: 503, code: 'SessionCapExhausted', connection: 'close' });
    assert.deepEqual(await getOnce('127.0.0.1'), { status: 200 });
    // The hog's two sessions stay; the others close.
    await until(() => iface.sessionMetrics().active === 2);
    assert.equal(hog.length, 2);
  } finally {
    await iface.close();
  }
});

/** Polls `condition` every 20 ms, failing after 10 s. */
async function until(condition: () => boolean): Promise<void> {
  for (let i = 0; !condition(); i++) {
    if (i > 500) throw new Error('condition not reached');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
