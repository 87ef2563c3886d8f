/**
 * Ordering and validity of map names and keys. Every ordering the store exposes (write sets,
 * snapshots, forEach) is by UTF-8 bytes, so that all nodes and all languages agree on it.
 */

/**
 * Compares two strings by the order of their UTF-8 encodings without encoding them. UTF-16 code
 * unit order differs from code point (= UTF-8 byte) order only where a surrogate (U+D800..U+DFFF,
 * half of a code point above U+FFFF) meets a unit in U+E000..U+FFFF; when both units are at or
 * above U+D800, shifting those two ranges past each other fixes it.
 */
export function compareUtf8(a: string, b: string): number {
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    let x = a.charCodeAt(i);
    let y = b.charCodeAt(i);
    if (x === y) continue;
    if (x >= 0xd800 && y >= 0xd800) {
      x = x >= 0xe000 ? x - 0x800 : x + 0x2000;
      y = y >= 0xe000 ? y - 0x800 : y + 0x2000;
    }
    return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

// String.prototype.isWellFormed is in Node 20 but not in the ES2023 lib typings.
type MaybeWellFormed = { isWellFormed(): boolean };

/**
 * A string with a lone surrogate has no UTF-8 encoding: Node would write U+FFFD in its place and
 * a replica decoding the write set would hold a different key than the primary.
 */
export function isWellFormedKey(s: string): boolean {
  return (s as unknown as MaybeWellFormed).isWellFormed();
}

export const PUBLIC_MAP_PREFIX = 'public:';

/** Public maps are written to the ledger in clear; every other map is encrypted. */
export function isPublicMapName(name: string): boolean {
  return name.startsWith(PUBLIC_MAP_PREFIX);
}
