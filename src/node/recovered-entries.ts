import { assert } from '../base/assert.js';
import type { Configuration, Entry, EntryStretch } from '../consensus/index.js';

const NO_BYTES = new Uint8Array(0);

/**
 * What a recovery's read of the public ledger (or a restart's replay of the node's ledger) learnt
 * of the entries it applied, so that consensus builds its log from it (Replica.entriesFromLedger)
 * instead of reading and decoding every file again: the view of each entry (as runs: views never
 * decrease along a ledger), which entries are signatures, and (a replay) the configurations this
 * service's reconfiguration entries record. To the recovered service a previous service's entries
 * are normal entries or signatures (its configurations are not this service's: see entryOfFrame).
 */
export class RecoveredEntries {
  /** viewRuns[2i] is the first seqno of a run of entries of view viewRuns[2i + 1]. */
  private readonly viewRuns: number[] = [];
  private readonly signatures = new Set<number>();
  /** Reconfiguration entries of this service (a restart's replay records them; a recovery's read has none). */
  private readonly configurations = new Map<number, Configuration>();
  last: number;

  constructor(readonly first: number) {
    this.last = first - 1;
  }

  add(seqno: number, view: number, signature: boolean, configuration?: Configuration): void {
    assert(seqno === this.last + 1, () => `recovered entry ${seqno} follows ${this.last}`);
    if (this.viewRuns.length === 0 || this.viewRuns[this.viewRuns.length - 1] !== view) this.viewRuns.push(seqno, view);
    if (signature) this.signatures.add(seqno);
    if (configuration !== undefined) this.configurations.set(seqno, configuration);
    this.last = seqno;
  }

  truncateAfter(seqno: number): void {
    if (seqno >= this.last) return;
    while (this.viewRuns.length > 0 && this.viewRuns[this.viewRuns.length - 2]! > seqno) this.viewRuns.length -= 2;
    for (const s of this.signatures) if (s > seqno) this.signatures.delete(s);
    for (const s of this.configurations.keys()) if (s > seqno) this.configurations.delete(s);
    this.last = Math.max(seqno, this.first - 1);
  }

  /**
   * What entries(from, to) would give, summarised (EntryStretch): the consensus log is built from
   * it at the cost of the views, signatures and configurations recorded, not of the entries (a
   * walk over two million entries was one long turn of the event loop at restart).
   */
  stretch(from: number, to: number): EntryStretch {
    assert(from >= this.first && from <= to && to <= this.last, () => `recovered entries ${from}..${to} within ${this.first}..${this.last}`);
    const viewRuns: number[] = [];
    for (let i = 0; i < this.viewRuns.length; i += 2) {
      const runFirst = this.viewRuns[i]!;
      const runEnd = i + 2 < this.viewRuns.length ? this.viewRuns[i + 2]! - 1 : this.last;
      if (runEnd < from || runFirst > to) continue;
      viewRuns.push(Math.max(runFirst, from), this.viewRuns[i + 1]!);
    }
    // As entries() gives them: an entry that records a configuration is a reconfiguration, not a signature.
    const signatureSeqnos = [...this.signatures].filter((s) => s >= from && s <= to && !this.configurations.has(s)).sort((a, b) => a - b);
    const configurations = [...this.configurations]
      .filter(([s]) => s >= from && s <= to)
      .sort(([a], [b]) => a - b)
      .map(([, configuration]) => configuration);
    return { to, viewRuns, signatureSeqnos, configurations };
  }

  /** Entries from..to (within first..last), without their bytes: consensus keeps none of them. */
  *entries(from: number, to: number): Generator<Entry> {
    assert(from >= this.first && to <= this.last, () => `recovered entries ${from}..${to} within ${this.first}..${this.last}`);
    let run = 0;
    for (let seqno = from; seqno <= to; seqno++) {
      while (run + 2 < this.viewRuns.length && this.viewRuns[run + 2]! <= seqno) run += 2;
      const view = this.viewRuns[run + 1]!;
      const configuration = this.configurations.get(seqno);
      if (configuration !== undefined) yield { view, seqno, kind: 'reconfiguration', configuration, bytes: NO_BYTES };
      else yield { view, seqno, kind: this.signatures.has(seqno) ? 'signature' : 'normal', bytes: NO_BYTES };
    }
  }
}
