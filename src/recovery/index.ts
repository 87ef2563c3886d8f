/**
 * Public face of recovery's cryptographic core (docs/recovery.md): the ledger secrets chain's
 * wrapping, recovery shares (issue, decrypt, collect), submitted shares kept in the store, and the
 * recovery decision protocol of sealing-based recovery (docs/recovery-decision.md).
 */
export * from './errors.js';
export type { RandomBytes } from './random.js';
export * from './secret-chain.js';
export * from './share-format.js';
export * from './shares.js';
export * from './submitted-shares.js';
export * from './share-collection.js';
export { loadEncryptionPublicKey, encryptRsaOaepSha256, decryptRsaOaepSha256, RSA_MODULUS_BITS_MIN } from './rsa-oaep.js';
export * from './decision-messages.js';
export * from './decision-protocol.js';
