/**
 * JSON from outside the node (request bodies, proposals, ballots). JSON.parse itself accepts any
 * nesting, but everything that later walks the value recursively (schema checks, JSON.stringify
 * into the store, the constitution's sandbox) would overflow the stack on a document nested many
 * thousands of levels deep; such documents are refused where they are parsed, with a clear error.
 */

/** The deepest nesting of arrays and objects accepted in JSON from outside the node. */
export const JSON_NESTING_MAX = 128;

/**
 * JSON.parse that also refuses documents nested deeper than `maxDepth`; throws SyntaxError.
 * V8's JSON.parse does not recurse, so the depth is checked on the parsed value: a walk that visits
 * only arrays and objects and stops at the limit. That is cheap next to the parse itself, where a
 * scan of the text would cost several times the parse for a long string (a 32 MB message).
 */
export function parseExternalJson(text: string, maxDepth = JSON_NESTING_MAX): unknown {
  const value = JSON.parse(text) as unknown;
  if (typeof value === 'object' && value !== null) checkNesting(value, 1, maxDepth);
  return value;
}

/** Throws when `value`, at `depth`, holds arrays or objects deeper than `maxDepth`. Recurses at most maxDepth deep. */
function checkNesting(value: object, depth: number, maxDepth: number): void {
  if (depth > maxDepth) throw new SyntaxError(`nested deeper than ${maxDepth} levels of arrays and objects`);
  if (Array.isArray(value)) {
    for (const item of value as unknown[]) if (typeof item === 'object' && item !== null) checkNesting(item, depth + 1, maxDepth);
    return;
  }
  // A parsed object's own "__proto__" key is a data property, which shadows the inherited accessor.
  for (const key in value) {
    const item = (value as Record<string, unknown>)[key];
    if (typeof item === 'object' && item !== null) checkNesting(item, depth + 1, maxDepth);
  }
}
