import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import fc from 'fast-check';
import { encodeEntry, EntryFlags, type FrameJob } from '../../src/ledger/index.js';

export const SIG = EntryFlags.SIGNATURE;
export const END = EntryFlags.SIGNATURE | EntryFlags.CHUNK_END;

export function digest(fill: number): Uint8Array {
  return new Uint8Array(32).fill(fill & 0xff);
}

/** An entry whose payload is derived from its seqno, so a wrong read shows. */
export function entry(seqno: number, flags = 0, view = 1, payloadBytes = 20): Uint8Array {
  const publicBytes = new Uint8Array(payloadBytes);
  for (let i = 0; i < payloadBytes; i++) publicBytes[i] = (seqno * 31 + i) & 0xff;
  return encodeEntry({
    view,
    seqno,
    flags,
    claimsDigest: digest(seqno),
    commitEvidenceDigest: digest(seqno + 1),
    publicBytes,
    privateBytes: new Uint8Array(seqno % 3),
  });
}

/**
 * Entries first..last; the seqnos in `ends` end a chunk (signature + CHUNK_END), those in
 * `signatures` are plain signatures.
 */
export function entries(first: number, last: number, ends: readonly number[] = [], signatures: readonly number[] = [], view = 1): Uint8Array[] {
  const out: Uint8Array[] = [];
  for (let s = first; s <= last; s++) out.push(entry(s, ends.includes(s) ? END : signatures.includes(s) ? SIG : 0, view));
  return out;
}

/** Any job a framer may be given: views fit an AES-GCM IV (32 bits), write sets of any size. */
export const frameJobArb: fc.Arbitrary<FrameJob> = fc.record({
  view: fc.integer({ min: 0, max: 0xffff_ffff }),
  seqno: fc.maxSafeNat(),
  flags: fc.integer({ min: 0, max: 15 }),
  claimsDigest: fc.uint8Array({ minLength: 32, maxLength: 32 }),
  publicBytes: fc.uint8Array({ maxLength: 400 }),
  privatePlain: fc.uint8Array({ maxLength: 400 }),
});

/** Runs `run` in a new temporary folder (named after `prefix`), removed afterwards. */
export function withTempDir(prefix: string, run: (dir: string) => void): void {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `covenant-${prefix}-`));
  try {
    run(dir);
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
