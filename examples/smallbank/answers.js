// Answers in the service's error shape ({"error": {"code", "message"}}), and the checks of
// request bodies: every body is a JSON object with exactly the keys its transaction names.

/** The largest amount one request may name: balances stay far inside the safe integers. */
export const VALUE_MAX = 1_000_000_000;
/** The most accounts one batch may open: ≈ 10 ms of a handler on an idle machine, far inside max_execution_time_ms (100 ms by default) on a busy one. */
export const BATCH_ACCOUNTS_MAX = 25;

export const fail = (statusCode, code, message) => ({ statusCode, body: { error: { code, message } } });
export const invalid = (message) => fail(400, 'InvalidInput', message);
export const notFound = (name) => fail(404, 'AccountNotFound', 'no account ' + JSON.stringify(name));
export const insufficient = (message) => fail(400, 'InsufficientFunds', message);

const NAME = /^[A-Za-z0-9_-]{1,64}$/;

/**
 * The request's body as an object holding exactly `keys`, each checked by its rule; returns
 * {value} or {error} (the answer). Rules: 'name', 'amount' (|v| ≤ VALUE_MAX), 'positive'
 * (1..VALUE_MAX), 'nonNegative' (0..VALUE_MAX), 'balance' (0..VALUE_MAX), 'index' (0..2^31).
 */
export function bodyOf(request, rules) {
  let body;
  try {
    body = request.body.json();
  } catch (e) {
    return { error: fail(400, 'InvalidJsonBody', 'the body is not JSON: ' + e.message) };
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { error: invalid('the body is a JSON object {' + Object.keys(rules).join(', ') + '}') };
  const extra = Object.keys(body).filter((k) => !(k in rules));
  if (extra.length > 0) return { error: invalid('body: unrecognized key(s) ' + extra.join(', ')) };
  for (const [key, rule] of Object.entries(rules)) {
    const problem = check(rule, body[key]);
    if (problem !== undefined) return { error: invalid('body "' + key + '": ' + problem) };
  }
  return { value: body };
}

/** What is wrong with `value` under `rule`, or undefined. */
export function check(rule, value) {
  if (rule === 'name') return typeof value === 'string' && NAME.test(value) ? undefined : 'an account name has 1 to 64 letters, digits, _ or -';
  const ranges = { amount: [-VALUE_MAX, VALUE_MAX], positive: [1, VALUE_MAX], nonNegative: [0, VALUE_MAX], balance: [0, VALUE_MAX], index: [0, 2 ** 31] };
  const [min, max] = ranges[rule];
  return Number.isSafeInteger(value) && value >= min && value <= max ? undefined : 'an integer from ' + min + ' to ' + max;
}
