/**
 * A whole simulated cluster: consensus cores wired to simulated disks and a simulated network,
 * with a minimal node layer (persist, send, apply; sign when asked; record retirements; install a
 * snapshot on a peer that needs one). Both the random swarm runs and the scenario scripts drive
 * this class; the checkers watch every step.
 */
import { isCovenantError, utf8, type NodeId, type Seqno } from '../../base/index.js';
import {
  createRaft,
  decodeMessage,
  encodeMessage,
  type Configuration,
  type Entry,
  type EntryKind,
  type KnownBug,
  type Message,
  type Raft,
  type RaftOptions,
  type Ready,
} from '../../consensus/index.js';
import type { Prng } from '../prng.js';
import { Checker, Violation, type ObservedNode } from './checker.js';
import { SimDisk, type DiskStart } from './disk.js';
import { SimNetwork, type NetworkFaults } from './network.js';

/** A bounded event log; a failing run prints it. */
export class Trace {
  readonly lines: string[] = [];
  dropped = 0;
  nowTicks = 0;

  constructor(private readonly maxLines = 500_000) {}

  add(text: string): void {
    if (this.lines.length >= this.maxLines) {
      this.lines.shift();
      this.dropped++;
    }
    this.lines.push(`t=${this.nowTicks} ${text}`);
  }
}

export interface ClusterOptions {
  readonly rng: Prng;
  readonly raft: RaftOptions;
  readonly network: NetworkFaults;
  readonly bugs?: readonly KnownBug[];
  /** Share of messages sent through encodeMessage/decodeMessage on their way. */
  readonly codecProbability?: number;
  readonly traceMessages?: boolean;
  /** Trace every applied commit (scenarios want it; swarms keep traces shorter). */
  readonly traceCommits?: boolean;
}

export class SimNode implements ObservedNode {
  raft: Raft | undefined;
  appliedSeqno: Seqno;
  /** Counter for unique entry contents. */
  proposals = 0;

  constructor(
    readonly id: NodeId,
    readonly disk: SimDisk,
    readonly rng: Prng,
  ) {
    this.appliedSeqno = disk.hard.commitSeqno;
  }

  get alive(): boolean {
    return this.raft !== undefined;
  }
}

/** Bounded so that one step always ends: each round of a node's I/O may create more work. */
const MAX_IO_ROUNDS = 16;

export class Cluster {
  readonly nodes = new Map<NodeId, SimNode>();
  readonly network: SimNetwork;
  readonly checker: Checker;
  readonly trace = new Trace();
  private readonly rng: Prng;
  private readonly options: ClusterOptions;
  nowTicks = 0;
  rejectedProposals = 0;

  constructor(options: ClusterOptions, initialNodes: readonly NodeId[]) {
    this.options = options;
    this.rng = options.rng;
    this.network = new SimNetwork(options.rng.split(), options.network);
    const genesis: Configuration = { seqno: 0, nodes: [...initialNodes] };
    this.checker = new Checker(genesis);
    for (const id of initialNodes) {
      const disk = new SimDisk(id, { seqno: 0, view: 0, viewHistory: [], configs: [genesis], chainHash: 0 });
      this.addNode(id, disk);
    }
  }

  private addNode(id: NodeId, disk: SimDisk): SimNode {
    if (this.nodes.has(id)) throw new Error(`node ${id} exists already`);
    const node = new SimNode(id, disk, this.rng.split());
    this.nodes.set(id, node);
    this.start(node);
    return node;
  }

  private start(node: SimNode): void {
    const disk = node.disk;
    node.raft = createRaft({
      ...this.options.raft,
      selfId: node.id,
      random: node.rng.split(),
      storage: disk,
      bugs: this.options.bugs ?? [],
      initial: {
        startSeqno: disk.start.seqno,
        startView: disk.start.view,
        viewHistory: disk.start.viewHistory,
        configs: disk.start.configs,
        lastSeqno: disk.lastSeqno,
        view: disk.hard.view,
        votedFor: disk.hard.votedFor,
        commitSeqno: disk.hard.commitSeqno,
      },
    });
    node.appliedSeqno = Math.max(node.appliedSeqno, disk.start.seqno);
  }

  setTime(nowTicks: number): void {
    this.nowTicks = nowTicks;
    this.trace.nowTicks = nowTicks;
  }

  liveNodes(): SimNode[] {
    return [...this.nodes.values()].filter((n) => n.alive);
  }

  node(id: NodeId): SimNode {
    const node = this.nodes.get(id);
    if (node === undefined) throw new Error(`unknown node ${id}`);
    return node;
  }

  /** Live nodes that believe they are primary. */
  primaries(): SimNode[] {
    return this.liveNodes().filter((n) => n.raft!.summary().role === 'Primary');
  }

  // ---- Driving the cores -------------------------------------------------------------------

  /** Runs one call into a core; a failed assertion inside is a violation like any other. */
  private guarded(node: SimNode, what: string, call: (raft: Raft) => void): void {
    const raft = node.raft;
    if (raft === undefined) return;
    try {
      call(raft);
    } catch (e) {
      if (e instanceof Violation || isCovenantError(e)) throw e;
      throw new Violation('invariant', `${node.id} ${what}: ${e instanceof Error ? e.message : String(e)}`);
    }
    this.checker.observe(node, this.nodes);
  }

  tick(node: SimNode): void {
    this.guarded(node, 'tick', (raft) => raft.tick());
  }

  campaign(node: SimNode): void {
    this.guarded(node, 'campaign', (raft) => raft.campaign());
  }

  /** Delivers every message due now, in random order. */
  deliverDue(): number {
    const due = this.network.takeDue(this.nowTicks);
    for (let message of due) {
      const node = this.nodes.get(message.to);
      if (node === undefined || !node.alive) continue;
      if (this.options.codecProbability !== undefined && this.rng.chance(this.options.codecProbability)) {
        message = decodeMessage(encodeMessage(message));
      }
      if (this.options.traceMessages) this.trace.add(`deliver ${describeMessage(message)}`);
      this.guarded(node, `step ${message.type}`, (raft) => raft.step(message));
    }
    return due.length;
  }

  /** The node layer's I/O: persist, send, apply, then react to what the core asked for. */
  io(node: SimNode): void {
    for (let round = 0; round < MAX_IO_ROUNDS && node.raft !== undefined && node.raft.hasReady(); round++) {
      const raft = node.raft;
      let ready: Ready | undefined;
      this.guarded(node, 'ready', (r) => {
        ready = r.ready();
      });
      const rd = ready!;
      node.disk.persist(rd, this.checker);
      if (rd.truncateAfterSeqno !== undefined) this.trace.add(`${node.id} truncates after ${rd.truncateAfterSeqno}`);
      for (const message of rd.messages) {
        this.checker.onSend(message);
        this.network.send(message, this.nowTicks);
      }
      if (rd.committedSeqno > node.appliedSeqno && this.options.traceCommits) this.trace.add(`${node.id} commits ${rd.committedSeqno}`);
      this.checker.onApply(node, rd.committedSeqno);
      if (rd.roleChange !== undefined) {
        const rc = rd.roleChange;
        this.trace.add(`${node.id} is ${rc.role} in view ${rc.view}${rc.primaryId !== undefined && rc.role === 'Backup' ? ` (primary ${rc.primaryId})` : ''}`);
      }
      if (rd.retirementStage !== undefined) this.trace.add(`${node.id} retirement ${rd.retirementStage}`);
      for (const read of rd.readsConfirmed) {
        this.trace.add(`${node.id} confirms read r${read.readId} at ${read.seqno}`);
        this.checker.onReadConfirmed(node, read.readId, read.seqno);
      }
      for (const readId of rd.readsAbandoned) {
        this.trace.add(`${node.id} abandons read r${readId}`);
        this.checker.onReadAbandoned(node.id, readId);
      }
      this.guarded(node, 'advance', (r) => r.advance(rd));
      if (raft !== node.raft) return;
      if (rd.signatureRequested) this.propose(node, 'signature');
      if (rd.retirementsToRecord.length > 0) this.propose(node, 'normal', { retiredCommitted: rd.retirementsToRecord });
      for (const id of rd.snapshotsNeeded) this.installSnapshot(id);
    }
  }

  // ---- The primary's node layer ------------------------------------------------------------

  /** Appends an entry on a node if it is primary; returns the entry, or undefined when refused. */
  propose(
    node: SimNode,
    kind: EntryKind,
    extra: { configuration?: readonly NodeId[]; retiredCommitted?: readonly NodeId[] } = {},
  ): Entry | undefined {
    const raft = node.raft;
    if (raft === undefined) return undefined;
    const status = raft.summary();
    if (status.role !== 'Primary') return undefined;
    const seqno = status.lastSeqno + 1;
    node.proposals++;
    const entry: { -readonly [K in keyof Entry]: Entry[K] } = {
      view: status.view,
      seqno,
      kind,
      bytes: utf8.encode(`${kind[0]}:${node.id}:${status.view}.${seqno}#${node.proposals}`),
    };
    if (extra.configuration !== undefined) entry.configuration = { seqno, nodes: [...extra.configuration] };
    if (extra.retiredCommitted !== undefined) entry.retiredCommitted = [...extra.retiredCommitted];
    let accepted = true;
    this.guarded(node, 'propose', (r) => {
      try {
        r.propose(entry);
      } catch (e) {
        if (isCovenantError(e) && (e.code === 'TooManyPendingTransactions' || e.code === 'NotPrimary')) {
          accepted = false;
          this.rejectedProposals++;
          return;
        }
        throw e;
      }
    });
    if (!accepted) return undefined;
    if (kind !== 'normal' || extra.retiredCommitted !== undefined) {
      const detail = extra.configuration ? ` [${extra.configuration.join(' ')}]` : extra.retiredCommitted ? ` retired [${extra.retiredCommitted.join(' ')}]` : '';
      this.trace.add(`${node.id} appends ${kind} ${entry.view}.${seqno}${detail}`);
    }
    return entry;
  }

  /**
   * A linearizable read asked of a node that believes it is primary; the checker records the
   * highest seqno any node knows committed now, which the read's seqno must reach. Undefined when refused.
   */
  requestRead(node: SimNode): number | undefined {
    const raft = node.raft;
    if (raft === undefined || raft.summary().role !== 'Primary') return undefined;
    let readId: number | undefined;
    this.guarded(node, 'requestRead', (r) => {
      readId = r.requestRead();
    });
    let knownCommitted = this.checker.committedSeqno;
    for (const other of this.liveNodes()) knownCommitted = Math.max(knownCommitted, other.raft!.summary().commitSeqno);
    this.checker.onReadRequested(node.id, readId!, knownCommitted);
    this.trace.add(`${node.id} asked read r${readId} (committed anywhere: ${knownCommitted})`);
    return readId;
  }

  /** The newest configuration a node knows. */
  newestConfig(node: SimNode): Configuration {
    const configs = node.raft!.status().configs;
    return configs[configs.length - 1]!;
  }

  /** A snapshot of the committed prefix at its last signature, as a joining node receives it. */
  committedSnapshot(): DiskStart {
    const seqno = this.checker.lastCommittedSignatureSeqno();
    const at = this.checker.committedAt(seqno)!;
    return {
      seqno,
      view: at.view,
      viewHistory: this.checker.committedViewHistory(at.view),
      configs: [this.checker.committedConfigAt(seqno)],
      chainHash: at.chainHash,
    };
  }

  /** Creates a node that starts from a snapshot of the committed state; it waits to be added. */
  createJoiner(id: NodeId): SimNode {
    const start = this.committedSnapshot();
    this.trace.add(`${id} created from snapshot at ${start.seqno}`);
    return this.addNode(id, new SimDisk(id, start));
  }

  /** A lagging peer that the primary can no longer serve gets a fresh snapshot (and restarts from it). */
  installSnapshot(id: NodeId): void {
    const node = this.nodes.get(id);
    if (node === undefined || !node.alive) return;
    const start = this.committedSnapshot();
    if (start.seqno <= node.disk.lastSeqno) return;
    this.trace.add(`${id} installs snapshot at ${start.seqno}`);
    node.raft = undefined;
    this.checker.forgetReads(id);
    node.disk.installSnapshot(start);
    node.appliedSeqno = start.seqno;
    this.start(node);
  }

  // ---- Faults ------------------------------------------------------------------------------

  crash(node: SimNode): void {
    if (!node.alive) return;
    node.raft = undefined;
    // A new core numbers its reads from 1 again.
    this.checker.forgetReads(node.id);
    this.trace.add(`${node.id} crashes`);
  }

  restart(node: SimNode): void {
    if (node.alive) return;
    this.trace.add(`${node.id} restarts`);
    try {
      this.start(node);
    } catch (e) {
      throw new Violation('invariant', `${node.id} restart: ${e instanceof Error ? e.message : String(e)}`);
    }
    this.checker.observe(node, this.nodes);
  }
}

export function describeMessage(m: Message): string {
  const head = `${m.from}->${m.to} ${m.type} v${m.view}`;
  switch (m.type) {
    case 'append':
      return `${head} prev=${m.prevView}.${m.prevSeqno} commit=${m.commitSeqno} entries=${m.entries.length === 0 ? '[]' : `[${m.entries[0]!.seqno}..${m.entries[m.entries.length - 1]!.seqno}]`}`;
    case 'append-response':
      return `${head} ${m.success ? 'ok' : 'reject'} ${m.lastSeqno}`;
    case 'request-vote':
      return `${head}${m.preVote ? ' pre' : ''}${m.force ? ' force' : ''} sig=${m.lastSignatureView}.${m.lastSignatureSeqno}`;
    case 'vote-response':
      return `${head}${m.preVote ? ' pre' : ''} ${m.granted ? 'granted' : 'rejected'}`;
    case 'propose-vote':
      return head;
  }
}
