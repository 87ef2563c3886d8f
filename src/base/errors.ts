/**
 * Operating errors: typed, with a stable PascalCase `code` and the HTTP status that the
 * single error mapping in src/http uses. Programmer errors are assertions (see assert.ts).
 */
export class CovenantError extends Error {
  readonly code: string;
  readonly status: number;
  readonly details: Record<string, unknown> | undefined;
  /**
   * For a refusal by rate or capacity: whole seconds after which the same request may succeed,
   * answered as Retry-After (RFC 9110, 10.2.3) beside the JSON error.
   */
  readonly retryAfterSeconds: number | undefined;

  constructor(code: string, message: string, status = 500, details?: Record<string, unknown>, retryAfterSeconds?: number) {
    // An answer to a bad request needs no stack, and capturing one costs more than the rest of
    // the answer (a client sending many bad requests would mostly make stacks). 5xx keep theirs.
    const limit = Error.stackTraceLimit;
    if (status < 500) Error.stackTraceLimit = 0;
    super(message);
    Error.stackTraceLimit = limit;
    this.name = 'CovenantError';
    this.code = code;
    this.status = status;
    this.details = details;
    this.retryAfterSeconds = retryAfterSeconds;
  }

  toBody(): { error: { code: string; message: string; details?: Record<string, unknown> } } {
    return this.details === undefined
      ? { error: { code: this.code, message: this.message } }
      : { error: { code: this.code, message: this.message, details: this.details } };
  }
}

export const badRequest = (code: string, message: string, details?: Record<string, unknown>) =>
  new CovenantError(code, message, 400, details);
export const notFound = (code: string, message: string) => new CovenantError(code, message, 404);
export const unauthorized = (code: string, message: string) => new CovenantError(code, message, 401);
export const forbidden = (code: string, message: string) => new CovenantError(code, message, 403);
export const conflict = (code: string, message: string) => new CovenantError(code, message, 409);
export const unavailable = (code: string, message: string) => new CovenantError(code, message, 503);
export const internal = (code: string, message: string) => new CovenantError(code, message, 500);

export function isCovenantError(e: unknown): e is CovenantError {
  return e instanceof CovenantError;
}

/** Message of any thrown value, for logs and error bodies. */
export function errorMessage(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
