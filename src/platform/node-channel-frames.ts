/**
 * The node-to-node frame format: u32 LE length of (kind + payload), u8 kind, payload, with
 * 1 ≤ length ≤ maxFrameBytes. Encoding for the sender and a streaming decoder for the receiver.
 */
import { assert } from '../base/assert.js';
import { ChannelError, FRAME_HEADER_BYTES } from '../base/channels.js';

/**
 * Payloads from this size on are written from the caller's bytes after a header of their own
 * instead of being copied into one frame buffer: a copy of a 32 MB entry batch per peer costs
 * the request thread tens of milliseconds (most of it faulting in fresh pages).
 */
export const UNCOPIED_PAYLOAD_BYTES = 64 * 1024;

/**
 * A frame ready to write: one buffer, or its header and a large payload left uncopied. The two
 * parts are always queued and written together, so that a connection never starts mid-frame.
 */
export type OutFrame = Buffer | readonly [header: Buffer, payload: Buffer];

export function outFrameOf(kind: number, payload: Uint8Array): OutFrame {
  if (payload.byteLength < UNCOPIED_PAYLOAD_BYTES) return encodeFrame(kind, payload);
  const header = Buffer.allocUnsafe(FRAME_HEADER_BYTES);
  header.writeUInt32LE(payload.byteLength + 1, 0);
  header[4] = kind;
  return [header, Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength)];
}

export function frameBytesOf(frame: OutFrame): number {
  return Buffer.isBuffer(frame) ? frame.length : frame[0].length + frame[1].length;
}

/** One frame with its header, ready to write. */
export function encodeFrame(kind: number, payload: Uint8Array): Buffer {
  const frame = Buffer.allocUnsafe(FRAME_HEADER_BYTES + payload.byteLength);
  frame.writeUInt32LE(payload.byteLength + 1, 0);
  frame[4] = kind;
  frame.set(payload, FRAME_HEADER_BYTES);
  return frame;
}

/**
 * Splits a byte stream into frames. Holds at most one frame's bytes (bounded by maxFrameBytes)
 * plus one read; a frame that spans reads is copied once, a frame inside one read not at all.
 */
export class FrameDecoder {
  private readonly chunks: Buffer[] = [];
  private bufferedBytes = 0;
  /** Length field of the frame being read, or -1 while its header is incomplete. */
  private frameBytes = -1;
  private failed: ChannelError | undefined;

  constructor(private readonly maxFrameBytes: number) {
    assert(Number.isInteger(maxFrameBytes) && maxFrameBytes >= 1 && maxFrameBytes <= 0xffff_ffff, 'maxFrameBytes must be in [1, 2^32)');
  }

  /**
   * Feeds the next bytes of the stream, calling onFrame for each complete frame. Returns the
   * error of a bad length prefix (after which the stream is unusable and every call returns it).
   */
  push(chunk: Buffer, onFrame: (kind: number, payload: Buffer) => void): ChannelError | undefined {
    if (this.failed !== undefined) return this.failed;
    if (chunk.length > 0) {
      this.chunks.push(chunk);
      this.bufferedBytes += chunk.length;
    }
    for (;;) {
      if (this.frameBytes < 0) {
        if (this.bufferedBytes < 4) return undefined;
        const length = this.peekLength();
        if (length === 0) return (this.failed = new ChannelError('FrameEmpty', 'frame length 0 (a frame holds at least its kind byte)'));
        if (length > this.maxFrameBytes) {
          return (this.failed = new ChannelError('FrameTooLarge', `frame length ${length} exceeds the limit of ${this.maxFrameBytes} bytes`, {
            frameBytes: length,
            maxFrameBytes: this.maxFrameBytes,
          }));
        }
        this.frameBytes = length;
      }
      const totalBytes = 4 + this.frameBytes;
      if (this.bufferedBytes < totalBytes) return undefined;
      const frame = this.take(totalBytes);
      this.frameBytes = -1;
      onFrame(frame[4]!, frame.subarray(FRAME_HEADER_BYTES));
    }
  }

  private peekLength(): number {
    const first = this.chunks[0]!;
    if (first.length >= 4) return first.readUInt32LE(0);
    const head = Buffer.allocUnsafe(4);
    let filled = 0;
    for (let i = 0; filled < 4; i++) filled += this.chunks[i]!.copy(head, filled, 0, Math.min(this.chunks[i]!.length, 4 - filled));
    return head.readUInt32LE(0);
  }

  private take(n: number): Buffer {
    this.bufferedBytes -= n;
    const first = this.chunks[0]!;
    if (first.length >= n) {
      if (first.length === n) this.chunks.shift();
      else this.chunks[0] = first.subarray(n);
      return first.subarray(0, n);
    }
    const out = Buffer.allocUnsafe(n);
    let filled = 0;
    let used = 0;
    while (filled < n) {
      const chunk = this.chunks[used]!;
      const count = Math.min(chunk.length, n - filled);
      chunk.copy(out, filled, 0, count);
      filled += count;
      if (count === chunk.length) used++;
      else this.chunks[used] = chunk.subarray(count);
    }
    this.chunks.splice(0, used);
    return out;
  }
}
