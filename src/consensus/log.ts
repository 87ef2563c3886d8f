/**
 * The consensus view of the log: the view history (first seqno of each view), the signature
 * positions, the configurations and the retirement bookkeeping, plus what has and has not yet
 * been handed to the caller for persistence. Entry bytes live in the caller's storage once
 * persisted; until then they are kept here.
 *
 * Memory does not grow with the number of entries: an entry's view comes from the view history
 * (entries' views never decrease), and signatures at or below the commit seqno are dropped but
 * the last one (nothing asks about older ones). What remains grows with views, reconfigurations
 * and uncommitted signatures only.
 */
import { assert, type NodeId, type Seqno, type View } from '../base/index.js';
import type { Configuration, Entry, EntryStorage, EntryStretch } from './types.js';

export interface LogStart {
  /** The log starts after this seqno (a snapshot's, always a signature; 0 at genesis). */
  readonly seqno: Seqno;
  readonly view: View;
  /** viewHistory[v - 1] = first seqno of view v, for views up to `view`. */
  readonly viewHistory: readonly Seqno[];
  /** Configurations active at `seqno`. */
  readonly configs: readonly Configuration[];
}

/** How many of the ascending `sorted` are at or below `value` (the first index above it). */
function countAtOrBelow(sorted: readonly number[], value: number): number {
  let lo = 0;
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! <= value) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

export class RaftLog {
  readonly startSeqno: Seqno;
  readonly startView: View;
  private readonly storage: EntryStorage;
  private last: Seqno;
  private lastEntryView: View;
  /**
   * Seqnos of the signature entries after the start, ascending; those below the last committed
   * one are dropped (see compact).
   */
  private signatureSeqnos: Seqno[] = [];
  /** The start's configurations and every reconfiguration in the log, ascending by seqno. */
  private configsAll: Configuration[];
  private readonly viewStarts: Seqno[];
  /** First reconfiguration in the log that left each node out. */
  private readonly removedAt = new Map<NodeId, Seqno>();
  /** First entry in the log that records each node's retirement as committed. */
  private readonly recordedAt = new Map<NodeId, Seqno>();

  /**
   * Entries not yet known to be in storage: seqnos stableSeqno + 1 .. last, in order (an array,
   * not a Map by seqno: a busy primary passes every entry through here).
   */
  private unstable: Entry[] = [];
  /** Storage holds exactly this log up to here. */
  private stableSeqno: Seqno;
  /** Entries up to here are durable (at most stableSeqno): see markDurable. */
  private durable: Seqno;
  /** Entries up to here have been handed to the caller. */
  private handedOutSeqno: Seqno;
  /** Lowest truncation point not yet handed to the caller. */
  private pendingTruncateAfter: Seqno | undefined;
  /** The Ready in flight: the last seqno it handed out, and the lowest truncation since. */
  private inFlight: { lastSeqno: Seqno; truncatedAfter: Seqno | undefined } | undefined;

  constructor(start: LogStart, storage: EntryStorage, persistedLastSeqno: Seqno) {
    assert(start.viewHistory.length <= start.view, 'view history goes no further than the start view');
    assert(start.configs.length > 0, 'a log starts with at least one configuration');
    assert(persistedLastSeqno >= start.seqno, 'persisted entries start after the start seqno');
    this.startSeqno = start.seqno;
    this.startView = start.view;
    this.storage = storage;
    this.configsAll = [...start.configs];
    this.viewStarts = [...start.viewHistory];
    // Views of the start without a known first seqno begin at most at the start itself.
    while (this.viewStarts.length < start.view) this.viewStarts.push(start.seqno);
    this.last = start.seqno;
    this.lastEntryView = start.view;
    this.stableSeqno = start.seqno;
    this.handedOutSeqno = start.seqno;
    // A summarised stretch first (a restart's replay: the cost of signatures, not of entries).
    const stretch = persistedLastSeqno > start.seqno ? storage.stretchBetween?.(start.seqno + 1, persistedLastSeqno) : undefined;
    if (stretch !== undefined) this.appendStretch(stretch, persistedLastSeqno);
    if (persistedLastSeqno > this.last && storage.entriesBetween !== undefined) {
      for (const entry of storage.entriesBetween(this.last + 1, persistedLastSeqno)) {
        this.append(entry);
        this.unstable.length = 0;
      }
    }
    // What a stretch did not give, entry by entry.
    for (let s = this.last + 1; s <= persistedLastSeqno; s++) {
      const entry = storage.entryAt(s);
      assert(entry !== undefined, () => `persisted entry ${s} is readable`);
      this.append(entry);
      this.unstable.length = 0;
    }
    this.stableSeqno = persistedLastSeqno;
    this.durable = persistedLastSeqno;
    this.handedOutSeqno = persistedLastSeqno;
  }

  get lastSeqno(): Seqno {
    return this.last;
  }

  get lastView(): View {
    return this.lastEntryView;
  }

  /** The last committable position: the last signature, or the start (a snapshot is at a signature). */
  get lastSignatureSeqno(): Seqno {
    return this.signatureSeqnos.length === 0 ? this.startSeqno : this.signatureSeqnos[this.signatureSeqnos.length - 1]!;
  }

  get persistedSeqno(): Seqno {
    return this.stableSeqno;
  }

  /** The entries up to here survive a power loss of this node: what it acknowledges and counts. */
  get durableSeqno(): Seqno {
    return this.durable;
  }

  /** The caller will say what is durable (markDurable): until then, nothing past `seqno` counts as such. */
  awaitDurabilityFrom(seqno: Seqno): void {
    this.durable = Math.min(this.durable, seqno);
  }

  /** Entries up to `seqno` are durable, as far as storage holds this log (never beyond stableSeqno, never back). */
  markDurable(seqno: Seqno): boolean {
    const durable = Math.min(seqno, this.stableSeqno);
    if (durable <= this.durable) return false;
    this.durable = durable;
    return true;
  }

  /** The view of the entry at seqno, or undefined when the log does not know it. */
  viewAt(seqno: Seqno): View | undefined {
    if (seqno === this.startSeqno) return this.startView;
    if (seqno < this.startSeqno || seqno > this.last) return undefined;
    // The highest view that starts at or before seqno: views without entries start where the next
    // view does, so they sort before it.
    const view = countAtOrBelow(this.viewStarts, seqno);
    assert(view > 0, () => `entry ${seqno} belongs to a known view`);
    return view;
  }

  /**
   * The highest committable seqno at or below `seqno`, or undefined when below the start. Below
   * the last committed signature the answer may be lower than that (older positions are
   * forgotten), which is all a caller advancing its commit needs.
   */
  signatureAtOrBelow(seqno: Seqno): Seqno | undefined {
    if (seqno < this.startSeqno) return undefined;
    const count = countAtOrBelow(this.signatureSeqnos, seqno);
    return count === 0 ? this.startSeqno : this.signatureSeqnos[count - 1]!;
  }

  /** Signature seqnos above `above`, highest first. */
  *signaturesDescending(above: Seqno): Generator<Seqno> {
    for (let i = this.signatureSeqnos.length - 1; i >= 0; i--) {
      const s = this.signatureSeqnos[i]!;
      if (s <= above) return;
      yield s;
    }
  }

  /** First seqno of `view` (or of the next view holding entries); undefined for an unknown view. */
  viewStartSeqno(view: View): Seqno | undefined {
    return view >= 1 && view <= this.viewStarts.length ? this.viewStarts[view - 1] : undefined;
  }

  viewHistory(): Seqno[] {
    return [...this.viewStarts];
  }

  entry(seqno: Seqno): Entry | undefined {
    if (seqno <= this.startSeqno || seqno > this.lastSeqno) return undefined;
    const cached = this.unstableEntry(seqno);
    if (cached !== undefined) return cached;
    assert(seqno <= this.stableSeqno, () => `entry ${seqno} is either kept or persisted`);
    const entry = this.storage.entryAt(seqno);
    assert(entry !== undefined && entry.seqno === seqno, () => `storage returns persisted entry ${seqno}`);
    return entry;
  }

  append(entry: Entry): void {
    assert(entry.seqno === this.lastSeqno + 1, () => `entry ${entry.seqno} follows ${this.lastSeqno}`);
    assert(entry.view >= this.lastView, () => `entry view ${entry.view} is not below ${this.lastView}`);
    assert((entry.kind === 'reconfiguration') === (entry.configuration !== undefined), 'configuration iff reconfiguration');
    this.last = entry.seqno;
    this.lastEntryView = entry.view;
    if (entry.kind === 'signature') this.signatureSeqnos.push(entry.seqno);
    while (this.viewStarts.length < entry.view) this.viewStarts.push(entry.seqno);
    if (entry.configuration !== undefined) {
      assert(entry.configuration.seqno === entry.seqno, 'a configuration takes effect at its own entry');
      this.addConfiguration(entry.configuration);
    }
    for (const id of entry.retiredCommitted ?? []) if (!this.recordedAt.has(id)) this.recordedAt.set(id, entry.seqno);
    this.unstable.push(entry);
  }

  private addConfiguration(configuration: Configuration): void {
    const previous = this.configsAll[this.configsAll.length - 1]!;
    const next = new Set(configuration.nodes);
    for (const id of previous.nodes) if (!next.has(id) && !this.removedAt.has(id)) this.removedAt.set(id, configuration.seqno);
    this.configsAll.push(configuration);
  }

  /**
   * The persisted entries of a stretch, as appending each would record them: views, signatures
   * and configurations are independent of one another in append, so each list is taken in order.
   */
  private appendStretch(stretch: EntryStretch, persistedLastSeqno: Seqno): void {
    const from = this.last + 1;
    assert(stretch.to >= from && stretch.to <= persistedLastSeqno, () => `a stretch ${from}..${stretch.to} within the persisted log (to ${persistedLastSeqno})`);
    const runs = stretch.viewRuns;
    assert(runs.length >= 2 && runs.length % 2 === 0 && runs[0] === from, 'a stretch starts with a run of views at its first entry');
    for (let i = 0; i < runs.length; i += 2) {
      const first = runs[i]!;
      const view = runs[i + 1]!;
      assert(first <= stretch.to && (i === 0 || first > runs[i - 2]!), 'runs of views are ascending within the stretch');
      assert(view >= this.lastEntryView, () => `entry view ${view} is not below ${this.lastEntryView}`);
      while (this.viewStarts.length < view) this.viewStarts.push(first);
      this.lastEntryView = view;
    }
    for (const seqno of stretch.signatureSeqnos) {
      assert(seqno >= from && seqno <= stretch.to && seqno > this.lastSignatureSeqno, 'signatures are ascending within the stretch');
      this.signatureSeqnos.push(seqno);
    }
    let previousSeqno = from - 1;
    for (const configuration of stretch.configurations) {
      assert(configuration.seqno > previousSeqno && configuration.seqno <= stretch.to, 'configurations are ascending within the stretch');
      previousSeqno = configuration.seqno;
      this.addConfiguration(configuration);
    }
    this.last = stretch.to;
  }

  private unstableEntry(seqno: Seqno): Entry | undefined {
    return seqno > this.stableSeqno ? this.unstable[seqno - this.stableSeqno - 1] : undefined;
  }

  /** Removes every entry above `seqno`. The caller guarantees nothing committed is removed. */
  truncateAfter(seqno: Seqno): void {
    assert(seqno >= this.startSeqno, 'no truncation below the start of the log');
    if (seqno >= this.lastSeqno) return;
    this.unstable.length = Math.max(0, seqno - this.stableSeqno);
    while (this.signatureSeqnos.length > 0 && this.signatureSeqnos[this.signatureSeqnos.length - 1]! > seqno) this.signatureSeqnos.pop();
    while (this.viewStarts.length > 0 && this.viewStarts[this.viewStarts.length - 1]! > seqno) this.viewStarts.pop();
    this.last = seqno;
    this.lastEntryView = this.viewAt(seqno)!;
    this.configsAll = this.configsAll.filter((c) => c.seqno <= seqno);
    assert(this.configsAll.length > 0, 'the configuration of the start is never truncated');
    for (const [id, s] of this.removedAt) if (s > seqno) this.removedAt.delete(id);
    for (const [id, s] of this.recordedAt) if (s > seqno) this.recordedAt.delete(id);
    if (seqno < this.handedOutSeqno) {
      this.pendingTruncateAfter = Math.min(this.pendingTruncateAfter ?? seqno, seqno);
      this.handedOutSeqno = seqno;
      if (this.inFlight !== undefined) this.inFlight.truncatedAfter = Math.min(this.inFlight.truncatedAfter ?? seqno, seqno);
    }
    this.stableSeqno = Math.min(this.stableSeqno, seqno);
    this.durable = Math.min(this.durable, seqno);
  }

  /** Active configurations given the commit seqno: the last committed one and every later one. */
  activeConfigs(commitSeqno: Seqno): Configuration[] {
    let first = 0;
    for (let i = 0; i < this.configsAll.length; i++) if (this.configsAll[i]!.seqno <= commitSeqno) first = i;
    return this.configsAll.slice(first);
  }

  /**
   * Forgets what the commit at `commitSeqno` made unnecessary: configurations that a later
   * committed one replaces, and signature positions below the last committed signature.
   */
  compact(commitSeqno: Seqno): void {
    this.configsAll = this.activeConfigs(commitSeqno);
    const sigs = this.signatureSeqnos;
    let keepFrom = 0;
    while (keepFrom + 1 < sigs.length && sigs[keepFrom + 1]! <= commitSeqno) keepFrom++;
    if (keepFrom > 0) this.signatureSeqnos = sigs.slice(keepFrom);
  }

  /** Sizes of what the log keeps besides uncommitted entries (for tests: none grows per entry). */
  metadataSizes(): { viewStarts: number; signatureSeqnos: number; configs: number; unstable: number } {
    return { viewStarts: this.viewStarts.length, signatureSeqnos: this.signatureSeqnos.length, configs: this.configsAll.length, unstable: this.unstable.length };
  }

  removedAtSeqno(id: NodeId): Seqno | undefined {
    return this.removedAt.get(id);
  }

  recordedAtSeqno(id: NodeId): Seqno | undefined {
    return this.recordedAt.get(id);
  }

  /** Nodes removed by a reconfiguration in this log, with the seqno that removed them. */
  removals(): ReadonlyMap<NodeId, Seqno> {
    return this.removedAt;
  }

  hasUnhandedWork(): boolean {
    return this.pendingTruncateAfter !== undefined || this.handedOutSeqno < this.lastSeqno;
  }

  /** Hands the unpersisted suffix to the caller. One hand-out at a time: see acknowledge(). */
  handOut(): { truncateAfterSeqno: Seqno | undefined; entries: Entry[] } {
    assert(this.inFlight === undefined, 'the previous Ready is acknowledged before the next is taken');
    const entries: Entry[] = [];
    for (let s = this.handedOutSeqno + 1; s <= this.lastSeqno; s++) {
      const entry = this.unstableEntry(s);
      assert(entry !== undefined, () => `unpersisted entry ${s} is kept until persisted`);
      entries.push(entry);
    }
    const truncateAfterSeqno = this.pendingTruncateAfter;
    this.pendingTruncateAfter = undefined;
    this.handedOutSeqno = this.lastSeqno;
    this.inFlight = { lastSeqno: this.lastSeqno, truncatedAfter: undefined };
    return { truncateAfterSeqno, entries };
  }

  /** The caller persisted the last hand-out: storage now matches the log up to there. */
  acknowledge(): void {
    assert(this.inFlight !== undefined, 'acknowledging a Ready that was handed out');
    const { lastSeqno, truncatedAfter } = this.inFlight;
    this.inFlight = undefined;
    const stable = truncatedAfter === undefined ? lastSeqno : Math.min(lastSeqno, truncatedAfter);
    assert(stable >= this.stableSeqno, () => `storage does not go back from ${this.stableSeqno} to ${stable}`);
    const persisted = stable - this.stableSeqno;
    if (persisted > 0) this.unstable = persisted >= this.unstable.length ? [] : this.unstable.slice(persisted);
    this.stableSeqno = stable;
  }
}
