/**
 * Operating errors of the key-value store. Each failure mode has one stable code; the HTTP
 * status is what a client would see if the error escaped a handler.
 */
import { CovenantError } from '../base/index.js';

export const KvErrorCode = {
  /** A transaction was begun at an older store version than the one it commits onto. */
  TransactionConflict: 'TransactionConflict',
  /** Write-set bytes (from a peer or the ledger) do not follow the write-set format. */
  MalformedWriteSet: 'MalformedWriteSet',
  /** Snapshot bytes do not follow the snapshot format or their digest does not match. */
  MalformedSnapshot: 'MalformedSnapshot',
  /** AES-GCM authentication failed: wrong ledger secret, wrong view/seqno, or tampered bytes. */
  LedgerDecryptionFailed: 'LedgerDecryptionFailed',
  /** A map name or key cannot be stored faithfully (lone surrogate, empty map name). */
  InvalidKey: 'InvalidKey',
  /** Stored bytes do not decode with the codec a handler asked for. */
  MalformedValue: 'MalformedValue',
  /** A read asked for a version that is no longer (or not yet) retained in memory. */
  VersionNotRetained: 'VersionNotRetained',
  /** Too many versions above the committed one: the node must wait for consensus to catch up. */
  UncommittedHistoryFull: 'UncommittedHistoryFull',
  /** No ledger secret applies to the seqno being encrypted or decrypted. */
  NoLedgerSecret: 'NoLedgerSecret',
} as const;

export type KvErrorCode = (typeof KvErrorCode)[keyof typeof KvErrorCode];

export function transactionConflict(message: string): CovenantError {
  return new CovenantError(KvErrorCode.TransactionConflict, message, 409);
}
export function malformedWriteSet(message: string): CovenantError {
  return new CovenantError(KvErrorCode.MalformedWriteSet, `malformed write set: ${message}`, 500);
}
export function malformedSnapshot(message: string): CovenantError {
  return new CovenantError(KvErrorCode.MalformedSnapshot, `malformed snapshot: ${message}`, 500);
}
export function decryptionFailed(message: string): CovenantError {
  return new CovenantError(KvErrorCode.LedgerDecryptionFailed, message, 500);
}
export function invalidKey(message: string): CovenantError {
  return new CovenantError(KvErrorCode.InvalidKey, message, 400);
}
export function malformedValue(message: string): CovenantError {
  return new CovenantError(KvErrorCode.MalformedValue, message, 500);
}
export function versionNotRetained(message: string): CovenantError {
  return new CovenantError(KvErrorCode.VersionNotRetained, message, 404);
}
export function uncommittedHistoryFull(message: string): CovenantError {
  return new CovenantError(KvErrorCode.UncommittedHistoryFull, message, 503);
}
export function noLedgerSecret(message: string): CovenantError {
  return new CovenantError(KvErrorCode.NoLedgerSecret, message, 500);
}
