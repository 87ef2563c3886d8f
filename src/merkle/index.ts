/** Public face of the Merkle layer: the history tree, inclusion proofs, commit evidence and receipts. */
export * from './errors.js';
export { HASH_LENGTH_BYTES, NO_CLAIMS_DIGEST, EMPTY_TREE_ROOT, leafDigest, leafFromComponents, hashPair } from './hash.js';
export * from './proof.js';
export * from './history-tree.js';
export * from './commit-evidence.js';
export * from './receipt.js';
export * from './service-endorsements.js';
export * from './cose-receipt.js';
