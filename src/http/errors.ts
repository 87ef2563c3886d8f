/**
 * The one place that maps errors to HTTP answers: `{"error": {"code", "message"}}` with the
 * status carried by the CovenantError. Anything else is an internal error (logged, never leaked).
 */
import { CovenantError, isCovenantError } from '../base/errors.js';
import { z } from 'zod';
import { isTokenError } from '../jwt/index.js';

export function zodIssuesMessage(error: z.ZodError, where: string): string {
  return error.issues
    .map((issue) => {
      const path = issue.path.length ? `${where} "${issue.path.join('.')}"` : where;
      return `${path}: ${issue.message}`;
    })
    .join('; ');
}

/** 405: the path exists with other methods, named in the answer's Allow header. */
export class MethodNotAllowed extends CovenantError {
  constructor(
    method: string,
    path: string,
    readonly allowed: readonly string[],
  ) {
    super('UnsupportedHttpVerb', `${method} is not allowed on ${path} (allowed: ${allowed.join(', ')})`, 405);
  }
}

export function toCovenantError(e: unknown): CovenantError {
  if (isCovenantError(e)) return e;
  if (e instanceof z.ZodError) return new CovenantError('InvalidInput', zodIssuesMessage(e, 'input'), 400);
  return new CovenantError('InternalError', 'the request could not be processed because of an internal error', 500);
}

/** The headers an error answer carries besides its JSON body: Retry-After for refusals by rate or capacity, WWW-Authenticate for a refused bearer token, Allow for a method the path does not take. */
export function errorHeaders(error: CovenantError): Record<string, string> {
  if (error instanceof MethodNotAllowed) return { allow: error.allowed.join(', ') };
  if (isTokenError(error)) {
    // RFC 6750, 3.1: the refused bearer token, and why.
    const description = error.message.replace(/[\\"]/g, "'").replace(/[^\x20-\x7e]/g, '?');
    return { 'www-authenticate': `Bearer realm="covenant", error="invalid_token", error_description="${description}"` };
  }
  return error.retryAfterSeconds === undefined ? {} : { 'retry-after': String(error.retryAfterSeconds) };
}

export const httpErrors = {
  notFound: (path: string) => new CovenantError('ResourceNotFound', `Unknown path: ${path}`, 404),
  methodNotAllowed: (method: string, path: string, allowed: readonly string[]) => new MethodNotAllowed(method, path, allowed),
  payloadTooLarge: (limitBytes: number) =>
    new CovenantError('RequestBodyTooLarge', `request body exceeds the limit of ${limitBytes} bytes`, 413),
  invalidJson: (reason: string) => new CovenantError('InvalidJsonBody', `request body is not valid JSON: ${reason}`, 400),
  missingQuery: (name: string) =>
    new CovenantError('MissingRequiredQueryParameter', `missing required query parameter "${name}"`, 400),
  invalidQuery: (message: string) => new CovenantError('InvalidQueryParameterValue', message, 400),
  invalidBody: (message: string) => new CovenantError('InvalidInput', message, 400),
  /** A route the API already lists (GET /node/api) whose capability this version does not have yet. */
  notImplemented: (what: string) => new CovenantError('NotImplemented', `${what} is not available in this version of the node`, 501),
};
