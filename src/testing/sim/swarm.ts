/**
 * One seeded simulation run ("swarm" testing: each seed also picks which faults are on and how
 * often, so that runs differ in kind, not only in detail). A fault phase with message loss, delay,
 * reordering, duplication, partitions (one-way too), crashes with restarts that lose unpersisted
 * work, membership changes and client proposals; then a liveness phase that heals everything and
 * requires a new commit within a bounded number of ticks.
 */
import type { NodeId } from '../../base/index.js';
import type { KnownBug, RaftOptions } from '../../consensus/index.js';
import { Prng } from '../prng.js';
import { Violation, type CheckerName } from './checker.js';
import { Cluster, type SimNode } from './cluster.js';
import type { NetworkFaults } from './network.js';

export const FAULT_KINDS = ['loss', 'duplicate', 'delay', 'partition', 'crash', 'slow-disk', 'reconfiguration', 'proposals'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface SwarmOptions {
  readonly seed: number;
  /** Fixed cluster size; when absent the seed picks one in 3..7. */
  readonly nodes?: number;
  /** Ticks of the fault phase. */
  readonly steps: number;
  readonly bug?: KnownBug;
  /** Fault kinds forced off (used to shrink a failing run). */
  readonly disabled?: ReadonlySet<FaultKind>;
  readonly traceMessages?: boolean;
  /** Called after every step, for debugging a seed. */
  readonly inspect?: (cluster: Cluster, ticks: number) => void;
}

export interface SwarmParameters {
  readonly nodeCount: number;
  readonly raft: RaftOptions;
  readonly network: NetworkFaults;
  readonly partitionRate: number;
  readonly healRate: number;
  readonly crashRate: number;
  readonly restartRate: number;
  readonly slowDiskProbability: number;
  readonly proposalRate: number;
  readonly signatureRate: number;
  readonly reconfigurationRate: number;
  /** Per step, the chance that each node believing it is primary is asked a linearizable read. */
  readonly readRate: number;
  readonly enabled: readonly FaultKind[];
}

export interface SwarmResult {
  readonly seed: number;
  readonly parameters: SwarmParameters;
  readonly violation: { readonly checker: CheckerName; readonly message: string; readonly atTicks: number } | undefined;
  /** Simulated ticks run (fault and liveness phases). */
  readonly ticks: number;
  readonly committedSeqno: number;
  readonly trace: readonly string[];
  readonly checks: number;
  readonly viewsSeen: number;
  readonly membershipChanges: number;
}

/** Upper bound on nodes ever created in one run (joiners included). */
const MAX_NODES_CREATED = 40;
const MAX_CONFIG_NODES = 7;

export function drawParameters(seed: number, options: Pick<SwarmOptions, 'nodes' | 'disabled'>): SwarmParameters {
  const rng = new Prng(seed).split();
  const drawnNodes = rng.int(3, 7);
  const enabled = FAULT_KINDS.filter((kind) => rng.chance(0.75) && !options.disabled?.has(kind));
  const on = (kind: FaultKind): boolean => enabled.includes(kind);
  const electionTimeoutTicks = rng.int(8, 20);
  const raft: RaftOptions = {
    electionTimeoutTicks,
    heartbeatTicks: rng.int(1, Math.min(4, Math.floor(electionTimeoutTicks / 3))),
    maxBatchEntries: rng.pick([1, 3, 16, 64]),
    maxBatchBytes: rng.pick([40, 256, 4096]),
    maxUncommittedEntries: rng.pick([6, 32, 128]),
    maxInflightBatches: rng.pick([1, 2, 4]),
  };
  const loss = rng.pick([0.005, 0.03, 0.15]);
  const duplicate = rng.pick([0.01, 0.05, 0.2]);
  const maxDelay = rng.pick([2, 4, 8]);
  const parameters: SwarmParameters = {
    nodeCount: options.nodes ?? drawnNodes,
    raft,
    network: {
      lossProbability: on('loss') ? loss : 0,
      duplicateProbability: on('duplicate') ? duplicate : 0,
      minDelayTicks: 1,
      maxDelayTicks: on('delay') ? maxDelay : 1,
    },
    partitionRate: on('partition') ? rng.pick([0.003, 0.01, 0.03]) : 0,
    healRate: rng.pick([0.02, 0.05, 0.15]),
    crashRate: on('crash') ? rng.pick([0.002, 0.008, 0.03]) : 0,
    restartRate: rng.pick([0.02, 0.08, 0.3]),
    slowDiskProbability: on('slow-disk') ? rng.pick([0.1, 0.3, 0.6]) : 0,
    proposalRate: on('proposals') ? rng.pick([0.1, 0.4, 0.9]) : 0.02,
    signatureRate: rng.pick([0.1, 0.3, 0.7]),
    reconfigurationRate: on('reconfiguration') ? rng.pick([0.005, 0.015, 0.04]) : 0,
    enabled,
    // Drawn last, so that the draws above (and the runs of older seeds' parameters) stay as they were.
    readRate: rng.pick([0, 0.05, 0.3]),
  };
  return parameters;
}

/**
 * How long the healed cluster may take to commit again: a few elections, plus the time to
 * replicate the uncommitted backlog with the run's (possibly tiny) batches and round trips.
 */
function livenessBoundTicks(parameters: SwarmParameters, cluster: Cluster): number {
  let longestLog = 0;
  for (const node of cluster.nodes.values()) longestLog = Math.max(longestLog, node.disk.lastSeqno);
  const backlogEntries = Math.max(0, longestLog - cluster.checker.committedSeqno);
  const { maxBatchEntries, maxBatchBytes, maxInflightBatches = 1, electionTimeoutTicks, heartbeatTicks } = parameters.raft;
  // Simulated entries take about 32 bytes; a batch always carries at least one.
  const entriesPerBatch = Math.max(1, Math.min(maxBatchEntries, Math.floor(maxBatchBytes / 32)));
  const roundTripTicks = 2 * parameters.network.maxDelayTicks + heartbeatTicks + 2;
  const replicationTicks = Math.ceil(backlogEntries / entriesPerBatch / maxInflightBatches) * roundTripTicks * 2;
  return 40 * electionTimeoutTicks + 400 + replicationTicks;
}

export function runSwarm(options: SwarmOptions): SwarmResult {
  const parameters = drawParameters(options.seed, options);
  const root = new Prng(options.seed);
  root.split(); // the parameters' stream
  // One stream per concern, so that turning one fault off does not reshuffle the others.
  const clusterRng = root.split();
  const faultRng = {
    partition: root.split(),
    crash: root.split(),
    disk: root.split(),
    client: root.split(),
    reconfiguration: root.split(),
    order: root.split(),
    reads: root.split(),
  };
  const initial = Array.from({ length: parameters.nodeCount }, (_, i) => `n${i + 1}`);
  const cluster = new Cluster(
    {
      rng: clusterRng,
      raft: parameters.raft,
      network: { ...parameters.network },
      bugs: options.bug === undefined ? [] : [options.bug],
      codecProbability: 0.05,
      traceMessages: options.traceMessages ?? false,
    },
    initial,
  );
  let created = initial.length;
  let membershipChanges = 0;
  const views = new Set<number>();
  let ticks = 0;

  const tickAll = (): void => {
    ticks++;
    cluster.setTime(ticks);
    cluster.deliverDue();
    for (const node of faultRng.order.shuffle(cluster.liveNodes())) cluster.tick(node);
  };
  const ioAll = (slowDiskProbability: number): void => {
    for (const node of faultRng.order.shuffle(cluster.liveNodes())) {
      // A slow disk leaves work unpersisted across the step: a crash now loses it.
      if (!faultRng.disk.chance(slowDiskProbability)) cluster.io(node);
    }
  };

  const clientActivity = (proposalRate: number, allowReconfiguration: boolean): void => {
    const primaries = cluster.primaries();
    for (const p of primaries) views.add(p.raft!.summary().view);
    if (primaries.length === 0) return;
    // Every node that believes it leads is asked, a deposed one included: it must never confirm.
    for (const p of primaries) if (faultRng.reads.chance(parameters.readRate)) cluster.requestRead(p);
    const primary = faultRng.client.pick(primaries);
    if (faultRng.client.chance(proposalRate)) {
      const count = faultRng.client.int(1, 3);
      for (let i = 0; i < count; i++) {
        // A client backs off when the primary is full; now and then it tries anyway (and is refused).
        const s = primary.raft!.summary();
        if (s.lastSeqno - s.commitSeqno >= parameters.raft.maxUncommittedEntries && !faultRng.client.chance(0.1)) break;
        cluster.propose(primary, 'normal');
      }
    }
    const status = primary.raft!.summary();
    if (status.lastSignatureSeqno < status.lastSeqno && faultRng.client.chance(parameters.signatureRate)) cluster.propose(primary, 'signature');
    if (allowReconfiguration && faultRng.reconfiguration.chance(parameters.reconfigurationRate)) {
      if (reconfigure(primary)) membershipChanges++;
    }
  };

  const reconfigure = (primary: SimNode): boolean => {
    const rng = faultRng.reconfiguration;
    const status = primary.raft!.status();
    // Mostly one change at a time; sometimes stack them, so that several configurations are active.
    if (status.configs.length > 1 && !rng.chance(0.25)) return false;
    const current = [...cluster.newestConfig(primary).nodes];
    const others = current.filter((id) => id !== primary.id);
    const ops: string[] = [];
    if (current.length < MAX_CONFIG_NODES && created < MAX_NODES_CREATED) ops.push('add', 'add', 'replace');
    if (current.length > 1) ops.push('remove-backup', 'retire-primary');
    if (current.length > 3) ops.push('remove-two');
    if (ops.length === 0) return false;
    const op = rng.pick(ops);
    let next = current;
    const fresh = (): NodeId => {
      created++;
      const id = `n${created}`;
      cluster.createJoiner(id);
      return id;
    };
    switch (op) {
      case 'add':
        next = [...current, fresh()];
        break;
      case 'replace': {
        const out = rng.pick(current);
        next = [...current.filter((id) => id !== out), fresh()];
        break;
      }
      case 'remove-backup': {
        if (others.length === 0) return false;
        const out = rng.pick(others);
        next = current.filter((id) => id !== out);
        break;
      }
      case 'retire-primary':
        if (!current.includes(primary.id)) return false;
        next = others;
        break;
      case 'remove-two': {
        const shuffled = rng.shuffle([...current]);
        next = current.filter((id) => id !== shuffled[0] && id !== shuffled[1]);
        break;
      }
    }
    cluster.trace.add(`reconfiguration ${op} on ${primary.id}`);
    return cluster.propose(primary, 'reconfiguration', { configuration: next }) !== undefined;
  };

  const faults = (): void => {
    const rng = faultRng;
    if (!cluster.network.partitioned && rng.partition.chance(parameters.partitionRate)) {
      const ids = [...cluster.nodes.keys()];
      const kind = rng.partition.pick(['split', 'isolate', 'one-way', 'one-way-node']);
      if (kind === 'split') {
        rng.partition.shuffle(ids);
        const cut = rng.partition.int(1, Math.max(1, ids.length - 1));
        cluster.network.partition(ids.slice(0, cut), ids.slice(cut));
      } else if (kind === 'isolate') {
        const victim = rng.partition.pick(ids);
        cluster.network.partition([victim], ids.filter((id) => id !== victim));
      } else if (kind === 'one-way') {
        const from = rng.partition.pick(ids);
        const to = rng.partition.pick(ids);
        if (from !== to) cluster.network.block(from, to);
      } else {
        // A node that can send but not receive (or the reverse).
        const victim = rng.partition.pick(ids);
        const inbound = rng.partition.chance(0.5);
        for (const other of ids) {
          if (other === victim) continue;
          if (inbound) cluster.network.block(other, victim);
          else cluster.network.block(victim, other);
        }
      }
      cluster.trace.add(`partition ${kind}: blocked ${cluster.network.describeBlocked()}`);
    } else if (cluster.network.partitioned && rng.partition.chance(parameters.healRate)) {
      cluster.network.heal();
      cluster.trace.add('network heals');
    }
    if (rng.crash.chance(parameters.crashRate)) {
      const live = cluster.liveNodes();
      if (live.length > 0) cluster.crash(rng.crash.pick(live));
    }
    for (const node of cluster.nodes.values()) {
      if (!node.alive && rng.crash.chance(parameters.restartRate)) cluster.restart(node);
    }
  };

  let violation: SwarmResult['violation'];
  try {
    for (let step = 0; step < options.steps; step++) {
      faults();
      tickAll();
      clientActivity(parameters.proposalRate, true);
      ioAll(parameters.slowDiskProbability);
      options.inspect?.(cluster, ticks);
    }
    // Liveness: everything heals and comes back; a new commit must follow within a bound.
    cluster.network.heal();
    cluster.network.faults = { lossProbability: 0, duplicateProbability: 0, minDelayTicks: 1, maxDelayTicks: parameters.network.maxDelayTicks };
    for (const node of cluster.nodes.values()) cluster.restart(node);
    cluster.trace.add('liveness phase: network healed, every node up');
    const baseline = cluster.checker.committedSeqno;
    const boundTicks = livenessBoundTicks(parameters, cluster);
    let progressed = false;
    for (let t = 0; t < boundTicks && !progressed; t++) {
      tickAll();
      // Few new entries: the backlog the bound allows for must not keep growing.
      clientActivity(0.02, false);
      ioAll(0);
      options.inspect?.(cluster, ticks);
      progressed = cluster.checker.committedSeqno > baseline;
    }
    if (!progressed) {
      throw new Violation('liveness', `no new commit within ${boundTicks} ticks after healing (commit stuck at ${baseline})`);
    }
  } catch (e) {
    if (!(e instanceof Violation)) throw e;
    cluster.trace.add(`VIOLATION ${e.message}`);
    violation = { checker: e.checker, message: e.message, atTicks: ticks };
  }
  return {
    seed: options.seed,
    parameters,
    violation,
    ticks,
    committedSeqno: cluster.checker.committedSeqno,
    trace: cluster.trace.lines,
    checks: cluster.checker.checks,
    viewsSeen: views.size,
    membershipChanges,
  };
}

/**
 * Shrinks a failing run: stops at the violation and turns off, one at a time, every fault kind
 * whose absence still fails. Returns the smallest failing variant found.
 */
export function shrink(options: SwarmOptions, failing: SwarmResult, maxAttempts = 12): { options: SwarmOptions; result: SwarmResult } {
  // The fault phase draws nothing from the future: cutting it just after the violation keeps it.
  const cut: SwarmOptions = { ...options, steps: Math.min(options.steps, failing.ticks + 1) };
  const cutResult = runSwarm(cut);
  let best = cutResult.violation !== undefined ? { options: cut, result: cutResult } : { options, result: failing };
  let attempts = 0;
  for (const kind of FAULT_KINDS) {
    if (attempts++ >= maxAttempts) break;
    if (!best.result.parameters.enabled.includes(kind)) continue;
    const disabled = new Set(best.options.disabled ?? []);
    disabled.add(kind);
    const candidate: SwarmOptions = { ...best.options, disabled };
    const result = runSwarm(candidate);
    if (result.violation !== undefined && result.trace.length <= best.result.trace.length) {
      best = { options: { ...candidate, steps: Math.min(candidate.steps, result.ticks + 1) }, result };
    }
  }
  return best;
}
