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
 *
 * Submitting is async, because reassembling the key with `shamir-secret-sharing` is: the node
 * collects shares outside any KV transaction (a transaction runs synchronously, docs/architecture.md,
 * decision 2) and writes the outcome (a stored share, or the recovered chain) afterwards.
 * Submissions are handled one at a time, in the order they were made: one that arrives while
 * another reassembles the key waits for it, so no two submissions both see the threshold met.
 */
import { bytesEqual, toHex } from '../base/index.js';
import { RecoveryError, isRecoveryError } from './errors.js';
import type { RandomBytes } from './random.js';
import { type ChainSecret, openSecretChain, unwrapLatestSecret } from './secret-chain.js';
import { type DecodedShare, decodeShare } from './share-format.js';
import { combineKey } from './key-sharing.js';
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
  /** The end of the last submission made: the next one starts after it. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(sharing: RecordedSharing, storageKey: Uint8Array, randomBytes: RandomBytes) {
    this.#sharing = sharing;
    this.#members = new Set(sharing.recoveryMemberIds);
    this.#storageKey = storageKey;
    this.#randomBytes = randomBytes;
  }

  /** Rebuilds a collection from the shares held in the store (after a primary change). */
  static async fromStore(sharing: RecordedSharing, storageKey: Uint8Array, stored: readonly StoredSubmittedShare[], randomBytes: RandomBytes): Promise<ShareCollection> {
    const collection = new ShareCollection(sharing, storageKey, randomBytes);
    for (const s of stored) await collection.submitStored(s.memberId, s.storedShare);
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

  /**
   * Stops collecting (recovery abandoned): every later submission is NotWaitingForShares, and so is
   * one reassembling the key when the collection is closed.
   */
  close(): void {
    if (this.#state === 'Collecting') this.#state = 'Closed';
    this.#forget();
  }

  /** A share as stored by an earlier primary: decrypted with the storage key, then submitted. */
  submitStored(memberId: string, storedShare: Uint8Array): Promise<SubmitOutcome> {
    return this.#enqueue(() => {
      this.#checkWaiting();
      return this.#submit(memberId, decryptSubmittedShare(this.#storageKey, memberId, storedShare));
    });
  }

  /** A member's decrypted share (either format). Rejects with a RecoveryError and changes nothing if refused. */
  submit(memberId: string, shareBytes: Uint8Array): Promise<SubmitOutcome> {
    return this.#enqueue(() => this.#submit(memberId, shareBytes));
  }

  #enqueue(run: () => Promise<SubmitOutcome>): Promise<SubmitOutcome> {
    const outcome = this.#queue.then(run);
    this.#queue = outcome.catch(() => undefined);
    return outcome;
  }

  async #submit(memberId: string, shareBytes: Uint8Array): Promise<SubmitOutcome> {
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
    const ledgerSecrets = await this.#reconstruct([...this.#shares.values(), share], [...this.#shares.keys(), memberId]);
    if (this.#state === 'Closed') {
      // close() ran while the key was reassembled: the recovery was abandoned, its result is not given out.
      for (const s of ledgerSecrets) s.secret.fill(0);
      this.#checkWaiting();
    }
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

  async #reconstruct(shares: DecodedShare[], memberIds: string[]): Promise<ChainSecret[]> {
    const wrappingKey = await combineKey(shares);
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
