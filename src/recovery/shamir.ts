/**
 * Shamir secret sharing over GF(2^8), byte for byte the scheme of `shamir-secret-sharing`
 * (docs/recovery.md, "Shamir sharing"): the field of AES (x^8 + x^4 + x^3 + x + 1), one polynomial
 * per secret byte whose constant term is that byte, and a share laid out as the y values followed
 * by the x coordinate.
 *
 * Why not call the library: its `split` draws from its own CSPRNG, which the deterministic zone
 * cannot inject, and both its functions are async while transactions run synchronously
 * (docs/architecture.md, decision 2). This module follows its split step for step (same x
 * coordinate shuffle, same order of random draws), so with the same random bytes it emits the same
 * shares; the tests check that against the library itself, and that the library's `combine`
 * reassembles these shares. Unlike the library, a threshold of 1 is allowed (every share is then
 * the secret itself, which is what a recovery threshold of 1 means).
 */
import { assert } from '../base/index.js';
import { draw, type RandomBytes } from './random.js';

/** Product in GF(2^8) modulo x^8 + x^4 + x^3 + x + 1, without branches or tables indexed by secret bytes. */
function gfMul(a: number, b: number): number {
  let product = 0;
  for (let i = 0; i < 8; i++) {
    product ^= -(b & 1) & a;
    b >>= 1;
    a = ((a << 1) ^ (-(a >> 7) & 0x11b)) & 0xff;
  }
  return product;
}

/** Inverse in GF(2^8) as a^254 (a^255 = 1 for a != 0). */
function gfInv(a: number): number {
  assert(a !== 0, 'no inverse of 0 in GF(2^8)');
  let result = 1;
  let base = a;
  for (let e = 254; e > 0; e >>= 1) {
    if (e & 1) result = gfMul(result, base);
    base = gfMul(base, base);
  }
  return result;
}

/** A Shamir share: `y.length` y values, all at the x coordinate `x` (1..255). */
export interface ShamirShare {
  readonly x: number;
  readonly y: Uint8Array;
}

/** The raw share bytes of the library: y values followed by the x coordinate. */
export function rawShareBytes(share: ShamirShare): Uint8Array {
  const out = new Uint8Array(share.y.byteLength + 1);
  out.set(share.y, 0);
  out[share.y.byteLength] = share.x;
  return out;
}

/**
 * The 255 x coordinates in a random order, drawn as the library draws them: one random byte per
 * position, swapped with position (byte mod 255). The shuffle is biased, which costs Shamir's
 * secrecy nothing (any distinct non-zero coordinates will do); it is kept so that the same random
 * bytes give the library's shares.
 */
function shuffledCoordinates(randomBytes: RandomBytes): Uint8Array {
  const coordinates = new Uint8Array(255);
  for (let i = 0; i < 255; i++) coordinates[i] = i + 1;
  const swaps = draw(randomBytes, 255);
  for (let i = 0; i < 255; i++) {
    const j = swaps[i]! % 255;
    const t = coordinates[i]!;
    coordinates[i] = coordinates[j]!;
    coordinates[j] = t;
  }
  return coordinates;
}

/** Splits `secret` into `count` shares, any `threshold` of which reassemble it. */
export function splitSecret(secret: Uint8Array, count: number, threshold: number, randomBytes: RandomBytes): ShamirShare[] {
  assert(secret.byteLength >= 1, 'a non-empty secret');
  assert(Number.isInteger(count) && count >= 1 && count <= 255, () => `share count ${count} not in [1, 255]`);
  assert(Number.isInteger(threshold) && threshold >= 1 && threshold <= count, () => `threshold ${threshold} not in [1, ${count}]`);
  const xs = shuffledCoordinates(randomBytes);
  const ys = Array.from({ length: count }, () => new Uint8Array(secret.byteLength));
  const degree = threshold - 1;
  const coefficients = new Uint8Array(degree + 1);
  for (let i = 0; i < secret.byteLength; i++) {
    coefficients[0] = secret[i]!;
    if (degree > 0) coefficients.set(draw(randomBytes, degree), 1);
    for (let j = 0; j < count; j++) {
      // Horner's rule, highest coefficient first, as the library evaluates.
      const x = xs[j]!;
      let y = coefficients[degree]!;
      for (let c = degree - 1; c >= 0; c--) y = gfMul(y, x) ^ coefficients[c]!;
      ys[j]![i] = y;
    }
  }
  coefficients.fill(0);
  return ys.map((y, j) => ({ x: xs[j]!, y }));
}

/**
 * Lagrange interpolation at 0 of the shares' points. With fewer shares than the threshold this
 * returns a value unrelated to the secret (nothing tells them apart: the caller checks the result,
 * docs/recovery.md). Shares must have distinct non-zero x and equal lengths (the caller's checks).
 */
export function combineShares(shares: readonly ShamirShare[]): Uint8Array {
  assert(shares.length >= 1, 'at least one share');
  const length = shares[0]!.y.byteLength;
  const xs = new Set<number>();
  for (const s of shares) {
    assert(s.y.byteLength === length, 'shares of one length');
    assert(s.x >= 1 && s.x <= 255 && !xs.has(s.x), () => `share x ${s.x} is distinct and in [1, 255]`);
    xs.add(s.x);
  }
  // basis_i = prod_{j != i} x_j / (x_i + x_j): the Lagrange basis at 0 (addition is xor).
  const basis = shares.map((si, i) => {
    let b = 1;
    shares.forEach((sj, j) => {
      if (i !== j) b = gfMul(b, gfMul(sj.x, gfInv(si.x ^ sj.x)));
    });
    return b;
  });
  const secret = new Uint8Array(length);
  for (let k = 0; k < length; k++) {
    let acc = 0;
    shares.forEach((s, i) => {
      acc ^= gfMul(s.y[k]!, basis[i]!);
    });
    secret[k] = acc;
  }
  return secret;
}
