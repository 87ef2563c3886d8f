/**
 * Programmer-error assertions. A failed assertion means an invariant is broken: continuing could
 * fork the ledger, so it throws an AssertionError that is never mapped to a client answer.
 */
export class InvariantError extends Error {
  constructor(message: string) {
    super(`invariant violated: ${message}`);
    this.name = 'InvariantError';
  }
}

export function assert(condition: unknown, message: string | (() => string)): asserts condition {
  if (!condition) throw new InvariantError(typeof message === 'function' ? message() : message);
}

export function unreachable(value: never, message = 'unreachable'): never {
  throw new InvariantError(`${message}: ${JSON.stringify(value)}`);
}
