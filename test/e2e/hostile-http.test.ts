/**
 * End to end: hostile clients against one real node with small limits (max_open_sessions 10, 4
 * per address, 500 ms deadlines). Attackers connect from 127.0.0.2, the normal client from
 * 127.0.0.1 (both loopback). After each attack the node still serves a normal client.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { Tag } from 'cbor-x';
import { decodeCbor, encodeCbor } from '../../src/crypto/index.js';
import { signGovRequest } from '../../src/gov/index.js';
import { removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';

const ATTACKER = '127.0.0.2';

interface Answer {
  readonly status: number | 'reset';
  readonly code?: string;
  readonly headers?: Record<string, string | string[] | undefined>;
  readonly text?: string;
}

describe('a node under hostile HTTP clients', () => {
  let node: StartedNode;
  let host: string;
  let port: number;

  before(async () => {
    node = await startNode({
      configPatch: {
        rpc_interfaces: { primary: { max_open_sessions: 10, max_sessions_per_address: 4, tls_handshake_timeout: '500ms', first_request_timeout: '500ms' } },
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

  /** One request on a new connection from `localAddress`; 'reset' when the connection fails. */
  const once = (method: string, path: string, options: { localAddress?: string; body?: string; headers?: Record<string, string> } = {}) =>
    new Promise<Answer>((resolve) => {
      const req = https.request(
        { host, port, method, path, localAddress: options.localAddress ?? '127.0.0.1', ca: node.serviceCertificatePem, agent: false, headers: options.headers ?? {} },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            const code = text.startsWith('{') ? (JSON.parse(text) as { error?: { code: string } }).error?.code : undefined;
            resolve({ status: res.statusCode!, headers: res.headers, text, ...(code !== undefined ? { code } : {}) });
          });
        },
      );
      req.on('error', () => resolve({ status: 'reset' }));
      req.end(options.body);
    });

  /** A connection from the attacker's address that sends nothing (after TCP, or after the TLS handshake). */
  const idle = (kind: 'tcp' | 'tls') =>
    new Promise<{ closed: Promise<void> } | undefined>((resolve) => {
      const socket =
        kind === 'tcp'
          ? net.connect({ host, port, localAddress: ATTACKER }, () => resolve({ closed }))
          : tls.connect({ host, port, ca: node.serviceCertificatePem, ...({ localAddress: ATTACKER } as tls.ConnectionOptions) }, () => resolve({ closed }));
      const closed = new Promise<void>((done) => socket.once('close', () => done()));
      // Closed at accept (beyond the caps): never opened.
      socket.on('error', () => resolve(undefined));
      socket.once('close', () => resolve(undefined));
      socket.on('data', () => undefined);
    });

  const sessions = async () => (await node.client.request('GET', '/node/metrics')).body.sessions.primary;

  test('half-open connections (TCP, never TLS) are closed at the handshake deadline; normal clients are served during and after', { timeout: 60_000 }, async () => {
    const held = (await Promise.all(Array.from({ length: 30 }, () => idle('tcp')))).filter((h) => h !== undefined);
    assert.ok(held.length >= 4, 'the attacker holds its share');
    assert.equal((await once('GET', '/node/commit')).status, 200, 'served during the attack');
    // Before, the server "ended" such sockets, which can never flush, and kept them for good.
    await Promise.all(held.map((h) => h.closed));
    const after = await sessions();
    assert.equal(after.refusing, 0);
    assert.ok(after.active <= 2, `only the normal clients' sessions remain: ${JSON.stringify(after)}`);
    assert.ok(after.timed_out >= 4);
    assert.equal((await once('GET', '/node/commit', { localAddress: ATTACKER })).status, 200, 'the attacker\u2019s address is served again too');
  });

  test('idle TLS sessions: one address holds its share, beyond it 503 SessionCapExhausted, and they are closed at the first-request deadline', { timeout: 60_000 }, async () => {
    const held = (await Promise.all(Array.from({ length: 4 }, () => idle('tls')))).filter((h) => h !== undefined);
    assert.equal(held.length, 4);
    const refused = await once('GET', '/node/commit', { localAddress: ATTACKER });
    assert.equal(refused.status, 503);
    assert.equal(refused.code, 'SessionCapExhausted');
    assert.equal(refused.headers?.['connection'], 'close');
    assert.equal((await once('GET', '/node/commit')).status, 200, 'another address is served');
    await Promise.all(held.map((h) => h.closed));
    assert.equal((await once('GET', '/node/commit', { localAddress: ATTACKER })).status, 200);
  });

  test('HEAD, two Host headers, another HTTP version, CONNECT: each answered, and the node keeps serving', async () => {
    const head = await once('HEAD', '/node/commit');
    assert.equal(head.status, 200);
    assert.equal(head.text, '');
    assert.ok(Number(head.headers?.['content-length']) > 0);
    const raw = (text: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = tls.connect({ host, port, ca: node.serviceCertificatePem }, () => socket.end(text));
        const chunks: Buffer[] = [];
        socket.on('data', (c: Buffer) => chunks.push(c));
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
        socket.on('error', reject);
      });
    assert.match(await raw('GET /node/commit HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n'), /^HTTP\/1\.1 400 [^]*DuplicateHostHeader/);
    assert.match(await raw('GET /node/commit HTTP/1.2\r\nHost: a\r\nConnection: close\r\n\r\n'), /^HTTP\/1\.1 505 [^]*HttpVersionNotSupported/);
    assert.match(await raw('CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n'), /^HTTP\/1\.1 405 [^]*MethodNotAllowed/);
    assert.equal((await once('GET', '/node/commit')).status, 200);
  });

  test('JSON with a duplicate key or a lone surrogate is 400 InvalidJsonBody, and nothing is written', async () => {
    const write = (rawBody: string) => node.client.request('POST', '/app/log/private', { rawBody, headers: { 'content-type': 'application/json' }, identity: node.user });
    for (const body of ['{"id":1,"msg":"a","msg":"b"}', '{"id":1,"msg":"\\ud800"}']) {
      const answer = await write(body);
      assert.equal(answer.status, 400, body);
      assert.equal(answer.body.error.code, 'InvalidJsonBody', body);
    }
    assert.equal((await node.client.request('GET', '/app/log/private?id=1', { identity: node.user })).status, 404, 'nothing was written');
    assert.equal((await write('{"id":1,"msg":"\\ud83d\\ude00"}')).status, 200);
  });

  test('governance: an untagged COSE_Sign1 is 400 UntaggedCoseSign1; a replayed state-digest update is 400 RequestReplay', async () => {
    const path = `/gov/members/state-digests/${node.member.id}:update`;
    const signed = () =>
      signGovRequest({ type: 'state_digest', payload: '', privateKeyPem: node.member.privateKeyPem, memberId: node.member.id, createdAtSeconds: Math.floor(Date.now() / 1000) });
    const post = (body: Uint8Array) => node.client.request('POST', path, { rawBody: Buffer.from(body), headers: { 'content-type': 'application/cose' }, identity: node.member });
    const untagged = encodeCbor((decodeCbor(signed()) as Tag).value);
    const refused = await post(untagged);
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.code, 'UntaggedCoseSign1');
    const request = signed();
    assert.equal((await post(request)).status, 200);
    const replay = await post(request);
    assert.equal(replay.status, 400);
    assert.equal(replay.body.error.code, 'RequestReplay');
  });
});
