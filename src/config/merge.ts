/** Recursive merge of JSON configuration fragments (the sandbox's `--node-config` overrides). */

/** A fragment of T: objects may leave keys out at any depth; arrays are given whole. */
export type DeepPartial<T> = T extends readonly unknown[]
  ? T
  : T extends object
    ? { [K in keyof T]?: DeepPartial<T[K]> }
    : T;

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/**
 * Returns `base` overlaid with `fragment`: objects are merged key by key, recursively; arrays and
 * scalars (null included) in the fragment replace the base value; keys whose fragment value is
 * undefined keep the base value. Neither argument is modified.
 */
export function deepMerge<T>(base: T, fragment: DeepPartial<T>): T;
export function deepMerge(base: unknown, fragment: unknown): unknown;
export function deepMerge(base: unknown, fragment: unknown): unknown {
  if (fragment === undefined) return base;
  if (!isPlainObject(base) || !isPlainObject(fragment)) return fragment;
  const merged = new Map<string, unknown>(Object.entries(base));
  for (const [key, value] of Object.entries(fragment)) {
    if (value === undefined) continue;
    merged.set(key, deepMerge(merged.get(key), value));
  }
  // fromEntries defines own properties, so a "__proto__" key from JSON stays data, never a prototype.
  return Object.fromEntries(merged);
}
