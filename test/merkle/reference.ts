/**
 * A naive recursive model of the history tree (RFC 6962 MTH and PATH, with CCF's unprefixed hashes),
 * written straight from docs/merkle.md and independent of src/merkle, to check the real tree against.
 */
import nodeCrypto from 'node:crypto';

export type RefStep = { left: string } | { right: string };

const h = (...parts: Uint8Array[]): Uint8Array => new Uint8Array(nodeCrypto.createHash('sha256').update(Buffer.concat(parts)).digest());
const hex = (b: Uint8Array) => Buffer.from(b).toString('hex');

function split(n: number): number {
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}

export function refRoot(leaves: readonly Uint8Array[]): Uint8Array {
  if (leaves.length === 0) return h();
  if (leaves.length === 1) return leaves[0]!;
  const k = split(leaves.length);
  return h(refRoot(leaves.slice(0, k)), refRoot(leaves.slice(k)));
}

/** Leaf-to-root path of leaf m in the tree of `leaves`. */
export function refPath(m: number, leaves: readonly Uint8Array[]): RefStep[] {
  if (leaves.length <= 1) return [];
  const k = split(leaves.length);
  if (m < k) return [...refPath(m, leaves.slice(0, k)), { right: hex(refRoot(leaves.slice(k))) }];
  return [...refPath(m - k, leaves.slice(k)), { left: hex(refRoot(leaves.slice(0, k))) }];
}

/** Deterministic distinct leaves: leaf i = SHA-256(seed ‖ u32be(i)). */
export function makeLeaves(count: number, seed = 0): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let i = 0; i < count; i++) {
    const b = Buffer.alloc(8);
    b.writeUInt32BE(seed >>> 0, 0);
    b.writeUInt32BE(i, 4);
    out.push(h(b));
  }
  return out;
}
