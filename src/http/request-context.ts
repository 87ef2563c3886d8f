/**
 * A request's parts turned into the RequestContext a handler sees: the body read under its size
 * limit, the query and body validated with the route's zod schemas (the request pipeline's
 * "validate" step, pipeline.ts).
 */
import { isUtf8 } from 'node:buffer';
import type { IncomingMessage } from 'node:http';
import type { z } from 'zod';
import { CovenantError } from '../base/errors.js';
import { parseExternalJson } from '../base/json.js';
import type { Caller, HttpMethod, RequestContext, RequestState, Route } from './route.js';
import { httpErrors, zodIssuesMessage } from './errors.js';

export interface RequestParts {
  readonly method: HttpMethod;
  readonly path: string;
  readonly params: Record<string, string>;
  readonly rawQuery: string;
  readonly rawBody: Buffer;
  readonly headers: IncomingMessage['headers'];
  readonly caller: Caller;
  readonly clientCertificateDer: Buffer | undefined;
  readonly remoteAddress: string | undefined;
  readonly interfaceName: string;
  readonly state: RequestState;
}

/** Validates the query and body of a request for its route. */
export function buildRequestContext(route: Route, parts: RequestParts): RequestContext {
  const queryObject: Record<string, string> = {};
  if (parts.rawQuery !== '') {
    for (const [k, v] of new URLSearchParams(parts.rawQuery)) {
      // No parameter of the API takes several values: which one was meant would be a guess.
      if (Object.hasOwn(queryObject, k)) throw httpErrors.invalidQuery(`query parameter "${k}" is given more than once`);
      queryObject[k] = v;
    }
  }
  let query: unknown = queryObject;
  if (route.query) {
    const parsed = route.query.safeParse(queryObject);
    if (!parsed.success) throw queryError(parsed.error, queryObject);
    query = parsed.data;
  }
  let body: unknown = undefined;
  if (route.body) {
    let value: unknown;
    if (parts.rawBody.length > 0) {
      // JSON is UTF-8 (RFC 8259); decoding other bytes would silently store U+FFFD instead.
      if (!isUtf8(parts.rawBody)) throw httpErrors.invalidJson('the body is not valid UTF-8');
      try {
        value = parseExternalJson(parts.rawBody.toString('utf8'));
      } catch (e) {
        throw httpErrors.invalidJson((e as Error).message);
      }
    }
    const parsed = route.body.safeParse(value);
    if (!parsed.success) throw httpErrors.invalidBody(zodIssuesMessage(parsed.error, 'body'));
    body = parsed.data;
  }
  return {
    method: parts.method,
    path: parts.path,
    params: parts.params,
    query: query as Record<string, string>,
    body,
    rawBody: parts.rawBody,
    headers: parts.headers,
    caller: parts.caller,
    clientCertificateDer: parts.clientCertificateDer,
    remoteAddress: parts.remoteAddress,
    interfaceName: parts.interfaceName,
    state: parts.state,
  };
}

function queryError(error: z.ZodError, given: Record<string, string>): CovenantError {
  const first = error.issues[0];
  const name = first?.path[0];
  if (typeof name === 'string' && !(name in given)) return httpErrors.missingQuery(name);
  return httpErrors.invalidQuery(zodIssuesMessage(error, 'query parameter'));
}

const NO_BODY = Buffer.alloc(0);

/** Reads the whole body, refusing (413) as soon as it exceeds the limit. `done` is called once. */
export function readBody(req: IncomingMessage, limitBytes: number, done: (error: CovenantError | undefined, body: Buffer) => void): void {
  const declared = Number(req.headers['content-length'] ?? 0);
  if (declared > limitBytes) {
    req.resume();
    done(httpErrors.payloadTooLarge(limitBytes), NO_BODY);
    return;
  }
  if (declared === 0 && req.headers['transfer-encoding'] === undefined) {
    req.resume();
    done(undefined, NO_BODY);
    return;
  }
  let chunks: Buffer[] | undefined;
  let first: Buffer | undefined;
  let received = 0;
  let finished = false;
  req.on('data', (chunk: Buffer) => {
    if (finished) return;
    received += chunk.length;
    if (received > limitBytes) {
      finished = true;
      done(httpErrors.payloadTooLarge(limitBytes), NO_BODY);
      return;
    }
    if (first === undefined) first = chunk;
    else (chunks ??= [first]).push(chunk);
  });
  req.on('end', () => {
    if (finished) return;
    finished = true;
    done(undefined, chunks !== undefined ? Buffer.concat(chunks) : (first ?? NO_BODY));
  });
  req.on('error', (e) => {
    if (finished) return;
    finished = true;
    done(new CovenantError('RequestAborted', `request body could not be read: ${e.message}`, 400), NO_BODY);
  });
}
