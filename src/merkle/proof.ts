/**
 * Inclusion proofs in CCF's receipt style: the sibling hashes from the leaf up to the root, each
 * tagged with the side it sits on. Folding: {left: h} → acc = H(h ‖ acc); {right: h} → acc = H(acc ‖ h).
 */
import { fromHex } from '../base/index.js';
import { HASH_LENGTH_BYTES, hashPair } from './hash.js';

export type ProofStep = { readonly left: string } | { readonly right: string };

export interface InclusionProof {
  /** Leaf to root. Hashes are lower-case hex. */
  readonly path: readonly ProofStep[];
}

/** Longest path a proof may have: a tree of 2^53 leaves has depth 53. */
export const PROOF_PATH_LENGTH_MAX = 64;

const HEX_HASH = /^[0-9a-f]{64}$/;

/** The hash of one proof step, or undefined when the step is malformed. */
function stepHash(step: unknown): { side: 'left' | 'right'; hash: Uint8Array } | undefined {
  if (typeof step !== 'object' || step === null) return undefined;
  const keys = Object.keys(step);
  if (keys.length !== 1) return undefined;
  const side = keys[0];
  if (side !== 'left' && side !== 'right') return undefined;
  const hex = (step as Record<string, unknown>)[side];
  if (typeof hex !== 'string' || !HEX_HASH.test(hex)) return undefined;
  return { side, hash: fromHex(hex) };
}

/** The root a proof leads to from `leaf`, or undefined when the proof is malformed. */
export function rootFromProof(leaf: Uint8Array, proof: InclusionProof): Uint8Array | undefined {
  if (leaf.byteLength !== HASH_LENGTH_BYTES) return undefined;
  if (typeof proof !== 'object' || proof === null || !Array.isArray(proof.path) || proof.path.length > PROOF_PATH_LENGTH_MAX) return undefined;
  let acc = leaf;
  for (const step of proof.path) {
    const parsed = stepHash(step);
    if (parsed === undefined) return undefined;
    acc = parsed.side === 'left' ? hashPair(parsed.hash, acc) : hashPair(acc, parsed.hash);
  }
  return acc;
}

export function verifyInclusion(leaf: Uint8Array, proof: InclusionProof, root: Uint8Array): boolean {
  const computed = rootFromProof(leaf, proof);
  if (computed === undefined || root.byteLength !== HASH_LENGTH_BYTES) return false;
  for (let i = 0; i < HASH_LENGTH_BYTES; i++) if (computed[i] !== root[i]) return false;
  return true;
}
