/** Randomness, injected: code that must be reproducible under the simulator never uses ambient randomness. */
export interface RandomSource {
  /** A uniformly distributed integer in [0, 2^32). */
  nextUint32(): number;
}

/** A uniformly distributed number in [0, 1), from a RandomSource (the injected Math.random). */
export function randomUnit(random: RandomSource): number {
  return random.nextUint32() / 2 ** 32;
}

/** A RandomSource over a source of random bytes (the host's CSPRNG in production), read 1 KiB at a time. */
export class BytesRandom implements RandomSource {
  private buffer: Uint8Array = new Uint8Array(0);
  private offset = 0;
  constructor(private readonly randomBytes: (n: number) => Uint8Array) {}
  nextUint32(): number {
    if (this.offset + 4 > this.buffer.length) {
      this.buffer = this.randomBytes(1024);
      this.offset = 0;
    }
    const b = this.buffer;
    const value = (b[this.offset]! | (b[this.offset + 1]! << 8) | (b[this.offset + 2]! << 16) | (b[this.offset + 3]! << 24)) >>> 0;
    this.offset += 4;
    return value;
  }
}
