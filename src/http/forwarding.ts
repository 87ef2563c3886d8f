/**
 * Forwarding of client requests from a backup to the primary over the node-to-node channel
 * (issue: "writes and anything that needs the primary are forwarded to the primary; the client
 * sees one answer with the transaction id"). The backup authenticates the caller itself; the
 * primary trusts the caller identity because the channel authenticates the backup node.
 */
import { CovenantError, errorMessage } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import { FrameKind, type CovenantNode } from '../node/node.js';
import { toCovenantError } from './errors.js';
import type { Caller, HttpMethod, RequestContext, Route, RouteResponse } from './route.js';
import type { Router } from './router.js';
import { buildRequestContext, type RequestForwarder } from './server.js';

interface ForwardedRequest {
  id: number;
  method: HttpMethod;
  path: string;
  query: string;
  headers: Record<string, string>;
  body: string;
  caller: Caller;
  interface: string;
}

interface ForwardedResponse {
  id: number;
  status: number;
  headers: Record<string, string | number | string[]>;
  kind: 'json' | 'none' | 'bytes' | 'text';
  body: unknown;
}

/** Headers a handler may read; others stay on the backup. */
const FORWARDED_HEADERS = ['content-type', 'authorization', 'if-none-match', 'range', 'want-repr-digest'];
const MAX_PENDING_FORWARDS = 10_000;

export class PrimaryForwarder implements RequestForwarder {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (r: RouteResponse) => void; reject: (e: unknown) => void; timer: NodeJS.Timeout }>();

  constructor(
    private readonly node: CovenantNode,
    private readonly router: () => Router,
    private readonly logger: Logger,
    private readonly timeoutMs = 10_000,
  ) {
    node.onFrame(FrameKind.ForwardedRequest, (from, payload) => {
      void this.onRequest(from, payload);
    });
    node.onFrame(FrameKind.ForwardedResponse, (from, payload) => this.onResponse(from, payload));
  }

  shouldForward(route: Route, method: HttpMethod): boolean {
    if (this.node.isPrimary()) return false;
    if (route.forward !== undefined) return route.forward;
    return method === 'POST' || method === 'PUT' || method === 'DELETE';
  }

  forward(route: Route, ctx: RequestContext, rawQuery: string): Promise<RouteResponse> {
    const primary = this.node.primaryId();
    if (!primary || primary === this.node.nodeId) {
      return Promise.reject(new CovenantError('NoPrimary', 'no primary is known at the moment: retry shortly', 503));
    }
    if (this.pending.size >= MAX_PENDING_FORWARDS) {
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
      caller: ctx.caller,
      interface: ctx.interfaceName,
    };
    void route;
    return new Promise<RouteResponse>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new CovenantError('ForwardingTimedOut', `the primary did not answer within ${this.timeoutMs}ms`, 503));
      }, this.timeoutMs);
      this.pending.set(id, { resolve, reject, timer });
      if (!this.node.sendFrame(primary, FrameKind.ForwardedRequest, Buffer.from(JSON.stringify(request)))) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(new CovenantError('ForwardingFailed', 'the request could not be sent to the primary', 503));
      }
    });
  }

  private async onRequest(from: string, payload: Uint8Array): Promise<void> {
    let request: ForwardedRequest;
    try {
      request = JSON.parse(Buffer.from(payload).toString('utf8')) as ForwardedRequest;
      if (typeof request.id !== 'number' || typeof request.path !== 'string') throw new Error('missing id or path');
    } catch (e) {
      this.logger.info(`dropping a malformed forwarded request from ${from}: ${errorMessage(e)}`);
      return;
    }
    let response: ForwardedResponse;
    try {
      if (!this.node.isPrimary()) throw new CovenantError('NotPrimary', 'the node the request was forwarded to is no longer primary', 503);
      const match = this.router().match(request.method, request.path);
      if (match.kind !== 'found') throw new CovenantError('ResourceNotFound', `Unknown path: ${request.path}`, 404);
      const ctx = buildRequestContext(match.match.route, {
        method: request.method,
        path: request.path,
        params: match.match.params,
        rawQuery: request.query,
        rawBody: Buffer.from(request.body, 'base64'),
        headers: request.headers,
        caller: request.caller,
        clientCertificateDer: undefined,
        interfaceName: request.interface,
      });
      const answer = await match.match.route.handler(ctx);
      response = toForwardedResponse(request.id, answer);
    } catch (e) {
      const error = toCovenantError(e);
      if (error.code === 'InternalError') this.logger.fail(`forwarded request failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      response = { id: request.id, status: error.status, headers: {}, kind: 'json', body: error.toBody() };
    }
    this.node.sendFrame(from, FrameKind.ForwardedResponse, Buffer.from(JSON.stringify(response)));
  }

  private onResponse(from: string, payload: Uint8Array): void {
    let response: ForwardedResponse;
    try {
      response = JSON.parse(Buffer.from(payload).toString('utf8')) as ForwardedResponse;
    } catch (e) {
      this.logger.info(`dropping a malformed forwarded response from ${from}: ${errorMessage(e)}`);
      return;
    }
    const waiter = this.pending.get(response.id);
    if (!waiter) return;
    this.pending.delete(response.id);
    clearTimeout(waiter.timer);
    const body = response.kind === 'bytes' ? Buffer.from(String(response.body), 'base64') : response.body;
    waiter.resolve({ status: response.status, headers: response.headers, bodyKind: response.kind, body });
  }

  close(): void {
    for (const [id, waiter] of this.pending) {
      clearTimeout(waiter.timer);
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
