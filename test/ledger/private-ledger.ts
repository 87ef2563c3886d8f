/**
 * A ledger whose entries write private maps, encrypted under a chain of two secrets (a rekey):
 * for tests of a recovery's private replay (test/ledger/entry-replay.test.ts,
 * test/platform/worker-entry-replayer.test.ts).
 */
import { encodeWriteSet, LedgerEncryptor, LedgerSecrets } from '../../src/kv/index.js';
import { encodeEntry, Ledger, type Disk } from '../../src/ledger/index.js';
import { NO_CLAIMS_DIGEST } from '../../src/merkle/index.js';

export const ENTRIES = 400;
/** The secret of entries 1..249, and the one from 250 on (a rekey). */
export const SECRETS = [
  { fromSeqno: 1, secret: new Uint8Array(32).fill(1) },
  { fromSeqno: 250, secret: new Uint8Array(32).fill(2) },
];

/** What each entry of the test ledger wrote: a public record, and a private one on most. */
export function writesOf(seqno: number): ReadonlyMap<string, ReadonlyMap<string, Uint8Array>> {
  const writes = new Map<string, ReadonlyMap<string, Uint8Array>>([['public:records', new Map([[String(seqno % 7), new Uint8Array(20).fill(seqno & 0xff)]])]]);
  if (seqno % 5 !== 0) writes.set('records', new Map([[String(seqno % 11), new Uint8Array(100 + (seqno % 300)).fill(seqno & 0x7f)]]));
  return writes;
}

/** Writes ENTRIES entries (view 3) into `directory`, private parts encrypted under SECRETS (one chunk: no signature ends it). */
export function writePrivateLedger(disk: Disk, directory: string): { publicBytes: Uint8Array; privatePlain: Uint8Array }[] {
  const encryptor = new LedgerEncryptor(new LedgerSecrets(SECRETS.map((s, i) => ({ fromSeqno: i === 0 ? 0 : s.fromSeqno, secret: s.secret }))));
  const ledger = new Ledger({ disk, directory });
  ledger.open();
  const written: { publicBytes: Uint8Array; privatePlain: Uint8Array }[] = [];
  for (let seqno = 1; seqno <= ENTRIES; seqno++) {
    const { publicBytes, privateBytes } = encodeWriteSet(writesOf(seqno));
    const frame = encodeEntry({
      view: 3,
      seqno,
      flags: 0,
      claimsDigest: NO_CLAIMS_DIGEST,
      commitEvidenceDigest: new Uint8Array(32),
      publicBytes,
      privateBytes: encryptor.encryptPrivate(3, seqno, privateBytes),
    });
    ledger.append([frame]);
    written.push({ publicBytes, privatePlain: privateBytes });
  }
  ledger.close();
  return written;
}
