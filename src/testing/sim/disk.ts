/**
 * A simulated disk for one node: what survives a crash. It holds the hard state and the entries
 * handed over by Ready, and serves them back to the consensus core as its EntryStorage. Every
 * entry also carries a chain hash over the whole prefix, so that checkers compare logs in O(1).
 */
import type { NodeId, Seqno, View } from '../../base/index.js';
import type { Configuration, Entry, EntryStorage, HardState, Ready } from '../../consensus/index.js';

/** Where a log starts: genesis, or a snapshot of the committed prefix. */
export interface DiskStart {
  readonly seqno: Seqno;
  readonly view: View;
  readonly viewHistory: readonly Seqno[];
  readonly configs: readonly Configuration[];
  /** Chain hash of the prefix up to and including `seqno` (0 for genesis). */
  readonly chainHash: number;
}

const textDecoder = new TextDecoder();
const contentIds = new WeakMap<Uint8Array, string>();

/** The simulator's entries carry a unique text id as their bytes. */
export function contentIdOf(entry: Entry): string {
  let id = contentIds.get(entry.bytes);
  if (id === undefined) {
    id = textDecoder.decode(entry.bytes);
    contentIds.set(entry.bytes, id);
  }
  return id;
}

/** cyrb53: a fast 53-bit string hash, plenty to tell simulated logs apart. */
export function hash53(text: string, seed = 0): number {
  let h1 = 0xdeadbeef ^ seed;
  let h2 = 0x41c6ce57 ^ seed;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ ch, 2654435761);
    h2 = Math.imul(h2 ^ ch, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

export function chainHashOf(previous: number, entry: Entry): number {
  const config = entry.configuration === undefined ? '' : entry.configuration.nodes.join(',');
  const retired = entry.retiredCommitted === undefined ? '' : entry.retiredCommitted.join(',');
  return hash53(`${entry.view}|${entry.seqno}|${entry.kind}|${config}|${retired}|${contentIdOf(entry)}`, previous % 0x7fffffff);
}

export interface DiskListener {
  onAppend(node: NodeId, entry: Entry, chainHash: number): void;
  onTruncate(node: NodeId, afterSeqno: Seqno, persistedCommitSeqno: Seqno): void;
}

export class SimDisk implements EntryStorage {
  start: DiskStart;
  hard: HardState;
  private entries: Entry[] = [];
  private chains: number[] = [];

  constructor(
    readonly nodeId: NodeId,
    start: DiskStart,
    hard?: HardState,
  ) {
    this.start = start;
    this.hard = hard ?? { view: start.view, votedFor: undefined, commitSeqno: start.seqno };
  }

  get lastSeqno(): Seqno {
    return this.start.seqno + this.entries.length;
  }

  entryAt(seqno: Seqno): Entry | undefined {
    return this.entries[seqno - this.start.seqno - 1];
  }

  chainAt(seqno: Seqno): number | undefined {
    if (seqno === this.start.seqno) return this.start.chainHash;
    return this.chains[seqno - this.start.seqno - 1];
  }

  /** Writes a Ready's durable part, in the order the contract requires. */
  persist(ready: Ready, listener: DiskListener): void {
    if (ready.truncateAfterSeqno !== undefined) {
      listener.onTruncate(this.nodeId, ready.truncateAfterSeqno, this.hard.commitSeqno);
      const keep = Math.max(0, ready.truncateAfterSeqno - this.start.seqno);
      this.entries.length = Math.min(this.entries.length, keep);
      this.chains.length = this.entries.length;
    }
    for (const entry of ready.entriesToPersist) {
      if (entry.seqno !== this.lastSeqno + 1) throw new Error(`disk of ${this.nodeId}: entry ${entry.seqno} does not follow ${this.lastSeqno}`);
      const chain = chainHashOf(this.chainAt(this.lastSeqno)!, entry);
      this.entries.push(entry);
      this.chains.push(chain);
      listener.onAppend(this.nodeId, entry, chain);
    }
    if (ready.hardState !== undefined) this.hard = ready.hardState;
  }

  /** Replaces everything with a snapshot of the committed prefix (a lagging node catching up). */
  installSnapshot(start: DiskStart): void {
    this.start = start;
    this.entries = [];
    this.chains = [];
    this.hard = { view: Math.max(this.hard.view, start.view), votedFor: this.hard.votedFor, commitSeqno: start.seqno };
  }
}
