/**
 * The ledger secrets this node holds, as a chain keyed by the seqno from which each applies
 * (docs/architecture.md, decision 15): entries at or after a secret's starting seqno (and before
 * the next one's) are encrypted under it, and their commit evidence is derived from it. Today a
 * service has one secret from seqno 0; a rekey or a recovery appends to the chain, and every old
 * private entry still decrypts with the secret of its own seqno.
 */
import { assert } from '../../base/assert.js';
import { EntrySeal } from '../../ledger/index.js';

/** A ledger secret as the node state file and the join answer carry it. */
export interface LedgerSecretRecord {
  from_seqno: number;
  /** Base64 of the 32 secret bytes. */
  secret: string;
}

interface ChainLink {
  readonly fromSeqno: number;
  readonly secret: Uint8Array;
  readonly seal: EntrySeal;
}

export class LedgerSecrets {
  private readonly chain: ChainLink[] = [];

  /** Adds the secret that applies from `fromSeqno` on (after every secret already held). */
  install(fromSeqno: number, secret: Uint8Array): void {
    const last = this.chain.at(-1);
    assert(last === undefined || fromSeqno > last.fromSeqno, `ledger secrets chain in seqno order (${fromSeqno} after ${last?.fromSeqno})`);
    assert(secret.byteLength === 32, 'a ledger secret is 32 bytes');
    this.chain.push({ fromSeqno, secret, seal: new EntrySeal(secret) });
  }

  installRecords(records: readonly LedgerSecretRecord[]): void {
    assert(records.length > 0, 'at least one ledger secret');
    for (const r of records) this.install(r.from_seqno, new Uint8Array(Buffer.from(r.secret, 'base64')));
  }

  get held(): boolean {
    return this.chain.length > 0;
  }

  /** The newest secret: new entries are sealed under it. */
  get latest(): { readonly fromSeqno: number; readonly secret: Uint8Array; readonly seal: EntrySeal } {
    const last = this.chain.at(-1);
    assert(last, 'a ledger secret is installed');
    return last;
  }

  /** The seal (encryptor and commit-evidence derivation) of the secret that applies at `seqno`. */
  sealFor(seqno: number): EntrySeal {
    assert(this.chain.length > 0, 'a ledger secret is installed');
    for (let i = this.chain.length - 1; i > 0; i--) if (this.chain[i]!.fromSeqno <= seqno) return this.chain[i]!.seal;
    return this.chain[0]!.seal;
  }

  records(): LedgerSecretRecord[] {
    return this.chain.map((l) => ({ from_seqno: l.fromSeqno, secret: Buffer.from(l.secret).toString('base64') }));
  }
}
