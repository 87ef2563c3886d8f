/**
 * How often a growing state is snapshotted. Every snapshot writes the whole state, on every node:
 * with a fixed `snapshots.tx_count` the work per transaction grows with the state (at a million
 * 200-byte records a 221 MB snapshot every 10,000 transactions is some 22 KB written, encoded,
 * enciphered and hashed per transaction, on each node), until snapshotting is most of what the
 * nodes do. So an automatic snapshot point (tx_count, time_interval) also waits until the ledger
 * written since the previous snapshot is at least `snapshots.min_ledger_fraction` of that
 * snapshot's size: the snapshot work per transaction is then at most 1 / fraction times the
 * transaction's own ledger bytes whatever the state's size, and what a restart or a joiner replays
 * after a snapshot is at most that fraction of it (docs/snapshots.md, "When"). Requested
 * snapshots (POST /node/snapshot:create, trigger_snapshot) do not wait.
 *
 * Only the primary decides, and the decision travels in the replicated entry; its inputs are the
 * node's own files (the ledger's chunk sizes, its snapshots' sizes), no time.
 */
export class SnapshotCadence {
  /** The newest snapshot this node wrote or found in its directory, and its size. */
  #last: { seqno: number; sizeBytes: number } | undefined;
  /** The snapshot point after which a deferral was last logged (one line per snapshot). */
  #loggedAfter: number | undefined;
  /** After a deferral, the seqno before which the ledger is not measured again. */
  #recheckAt = 0;

  /**
   * `recheckSeqnos`: once a snapshot point is deferred, the ledger's bytes are measured again
   * only this many seqnos later (measuring walks every chunk; signatures come every few
   * transactions), so a snapshot is taken at most that late.
   */
  constructor(
    private readonly fraction: number,
    private readonly recheckSeqnos: number,
  ) {}

  /** A snapshot file of this node was written (or, at start, the newest one it holds). */
  written(seqno: number, sizeBytes: number): void {
    if (this.#last === undefined || seqno >= this.#last.seqno) this.#last = { seqno, sizeBytes };
  }

  /**
   * Whether an automatic snapshot point may be taken now, the previous snapshot point being
   * `lastPointSeqno` and `ledgerBytesAfter` what the ledger holds after it. The size compared
   * with is that of the newest snapshot this node holds (the previous point's, or an earlier one's
   * when this node has not written that one: the state it measures grows slowly); with none,
   * no wait.
   * `deferred` is called once per previous snapshot point when the rule defers one. `seqno` is
   * the signature's that would be the snapshot point.
   */
  allows(seqno: number, lastPointSeqno: number, ledgerBytesAfter: (seqno: number) => number, deferred: (message: string) => void): boolean {
    const last = this.#last;
    if (this.fraction <= 0 || last === undefined) return true;
    if (this.#loggedAfter === lastPointSeqno && seqno < this.#recheckAt) return false;
    const needed = Math.ceil(this.fraction * last.sizeBytes);
    const written = ledgerBytesAfter(lastPointSeqno);
    if (written >= needed) return true;
    this.#recheckAt = seqno + this.recheckSeqnos;
    if (this.#loggedAfter !== lastPointSeqno) {
      this.#loggedAfter = lastPointSeqno;
      deferred(
        `snapshot deferred: ${written} bytes of ledger since the snapshot at ${lastPointSeqno}, which is ${last.sizeBytes} bytes; ` +
          `the next is taken once ${needed} are written (snapshots.min_ledger_fraction ${this.fraction})`,
      );
    }
    return false;
  }
}
