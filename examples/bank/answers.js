// Answers in the service's error shape, and the checks of request bodies.
export const fail = (statusCode, code, message) => ({ statusCode, body: { error: { code, message } } });
export const notFound = (id) => fail(404, 'AccountNotFound', 'no account ' + id);
export const forbidden = (message) => fail(403, 'Forbidden', message);
export const conflict = (code, message) => fail(409, code, message);

export function jsonBody(request) {
  try {
    const value = request.body.json();
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return { error: fail(400, 'InvalidInput', 'the body is a JSON object') };
    return { value };
  } catch (e) {
    return { error: fail(400, 'InvalidJsonBody', 'the body is not JSON: ' + e.message) };
  }
}

/** A positive whole amount (cents), or the error answer. */
export function asAmount(value) {
  if (!Number.isSafeInteger(value) || value <= 0) return fail(400, 'InvalidInput', '"amount" is a positive integer (cents)');
  return value;
}
