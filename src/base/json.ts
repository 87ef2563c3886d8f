/**
 * JSON from outside the node (request bodies, proposals, ballots). JSON.parse itself accepts any
 * nesting, but everything that later walks the value recursively (schema checks, JSON.stringify
 * into the store, the constitution's sandbox) would overflow the stack on a document nested many
 * thousands of levels deep; such documents are refused where they are parsed, with a clear error.
 */

/** The deepest nesting of arrays and objects accepted in JSON from outside the node. */
export const JSON_NESTING_MAX = 128;

/** JSON.parse that also refuses documents nested deeper than `maxDepth`; throws SyntaxError. */
export function parseExternalJson(text: string, maxDepth = JSON_NESTING_MAX): unknown {
  // Each level takes at least two characters ("[" and "]"), so a short text cannot be too deep.
  if (text.length > 2 * maxDepth) checkNesting(text, maxDepth);
  return JSON.parse(text) as unknown;
}

function checkNesting(text: string, maxDepth: number): void {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) throw new SyntaxError(`nested deeper than ${maxDepth} levels of arrays and objects`);
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
}
