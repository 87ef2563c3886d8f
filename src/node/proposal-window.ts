/**
 * The entries a primary proposed recently, by seqno, up to a byte budget (Node's
 * recentProposals). Entries arrive in seqno order, one per transaction, and leave oldest first
 * (acknowledged by every peer, or over the budget): an array with a moving start does this
 * without the hashing, the deleted slots and the table rebuilds a Map by seqno costs per entry.
 */
import { assert } from '../base/index.js';

/** Compact the array once this many slots before the start are empty (and they are half of it). */
const COMPACT_AFTER = 4096;

export class ProposalWindow<T extends { readonly seqno: number }> {
  #items: (T | undefined)[] = [];
  #start = 0;
  #bytes = 0;

  constructor(
    private readonly maxBytes: number,
    private readonly sizeOf: (item: T) => number,
  ) {}

  get size(): number {
    return this.#items.length - this.#start;
  }

  /** The bytes the window holds, as sizeOf counts them. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * Adds the next entry. One that does not follow the newest (after a gap) starts the window
   * afresh: the entries before it are dropped, not kept out of order.
   */
  push(item: T): void {
    const newest = this.#items[this.#items.length - 1];
    if (newest !== undefined && item.seqno !== newest.seqno + 1) this.clear();
    this.#items.push(item);
    this.#bytes += this.sizeOf(item);
    while (this.#bytes > this.maxBytes && this.size > 0) this.#dropOldest();
  }

  get(seqno: number): T | undefined {
    const oldest = this.#items[this.#start];
    if (oldest === undefined) return undefined;
    const at = this.#start + (seqno - oldest.seqno);
    return at >= this.#start && at < this.#items.length ? this.#items[at] : undefined;
  }

  /** Drops every entry at or below `seqno`. */
  dropThrough(seqno: number): void {
    while (this.size > 0 && this.#items[this.#start]!.seqno <= seqno) this.#dropOldest();
  }

  clear(): void {
    this.#items = [];
    this.#start = 0;
    this.#bytes = 0;
  }

  #dropOldest(): void {
    const item = this.#items[this.#start];
    assert(item !== undefined, 'the window is not empty');
    this.#bytes -= this.sizeOf(item);
    this.#items[this.#start++] = undefined;
    if (this.#start === this.#items.length) {
      this.clear();
    } else if (this.#start >= COMPACT_AFTER && this.#start * 2 >= this.#items.length) {
      this.#items = this.#items.slice(this.#start);
      this.#start = 0;
    }
  }
}
