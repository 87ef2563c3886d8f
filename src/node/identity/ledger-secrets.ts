/**
 * The ledger secrets this node holds, as a chain keyed by the seqno from which each applies
 * (docs/architecture.md, decision 15): entries at or after a secret's starting seqno (and before
 * the next one's) are encrypted under it, and their commit evidence is derived from it. Today a
 * service has one secret from seqno 0; a rekey or a recovery appends to the chain, and every old
 * private entry still decrypts with the secret of its own seqno.
 */
import { assert } from '../../base/assert.js';
import { EntryFraming } from '../../ledger/index.js';

/** A ledger secret as the node state file and the join answer carry it. */
export interface LedgerSecretRecord {
  from_seqno: number;
  /** Base64 of the 32 secret bytes. */
  secret: string;
}

interface ChainLink {
  readonly fromSeqno: number;
  readonly secret: Uint8Array;
  readonly framing: EntryFraming;
}

export class LedgerSecrets {
  private readonly chain: ChainLink[] = [];

  /** Adds the secret that applies from `fromSeqno` on (after every secret already held). */
  install(fromSeqno: number, secret: Uint8Array): void {
    const last = this.chain.at(-1);
    assert(last === undefined || fromSeqno > last.fromSeqno, `ledger secrets chain in seqno order (${fromSeqno} after ${last?.fromSeqno})`);
    assert(secret.byteLength === 32, 'a ledger secret is 32 bytes');
    this.chain.push({ fromSeqno, secret, framing: new EntryFraming(secret) });
  }

  /**
   * Recovery: puts the secrets of a previous service's ledger (oldest first, all before the
   * secrets already held) in front of the chain, so that its private entries decrypt.
   */
  installOlder(olderFirst: readonly { fromSeqno: number; secret: Uint8Array }[]): void {
    const first = this.chain[0];
    const links = olderFirst.map((s) => ({ fromSeqno: s.fromSeqno, secret: s.secret, framing: new EntryFraming(s.secret) }));
    for (let i = 0; i < links.length; i++) {
      const next = links[i + 1] ?? first;
      assert(next === undefined || links[i]!.fromSeqno < next.fromSeqno, 'older ledger secrets come before the chain, in seqno order');
    }
    this.chain.unshift(...links);
  }

  /** Drops the secrets that entries after `seqno` installed (a rekey rolled back: its secret applies from its seqno + 1). */
  rollbackAfter(seqno: number): boolean {
    let dropped = false;
    while (this.chain.length > 1 && this.chain.at(-1)!.fromSeqno > seqno + 1) {
      this.chain.pop();
      dropped = true;
    }
    return dropped;
  }

  /** Whether a secret held applies at `seqno` (a node of a recovering service holds none for the previous service's entries). */
  covers(seqno: number): boolean {
    return this.chain.length > 0 && this.chain[0]!.fromSeqno <= seqno;
  }

  installRecords(records: readonly LedgerSecretRecord[]): void {
    assert(records.length > 0, 'at least one ledger secret');
    for (const r of records) this.install(r.from_seqno, new Uint8Array(Buffer.from(r.secret, 'base64')));
  }

  get held(): boolean {
    return this.chain.length > 0;
  }

  /** The newest secret: new entries are framed under it. */
  get latest(): { readonly fromSeqno: number; readonly secret: Uint8Array; readonly framing: EntryFraming } {
    const last = this.chain.at(-1);
    assert(last, 'a ledger secret is installed');
    return last;
  }

  /** The framing (encryptor and commit-evidence derivation) of the secret that applies at `seqno`. */
  framingFor(seqno: number): EntryFraming {
    return this.linkFor(seqno).framing;
  }

  /** The secret that applies at `seqno`, with its framing. */
  linkFor(seqno: number): { readonly fromSeqno: number; readonly secret: Uint8Array; readonly framing: EntryFraming } {
    assert(this.chain.length > 0, 'a ledger secret is installed');
    for (let i = this.chain.length - 1; i > 0; i--) if (this.chain[i]!.fromSeqno <= seqno) return this.chain[i]!;
    return this.chain[0]!;
  }

  /** Whether the secret that applies from `fromSeqno` is held. */
  holds(fromSeqno: number): boolean {
    return this.chain.some((l) => l.fromSeqno === fromSeqno);
  }

  records(): LedgerSecretRecord[] {
    return this.chain.map((l) => ({ from_seqno: l.fromSeqno, secret: Buffer.from(l.secret).toString('base64') }));
  }
}
