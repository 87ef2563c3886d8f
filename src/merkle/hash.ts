/**
 * The hashing rules of the history tree (docs/merkle.md is the normative description):
 *   leaf          = SHA-256(write_set_digest ‖ SHA-256(commit_evidence) ‖ claims_digest)
 *   internal node = SHA-256(left ‖ right)
 * No domain-separation prefixes (unlike RFC 6962), as in CCF, so receipts have CCF's shape.
 */
import { assert } from '../base/index.js';
import { sha256 } from '../crypto/index.js';

export const HASH_LENGTH_BYTES = 32;

/** Claims digest of a transaction without application claims. */
export const NO_CLAIMS_DIGEST: Uint8Array = new Uint8Array(HASH_LENGTH_BYTES);

const scratch = new Uint8Array(3 * HASH_LENGTH_BYTES);

export function leafDigest(writeSetDigest: Uint8Array, commitEvidenceDigest: Uint8Array, claimsDigest: Uint8Array): Uint8Array {
  assert(writeSetDigest.byteLength === HASH_LENGTH_BYTES, 'write set digest is 32 bytes');
  assert(commitEvidenceDigest.byteLength === HASH_LENGTH_BYTES, 'commit evidence digest is 32 bytes');
  assert(claimsDigest.byteLength === HASH_LENGTH_BYTES, 'claims digest is 32 bytes');
  // One reused input buffer: hashing copies its input, and the tree hashes at every write.
  const input = scratch;
  input.set(writeSetDigest, 0);
  input.set(commitEvidenceDigest, HASH_LENGTH_BYTES);
  input.set(claimsDigest, 2 * HASH_LENGTH_BYTES);
  return sha256(input);
}

/** The leaf of a transaction from its components, the commit evidence given as its string form. */
export function leafFromComponents(writeSetDigest: Uint8Array, commitEvidence: string, claimsDigest: Uint8Array): Uint8Array {
  return leafDigest(writeSetDigest, sha256(commitEvidence), claimsDigest);
}

export function hashPair(left: Uint8Array, right: Uint8Array): Uint8Array {
  assert(left.byteLength === HASH_LENGTH_BYTES && right.byteLength === HASH_LENGTH_BYTES, 'tree nodes are 32 bytes');
  const input = scratch.subarray(0, 2 * HASH_LENGTH_BYTES);
  input.set(left, 0);
  input.set(right, HASH_LENGTH_BYTES);
  return sha256(input);
}

/** Root of the empty tree (as in RFC 6962: the hash of the empty string). */
export const EMPTY_TREE_ROOT: Uint8Array = sha256(new Uint8Array(0));

/** Largest power of two strictly smaller than n (n ≥ 2): where the tree of n leaves splits. */
export function splitPoint(n: number): number {
  assert(Number.isSafeInteger(n) && n >= 2, () => `no split for ${n} leaves`);
  let k = 1;
  while (k * 2 < n) k *= 2;
  return k;
}
