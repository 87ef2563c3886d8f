/**
 * The randomness recovery takes from its caller (docs/architecture.md, "The deterministic zone"):
 * wrapping keys and the IVs of the secret records and of stored shares come from one injected
 * source, so the simulator can reproduce those records from its seed. Production passes the host's
 * CSPRNG (`crypto.randomBytes`). The Shamir coefficients and the RSA-OAEP seeds are drawn by the
 * libraries that use them (`shamir-secret-sharing`, OpenSSL) from the host's CSPRNG: the encrypted
 * shares are not reproducible from a seed, only their formats (docs/recovery.md).
 */
import { assert } from '../base/index.js';

/** Returns `n` fresh random bytes. */
export type RandomBytes = (n: number) => Uint8Array;

/** Draws `n` bytes and checks the source kept its contract (a short answer would weaken a key silently). */
export function draw(randomBytes: RandomBytes, n: number): Uint8Array {
  const bytes = randomBytes(n);
  assert(bytes instanceof Uint8Array && bytes.byteLength === n, () => `random source returned ${bytes?.byteLength} bytes, asked for ${n}`);
  return bytes;
}
