/**
 * Issuing recovery shares and opening them (docs/architecture.md, decision 15; docs/recovery.md):
 * the wrapping key is split with Shamir sharing (`shamir-secret-sharing`, key-sharing.ts) into one
 * share per recovery member, threshold `recovery_threshold`; each share, in the v2 format, is
 * encrypted to its member's RSA key with RSA-OAEP-SHA256 (`node:crypto`).
 *
 * Issuing is async, because the library's split is: the node prepares the shares before the
 * transaction that records them (a KV transaction runs synchronously, docs/architecture.md,
 * decision 2), and writes the result in it.
 */
import { assert } from '../base/index.js';
import { RecoveryError } from './errors.js';
import { draw, type RandomBytes } from './random.js';
import { decryptRsaOaepSha256, encryptRsaOaepSha256, loadEncryptionPublicKey } from './rsa-oaep.js';
import { type ChainSecret, WRAPPING_KEY_LENGTH_BYTES, wrapLatestSecret } from './secret-chain.js';
import { decodeShare, encodeShareV2, sharingIdOf } from './share-format.js';
import { splitKey } from './key-sharing.js';

/** Shamir over GF(2^8) has 255 non-zero x coordinates. */
export const RECOVERY_MEMBERS_MAX = 255;
export const RECOVERY_THRESHOLD_MAX = 255;

/** A member that holds a recovery share: one with an encryption public key. */
export interface RecoveryMember {
  readonly memberId: string;
  /** SubjectPublicKeyInfo PEM of the member's RSA key (`public:svc.gov.members.encryption_public_keys`). */
  readonly encryptionPublicKeyPem: string;
}

export interface EncryptedShare {
  readonly memberId: string;
  /** RSA-OAEP-SHA256 ciphertext of the member's v2 share. */
  readonly encryptedShare: Uint8Array;
}

/** One issue of shares: what the service records so that a later recovery can collect them. */
export interface IssuedShares {
  /** The sharing's public name (docs/recovery.md): every v2 share carries it. */
  readonly sharingId: Uint8Array;
  readonly threshold: number;
  /** One per member, in the members' order. */
  readonly encryptedShares: EncryptedShare[];
}

/** IssuedShares with the latest ledger secret wrapped under the fresh key that the shares split. */
export interface RecoverySharing extends IssuedShares {
  readonly wrappedLatestSecret: Uint8Array;
}

/** Refuses a threshold the members cannot meet (the constitution refuses it first: set_recovery_threshold). */
export function checkRecoveryThreshold(threshold: number, memberCount: number): void {
  if (memberCount > RECOVERY_MEMBERS_MAX) {
    throw new RecoveryError('TooManyRecoveryMembers', `${memberCount} recovery members, at most ${RECOVERY_MEMBERS_MAX} can hold shares`, { memberCount });
  }
  if (!Number.isInteger(threshold) || threshold < 1 || threshold > RECOVERY_THRESHOLD_MAX || threshold > memberCount) {
    throw new RecoveryError('InvalidRecoveryThreshold', `recovery threshold ${threshold} is not in [1, ${Math.min(memberCount, RECOVERY_THRESHOLD_MAX)}] (${memberCount} recovery members)`, {
      threshold,
      memberCount,
    });
  }
}

/**
 * Splits `wrappingKey` into one v2 share per member, any `threshold` of which reassemble it, each
 * encrypted to its member. Draws nothing from an injected source: the Shamir coefficients and the
 * OAEP seeds come from the libraries (the host's CSPRNG), so the encrypted shares differ from one
 * call to the next.
 */
export async function issueShares(wrappingKey: Uint8Array, members: readonly RecoveryMember[], threshold: number): Promise<IssuedShares> {
  assert(wrappingKey.byteLength === WRAPPING_KEY_LENGTH_BYTES, () => `a wrapping key is ${WRAPPING_KEY_LENGTH_BYTES} bytes`);
  assert(new Set(members.map((m) => m.memberId)).size === members.length, 'recovery member ids are distinct');
  checkRecoveryThreshold(threshold, members.length);
  // Keys first: a bad key refuses the issue before the key is split.
  const keys = members.map((m) => loadEncryptionPublicKey(m.encryptionPublicKeyPem, m.memberId));
  const sharingId = sharingIdOf(wrappingKey);
  const shares = await splitKey(wrappingKey, members.length, threshold);
  try {
    const encryptedShares = members.map((m, i) => {
      const plain = encodeShareV2(shares[i]!, threshold, sharingId);
      try {
        return { memberId: m.memberId, encryptedShare: encryptRsaOaepSha256(keys[i]!, plain) };
      } finally {
        plain.fill(0);
      }
    });
    return { sharingId, threshold, encryptedShares };
  } finally {
    for (const s of shares) s.y.fill(0);
  }
}

/**
 * A full issue: a fresh wrapping key (32 bytes drawn from `randomBytes` first), the latest secret
 * wrapped under it (a 12-byte IV drawn next), then the shares as issueShares makes them. The
 * wrapping key is not returned: only the shares can bring it back. The same seed gives the same
 * wrapping key, sharing id and wrapped secret; the encrypted shares differ every time.
 */
export async function issueRecoveryShares(latest: ChainSecret, members: readonly RecoveryMember[], threshold: number, randomBytes: RandomBytes): Promise<RecoverySharing> {
  checkRecoveryThreshold(threshold, members.length);
  const wrappingKey = new Uint8Array(draw(randomBytes, WRAPPING_KEY_LENGTH_BYTES));
  try {
    const wrappedLatestSecret = wrapLatestSecret(wrappingKey, latest, randomBytes);
    return { ...(await issueShares(wrappingKey, members, threshold)), wrappedLatestSecret };
  } finally {
    wrappingKey.fill(0);
  }
}

/**
 * What a member does with its encrypted share (`covenant member` holds the private key): decrypts
 * it and checks that it reads as a share. The result is what the member submits.
 */
export function decryptShare(encryptedShare: Uint8Array, memberPrivateKeyPem: string): Uint8Array {
  const share = decryptRsaOaepSha256(memberPrivateKeyPem, encryptedShare);
  decodeShare(share);
  return share;
}
