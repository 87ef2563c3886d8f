/**
 * Public face of recovery's cryptographic core (docs/recovery.md): the ledger secrets chain's
 * wrapping and Shamir sharing.
 */
export * from './errors.js';
export type { RandomBytes } from './random.js';
export * from './secret-chain.js';
export { splitSecret, combineShares, rawShareBytes, type ShamirShare } from './shamir.js';
