/**
 * Collecting recovery shares (docs/recovery.md, "Collecting shares"): members submit their
 * decrypted shares one by one; at the threshold the shares reassemble the wrapping key, which is
 * checked by unwrapping the latest ledger secret (AES-GCM fails under a wrong key), and the chain
 * of previous secrets is opened down from it.
 *
 * A refused submission changes nothing: every check runs before the collection records the share,
 * and a reconstruction that fails leaves the shares already accepted as they were. Below the
 * threshold each accepted share comes back encrypted for the store (submitted-shares.ts), and a
 * new primary rebuilds the collection from those rows (`fromStore`).
 */
import { bytesEqual, toHex } from '../base/index.js';
import { RecoveryError, isRecoveryError } from './errors.js';
import type { RandomBytes } from './random.js';
import { type ChainSecret, openSecretChain, unwrapLatestSecret } from './secret-chain.js';
import { type DecodedShare, decodeShare } from './share-format.js';
import { combineShares } from './shamir.js';
import { decryptSubmittedShare, encryptSubmittedShare } from './submitted-shares.js';

/** What the service recorded when it last issued shares, and the ledger's previous-secret records. */
export interface RecordedSharing {
  /** The members the shares were issued to. */
  readonly recoveryMemberIds: readonly string[];
  readonly threshold: number;
  /**
   * The sharing's public name; absent when the shares were issued by code that wrote only v1 shares
   * (there is then nothing to check a v2 header against, and reconstruction alone decides).
   */
  readonly sharingId?: Uint8Array;
  readonly wrappedLatestSecret: Uint8Array;
  /** Every previous-secret record of the ledger, in any order. */
  readonly previousSecretRecords: readonly Uint8Array[];
}

export interface StoredSubmittedShare {
  readonly memberId: string;
  /** encryptSubmittedShare's output. */
  readonly storedShare: Uint8Array;
}

export type SubmitOutcome =
  /** Below the threshold: write `storedShare` to the store under the member's id. */
  | { readonly status: 'Accepted'; readonly memberId: string; readonly submittedCount: number; readonly threshold: number; readonly storedShare: Uint8Array }
  /** The threshold is met and the chain of ledger secrets is back, oldest first. */
  | { readonly status: 'Recovered'; readonly memberId: string; readonly submittedCount: number; readonly threshold: number; readonly ledgerSecrets: ChainSecret[] };

/** The refusal of a share when no collection is open (the node's state, or a closed collection). */
export function notWaitingForShares(why = 'the service is not waiting for recovery shares'): RecoveryError {
  return new RecoveryError('NotWaitingForShares', why);
}

export class ShareCollection {
  readonly #sharing: RecordedSharing;
  readonly #members: ReadonlySet<string>;
  readonly #storageKey: Uint8Array;
  readonly #randomBytes: RandomBytes;
  /** Accepted shares by member id, in submission order. */
  readonly #shares = new Map<string, DecodedShare>();
  #state: 'Collecting' | 'Recovered' | 'Closed' = 'Collecting';

  constructor(sharing: RecordedSharing, storageKey: Uint8Array, randomBytes: RandomBytes) {
    this.#sharing = sharing;
    this.#members = new Set(sharing.recoveryMemberIds);
    this.#storageKey = storageKey;
    this.#randomBytes = randomBytes;
  }

  /** Rebuilds a collection from the shares held in the store (after a primary change). */
  static fromStore(sharing: RecordedSharing, storageKey: Uint8Array, stored: readonly StoredSubmittedShare[], randomBytes: RandomBytes): ShareCollection {
    const collection = new ShareCollection(sharing, storageKey, randomBytes);
    for (const s of stored) collection.submitStored(s.memberId, s.storedShare);
    return collection;
  }

  get threshold(): number {
    return this.#sharing.threshold;
  }

  get submittedCount(): number {
    return this.#shares.size;
  }

  get waiting(): boolean {
    return this.#state === 'Collecting';
  }

  submittedMemberIds(): string[] {
    return [...this.#shares.keys()];
  }

  /** Stops collecting (recovery abandoned): every later submission is NotWaitingForShares. */
  close(): void {
    if (this.#state === 'Collecting') this.#state = 'Closed';
    this.#forget();
  }

  /** A share as stored by an earlier primary: decrypted with the storage key, then submitted. */
  submitStored(memberId: string, storedShare: Uint8Array): SubmitOutcome {
    this.#checkWaiting();
    return this.submit(memberId, decryptSubmittedShare(this.#storageKey, memberId, storedShare));
  }

  /** A member's decrypted share (either format). Throws a RecoveryError and changes nothing if refused. */
  submit(memberId: string, shareBytes: Uint8Array): SubmitOutcome {
    this.#checkWaiting();
    if (!this.#members.has(memberId)) {
      throw new RecoveryError('ShareFromNonMember', `member ${memberId} holds no recovery share of this sharing`, { memberId });
    }
    if (this.#shares.has(memberId)) {
      throw new RecoveryError('ShareAlreadySubmitted', `member ${memberId} has already submitted a share`, { memberId });
    }
    const share = decodeShare(shareBytes);
    this.#checkBelongs(memberId, share);
    for (const [other, s] of this.#shares) {
      if (s.x === share.x) {
        throw new RecoveryError('ShareIndexAlreadySubmitted', `member ${memberId} submitted the share with index ${share.x}, which member ${other} already submitted`, {
          memberId,
          shareIndex: share.x,
        });
      }
    }
    const submittedCount = this.#shares.size + 1;
    const threshold = this.#sharing.threshold;
    if (submittedCount < threshold) {
      const storedShare = encryptSubmittedShare(this.#storageKey, memberId, shareBytes, this.#randomBytes);
      this.#shares.set(memberId, share);
      return { status: 'Accepted', memberId, submittedCount, threshold, storedShare };
    }
    const ledgerSecrets = this.#reconstruct([...this.#shares.values(), share], [...this.#shares.keys(), memberId]);
    this.#state = 'Recovered';
    this.#forget();
    return { status: 'Recovered', memberId, submittedCount, threshold, ledgerSecrets };
  }

  #checkWaiting(): void {
    if (this.#state === 'Recovered') throw notWaitingForShares('the ledger secrets are already recovered: no more shares are needed');
    if (this.#state === 'Closed') throw notWaitingForShares('share collection is closed');
  }

  /** A v2 share names its sharing: one of another sharing is refused before it can spoil a reconstruction. */
  #checkBelongs(memberId: string, share: DecodedShare): void {
    if (share.version !== 2) return;
    if (share.threshold !== this.#sharing.threshold) {
      throw new RecoveryError('ShareOfAnotherSharing', `member ${memberId}'s share is of a sharing with threshold ${share.threshold}, not ${this.#sharing.threshold}`, {
        memberId,
        shareThreshold: share.threshold,
        threshold: this.#sharing.threshold,
      });
    }
    const expected = this.#sharing.sharingId;
    if (expected !== undefined && !bytesEqual(share.sharingId!, expected)) {
      throw new RecoveryError('ShareOfAnotherSharing', `member ${memberId}'s share is of sharing ${toHex(share.sharingId!)}, not ${toHex(expected)}`, {
        memberId,
        shareSharingId: toHex(share.sharingId!),
        sharingId: toHex(expected),
      });
    }
  }

  #reconstruct(shares: DecodedShare[], memberIds: string[]): ChainSecret[] {
    const wrappingKey = combineShares(shares);
    let latest: ChainSecret;
    try {
      latest = unwrapLatestSecret(wrappingKey, this.#sharing.wrappedLatestSecret);
    } catch (e) {
      if (isRecoveryError(e, 'LedgerSecretUnwrapFailed')) {
        throw new RecoveryError(
          'ShareReconstructionFailed',
          `the ${shares.length} shares reassemble into a key that does not unwrap the latest ledger secret: at least one share is wrong or of another sharing`,
          { memberIds },
        );
      }
      throw e;
    } finally {
      wrappingKey.fill(0);
    }
    // Only the latest secret is under the reassembled key: a failure further down is the ledger's
    // records, not the shares', and keeps its own code.
    return openSecretChain(latest, this.#sharing.previousSecretRecords);
  }

  #forget(): void {
    for (const s of this.#shares.values()) s.y.fill(0);
    this.#shares.clear();
  }
}
