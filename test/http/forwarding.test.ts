/**
 * The forwarder's two frames as they arrive from peers: anything malformed is logged and dropped
 * (a node never falls over because of a peer's frame), and an answer is taken only from the node
 * the request went to.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Logger } from '../../src/base/log.js';
import { nullLogger } from '../../src/base/log.js';
import { PrimaryForwarder } from '../../src/http/forwarding.js';
import { Router } from '../../src/http/router.js';
import { json, type RequestContext, type Route } from '../../src/http/route.js';
import { CONSISTENCY_HEADER, RequestPipeline, type PipelineNode } from '../../src/http/pipeline.js';
import { CovenantError } from '../../src/base/errors.js';
import { InvariantError, assert as invariant } from '../../src/base/assert.js';
import { FrameKind, forwardedPrimaryCheckMs, type CovenantNode } from '../../src/node/node.js';
import { systemClock } from '../../src/platform/clock.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

type Handler = (from: string, payload: Uint8Array) => void;

/** The part of a node the forwarder uses, recording frames sent and handlers registered. */
function backupNode(primary: string | (() => string | undefined)): { node: CovenantNode; handlers: Map<number, Handler>; sent: { to: string; kind: number; payload: unknown }[] } {
  const primaryId = typeof primary === 'string' ? () => primary : primary;
  const handlers = new Map<number, Handler>();
  const sent: { to: string; kind: number; payload: unknown }[] = [];
  const node = {
    nodeId: 'backup',
    isPrimary: () => false,
    primaryId,
    onFrame: (kind: number, handler: Handler) => handlers.set(kind, handler),
    sendFrame: (to: string, kind: number, payload: Uint8Array) => {
      sent.push({ to, kind, payload: JSON.parse(Buffer.from(payload).toString('utf8')) });
      return true;
    },
  } as unknown as CovenantNode;
  return { node, handlers, sent };
}

const route: Route = { method: 'POST', path: '/app/log/private', summary: 'writes', handler: ({ caller }) => json(200, { caller: caller.id }) };
const broken: Route = { method: 'POST', path: '/broken', summary: 'breaks an invariant', handler: () => {
    invariant(false, 'never');
  },
};

/** The primary's side: the request pipeline that runs what a backup forwarded (a route table without a node). */
function pipelineOf(failStops: InvariantError[] = []): () => RequestPipeline {
  const pipeline = new RequestPipeline({
    router: new Router([route, broken]),
    authenticator: { authenticate: () => assert.fail('a forwarded request is not authenticated again') },
    logger: nullLogger,
    failStop: (e) => failStops.push(e),
  });
  return () => pipeline;
}

function context(): RequestContext {
  return {
    method: 'POST',
    path: '/app/log/private',
    params: {},
    query: {},
    body: { id: 1, msg: 'm' },
    rawBody: Buffer.from('{"id":1,"msg":"m"}'),
    headers: { 'content-type': 'application/json' },
    caller: { kind: 'user', id: 'u' },
    clientCertificateDer: undefined,
    remoteAddress: undefined,
    interfaceName: 'primary',
    state: { read: () => assert.fail('reads nothing'), write: () => assert.fail('writes nothing') },
  };
}

function recordingLogger(lines: string[]): Logger {
  return { ...nullLogger, info: (message: string) => lines.push(message) };
}

const frame = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value));

test('malformed forwarded answers are dropped with a logged reason; the right answer from the primary is taken', async () => {
  const { node, handlers, sent } = backupNode('primary-node');
  const lines: string[] = [];
  const forwarder = new PrimaryForwarder(node, pipelineOf(), recordingLogger(lines), systemClock, 5_000);
  try {
    const answer = forwarder.forward(context(), '');
    assert.equal(sent.length, 1);
    assert.equal(sent[0]!.to, 'primary-node');
    assert.equal(sent[0]!.kind, FrameKind.ForwardedRequest);
    const id = (sent[0]!.payload as { id: number }).id;
    const onResponse = handlers.get(FrameKind.ForwardedResponse)!;

    for (const bad of ['null', '5', '[]', '{"id":"x"}', 'not json', { id, status: 'ok', headers: {}, kind: 'json', body: 1 }, { id, status: 200, headers: { a: {} }, kind: 'json' }]) {
      assert.doesNotThrow(() => onResponse('primary-node', frame(bad)));
    }
    assert.equal(lines.filter((l) => l.includes('malformed forwarded response')).length, 7);

    // A well-formed answer from a node the request did not go to is not the answer.
    onResponse('another-node', frame({ id, status: 200, headers: {}, kind: 'json', body: 'forged' }));
    assert.ok(lines.some((l) => l.includes('went to primary-node')));

    onResponse('primary-node', frame({ id, status: 200, headers: { 'x-covenant-transaction-id': '2.7' }, kind: 'json', body: true }));
    const response = await answer;
    assert.equal(response.status, 200);
    assert.equal(response.body, true);
    assert.equal(response.headers?.['x-covenant-transaction-id'], '2.7');
    // An answer without a body (204) has no body field at all.
    const empty = forwarder.forward(context(), '');
    const emptyId = (sent[1]!.payload as { id: number }).id;
    onResponse('primary-node', frame({ id: emptyId, status: 204, headers: { 'content-length': 0 }, kind: 'none' }));
    assert.equal((await empty).status, 204);
  } finally {
    forwarder.close();
  }
});

test('malformed forwarded requests are dropped with a logged reason and answered by nothing', () => {
  const { node, handlers, sent } = backupNode('primary-node');
  const lines: string[] = [];
  const forwarder = new PrimaryForwarder(node, pipelineOf(), recordingLogger(lines), systemClock);
  const onRequest = handlers.get(FrameKind.ForwardedRequest)!;
  const valid = { id: 1, method: 'POST', path: '/app/log/private', query: '', headers: {}, body: '', caller: { kind: 'user', id: 'u' }, interface: 'primary' };
  const bads = [
    'null',
    'garbage',
    { ...valid, id: 0 },
    { ...valid, method: 'PATCH' },
    { ...valid, caller: null },
    { ...valid, headers: { a: 1 } },
    // Exactly one of a caller and an unrouted request.
    { ...valid, unrouted: {} },
    { ...valid, caller: undefined },
    { ...valid, caller: undefined, unrouted: { client_certificate: 5 } },
  ];
  for (const bad of bads) {
    assert.doesNotThrow(() => onRequest('peer', frame(bad)));
  }
  assert.equal(lines.filter((l) => l.includes('malformed forwarded request')).length, bads.length);
  assert.equal(sent.length, 0);
  forwarder.close();
});

test('an unanswered forward times out on the injected clock, without waiting in real time', async () => {
  const { node, handlers, sent } = backupNode('primary-node');
  const clock = new ManualClock();
  const forwarder = new PrimaryForwarder(node, pipelineOf(), nullLogger, clock, 10_000);
  try {
    const answer = forwarder.forward(context(), '');
    const outcome = answer.then(
      () => 'answered',
      (e: { code?: string }) => e.code,
    );
    assert.deepEqual(clock.pendingDelaysMs(), [10_000, forwardedPrimaryCheckMs]);
    clock.advance(9_999);
    assert.deepEqual(clock.pendingDelaysMs(), [10_000, forwardedPrimaryCheckMs], 'not yet due; the primary is still checked');
    clock.advance(1);
    assert.deepEqual(clock.pendingDelaysMs(), [], 'nothing waits: no check is armed');
    assert.equal(await outcome, 'ForwardingTimedOut');
    // An answer after the timeout finds no one waiting for it.
    const id = (sent[0]!.payload as { id: number }).id;
    handlers.get(FrameKind.ForwardedResponse)!('primary-node', frame({ id, status: 200, headers: {}, kind: 'json', body: true }));

    // An answer in time cancels the timer.
    const second = forwarder.forward(context(), '');
    const secondId = (sent[1]!.payload as { id: number }).id;
    handlers.get(FrameKind.ForwardedResponse)!('primary-node', frame({ id: secondId, status: 200, headers: {}, kind: 'json', body: true }));
    assert.equal((await second).status, 200);
    assert.deepEqual(clock.pendingDelaysMs(), []);
  } finally {
    forwarder.close();
  }
});

test('a forward to a primary that another node replaced is answered PrimaryChanged at the next check, not at the timeout', async () => {
  let primary: string | undefined = 'old-primary';
  const { node, handlers, sent } = backupNode(() => primary);
  const clock = new ManualClock();
  const forwarder = new PrimaryForwarder(node, pipelineOf(), nullLogger, clock, 10_000);
  try {
    const outcome = (p: Promise<unknown>) => p.then(() => 'answered', (e: { code?: string; message?: string }) => `${e.code}: ${e.message}`);
    const first = outcome(forwarder.forward(context(), ''));
    // An election under way (no primary known) is not a change: the old primary may still answer.
    primary = undefined;
    clock.advance(forwardedPrimaryCheckMs);
    primary = 'new-primary';
    const second = outcome(forwarder.forward(context(), ''));
    assert.equal(sent[1]!.to, 'new-primary');
    clock.advance(forwardedPrimaryCheckMs);
    assert.match(await first, /^PrimaryChanged: node old-primary stopped being the primary \(now new-primary\).*may or may not have been executed/);
    // The request sent to the new primary still waits, and its answer is taken.
    const id = (sent[1]!.payload as { id: number }).id;
    handlers.get(FrameKind.ForwardedResponse)!('new-primary', frame({ id, status: 200, headers: {}, kind: 'json', body: true }));
    assert.equal(await second, 'answered');
    assert.deepEqual(clock.pendingDelaysMs(), [], 'no timer is left once nothing waits');
  } finally {
    forwarder.close();
  }
});

test('a forwarded request runs through the primary\'s request pipeline with the caller the backup authenticated; a broken invariant there is never answered', async () => {
  const { node, handlers, sent } = backupNode('primary-node');
  const failStops: InvariantError[] = [];
  const forwarder = new PrimaryForwarder(node, pipelineOf(failStops), nullLogger, systemClock);
  const onRequest = handlers.get(FrameKind.ForwardedRequest)!;
  const request = { id: 7, method: 'POST', path: '/app/log/private', query: '', headers: {}, body: '', caller: { kind: 'user', id: 'u1' }, interface: 'primary' };
  const answered = async (count: number) => {
    for (let i = 0; i < 100 && sent.length < count; i++) await new Promise((resolve) => setImmediate(resolve));
  };
  try {
    onRequest('backup-node', frame(request));
    await answered(1);
    assert.deepEqual(sent[0], { to: 'backup-node', kind: FrameKind.ForwardedResponse, payload: { id: 7, status: 200, headers: {}, kind: 'json', body: { caller: 'u1' } } });
    onRequest('backup-node', frame({ ...request, id: 8, path: '/nowhere' }));
    await answered(2);
    assert.equal((sent[1]!.payload as { status: number }).status, 404, 'routed by the same route table');
    onRequest('backup-node', frame({ ...request, id: 9, path: '/broken' }));
    onRequest('backup-node', frame({ ...request, id: 10 }));
    await answered(3);
    for (let i = 0; i < 10; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(
      sent.map((f) => (f.payload as { id: number }).id),
      [7, 8, 10],
      'the request that broke an invariant got no answer',
    );
    assert.deepEqual(
      failStops.map((e) => e.message),
      ['invariant violated: never'],
    );
  } finally {
    forwarder.close();
  }
});

// ---- a backup whose state holds no route for an application request (its deployment not yet replicated)

/** A backup and a primary whose forwarders hand frames to each other at once; the primary alone has the application's route. */
function linkedPair() {
  const handlers = { backup: new Map<number, Handler>(), primary: new Map<number, Handler>() };
  const sent: { from: string; to: string; payload: any }[] = [];
  const nodeOf = (self: 'backup' | 'primary', other: 'backup' | 'primary') =>
    ({
      nodeId: self,
      isPrimary: () => self === 'primary',
      primaryId: () => 'primary',
      onFrame: (kind: number, handler: Handler) => handlers[self].set(kind, handler),
      sendFrame: (to: string, kind: number, payload: Uint8Array) => {
        sent.push({ from: self, to, payload: JSON.parse(Buffer.from(payload).toString('utf8')) });
        queueMicrotask(() => handlers[other].get(kind)!(self, payload));
        return true;
      },
    }) as unknown as CovenantNode;
  const appRoute: Route = { method: ['GET', 'POST'], path: '/app/deployed', summary: 'deployed on the primary only', auth: 'user_cert', handler: ({ caller }) => json(200, { caller: caller.id }) };
  // Authenticates a user from the certificate's bytes (the test's stand-in for the user table).
  const authenticator = {
    authenticate: (_policy: unknown, request: { clientCertificateDer: Buffer | undefined }) => {
      if (request.clientCertificateDer === undefined) throw new CovenantError('InvalidAuthenticationInfo', 'no certificate', 401);
      return { kind: 'user' as const, id: request.clientCertificateDer.toString('utf8') };
    },
  };
  const failStop = (e: InvariantError) => assert.fail(e.message);
  // Each forwarder runs what reaches it through its node's pipeline, made below (asked for only when a frame comes).
  const primaryForwarder: PrimaryForwarder = new PrimaryForwarder(nodeOf('primary', 'backup'), (): RequestPipeline => primaryPipeline, nullLogger, systemClock);
  const backupForwarder: PrimaryForwarder = new PrimaryForwarder(nodeOf('backup', 'primary'), (): RequestPipeline => backupPipeline, nullLogger, systemClock);
  const primaryPipeline: RequestPipeline = new RequestPipeline({ router: new Router([appRoute]), authenticator, logger: nullLogger, failStop });
  const backupNodeOfPipeline = { isPrimary: () => false } as unknown as PipelineNode;
  const backupPipeline: RequestPipeline = new RequestPipeline({
    router: new Router([]),
    authenticator,
    node: backupNodeOfPipeline,
    forwarder: { forward: (ctx, rawQuery, unrouted) => backupForwarder.forward(ctx, rawQuery, unrouted) },
    logger: nullLogger,
    failStop,
  });
  const request = (method: 'GET' | 'POST', path: string, headers: Record<string, string> = {}, certificate: string | null = 'alice') =>
    backupPipeline.handle({
      method,
      path,
      rawQuery: '',
      headers,
      body: Buffer.alloc(0),
      clientCertificateDer: certificate === null ? undefined : Buffer.from(certificate),
      remoteAddress: '127.0.0.1',
      interfaceName: 'primary',
    });
  return { request, sent, close: () => (primaryForwarder.close(), backupForwarder.close()) };
}

test('a backup with no route for an application request that needs the primary forwards it unrouted: the primary routes it and authenticates the client from its certificate', async () => {
  const pair = linkedPair();
  try {
    const written = await pair.request('POST', '/app/deployed');
    assert.equal(written.status, 200, JSON.stringify(written.body));
    assert.deepEqual(written.body, { caller: 'alice' }, 'authenticated on the primary, from the certificate the backup received');
    assert.deepEqual(pair.sent[0]!.payload.unrouted, { client_certificate: Buffer.from('alice').toString('base64') });
    assert.equal(pair.sent[0]!.payload.caller, undefined, 'no caller the backup could not have authenticated');

    const read = await pair.request('GET', '/app/deployed', { [CONSISTENCY_HEADER]: 'linearizable' });
    assert.equal(read.status, 200);
    // Without a certificate the primary's route refuses it, as it would have had the client come to it.
    const anonymous = await pair.request('POST', '/app/deployed', {}, null);
    assert.equal(anonymous.status, 401);
    // A path the primary has no route for either: its 404 comes back.
    const nowhere = await pair.request('POST', '/app/nowhere');
    assert.equal(nowhere.status, 404);
    assert.equal(pair.sent.filter((f) => f.from === 'backup').length, 4);
  } finally {
    pair.close();
  }
});

test('a default read of an application path the backup has no route for, and any unknown path outside /app/, is answered 404 by the backup itself', async () => {
  const pair = linkedPair();
  try {
    for (const [method, path] of [
      ['GET', '/app/deployed'],
      ['POST', '/node/nowhere'],
      ['GET', '/gov/nowhere'],
    ] as const) {
      const answer = await pair.request(method, path);
      assert.equal(answer.status, 404, `${method} ${path}`);
    }
    assert.equal(pair.sent.length, 0, 'nothing was forwarded');
  } finally {
    pair.close();
  }
});

test('a request forwarded unrouted to a node that is no longer primary is refused NotPrimary there, never forwarded again', async () => {
  const forwardedTwice: string[] = [];
  const pipeline = new RequestPipeline({
    router: new Router([{ method: 'POST', path: '/app/deployed', summary: 'a write', handler: () => json(200, {}) }]),
    authenticator: { authenticate: () => ({ kind: 'anonymous' }) },
    node: { isPrimary: () => false } as unknown as PipelineNode,
    forwarder: { forward: (ctx) => (forwardedTwice.push(ctx.path), Promise.resolve(json(200, {}))) },
    logger: nullLogger,
    failStop: (e) => assert.fail(e.message),
  });
  const head = { rawQuery: '', headers: {}, body: Buffer.alloc(0), clientCertificateDer: undefined, remoteAddress: undefined, interfaceName: 'primary', forwardedUnrouted: true };
  const routed = await pipeline.handle({ ...head, method: 'POST', path: '/app/deployed' });
  assert.equal(routed.status, 503);
  assert.equal((routed.body as { error: { code: string } }).error.code, 'NotPrimary');
  const unrouted = await pipeline.handle({ ...head, method: 'POST', path: '/app/elsewhere' });
  assert.equal(unrouted.status, 404);
  assert.deepEqual(forwardedTwice, []);
});
