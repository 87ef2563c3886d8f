/**
 * Public face of recovery's cryptographic core (docs/recovery.md): the ledger secrets chain's
 * wrapping, recovery shares (issue, decrypt, collect), submitted shares kept in the store, local
 * sealing with sealed shares (docs/sealing.md), and the recovery decision protocol of
 * sealing-based recovery (docs/recovery-decision.md).
 */
export * from './errors.js';
export type { RandomBytes } from './random.js';
export * from './secret-chain.js';
export * from './share-format.js';
export * from './shares.js';
export * from './submitted-shares.js';
export * from './share-collection.js';
export * from './share-checks.js';
export { combineKey } from './key-sharing.js';
export {
  VIRTUAL_CPU_KEY_LENGTH_BYTES,
  VIRTUAL_TCB_VERSION,
  DERIVED_KEY_LENGTH_BYTES,
  SEALING_KEY_LENGTH_BYTES,
  RECOVERY_KEY_MODULUS_BITS,
  SEALED_RECOVERY_KEY_VERSION,
  SEALED_RECOVERY_KEY_BYTES_MAX,
  SEALED_SHARE_VERSION,
  deriveVirtualDerivedKey,
  deriveSealingKey,
  createRecoveryKeyPair,
  sealRecoveryPrivateKey,
  unsealRecoveryPrivateKey,
  issueSealedShares,
  recoverChainWithSealedShare,
  type VirtualDerivedKeyInputs,
  type RecoveryKeyPair,
  type SealedShareRecipient,
  type SealedShares,
  type SealedShareRecovery,
} from './sealing.js';
export { loadEncryptionPublicKey, encryptRsaOaepSha256, decryptRsaOaepSha256, RSA_MODULUS_BITS_MIN } from './rsa-oaep.js';
export * from './decision-messages.js';
export * from './decision-protocol.js';
