/**
 * A seeded, splittable pseudo-random generator (sfc32, seeded through splitmix32) for the
 * simulator and tests. Not for anything secret. `split()` derives an independent stream, so that
 * adding a draw in one component does not shift the draws of another.
 */
import type { RandomSource } from '../consensus/index.js';

function splitmix32(state: number): () => number {
  let s = state >>> 0;
  return () => {
    s = (s + 0x9e3779b9) >>> 0;
    let z = s;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
}

export class Prng implements RandomSource {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  /** Any safe integer seed; its high and low halves both matter. */
  constructor(seed: number) {
    const low = seed >>> 0;
    const high = Math.floor(seed / 0x1_0000_0000) >>> 0;
    const mix = splitmix32(low ^ Math.imul(high, 0x27d4eb2f));
    this.a = mix();
    this.b = mix();
    this.c = mix();
    this.d = mix() | 1;
    for (let i = 0; i < 12; i++) this.nextUint32();
  }

  nextUint32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** A float in [0, 1). */
  float(): number {
    return this.nextUint32() / 0x1_0000_0000;
  }

  /** An integer in [min, max] (both inclusive). */
  int(min: number, max: number): number {
    if (!(Number.isSafeInteger(min) && Number.isSafeInteger(max) && min <= max)) throw new RangeError(`bad range [${min}, ${max}]`);
    return min + Math.floor(this.float() * (max - min + 1));
  }

  chance(probability: number): boolean {
    return probability > 0 && this.float() < probability;
  }

  pick<T>(items: readonly T[]): T {
    if (items.length === 0) throw new RangeError('pick from an empty list');
    return items[Math.floor(this.float() * items.length)]!;
  }

  /** Fisher–Yates, in place; returns the same array. */
  shuffle<T>(items: T[]): T[] {
    for (let i = items.length - 1; i > 0; i--) {
      const j = Math.floor(this.float() * (i + 1));
      [items[i], items[j]] = [items[j]!, items[i]!];
    }
    return items;
  }

  /** An independent generator derived from this one. */
  split(): Prng {
    return new Prng(this.nextUint32() * 0x20_0000 + (this.nextUint32() & 0x1f_ffff));
  }
}
