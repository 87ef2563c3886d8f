/**
 * Safety checkers, run after every simulated step. They judge the cluster from the outside (disks,
 * messages sent, statuses) against an independent record of what was committed, and throw a
 * Violation naming the property that broke:
 *
 * - one-primary-per-view: at most one node is ever primary in a given view (once its vote for
 *   itself is persisted: before that it has sent nothing and a crash makes it forget the view);
 * - vote-once-per-view: no node grants its vote to two candidates in one view;
 * - log-matching: two logs holding an entry of the same view at the same seqno agree on it and on
 *   everything before it;
 * - committed-never-lost: every committed entry stays committed and unchanged, a new primary holds
 *   every entry committed in earlier views, and no node rolls back at or below its own commit;
 * - commit-monotonic / commit-on-signature: a node's applied commit never decreases and always
 *   lands on a signature;
 * - same-applied-prefix: every node applies exactly the committed entries, in order;
 * - linearizable-read: a read a primary confirms (ReadIndex) reflects at least every entry any node
 *   knew committed when the read was asked, and lies within the confirming node's commit;
 * - joint-majority: when a primary advances its commit, a majority of every active configuration
 *   (the last committed one and every later one in its log) holds the entry on disk; and a node
 *   becomes primary only with votes from a majority of every configuration active in its log.
 */
import type { NodeId, Seqno, View } from '../../base/index.js';
import type { Configuration, Entry, EntryKind, Message, Raft } from '../../consensus/index.js';
import { contentIdOf, type DiskListener, type SimDisk } from './disk.js';

export type CheckerName =
  | 'one-primary-per-view'
  | 'vote-once-per-view'
  | 'log-matching'
  | 'committed-never-lost'
  | 'commit-monotonic'
  | 'commit-on-signature'
  | 'same-applied-prefix'
  | 'joint-majority'
  | 'linearizable-read'
  | 'request-answer'
  | 'acknowledged-write'
  | 'liveness'
  | 'receipts-verify'
  | 'invariant';

export class Violation extends Error {
  constructor(
    readonly checker: CheckerName,
    message: string,
  ) {
    super(`${checker}: ${message}`);
    this.name = 'Violation';
  }
}

interface CommittedEntry {
  readonly chainHash: number;
  readonly view: View;
  readonly contentId: string;
  readonly kind: EntryKind;
}

/** What the checker needs to see of a node. */
export interface ObservedNode {
  readonly id: NodeId;
  readonly disk: SimDisk;
  readonly raft: Raft | undefined;
  appliedSeqno: Seqno;
}

interface LastObservation {
  view: View;
  primary: boolean;
  commitSeqno: Seqno;
}

export class Checker implements DiskListener {
  /** committed[s] describes the committed entry at seqno s; index 0 is genesis. */
  private readonly committed: CommittedEntry[] = [{ chainHash: 0, view: 0, contentId: 'genesis', kind: 'signature' }];
  /** Committed reconfigurations (and genesis), ascending. */
  private readonly committedConfigs: Configuration[];
  /** committedViewStarts[v - 1] = first committed seqno of view >= v. */
  private readonly committedViewStarts: Seqno[] = [];
  private readonly chainBySeqnoView = new Map<string, number>();
  private readonly votes = new Map<string, NodeId>();
  private readonly primaries = new Map<View, NodeId>();
  /** `${node}@${view}` of every election won, judged once. */
  private readonly elections = new Set<string>();
  private readonly observed = new Map<NodeId, LastObservation>();
  /** `${node}:${readId}` → the highest seqno known committed anywhere when the read was asked. */
  private readonly readsAsked = new Map<string, Seqno>();
  checks = 0;

  constructor(genesisConfig: Configuration) {
    this.committedConfigs = [genesisConfig];
  }

  get committedSeqno(): Seqno {
    return this.committed.length - 1;
  }

  committedAt(seqno: Seqno): CommittedEntry | undefined {
    return this.committed[seqno];
  }

  /** The last committed configuration at or below seqno. */
  committedConfigAt(seqno: Seqno): Configuration {
    let found = this.committedConfigs[0]!;
    for (const c of this.committedConfigs) if (c.seqno <= seqno) found = c;
    return found;
  }

  committedViewHistory(uptoView: View): Seqno[] {
    return this.committedViewStarts.slice(0, uptoView);
  }

  /** The highest committed signature seqno, for snapshots. */
  lastCommittedSignatureSeqno(): Seqno {
    for (let s = this.committed.length - 1; s > 0; s--) if (this.committed[s]!.kind === 'signature') return s;
    return 0;
  }

  // ---- Disk events -------------------------------------------------------------------------

  onAppend(node: NodeId, entry: Entry, chainHash: number): void {
    this.checks++;
    const key = `${entry.seqno}:${entry.view}`;
    const known = this.chainBySeqnoView.get(key);
    if (known === undefined) this.chainBySeqnoView.set(key, chainHash);
    else if (known !== chainHash) {
      throw new Violation('log-matching', `${node} persisted ${entry.view}.${entry.seqno} with a history that differs from another node's entry ${entry.view}.${entry.seqno}`);
    }
  }

  onTruncate(node: NodeId, afterSeqno: Seqno, persistedCommitSeqno: Seqno): void {
    this.checks++;
    if (afterSeqno < persistedCommitSeqno) {
      throw new Violation('committed-never-lost', `${node} truncates after ${afterSeqno}, below its commit ${persistedCommitSeqno}`);
    }
  }

  // ---- Messages ----------------------------------------------------------------------------

  onSend(message: Message): void {
    if (message.type !== 'vote-response' || !message.granted || message.preVote) return;
    this.checks++;
    const key = `${message.from}@${message.view}`;
    const previous = this.votes.get(key);
    if (previous === undefined) this.votes.set(key, message.to);
    else if (previous !== message.to) {
      throw new Violation('vote-once-per-view', `${message.from} voted for ${previous} and for ${message.to} in view ${message.view}`);
    }
  }

  // ---- Applying committed entries ----------------------------------------------------------

  onApply(node: ObservedNode, committedSeqno: Seqno): void {
    this.checks++;
    if (committedSeqno < node.appliedSeqno) {
      throw new Violation('commit-monotonic', `${node.id} commit went back from ${node.appliedSeqno} to ${committedSeqno}`);
    }
    if (committedSeqno === node.appliedSeqno) return;
    const disk = node.disk;
    if (committedSeqno > disk.start.seqno) {
      const entry = disk.entryAt(committedSeqno);
      if (entry === undefined) throw new Violation('committed-never-lost', `${node.id} commits ${committedSeqno} beyond its persisted log`);
      if (entry.kind !== 'signature') {
        throw new Violation('commit-on-signature', `${node.id} commits ${entry.view}.${committedSeqno}, a ${entry.kind} entry`);
      }
    }
    for (let s = Math.max(node.appliedSeqno, disk.start.seqno) + 1; s <= committedSeqno; s++) {
      const entry = disk.entryAt(s)!;
      const chainHash = disk.chainAt(s)!;
      const known = this.committed[s];
      if (known !== undefined) {
        if (known.chainHash !== chainHash) {
          throw new Violation(
            'same-applied-prefix',
            `${node.id} applies ${entry.view}.${s} (${contentIdOf(entry)}) but ${known.view}.${s} (${known.contentId}) was committed`,
          );
        }
        continue;
      }
      if (s !== this.committed.length) throw new Violation('invariant', `committed log has a gap before ${s}`);
      this.committed.push({ chainHash, view: entry.view, contentId: contentIdOf(entry), kind: entry.kind });
      while (this.committedViewStarts.length < entry.view) this.committedViewStarts.push(s);
      if (entry.configuration !== undefined) this.committedConfigs.push(entry.configuration);
    }
    node.appliedSeqno = committedSeqno;
  }

  // ---- Linearizable reads -----------------------------------------------------------------

  onReadRequested(node: NodeId, readId: number, knownCommittedSeqno: Seqno): void {
    this.readsAsked.set(`${node}:${readId}`, knownCommittedSeqno);
  }

  onReadConfirmed(node: ObservedNode, readId: number, seqno: Seqno): void {
    this.checks++;
    const key = `${node.id}:${readId}`;
    const floor = this.readsAsked.get(key);
    if (floor === undefined) throw new Violation('linearizable-read', `${node.id} confirmed read r${readId} that was never asked`);
    this.readsAsked.delete(key);
    if (seqno < floor) {
      throw new Violation('linearizable-read', `${node.id} confirmed read r${readId} at ${seqno}, but ${floor} was committed when it was asked: the read would miss committed writes`);
    }
    const commit = node.raft?.summary().commitSeqno ?? node.appliedSeqno;
    if (seqno > commit) throw new Violation('linearizable-read', `${node.id} confirmed read r${readId} at ${seqno}, beyond its commit ${commit}`);
  }

  onReadAbandoned(node: NodeId, readId: number): void {
    this.readsAsked.delete(`${node}:${readId}`);
  }

  /** A node's core is gone (crash, snapshot install): its reads with it. */
  forgetReads(node: NodeId): void {
    for (const key of this.readsAsked.keys()) if (key.startsWith(`${node}:`)) this.readsAsked.delete(key);
  }

  // ---- Status after every step -------------------------------------------------------------

  observe(node: ObservedNode, nodes: ReadonlyMap<NodeId, ObservedNode>): void {
    const raft = node.raft;
    if (raft === undefined) return;
    this.checks++;
    const status = raft.summary();
    const primary = status.role === 'Primary';
    const last = this.observed.get(node.id);
    this.observed.set(node.id, { view: status.view, primary, commitSeqno: status.commitSeqno });
    if (!primary) return;
    const election = `${node.id}@${status.view}`;
    if (!this.elections.has(election)) {
      // Judged as it wins, against the log it won with: the votes it counted were all sent.
      this.elections.add(election);
      this.checkLeaderCompleteness(node, status.view);
      this.checkElectionQuorum(node, status.view, status.commitSeqno, status.lastSeqno);
    }
    // A node is primary for the world once its vote for itself in this view is on disk: before
    // that it has sent nothing (persist before send), and a crash makes it forget the view.
    const durable = node.disk.hard.view === status.view && node.disk.hard.votedFor === node.id;
    if (!durable) return;
    const known = this.primaries.get(status.view);
    if (known === undefined) {
      this.primaries.set(status.view, node.id);
    } else if (known !== node.id) {
      throw new Violation('one-primary-per-view', `${known} and ${node.id} are both primary in view ${status.view}`);
    }
    if (last !== undefined && last.primary && last.view === status.view && status.commitSeqno > last.commitSeqno) {
      this.checkJointMajority(node, last.commitSeqno, status.commitSeqno, status.lastSeqno, nodes);
    }
  }

  /** A new primary of view v holds every entry committed in views before v. */
  private checkLeaderCompleteness(node: ObservedNode, view: View): void {
    let k = this.committed.length - 1;
    while (k > 0 && this.committed[k]!.view >= view) k--;
    const raft = node.raft!;
    const start = node.disk.start.seqno;
    if (k <= start) return;
    const entry = raft.entry(k);
    const expected = this.committed[k]!;
    if (entry === undefined || entry.view !== expected.view || contentIdOf(entry) !== expected.contentId) {
      throw new Violation(
        'committed-never-lost',
        `${node.id} became primary of view ${view} without committed entry ${expected.view}.${k} (${expected.contentId})`,
      );
    }
  }

  /** The votes sent for this node in this view (its own included) form a majority of every active configuration. */
  private checkElectionQuorum(node: ObservedNode, view: View, commitSeqno: Seqno, lastSeqno: Seqno): void {
    for (const c of this.activeConfigs(node, commitSeqno, lastSeqno)) {
      const voters = c.nodes.filter((id) => id === node.id || this.votes.get(`${id}@${view}`) === node.id);
      if (voters.length * 2 <= c.nodes.length) {
        throw new Violation(
          'joint-majority',
          `${node.id} became primary of view ${view} with votes of only [${voters.join(' ')}] of configuration @${c.seqno} [${c.nodes.join(' ')}]`,
        );
      }
    }
  }

  /**
   * Configurations active in a node's log: the last one at or below its commit (known committed,
   * or validated when the commit advanced, though maybe not applied anywhere yet) and every later one.
   */
  private activeConfigs(node: ObservedNode, commitSeqno: Seqno, lastSeqno: Seqno): Configuration[] {
    const knownCommitted = Math.min(commitSeqno, this.committedSeqno);
    let lastCommittedConfig = this.committedConfigAt(knownCommitted);
    const configs: Configuration[] = [];
    const raft = node.raft!;
    for (let s = Math.max(knownCommitted, node.disk.start.seqno) + 1; s <= lastSeqno; s++) {
      const c = raft.entry(s)?.configuration;
      if (c === undefined) continue;
      if (s <= commitSeqno) lastCommittedConfig = c;
      else configs.push(c);
    }
    configs.unshift(lastCommittedConfig);
    return configs;
  }

  private checkJointMajority(
    primary: ObservedNode,
    previousCommitSeqno: Seqno,
    commitSeqno: Seqno,
    lastSeqno: Seqno,
    nodes: ReadonlyMap<NodeId, ObservedNode>,
  ): void {
    const configs = this.activeConfigs(primary, previousCommitSeqno, lastSeqno);
    const chainHash = primary.disk.chainAt(commitSeqno);
    if (chainHash === undefined) throw new Violation('committed-never-lost', `${primary.id} commits ${commitSeqno} that it has not persisted`);
    const holds = (id: NodeId): boolean => {
      const disk = nodes.get(id)?.disk;
      if (disk === undefined) return false;
      if (commitSeqno <= disk.start.seqno) return true;
      return disk.chainAt(commitSeqno) === chainHash;
    };
    for (const c of configs) {
      const holding = c.nodes.filter(holds);
      if (holding.length * 2 <= c.nodes.length) {
        throw new Violation(
          'joint-majority',
          `${primary.id} committed ${commitSeqno} held by only [${holding.join(' ')}] of configuration @${c.seqno} [${c.nodes.join(' ')}]`,
        );
      }
    }
  }
}
