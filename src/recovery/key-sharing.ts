/**
 * Splitting the wrapping key into Shamir shares and reassembling it, with `shamir-secret-sharing`
 * (docs/architecture.md, "Dependencies"; docs/recovery.md, "Shamir sharing"). This module only
 * adapts the library's raw shares (y values ‖ x coordinate, as plain Uint8Arrays) to `ShamirShare`
 * and handles a threshold of 1, which the library refuses; the arithmetic is the library's.
 *
 * The library's functions are async and draw from the host's CSPRNG, not from the injected source:
 * shares are issued and reassembled outside any KV transaction (the node prepares them, then
 * writes the result), so neither matters to the deterministic zone: the share bytes are written
 * to the ledger only encrypted, and nothing's control flow depends on them.
 *
 * Threshold 1: the library needs a threshold and a share count of at least 2. A threshold of 1
 * means any one member recovers alone, so every member's share holds the wrapping key itself as
 * its y values (what Shamir sharing with a polynomial of degree 0 gives), at indexes 1..count in
 * the members' order; one share reassembles to its y values. Each share is still encrypted to its
 * own member. No arithmetic is involved, only copies.
 */
import { assert } from '../base/index.js';
import { combine, split } from 'shamir-secret-sharing';
import type { ShamirShare } from './share-format.js';

/** The library's raw share: y values followed by the x coordinate, as a plain Uint8Array (the library refuses Buffers). */
function toRaw(share: ShamirShare): Uint8Array {
  const raw = new Uint8Array(share.y.byteLength + 1);
  raw.set(share.y, 0);
  raw[share.y.byteLength] = share.x;
  return raw;
}

/** Splits `secret` into `count` shares, any `threshold` of which reassemble it (see the module comment for threshold 1). */
export async function splitKey(secret: Uint8Array, count: number, threshold: number): Promise<ShamirShare[]> {
  assert(secret.byteLength >= 1, 'a non-empty secret');
  assert(Number.isInteger(count) && count >= 1 && count <= 255, () => `share count ${count} not in [1, 255]`);
  assert(Number.isInteger(threshold) && threshold >= 1 && threshold <= count, () => `threshold ${threshold} not in [1, ${count}]`);
  if (threshold === 1) return Array.from({ length: count }, (_, i) => ({ x: i + 1, y: new Uint8Array(secret) }));
  const raw = await split(new Uint8Array(secret), count, threshold);
  return raw.map((r) => {
    const share = { x: r[r.byteLength - 1]!, y: r.slice(0, r.byteLength - 1) };
    r.fill(0);
    return share;
  });
}

/**
 * Reassembles the secret from `shares` (distinct non-zero x, equal lengths: the caller's checks).
 * One share is read as a share of threshold 1 (its y values); two or more go to the library.
 * Fewer shares than the sharing's threshold give a value unrelated to the secret, which nothing
 * tells apart from it: the caller checks the result (docs/recovery.md).
 */
export async function combineKey(shares: readonly ShamirShare[]): Promise<Uint8Array> {
  assert(shares.length >= 1 && shares.length <= 255, () => `${shares.length} shares, not in [1, 255]`);
  if (shares.length === 1) return new Uint8Array(shares[0]!.y);
  const raw = shares.map(toRaw);
  try {
    return await combine(raw);
  } finally {
    for (const r of raw) r.fill(0);
  }
}
