/**
 * Forwarding of client requests from a backup to the primary over the node-to-node channel:
 * writes and anything that needs the primary are forwarded to it, and the client sees one answer
 * with the transaction id. The request pipeline (pipeline.ts) decides what is forwarded, by the
 * endpoint's mode; the backup authenticates the caller itself, and the primary, which trusts that
 * identity because the channel authenticates the backup node, runs the request through the same
 * pipeline (no second routing).
 */
import type { Clock, TimerHandle } from '../base/clock.js';
import { CovenantError, errorMessage } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import { FrameKind, forwardedPrimaryCheckMs, forwardedRequestTimeoutMs, forwardedRequestsPendingMax } from '../node/node.js';
import type { NodeFrames } from '../node/api.js';
import { InvariantError } from '../base/assert.js';
import { z } from 'zod';
import { zodIssuesMessage } from './errors.js';
import type { RequestContext, RouteResponse } from './route.js';
import { CONSISTENCY_HEADER, errorResponse, type RequestForwarder, type RequestPipeline } from './pipeline.js';
import { forwardedRequestCostBytes, waitingWorkExhausted, type WaitingWorkBudget } from './waiting-work.js';

/**
 * The two frames, checked on arrival: they come from an authenticated node, but a node must not
 * fall over (or answer the wrong client) because a peer sent something it did not expect.
 */
const forwardedRequestSchema = z.object({
  id: z.number().int().positive(),
  method: z.enum(['GET', 'HEAD', 'POST', 'PUT', 'DELETE']),
  path: z.string().startsWith('/'),
  query: z.string(),
  headers: z.record(z.string(), z.string()),
  body: z.string(),
  // The caller the backup authenticated; or, for a request it found no route for, what the
  // primary authenticates it from: the client's certificate (DER, base64) when it gave one.
  caller: z
    .object({
      kind: z.enum(['anonymous', 'user', 'member', 'jwt']),
      id: z.string().optional(),
      claims: z.record(z.string(), z.unknown()).optional(),
      policy: z.string().optional(),
      cert: z.string().optional(),
    })
    .optional(),
  unrouted: z.object({ client_certificate: z.string().optional() }).optional(),
  interface: z.string(),
}).refine((r) => (r.caller === undefined) !== (r.unrouted === undefined), { message: 'exactly one of caller and unrouted' });

const forwardedResponseSchema = z.object({
  id: z.number().int().positive(),
  status: z.number().int().min(100).max(599),
  headers: z.record(z.string(), z.union([z.string(), z.number(), z.array(z.string())])),
  kind: z.enum(['json', 'none', 'bytes', 'text']),
  // Absent for answers without a body (JSON leaves undefined out).
  body: z.unknown().optional(),
});

type ForwardedRequest = z.infer<typeof forwardedRequestSchema>;
type ForwardedResponse = z.infer<typeof forwardedResponseSchema>;

/** A forwarded frame's JSON payload checked against its schema; undefined (and logged) otherwise. */
function parseFrame<T>(schema: z.ZodType<T>, payload: Uint8Array, what: string, from: string, logger: Logger): T | undefined {
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(payload).toString('utf8'));
  } catch (e) {
    logger.info(`dropping a malformed ${what} from ${from}: ${errorMessage(e)}`);
    return undefined;
  }
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    logger.info(`dropping a malformed ${what} from ${from}: ${zodIssuesMessage(parsed.error, 'field')}`);
    return undefined;
  }
  return parsed.data;
}

/**
 * Headers a handler may read; others stay on the backup. x-covenant-consistency goes along: a
 * write forwarded to the primary waits for its commit there, a linearizable read is confirmed there.
 */
const FORWARDED_HEADERS = ['content-type', 'authorization', 'if-none-match', 'range', 'want-repr-digest', CONSISTENCY_HEADER];

export class PrimaryForwarder implements RequestForwarder {
  private nextId = 1;
  private readonly pending = new Map<number, { to: string; resolve: (r: RouteResponse) => void; reject: (e: unknown) => void; timer: TimerHandle }>();
  /** Armed while requests wait: checks that the node they went to is still the primary. */
  private primaryCheck: TimerHandle | undefined;

  constructor(
    private readonly node: NodeFrames,
    /** The node's request pipeline, which runs the requests forwarded to this node. */
    private readonly pipeline: () => RequestPipeline,
    private readonly logger: Logger,
    /** Times out requests the primary does not answer. */
    private readonly clock: Clock,
    private readonly timeoutMs = forwardedRequestTimeoutMs,
    /** The node's waiting-work budget, which requests forwarded to this node wait in too; absent: none. */
    private readonly waitingWork?: WaitingWorkBudget,
  ) {
    node.onFrame(FrameKind.ForwardedRequest, (from, payload) => {
      void this.onRequest(from, payload);
    });
    node.onFrame(FrameKind.ForwardedResponse, (from, payload) => this.onResponse(from, payload));
  }

  forward(ctx: RequestContext, rawQuery: string, unrouted = false): Promise<RouteResponse> {
    const primary = this.node.primaryId();
    if (!primary || primary === this.node.nodeId) {
      return Promise.reject(new CovenantError('NoPrimary', 'no primary is known at the moment: retry shortly', 503));
    }
    if (this.pending.size >= forwardedRequestsPendingMax) {
      return Promise.reject(new CovenantError('TooManyForwardedRequests', 'too many requests are waiting for the primary', 503));
    }
    const id = this.nextId++;
    const headers: Record<string, string> = {};
    for (const name of FORWARDED_HEADERS) {
      const value = ctx.headers[name];
      if (typeof value === 'string') headers[name] = value;
    }
    const request: ForwardedRequest = {
      id,
      method: ctx.method,
      path: ctx.path,
      query: rawQuery,
      headers,
      body: ctx.rawBody.toString('base64'),
      ...(unrouted ? { unrouted: ctx.clientCertificateDer ? { client_certificate: ctx.clientCertificateDer.toString('base64') } : {} } : { caller: ctx.caller }),
      interface: ctx.interfaceName,
    };
    return new Promise<RouteResponse>((resolve, reject) => {
      const timer = this.clock.setTimer(this.timeoutMs, () => {
        this.pending.delete(id);
        reject(new CovenantError('ForwardingTimedOut', `the primary did not answer within ${this.timeoutMs}ms`, 503));
      });
      this.pending.set(id, { to: primary, resolve, reject, timer });
      this.armPrimaryCheck();
      if (!this.node.sendFrame(primary, FrameKind.ForwardedRequest, Buffer.from(JSON.stringify(request)))) {
        timer.cancel();
        this.pending.delete(id);
        reject(new CovenantError('ForwardingFailed', 'the request could not be sent to the primary', 503));
      }
    });
  }

  /**
   * A request that went to a node which is no longer the primary (another was elected: the one it
   * went to may be gone) is answered at once rather than at the timeout. Like a timeout, it may or
   * may not have been executed there; the message says so.
   */
  private armPrimaryCheck(): void {
    if (this.primaryCheck !== undefined) return;
    this.primaryCheck = this.clock.setTimer(forwardedPrimaryCheckMs, () => {
      this.primaryCheck = undefined;
      const primary = this.node.primaryId();
      for (const [id, waiter] of this.pending) {
        if (primary === undefined || primary === waiter.to) continue;
        waiter.timer.cancel();
        this.pending.delete(id);
        waiter.reject(
          new CovenantError('PrimaryChanged', `node ${waiter.to} stopped being the primary (now ${primary}) before it answered: the request may or may not have been executed`, 503),
        );
      }
      if (this.pending.size > 0) this.armPrimaryCheck();
    });
  }

  private async onRequest(from: string, payload: Uint8Array): Promise<void> {
    const request = parseFrame(forwardedRequestSchema, payload, 'forwarded request', from, this.logger);
    if (request === undefined) return;
    let response: ForwardedResponse;
    const release = this.waitingWork?.tryTake(forwardedRequestCostBytes(payload.byteLength), `node ${from}`);
    try {
      if (this.waitingWork !== undefined && release === undefined) throw waitingWorkExhausted(this.waitingWork);
      const answer = await this.pipeline().handle({
        method: request.method,
        path: request.path,
        rawQuery: request.query,
        headers: request.headers,
        body: Buffer.from(request.body, 'base64'),
        remoteAddress: undefined,
        interfaceName: request.interface,
        ...(request.unrouted !== undefined
          ? { clientCertificateDer: certificateOf(request.unrouted.client_certificate), forwardedUnrouted: true }
          : { clientCertificateDer: undefined, forwardedCaller: request.caller! }),
      });
      response = toForwardedResponse(request.id, answer);
    } catch (e) {
      // A broken invariant stopped the node (the pipeline's failStop): nothing is answered.
      if (e instanceof InvariantError) return;
      const error = this.pipeline().failure(e);
      if (error === undefined) return;
      const { status, headers, body } = errorResponse(error);
      response = { id: request.id, status, headers: { ...(headers as Record<string, string>) }, kind: 'json', body };
    } finally {
      release?.();
    }
    this.node.sendFrame(from, FrameKind.ForwardedResponse, Buffer.from(JSON.stringify(response)));
  }

  private onResponse(from: string, payload: Uint8Array): void {
    const response = parseFrame(forwardedResponseSchema, payload, 'forwarded response', from, this.logger);
    if (response === undefined) return;
    const waiter = this.pending.get(response.id);
    if (!waiter) return;
    if (waiter.to !== from) {
      this.logger.info(`dropping a forwarded response from ${from}: request ${response.id} went to ${waiter.to}`);
      return;
    }
    this.pending.delete(response.id);
    waiter.timer.cancel();
    if (this.pending.size === 0) this.cancelPrimaryCheck();
    const body = response.kind === 'bytes' ? Buffer.from(String(response.body), 'base64') : response.body;
    waiter.resolve({ status: response.status, headers: response.headers, bodyKind: response.kind, body });
  }

  private cancelPrimaryCheck(): void {
    this.primaryCheck?.cancel();
    this.primaryCheck = undefined;
  }

  close(): void {
    this.cancelPrimaryCheck();
    for (const [id, waiter] of this.pending) {
      waiter.timer.cancel();
      waiter.reject(new CovenantError('NodeStopping', 'the node is stopping', 503));
      this.pending.delete(id);
    }
  }
}

function toForwardedResponse(id: number, answer: RouteResponse): ForwardedResponse {
  const kind = answer.bodyKind ?? (answer.body === undefined ? 'none' : 'json');
  const headers = { ...(answer.headers ?? {}) } as Record<string, string | number | string[]>;
  if (kind === 'bytes') return { id, status: answer.status, headers, kind, body: Buffer.from(answer.body as Uint8Array).toString('base64') };
  if (kind === 'stream') throw new CovenantError('NotForwardable', 'streamed answers cannot be forwarded', 500);
  return { id, status: answer.status, headers, kind, body: answer.body };
}

/** The client certificate a backup forwarded with a request it found no route for (absent: none was given). */
function certificateOf(base64: string | undefined): Buffer | undefined {
  return base64 === undefined ? undefined : Buffer.from(base64, 'base64');
}
