/**
 * Verification of ECDSA signatures off the calling thread, for a node that checks its primary's
 * signatures while their ledger entries sync (src/node/signature-checks.ts). Node processes use
 * libuv's thread pool; the simulator gives its nodes a verifier whose verdicts come after a
 * seeded delay on its clock.
 */
import type { KeyObject } from 'node:crypto';
import { verifyEcdsaLater } from './keys.js';

export interface SignatureVerifier {
  /**
   * Verifies `signature` (DER) over `data` with `key`; `done` runs later (never within the call)
   * with the outcome, or an Error when the key cannot be used. `seqno`: the ledger entry holding
   * the signature (the simulator draws its delay from it).
   */
  verify(seqno: number, key: KeyObject, data: Uint8Array, signature: Uint8Array, done: (outcome: boolean | Error) => void): void;
}

/** Node processes' verifier: libuv's thread pool. */
export const threadPoolSignatureVerifier: SignatureVerifier = {
  verify: (_seqno, key, data, signature, done) => verifyEcdsaLater(key, data, signature, 'der', done),
};
