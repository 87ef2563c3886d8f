/**
 * The two share formats (docs/recovery.md, "Share formats"). This code reads both and writes only
 * v2 (the rule for changed recovery sharing: accept the old shares, produce only new ones).
 *
 *   v1, 33 bytes: y[32] ‖ x                                  (the raw share of shamir-secret-sharing)
 *   v2, 67 bytes: 0x02 ‖ x ‖ threshold ‖ sharing_id[32] ‖ y[32]
 *
 * A v1 share has no version byte (its first byte is a y value and can be anything), so the length
 * tells the formats apart: 33 bytes is v1, anything else must be v2. The v2 header lets a share of
 * another sharing (another wrapping key or threshold) be refused when it is submitted, instead of
 * spoiling a reconstruction.
 */
import { concatBytes, utf8 } from '../base/index.js';
import { sha256 } from '../crypto/index.js';
import { RecoveryError } from './errors.js';
import { WRAPPING_KEY_LENGTH_BYTES } from './secret-chain.js';

export const SHARE_V1_LENGTH_BYTES = WRAPPING_KEY_LENGTH_BYTES + 1;
export const SHARE_V2_VERSION = 2;
export const SHARING_ID_LENGTH_BYTES = 32;
export const SHARE_V2_LENGTH_BYTES = 3 + SHARING_ID_LENGTH_BYTES + WRAPPING_KEY_LENGTH_BYTES;
const SHARING_ID_LABEL = utf8.encode('covenant recovery sharing id v2');

/** A Shamir share of the wrapping key: its y values, all at the x coordinate `x` (1..255). */
export interface ShamirShare {
  readonly x: number;
  readonly y: Uint8Array;
}

/** A share as read from either format; `threshold` and `sharingId` only from v2. */
export interface DecodedShare extends ShamirShare {
  readonly version: 1 | 2;
  readonly threshold?: number;
  readonly sharingId?: Uint8Array;
}

/**
 * The public name of a sharing: SHA-256 of a label and the wrapping key. The key is 32 random
 * bytes, so its digest reveals nothing of it; every share and the service's record of the
 * sharing carry it.
 */
export function sharingIdOf(wrappingKey: Uint8Array): Uint8Array {
  return sha256(concatBytes([SHARING_ID_LABEL, wrappingKey]));
}

export function encodeShareV2(share: ShamirShare, threshold: number, sharingId: Uint8Array): Uint8Array {
  const out = new Uint8Array(SHARE_V2_LENGTH_BYTES);
  out[0] = SHARE_V2_VERSION;
  out[1] = share.x;
  out[2] = threshold;
  out.set(sharingId, 3);
  out.set(share.y, 3 + SHARING_ID_LENGTH_BYTES);
  return out;
}

/** Encodes a v1 share: only to show the old format in tests and vectors, the code never issues one. */
export function encodeShareV1(share: ShamirShare): Uint8Array {
  return concatBytes([share.y, new Uint8Array([share.x])]);
}

/** Reads a share of either format; MalformedShare for anything else. */
export function decodeShare(bytes: Uint8Array): DecodedShare {
  if (bytes.byteLength === SHARE_V1_LENGTH_BYTES) {
    const x = bytes[SHARE_V1_LENGTH_BYTES - 1]!;
    if (x === 0) throw new RecoveryError('MalformedShare', 'v1 share with x coordinate 0 (0 is where the secret lies)');
    return { version: 1, x, y: bytes.slice(0, WRAPPING_KEY_LENGTH_BYTES) };
  }
  if (bytes.byteLength !== SHARE_V2_LENGTH_BYTES || bytes[0] !== SHARE_V2_VERSION) {
    throw new RecoveryError(
      'MalformedShare',
      `${bytes.byteLength} bytes${bytes.byteLength > 0 ? ` starting with 0x${bytes[0]!.toString(16).padStart(2, '0')}` : ''} are neither a v1 share (${SHARE_V1_LENGTH_BYTES} bytes) nor a v2 share (${SHARE_V2_LENGTH_BYTES} bytes starting with 0x02)`,
    );
  }
  const x = bytes[1]!;
  const threshold = bytes[2]!;
  if (x === 0) throw new RecoveryError('MalformedShare', 'v2 share with index 0 (0 is where the secret lies)');
  if (threshold === 0) throw new RecoveryError('MalformedShare', 'v2 share with threshold 0');
  return {
    version: 2,
    x,
    threshold,
    sharingId: bytes.slice(3, 3 + SHARING_ID_LENGTH_BYTES),
    y: bytes.slice(3 + SHARING_ID_LENGTH_BYTES),
  };
}
