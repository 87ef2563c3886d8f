/**
 * Operating errors of recovery: the ledger secrets chain's wrapping, recovery shares and their
 * collection (docs/recovery.md), local sealing and sealed shares (docs/sealing.md), and the
 * recovery decision protocol (docs/recovery-decision.md). Each failure mode has one stable code;
 * a refused share changes nothing, so a member can simply submit the right one.
 */
import { CovenantError } from '../base/index.js';

export type RecoveryErrorCode =
  /** A recovery threshold outside [1, 255] or above the number of recovery members. */
  | 'InvalidRecoveryThreshold'
  /** More recovery members than Shamir sharing over GF(2^8) has share indexes (255). */
  | 'TooManyRecoveryMembers'
  /** A member's encryption public key is not an RSA key of at least 2048 bits, or does not carry a share. */
  | 'InvalidEncryptionKey'
  /** Share bytes that are neither a v1 nor a well-formed v2 share (garbage, wrong length, index 0). */
  | 'MalformedShare'
  /** RSA-OAEP decryption of an encrypted share failed: another member's key, or tampered bytes. */
  | 'ShareDecryptionFailed'
  /** The submitter is not one of the recovery members the shares were issued to. */
  | 'ShareFromNonMember'
  /** The member has already submitted a share in this collection. */
  | 'ShareAlreadySubmitted'
  /** Another member already submitted a share with the same index (a copy of one share). */
  | 'ShareIndexAlreadySubmitted'
  /** A v2 share whose header names another sharing (another wrapping key, or another threshold). */
  | 'ShareOfAnotherSharing'
  /** The shares reassemble into a key that does not unwrap the latest ledger secret. */
  | 'ShareReconstructionFailed'
  /** A share was submitted while no share collection is open (not recovering, or already recovered). */
  | 'NotWaitingForShares'
  /** Bytes that are not a wrapped ledger secret record of the documented layout. */
  | 'MalformedSecretRecord'
  /** A wrapped ledger secret record does not decrypt: wrong key, or tampered bytes. */
  | 'LedgerSecretUnwrapFailed'
  /** The previous-secret records do not form one chain down from the latest secret. */
  | 'SecretChainBroken'
  /** Bytes that are not a stored submitted share of the documented layout. */
  | 'MalformedStoredShare'
  /** A stored submitted share does not decrypt: another service key, another member, or tampered bytes. */
  | 'StoredShareDecryptionFailed'
  /** Bytes that are not a sealed recovery key record of the documented layout (docs/sealing.md). */
  | 'MalformedSealedKey'
  /** A sealed recovery key does not unseal: another CPU key, measurement, host data or TCB version, another node's row, or tampered bytes. */
  | 'UnsealFailed'
  /** An encrypted wrapping key (sealed share) does not decrypt with the node's recovery private key: encrypted to another node, or tampered. */
  | 'SealedShareDecryptionFailed'
  /** A sealed share decrypts to bytes that are not a wrapping key of the documented layout. */
  | 'MalformedSealedShare'
  /** A recovery decision protocol message that is not a well-formed Gossip, Vote or IAmOpen (untrusted input from a peer). */
  | 'InvalidDecisionMessage'
  /** The recovery decision protocol's settings do not fit together (this location not among the expected ones, a bad timer). */
  | 'InvalidDecisionConfiguration';

/** What a client sees if the error escapes a handler: refusals of the submitter, or a damaged ledger. */
export const RECOVERY_ERROR_STATUS: Record<RecoveryErrorCode, number> = {
  InvalidRecoveryThreshold: 400,
  TooManyRecoveryMembers: 400,
  InvalidEncryptionKey: 400,
  MalformedShare: 400,
  ShareDecryptionFailed: 400,
  ShareFromNonMember: 403,
  ShareAlreadySubmitted: 409,
  ShareIndexAlreadySubmitted: 409,
  ShareOfAnotherSharing: 400,
  ShareReconstructionFailed: 400,
  NotWaitingForShares: 403,
  // The records below come from the ledger, not from the caller: failing to read them is the service's problem.
  MalformedSecretRecord: 500,
  LedgerSecretUnwrapFailed: 500,
  SecretChainBroken: 500,
  MalformedStoredShare: 500,
  StoredShareDecryptionFailed: 500,
  // Sealing: the records are the node's own (its row of sealed recovery keys, the sealed shares the primary wrote).
  MalformedSealedKey: 500,
  UnsealFailed: 500,
  SealedShareDecryptionFailed: 500,
  MalformedSealedShare: 500,
  // The decision protocol: a peer's message, or the operator's configuration file.
  InvalidDecisionMessage: 400,
  InvalidDecisionConfiguration: 400,
};

export class RecoveryError extends CovenantError {
  declare readonly code: RecoveryErrorCode;
  constructor(code: RecoveryErrorCode, message: string, details?: Record<string, unknown>) {
    super(code, message, RECOVERY_ERROR_STATUS[code], details);
    this.name = 'RecoveryError';
  }
}

/** Whether `e` is a recovery error, optionally of one code. */
export function isRecoveryError(e: unknown, code?: RecoveryErrorCode): e is RecoveryError {
  return e instanceof RecoveryError && (code === undefined || e.code === code);
}
