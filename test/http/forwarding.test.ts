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
import { RequestPipeline } from '../../src/http/pipeline.js';
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
  for (const bad of ['null', 'garbage', { ...valid, id: 0 }, { ...valid, method: 'PATCH' }, { ...valid, caller: null }, { ...valid, headers: { a: 1 } }]) {
    assert.doesNotThrow(() => onRequest('peer', frame(bad)));
  }
  assert.equal(lines.filter((l) => l.includes('malformed forwarded request')).length, 6);
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
