/** The real randomness: the host's CSPRNG (node:crypto) as a RandomSource. */
import { randomBytes } from 'node:crypto';
import { BytesRandom, type RandomSource } from '../base/random.js';

export function cryptoRandom(): RandomSource {
  return new BytesRandom((n) => new Uint8Array(randomBytes(n)));
}
