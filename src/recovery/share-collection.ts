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
 * Submitting is async, because reassembling the key with `shamir-secret-sharing` is. The checks
 * are share-checks.ts's, which a node runs itself inside the transaction that records a share
 * (a transaction runs synchronously, docs/architecture.md, decision 2). Submissions are handled one at a time, in the order they were made: one that arrives while
 * another reassembles the key waits for it, so no two submissions both see the threshold met.
 */
import { RecoveryError } from './errors.js';
import type { RandomBytes } from './random.js';
import type { ChainSecret } from './secret-chain.js';
import type { DecodedShare } from './share-format.js';
import { combineKey } from './key-sharing.js';
import { chainFromWrappingKey, checkNewShare, forget, type RecordedSharing, type StoredSubmittedShare } from './share-checks.js';
import { decryptSubmittedShare, encryptSubmittedShare } from './submitted-shares.js';

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
  readonly #storageKey: Uint8Array;
  readonly #randomBytes: RandomBytes;
  /** Accepted shares by member id, in submission order. */
  readonly #shares = new Map<string, DecodedShare>();
  #state: 'Collecting' | 'Recovered' | 'Closed' = 'Collecting';
  /** The end of the last submission made: the next one starts after it. */
  #queue: Promise<unknown> = Promise.resolve();

  constructor(sharing: RecordedSharing, storageKey: Uint8Array, randomBytes: RandomBytes) {
    this.#sharing = sharing;
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
    const share = checkNewShare(this.#sharing, this.#shares, memberId, shareBytes);
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

  async #reconstruct(shares: DecodedShare[], memberIds: string[]): Promise<ChainSecret[]> {
    const wrappingKey = await combineKey(shares);
    try {
      return chainFromWrappingKey(this.#sharing, wrappingKey, memberIds);
    } finally {
      wrappingKey.fill(0);
    }
  }

  #forget(): void {
    forget(this.#shares.values());
    this.#shares.clear();
  }
}
