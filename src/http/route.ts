/**
 * The typed route table: the single source of routing, request validation and the OpenAPI
 * document served at /node/api. Frontends (/node, /gov, /app) are lists of Route.
 */
import type { IncomingHttpHeaders } from 'node:http';
import type { Readable } from 'node:stream';
import { z } from 'zod';
import type { CovenantError } from '../base/errors.js';
import type { StoreView, Tx } from '../kv/index.js';
import type { WriteOptions, WriteResult } from '../node/api.js';

export type HttpMethod = 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE';

export type OperatorFeature = 'LedgerChunkRead' | 'SnapshotRead' | 'SnapshotCreate';

/** Who may call a route. The app's policies are checked by the server before the handler runs. */
export type AuthPolicy = 'none' | 'user_cert' | 'user_cert_or_jwt' | 'member_cose';

export interface Caller {
  readonly kind: 'anonymous' | 'user' | 'member' | 'jwt';
  readonly id?: string;
  readonly claims?: Record<string, unknown>;
  /** The application endpoint policy that accepted the caller (user_cert, jwt, ...), for application handlers. */
  readonly policy?: string;
  /** PEM of a client certificate no user or member registered (application policy any_cert). */
  readonly cert?: string;
}

/**
 * How the request pipeline (pipeline.ts) runs an endpoint, declared by the endpoint rather than
 * chosen by its handler:
 * - `readwrite`: executed on the primary (a backup forwards it); `x-covenant-consistency:
 *   committed` (or `linearizable`) answers it once its transaction is committed;
 * - `readonly`: executed on the node that received it, from its current state; with
 *   `x-covenant-consistency: linearizable`, by the primary (a backup forwards it) from the
 *   committed state once consensus confirmed the read (ReadIndex);
 * - `historical`: executed where it arrived, on a past committed transaction it names;
 * - `operator`: about the node that received it (its state, its files, a join, a redirect):
 *   executed there, never forwarded, no consistency header.
 * Default: `readwrite` for POST, PUT and DELETE, `readonly` for GET and HEAD.
 */
export type EndpointMode = 'readwrite' | 'readonly' | 'historical' | 'operator';

/** A read function's view of the store: a transaction's maps and declared tables, or the committed state's. */
export type StateReader = Pick<StoreView, 'map' | 'table'>;

/**
 * The store as the request's mode and consistency give it, provided by the pipeline: a handler
 * reads and writes through these, and the pipeline knows the transaction the answer names
 * (x-covenant-transaction-id) and which commit to wait for.
 */
export interface RequestState {
  /**
   * Reads the node's current state, or (a linearizable read) the committed state confirmed by
   * consensus. `version`: the version read (a deterministic seed for what runs on it).
   */
  read<T>(fn: (reader: StateReader, version: number) => T): T;
  /** Executes a write transaction on this node (the primary: the pipeline forwarded it otherwise). */
  write<T>(fn: (tx: Tx) => T, options?: WriteOptions): WriteResult<T>;
}

export interface RequestContext<Q = Record<string, string>, B = unknown> {
  readonly method: HttpMethod;
  readonly path: string;
  readonly params: Record<string, string>;
  readonly query: Q;
  readonly body: B;
  readonly rawBody: Buffer;
  readonly headers: IncomingHttpHeaders;
  readonly caller: Caller;
  /** DER of the TLS client certificate, when one was presented. */
  readonly clientCertificateDer: Buffer | undefined;
  /** The remote address of the connection (undefined for a request a backup forwarded, or a closed socket). */
  readonly remoteAddress: string | undefined;
  readonly interfaceName: string;
  /** Reads and writes as the endpoint's mode and the request's consistency give them. */
  readonly state: RequestState;
}

export interface RouteResponse {
  readonly status: number;
  readonly headers?: Record<string, string | number | readonly string[]>;
  /** JSON-serialisable value, raw bytes, a stream, or nothing. */
  readonly body?: unknown;
  readonly bodyKind?: 'json' | 'bytes' | 'stream' | 'text' | 'none';
}

export type RouteHandler<Q = any, B = any> = (ctx: RequestContext<Q, B>) => RouteResponse | Promise<RouteResponse>;

export interface Route<Q = any, B = any> {
  readonly method: HttpMethod | readonly HttpMethod[];
  /** Path template, e.g. `/node/network/nodes/{node_id}` or `/gov/members/proposals/{id}:withdraw`. */
  readonly path: string;
  readonly summary: string;
  readonly auth?: AuthPolicy;
  readonly query?: z.ZodType<Q>;
  readonly body?: z.ZodType<B>;
  /** The route exists only on interfaces whose enabled_operator_features include this one. */
  readonly feature?: OperatorFeature;
  /** Where and how the pipeline runs the route (see EndpointMode); default by method. */
  readonly mode?: EndpointMode;
  /** Response statuses documented in OpenAPI. */
  readonly responses?: Readonly<Record<number, string>>;
  /**
   * Authenticates the caller instead of `auth` (an application endpoint's list of policies): the
   * pipeline calls it before the body is read, and a backup before it forwards.
   */
  readonly authenticate?: (request: { headers: IncomingHttpHeaders; clientCertificateDer: Buffer | undefined }) => Caller | Promise<Caller>;
  /** An OpenAPI operation fragment merged into the route's operation in /node/api (an application endpoint's `openapi`). */
  readonly openapi?: Readonly<Record<string, unknown>>;
  readonly handler: RouteHandler<Q, B>;
}

export function json(status: number, body: unknown, headers?: RouteResponse['headers']): RouteResponse {
  return headers === undefined ? { status, body, bodyKind: 'json' } : { status, body, bodyKind: 'json', headers };
}

/** An error answer that carries headers of its own (a read's 404 names the state it read). */
export function errorJson(error: CovenantError, headers: RouteResponse['headers']): RouteResponse {
  return json(error.status, error.toBody(), headers);
}

export function noContent(headers?: RouteResponse['headers']): RouteResponse {
  return headers === undefined ? { status: 204, bodyKind: 'none' } : { status: 204, bodyKind: 'none', headers };
}

export function bytes(status: number, body: Uint8Array, headers?: RouteResponse['headers']): RouteResponse {
  return { status, body, bodyKind: 'bytes', ...(headers ? { headers } : {}) };
}

export function stream(status: number, body: Readable, headers?: RouteResponse['headers']): RouteResponse {
  return { status, body, bodyKind: 'stream', ...(headers ? { headers } : {}) };
}

/** The mode a route runs in: its own, or by method (writes readwrite, reads readonly). */
export function modeOf(route: Route, method: HttpMethod): EndpointMode {
  if (route.mode !== undefined) return route.mode;
  return method === 'POST' || method === 'PUT' || method === 'DELETE' ? 'readwrite' : 'readonly';
}

export function routeMethods(route: Route): readonly HttpMethod[] {
  return typeof route.method === 'string' ? [route.method] : route.method;
}

/**
 * Query parameters arrive as text; these parse them and describe them in /node/api by what they
 * mean (an integer, a boolean), as the spec's operator table names them.
 */
export const integerQuery = z
  .string()
  .regex(/^\d+$/, { message: 'must be a non-negative integer', abort: true })
  // Beyond 2^53 - 1, Number() rounds (or gives Infinity): a redirect would pass on another value.
  .refine((v) => Number.isSafeInteger(Number(v)), `must be at most ${Number.MAX_SAFE_INTEGER}`)
  .meta({ type: 'integer', minimum: 0, maximum: Number.MAX_SAFE_INTEGER })
  .transform(Number);
export const booleanQuery = z.enum(['true', 'false']).meta({ type: 'boolean', enum: [true, false] }).transform((v) => v === 'true');
