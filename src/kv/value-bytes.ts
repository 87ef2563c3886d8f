/**
 * The bytes of stored values: small ones are carved out of shared slabs instead of each getting a
 * native buffer of its own.
 *
 * Every `ArrayBuffer` with its own memory costs a native allocation, an object the garbage
 * collector tracks and frees on a helper thread, and counts as external memory, which brings the
 * next full collection closer. A JSON record encoded per write was one such buffer per
 * transaction on a primary, and a backup's copy of each replicated private write set would be
 * another; carved out of a slab each is a view, and one native buffer serves a slab's worth.
 *
 * What it costs: a slab lives while any value carved out of it lives. Values written together
 * usually live or die together (the versions of a key overwritten one after another, records
 * kept together), so a slab holds little more than its values; in the worst case, one long-lived
 * value among short-lived ones, a value of at most MAX_CARVED_BYTES holds SLAB_BYTES. Larger
 * values get a buffer of their own, as before.
 *
 * Views are plain Uint8Arrays (not Buffers, whose `slice` shares memory), and distinct values
 * never overlap. One set of slabs per thread (module state); nothing here is shared across threads.
 */

import { assert } from '../base/index.js';

/** Size of one slab. */
export const SLAB_BYTES = 4096;
/** Values up to this size are carved out of a slab; larger ones get a buffer of their own. */
export const MAX_CARVED_BYTES = 512;

let slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
let slabOffset = 0;

/** A view of `bytes` fresh bytes in the current slab (a new slab when it has too few left). */
function carve(bytes: number): Uint8Array {
  if (bytes === 0) return new Uint8Array(0);
  if (slabOffset + bytes > SLAB_BYTES) {
    slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
    slabOffset = 0;
  }
  const view = new Uint8Array(slab.buffer, slab.byteOffset + slabOffset, bytes);
  slabOffset += bytes;
  return view;
}

const textEncoder = new TextEncoder();

/** The UTF-8 encoding of `text`, in bytes of its own (not shared with any other value). */
export function utf8Value(text: string): Uint8Array {
  const length = Buffer.byteLength(text, 'utf8');
  if (length > MAX_CARVED_BYTES) return textEncoder.encode(text);
  const view = carve(length);
  // Buffer.byteLength counts a lone surrogate as the 3 bytes of U+FFFD, which write() writes too.
  const written = slab.write(text, view.byteOffset - slab.byteOffset, length, 'utf8');
  assert(written === length, () => `UTF-8 encoding wrote ${written} of ${length} bytes`);
  return view;
}

/**
 * A copy of `bytes` that shares memory with nothing the caller holds. (Not `bytes.slice()`: on a
 * Buffer, which received frames are, `slice` returns a view of the same memory.)
 */
export function copyValue(bytes: Uint8Array): Uint8Array {
  if (bytes.byteLength > MAX_CARVED_BYTES) return new Uint8Array(bytes);
  const copy = carve(bytes.byteLength);
  copy.set(bytes);
  return copy;
}
