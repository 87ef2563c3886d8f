/**
 * JSON from outside the node (request bodies, proposals, ballots). JSON.parse itself accepts any
 * nesting, but everything that later walks the value recursively (schema checks, JSON.stringify
 * into the store, the constitution's sandbox) would overflow the stack on a document nested many
 * thousands of levels deep; such documents are refused where they are parsed, with a clear error.
 *
 * Two more things JSON.parse accepts are refused, as ambiguous input to a ledger:
 * - an object naming the same key twice (JSON.parse keeps the last; another reader may keep the
 *   first, so the signer, the node and an auditor could read different documents);
 * - a string holding a lone surrogate (an escape \uD800-\uDFFF not in a pair): it is no Unicode
 *   text, so it cannot be stored as UTF-8 and read back as the same string.
 */

/** The deepest nesting of arrays and objects accepted in JSON from outside the node. */
export const JSON_NESTING_MAX = 128;

/**
 * JSON.parse that also refuses documents nested deeper than `maxDepth`, duplicate keys and lone
 * surrogates; throws SyntaxError. The checks cost little next to the parse itself:
 * - V8's JSON.parse does not recurse, so the depth is checked on the parsed value: a walk that
 *   visits only arrays and objects and stops at the limit; it also counts the keys it sees.
 * - Duplicate keys: JSON.parse keeps one key per name, so the document names a key twice exactly
 *   when it holds more members than the parsed value has keys. Every member has one ':' outside
 *   strings, so a scan counting those decides; it jumps over strings with indexOf (the bulk of a
 *   large body). It is skipped when the value has no key (so no member either), or when the text
 *   holds no more colons at all than the value has keys (the common case: a few indexOf calls).
 * - Lone surrogates can only come from \u escapes (the body was checked to be UTF-8): strings are
 *   checked only when the text holds an escape of a surrogate.
 */
export function parseExternalJson(text: string, maxDepth = JSON_NESTING_MAX): unknown {
  const value = JSON.parse(text) as unknown;
  if (typeof value === 'object' && value !== null) {
    const keys = checkNesting(value, 1, maxDepth);
    // Colons in strings only add to the count: as many colons as keys proves every member distinct.
    if (keys > 0 && countColons(text) !== keys && countMembers(text) !== keys) throw new SyntaxError('an object names the same key more than once');
  }
  if (text.includes('\\u') && SURROGATE_ESCAPE.test(text) && !isWellFormedValue(value)) {
    throw new SyntaxError('a string holds a lone surrogate (a \\uD800-\\uDFFF escape not in a pair)');
  }
  return value;
}

/**
 * Throws when `value`, at `depth`, holds arrays or objects deeper than `maxDepth`; returns the
 * number of object keys within. Recurses at most maxDepth deep.
 */
function checkNesting(value: object, depth: number, maxDepth: number): number {
  if (depth > maxDepth) throw new SyntaxError(`nested deeper than ${maxDepth} levels of arrays and objects`);
  let keys = 0;
  if (Array.isArray(value)) {
    for (const item of value as unknown[]) if (typeof item === 'object' && item !== null) keys += checkNesting(item, depth + 1, maxDepth);
    return keys;
  }
  // A parsed object's own "__proto__" key is a data property, which shadows the inherited accessor.
  for (const key in value) {
    keys++;
    const item = (value as Record<string, unknown>)[key];
    if (typeof item === 'object' && item !== null) keys += checkNesting(item, depth + 1, maxDepth);
  }
  return keys;
}

const QUOTE = 0x22;
const COLON = 0x3a;
const BACKSLASH = 0x5c;

/** Every ':' in the text, in strings or not. */
function countColons(text: string): number {
  let colons = 0;
  for (let i = text.indexOf(':'); i !== -1; i = text.indexOf(':', i + 1)) colons++;
  return colons;
}

/** Object members in valid JSON text: the ':' outside strings. */
function countMembers(text: string): number {
  let members = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === COLON) members++;
    else if (c === QUOTE) i = closingQuote(text, i + 1);
  }
  return members;
}

/** The index of the quote that closes the string opened before `from` (the text is valid JSON). */
function closingQuote(text: string, from: number): number {
  for (;;) {
    const q = text.indexOf('"', from);
    // Escaped when an odd number of backslashes precede it.
    let b = q - 1;
    while (text.charCodeAt(b) === BACKSLASH) b--;
    if ((q - 1 - b) % 2 === 0) return q;
    from = q + 1;
  }
}

/**
 * A high-surrogate escape not followed by a low one, or a low one not preceded by a high one.
 * Text decoded from UTF-8 holds no surrogate code units of its own, so only escapes can make
 * one. An escaped backslash before "u" may match too, which only costs the exact check.
 */
const SURROGATE_ESCAPE = /\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F]/;

/** In a Unicode-mode pattern a surrogate pair is one code point: only a lone surrogate is a "Cs" one. */
const LONE_SURROGATE = /\p{Cs}/u;

function isWellFormedValue(value: unknown): boolean {
  if (typeof value === 'string') return !LONE_SURROGATE.test(value);
  if (typeof value !== 'object' || value === null) return true;
  if (Array.isArray(value)) return (value as unknown[]).every(isWellFormedValue);
  for (const key in value) {
    if (LONE_SURROGATE.test(key) || !isWellFormedValue((value as Record<string, unknown>)[key])) return false;
  }
  return true;
}
