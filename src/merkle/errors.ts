/** Stable error codes of the Merkle layer (operating errors: bad requests, bad receipts, bad re-read leaves). */
import { CovenantError } from '../base/index.js';

export const MerkleErrorCode = {
  /** A leaf index or tree size outside what the tree holds (or below its compaction point). */
  MerkleIndexOutOfRange: 'MerkleIndexOutOfRange',
  /** A proof of a compacted leaf was asked without a way to re-read its block. */
  MerkleLeafCompacted: 'MerkleLeafCompacted',
  /** Leaves re-read for a compacted block do not hash to the block hash the tree kept. */
  MerkleBlockMismatch: 'MerkleBlockMismatch',
  InvalidReceipt: 'InvalidReceipt',
  /** A receipt's service_endorsements do not chain its node certificate to the service certificate given. */
  InvalidServiceEndorsements: 'InvalidServiceEndorsements',
  InvalidCommitEvidence: 'InvalidCommitEvidence',
} as const;
export type MerkleErrorCode = (typeof MerkleErrorCode)[keyof typeof MerkleErrorCode];

export const MERKLE_ERROR_STATUS: Record<MerkleErrorCode, number> = {
  MerkleIndexOutOfRange: 400,
  MerkleLeafCompacted: 500,
  MerkleBlockMismatch: 500,
  InvalidReceipt: 400,
  InvalidServiceEndorsements: 400,
  InvalidCommitEvidence: 400,
};

export function merkleError(code: MerkleErrorCode, message: string, details?: Record<string, unknown>): CovenantError {
  return new CovenantError(code, message, MERKLE_ERROR_STATUS[code], details);
}
