/**
 * The checks a submitted recovery share goes through (docs/recovery.md, "Collecting shares"), as
 * plain synchronous functions of the recorded sharing and the shares accepted so far, so that a
 * service can check a share against its store and record it in the same transaction. Only
 * reassembling the key at the threshold is async (`combineKey`, the library's `combine`): the
 * caller reassembles outside the transaction, then checks the key (`chainFromWrappingKey`) and
 * records the outcome in one. ShareCollection (share-collection.ts) runs the same checks.
 */
import { bytesEqual, toHex } from '../base/index.js';
import { RecoveryError, isRecoveryError } from './errors.js';
import type { RandomBytes } from './random.js';
import { type ChainSecret, openSecretChain, unwrapLatestSecret } from './secret-chain.js';
import { type DecodedShare, decodeShare } from './share-format.js';
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

/**
 * Checks `memberId`'s share against the sharing and the shares already accepted (by member id),
 * in the documented order; returns it decoded, or throws the first failure's RecoveryError.
 */
export function checkNewShare(sharing: RecordedSharing, accepted: ReadonlyMap<string, DecodedShare>, memberId: string, shareBytes: Uint8Array): DecodedShare {
  if (!sharing.recoveryMemberIds.includes(memberId)) {
    throw new RecoveryError('ShareFromNonMember', `member ${memberId} holds no recovery share of this sharing`, { memberId });
  }
  if (accepted.has(memberId)) {
    throw new RecoveryError('ShareAlreadySubmitted', `member ${memberId} has already submitted a share`, { memberId });
  }
  const share = decodeShare(shareBytes);
  checkBelongs(sharing, memberId, share);
  for (const [other, s] of accepted) {
    if (s.x === share.x) {
      throw new RecoveryError('ShareIndexAlreadySubmitted', `member ${memberId} submitted the share with index ${share.x}, which member ${other} already submitted`, {
        memberId,
        shareIndex: share.x,
      });
    }
  }
  return share;
}

/** A v2 share names its sharing: one of another sharing is refused before it can spoil a reconstruction. */
function checkBelongs(sharing: RecordedSharing, memberId: string, share: DecodedShare): void {
  if (share.version !== 2) return;
  if (share.threshold !== sharing.threshold) {
    throw new RecoveryError('ShareOfAnotherSharing', `member ${memberId}'s share is of a sharing with threshold ${share.threshold}, not ${sharing.threshold}`, {
      memberId,
      shareThreshold: share.threshold,
      threshold: sharing.threshold,
    });
  }
  const expected = sharing.sharingId;
  if (expected !== undefined && !bytesEqual(share.sharingId!, expected)) {
    throw new RecoveryError('ShareOfAnotherSharing', `member ${memberId}'s share is of sharing ${toHex(share.sharingId!)}, not ${toHex(expected)}`, {
      memberId,
      shareSharingId: toHex(share.sharingId!),
      sharingId: toHex(expected),
    });
  }
}

/**
 * The chain of ledger secrets, oldest first, under a key reassembled from `memberIds`' shares: a
 * key that does not unwrap the latest secret is ShareReconstructionFailed (a share is wrong); a
 * failure further down is the ledger's records, not the shares', and keeps its own code.
 */
export function chainFromWrappingKey(sharing: RecordedSharing, wrappingKey: Uint8Array, memberIds: readonly string[]): ChainSecret[] {
  let latest: ChainSecret;
  try {
    latest = unwrapLatestSecret(wrappingKey, sharing.wrappedLatestSecret);
  } catch (e) {
    if (isRecoveryError(e, 'LedgerSecretUnwrapFailed')) {
      throw new RecoveryError(
        'ShareReconstructionFailed',
        `the ${memberIds.length} shares reassemble into a key that does not unwrap the latest ledger secret: at least one share is wrong or of another sharing`,
        { memberIds: [...memberIds] },
      );
    }
    throw e;
  }
  return openSecretChain(latest, sharing.previousSecretRecords);
}

/** A submission checked against the shares a store holds: every check but the reassembly's. */
export type CheckedSubmission =
  /** Below the threshold: `storedShare` is what the store keeps under the member's id. */
  | { readonly status: 'Accepted'; readonly memberId: string; readonly submittedCount: number; readonly threshold: number; readonly storedShare: Uint8Array }
  /** At the threshold: `shares` (of `memberIds`, the submitted one last) are to be reassembled. */
  | {
      readonly status: 'AtThreshold';
      readonly memberId: string;
      readonly submittedCount: number;
      readonly threshold: number;
      readonly shares: readonly DecodedShare[];
      readonly memberIds: readonly string[];
    };

/**
 * Checks a member's share against the shares the store holds (encrypted under `storageKey`,
 * checked when they were recorded), synchronously: the caller records the outcome in the
 * transaction that read `stored`.
 */
export function checkSubmission(
  sharing: RecordedSharing,
  storageKey: Uint8Array,
  stored: readonly StoredSubmittedShare[],
  submission: { readonly memberId: string; readonly share: Uint8Array },
  randomBytes: RandomBytes,
): CheckedSubmission {
  const accepted = new Map<string, DecodedShare>();
  for (const s of stored) accepted.set(s.memberId, decodeShare(decryptSubmittedShare(storageKey, s.memberId, s.storedShare)));
  const { memberId, share: shareBytes } = submission;
  const share = checkNewShare(sharing, accepted, memberId, shareBytes);
  const submittedCount = accepted.size + 1;
  const threshold = sharing.threshold;
  if (submittedCount < threshold) {
    forget(accepted.values());
    return { status: 'Accepted', memberId, submittedCount, threshold, storedShare: encryptSubmittedShare(storageKey, memberId, shareBytes, randomBytes) };
  }
  return { status: 'AtThreshold', memberId, submittedCount, threshold, shares: [...accepted.values(), share], memberIds: [...accepted.keys(), memberId] };
}

/** Zeroes the y values of shares no longer needed. */
export function forget(shares: Iterable<DecodedShare>): void {
  for (const s of shares) s.y.fill(0);
}
