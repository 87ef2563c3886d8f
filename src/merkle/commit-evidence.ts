/**
 * Commit evidence: `ce:<view>.<seqno>:<64 hex digits>`. Its SHA-256 is part of the leaf, and it is
 * revealed only once the transaction is committed, so a receipt cannot be made for a transaction
 * that was later rolled back. The nonce is derived from the ledger secret so that every node that
 * holds the secret computes the same leaf:
 *   commit_secret = HKDF-SHA256(ikm = ledger secret, salt = empty, info = "covenant commit evidence v1", 32 bytes)
 *   nonce         = HMAC-SHA256(commit_secret, ASCII "<view>.<seqno>")
 */
import { assert, toHex, type TxId } from '../base/index.js';
import { hkdfSha256, keyedHmacSha256 } from '../crypto/index.js';
import { merkleError, MerkleErrorCode } from './errors.js';

export const COMMIT_EVIDENCE_HKDF_INFO = 'covenant commit evidence v1';
export const COMMIT_EVIDENCE_NONCE_LENGTH_BYTES = 32;

function checkTxId(view: number, seqno: number): void {
  assert(Number.isSafeInteger(view) && view >= 0, () => `view ${view} is not a non-negative integer`);
  assert(Number.isSafeInteger(seqno) && seqno >= 0, () => `seqno ${seqno} is not a non-negative integer`);
}

/** The HMAC key of the nonces: HKDF of the ledger secret (see the derivation above). */
function commitSecret(ledgerSecretKeyBytes: Uint8Array): Uint8Array {
  assert(ledgerSecretKeyBytes.byteLength >= 16, 'a ledger secret has at least 16 bytes');
  return hkdfSha256(ledgerSecretKeyBytes, new Uint8Array(0), COMMIT_EVIDENCE_HKDF_INFO, 32);
}

/** Derives nonces for many transactions from one ledger secret (the HKDF step is done once). */
export function createCommitEvidenceDeriver(ledgerSecretKeyBytes: Uint8Array): (view: number, seqno: number) => Uint8Array {
  const hmac = keyedHmacSha256(commitSecret(ledgerSecretKeyBytes));
  return (view, seqno) => {
    checkTxId(view, seqno);
    return hmac(`${view}.${seqno}`);
  };
}

/**
 * Formats the commit evidence of many transactions under one ledger secret: the text
 * formatCommitEvidence(view, seqno, nonce) would give, with the nonce hashed straight to hex
 * (this runs once per transaction on the primary).
 */
export function createCommitEvidenceFormatter(ledgerSecretKeyBytes: Uint8Array): (view: number, seqno: number) => string {
  const hmacHex = keyedHmacSha256(commitSecret(ledgerSecretKeyBytes), 'hex');
  return (view, seqno) => {
    checkTxId(view, seqno);
    const id = `${view}.${seqno}`;
    return `ce:${id}:${hmacHex(id)}`;
  };
}

export function commitEvidenceNonce(ledgerSecretKeyBytes: Uint8Array, view: number, seqno: number): Uint8Array {
  return createCommitEvidenceDeriver(ledgerSecretKeyBytes)(view, seqno);
}

export function formatCommitEvidence(view: number, seqno: number, nonce: Uint8Array): string {
  checkTxId(view, seqno);
  assert(nonce.byteLength === COMMIT_EVIDENCE_NONCE_LENGTH_BYTES, 'commit evidence nonce is 32 bytes');
  return `ce:${view}.${seqno}:${toHex(nonce)}`;
}

const COMMIT_EVIDENCE = /^ce:(0|[1-9]\d{0,15})\.(0|[1-9]\d{0,15}):([0-9a-f]{64})$/;

/** Parses commit evidence; InvalidCommitEvidence for any other text. */
export function parseCommitEvidence(text: string): TxId & { nonceHex: string } {
  const match = typeof text === 'string' ? COMMIT_EVIDENCE.exec(text) : null;
  const view = match ? Number(match[1]) : NaN;
  const seqno = match ? Number(match[2]) : NaN;
  if (!match || !Number.isSafeInteger(view) || !Number.isSafeInteger(seqno)) {
    throw merkleError(MerkleErrorCode.InvalidCommitEvidence, `"${String(text).slice(0, 100)}" is not commit evidence (ce:<view>.<seqno>:<64 hex digits>)`);
  }
  return { view, seqno, nonceHex: match[3]! };
}
