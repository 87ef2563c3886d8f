/**
 * The signatures a backup verifies while its ledger syncs (ledger.durability Synced, with a
 * verifier: node processes use libuv's thread pool). The record and the root it signs are checked
 * against the Merkle tree as the entry is applied (then and there: the tree moves on with the next
 * entry); the ECDSA verification runs meanwhile, beside the sync of the same entries, instead of
 * before them on the request thread. Consensus sees no entry from the first signature still being
 * verified on as durable (Replica.durableSeqno), so the backup acknowledges a signature only once
 * it verified it and its sync ended, as before. A signature that does not verify stops the node,
 * as one found wrong when applied does.
 */
import type { KeyObject } from 'node:crypto';
import type { SignatureVerifier } from '../crypto/index.js';
import { signatureChecksInFlightMax } from './limits.js';

/** A signature transaction's signature, to verify over the tree root it signs. */
export interface SignatureToVerify {
  readonly key: KeyObject;
  readonly root: Uint8Array;
  readonly signature: Uint8Array;
  /** The problem if it does not verify, and if it cannot be checked (before the reason). */
  readonly failed: string;
  readonly uncheckable: string;
}

export interface SignatureChecksHost {
  readonly verifier: SignatureVerifier;
  /** The first signature still being verified was verified: the durable limit moved. */
  onVerified(): void;
  /** A signature did not verify, or could not be checked: the node stops. */
  onFailed(problem: string): void;
}

/** A verification under way (its object identifies it: the entry may be rolled back and replaced meanwhile). */
interface Check {
  readonly seqno: number;
}

export class SignatureChecks {
  /** Under way, in seqno order (entries apply in order). */
  private readonly underWay: Check[] = [];
  /** Signatures verified this way since the node started. */
  verified = 0;

  constructor(private readonly host: SignatureChecksHost) {}

  /** Whether one more may start (beyond the limit the caller verifies on its own thread). */
  hasRoom(): boolean {
    return this.underWay.length < signatureChecksInFlightMax;
  }

  /** Every entry up to here may count as durable as far as signatures go (infinity: none is being verified). */
  get limit(): number {
    const first = this.underWay[0];
    return first === undefined ? Number.POSITIVE_INFINITY : first.seqno - 1;
  }

  /** Starts verifying the signature transaction at `seqno` (after every one under way). */
  start(seqno: number, check: SignatureToVerify): void {
    const last = this.underWay[this.underWay.length - 1];
    if (last !== undefined && last.seqno >= seqno) throw new Error(`signature ${seqno} verified after ${last.seqno}`);
    const token: Check = { seqno };
    this.underWay.push(token);
    this.host.verifier.verify(seqno, check.key, check.root, check.signature, (outcome) => {
      const at = this.underWay.indexOf(token);
      // Rolled back meanwhile.
      if (at === -1) return;
      if (outcome !== true) {
        this.host.onFailed(outcome === false ? check.failed : `${check.uncheckable}: ${outcome.message}`);
        return;
      }
      this.underWay.splice(at, 1);
      this.verified++;
      if (at === 0) this.host.onVerified();
    });
  }

  /** The entries after `seqno` are rolled back: their verifications no longer matter. */
  dropAfter(seqno: number): void {
    while (this.underWay.length > 0 && this.underWay[this.underWay.length - 1]!.seqno > seqno) this.underWay.pop();
  }
}
