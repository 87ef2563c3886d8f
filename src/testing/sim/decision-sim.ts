/**
 * The recovery decision protocol under a seeded simulator (docs/recovery-decision.md,
 * "The simulator"). One run: 1 to 7 locations with drawn ledger positions (ties included) run
 * `RecoveryDecision` instances over a simulated network with loss, delay, reordering,
 * duplication and partitions (one-way too); locations start at different times, crash and restart
 * (a restarted location loses its protocol state but keeps its ledger position; a location that
 * opened keeps its decision, since the service it opened outlives a crash); an intruder that is
 * not an expected location sends well-formed messages, and peers send malformed ones. The checkers
 * (decision-checker.ts) judge every call. Then a liveness phase heals everything, restarts every
 * location, and requires a decision by every location within a bound.
 *
 * Every message crosses the network as JSON text and goes through parseDecisionMessage, as it
 * would between real nodes. Everything is drawn from the seed: a run is a function of its options.
 */
import {
  RecoveryDecision,
  isRecoveryError,
  parseDecisionMessage,
  type Decision,
  type DecisionBug,
  type DecisionLocation,
  type DecisionMessage,
  type DecisionOutput,
  type LedgerPosition,
} from '../../recovery/index.js';
import { Prng } from '../prng.js';
import { DecisionChecker, DecisionViolation, type DecisionCheckerName } from './decision-checker.js';
import { deliveryDelays, type NetworkFaults } from './network.js';

export const DECISION_FAULT_KINDS = ['loss', 'duplicate', 'delay', 'partition', 'crash', 'late-start', 'intruder', 'garbage'] as const;
export type DecisionFaultKind = (typeof DECISION_FAULT_KINDS)[number];

/** Simulated milliseconds per step. */
export const STEP_MS = 10;
const LOCATION_NAMES = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
const INTRUDER = 'intruder';
const MAX_MESSAGES_IN_FLIGHT = 20_000;

export interface DecisionSimOptions {
  readonly seed: number;
  /** Number of locations, 1..7; when absent the seed picks one. */
  readonly locations?: number;
  /** Whether failover is on (the seed then picks the failover timeout). */
  readonly failover: boolean;
  /** Steps of the fault phase (STEP_MS each). */
  readonly steps: number;
  readonly bug?: DecisionBug;
  /** Fault kinds forced off (used to shrink a failing run, and by scripted scenarios). */
  readonly disabled?: ReadonlySet<DecisionFaultKind>;
  /** Checkers that do not stop the run (to show what a bug leads to beyond the first broken property). */
  readonly disabledCheckers?: ReadonlySet<DecisionCheckerName>;
  /** Groups of location names cut from each other during the whole fault phase (a scripted partition). */
  readonly initialPartition?: readonly (readonly string[])[];
  readonly traceMessages?: boolean;
}

export interface DecisionSimParameters {
  readonly locationCount: number;
  readonly positions: Readonly<Record<string, LedgerPosition>>;
  readonly retryIntervalMs: number;
  /** 0 when failover is off. */
  readonly failoverTimeoutMs: number;
  /** Delays in steps. */
  readonly network: NetworkFaults;
  readonly partitionRate: number;
  readonly healRate: number;
  readonly crashRate: number;
  readonly restartRate: number;
  readonly startSkewMs: number;
  readonly intruderRate: number;
  readonly garbageRate: number;
  readonly enabled: readonly DecisionFaultKind[];
}

export interface DecisionSimResult {
  readonly seed: number;
  readonly parameters: DecisionSimParameters;
  readonly violation: { readonly checker: DecisionCheckerName; readonly message: string; readonly atMs: number } | undefined;
  /** Simulated time of the whole run. */
  readonly elapsedMs: number;
  readonly best: string;
  readonly opens: readonly { readonly location: string; readonly openKind: string; readonly atMs: number }[];
  readonly joins: number;
  /** Two or more locations opened (possible only with failover). */
  readonly forked: boolean;
  readonly messagesSent: number;
  readonly crashes: number;
  readonly checks: number;
  readonly trace: readonly string[];
}

export function drawDecisionParameters(seed: number, options: Pick<DecisionSimOptions, 'locations' | 'failover' | 'disabled'>): DecisionSimParameters {
  const rng = new Prng(seed).split();
  const drawnLocations = rng.int(1, 7);
  const enabled = DECISION_FAULT_KINDS.filter((kind) => rng.chance(0.75) && !options.disabled?.has(kind));
  const on = (kind: DecisionFaultKind): boolean => enabled.includes(kind);
  const locationCount = options.locations ?? drawnLocations;
  // Few distinct views and seqnos, so that equal positions (ties) are common.
  const positions: Record<string, LedgerPosition> = {};
  const sameForAll = rng.chance(0.15);
  const shared = { view: rng.int(1, 3), seqno: rng.pick([10, 20, 30]) };
  for (const name of LOCATION_NAMES.slice(0, locationCount)) {
    positions[name] = sameForAll ? { ...shared } : { view: rng.int(1, 3), seqno: rng.pick([10, 20, 30]) + (rng.chance(0.5) ? 0 : rng.int(1, 4)) };
  }
  const loss = rng.pick([0.01, 0.1, 0.3]);
  const duplicate = rng.pick([0.01, 0.05, 0.2]);
  const maxDelaySteps = rng.pick([2, 5, 10, 25]);
  const retryIntervalMs = rng.pick([20, 50, 100, 200]);
  const failoverTimeoutMs = rng.pick([200, 500, 1000, 2000]);
  return {
    locationCount,
    positions,
    retryIntervalMs,
    failoverTimeoutMs: options.failover ? failoverTimeoutMs : 0,
    network: {
      lossProbability: on('loss') ? loss : 0,
      duplicateProbability: on('duplicate') ? duplicate : 0,
      minDelayTicks: 1,
      maxDelayTicks: on('delay') ? maxDelaySteps : 1,
    },
    partitionRate: on('partition') ? rng.pick([0.003, 0.01, 0.03]) : 0,
    healRate: rng.pick([0.003, 0.01, 0.05]),
    crashRate: on('crash') ? rng.pick([0.002, 0.01, 0.03]) : 0,
    restartRate: rng.pick([0.01, 0.05, 0.2]),
    startSkewMs: on('late-start') ? rng.pick([100, 500, 2000]) : 0,
    intruderRate: on('intruder') ? rng.pick([0.01, 0.1]) : 0,
    garbageRate: on('garbage') ? rng.pick([0.01, 0.1]) : 0,
    enabled,
  };
}

interface SimLocation {
  readonly name: string;
  readonly position: LedgerPosition;
  readonly startAtMs: number;
  alive: boolean;
  instance: RecoveryDecision | undefined;
  instanceId: number;
  instanceStartedAtMs: number;
  voteTraced: boolean;
}

interface InFlight {
  readonly deliverAtStep: number;
  readonly from: string;
  readonly to: string;
  readonly text: string;
}

/** Malformed messages a faulty or hostile peer might send; every one must be refused. */
const GARBAGE: readonly unknown[] = [
  null,
  42,
  'Gossip',
  [],
  {},
  { kind: 'Hello' },
  { kind: 'Gossip' },
  { kind: 'Gossip', position: { view: -1, seqno: 3 } },
  { kind: 'Gossip', position: { view: 1, seqno: 2 ** 53 } },
  { kind: 'Gossip', position: { view: 1, seqno: 1.5 } },
  { kind: 'Gossip', position: { view: '1', seqno: 3 } },
  { kind: 'Gossip', position: { view: 1, seqno: 3, extra: 1 } },
  { kind: 'Gossip', position: [1, 3] },
  { kind: 'Vote', candidate: '', heard_all: true },
  { kind: 'Vote', candidate: 'a', heard_all: 'yes' },
  { kind: 'Vote', candidate: 'a'.repeat(300), heard_all: true },
  { kind: 'Vote', candidate: 7, heard_all: false },
  { kind: 'IAmOpen' },
  { kind: 'IAmOpen', open_kind: 'Quorum' },
  { kind: 'IAmOpen', open_kind: 'Election', by: 'a' },
];

export function runDecisionSim(options: DecisionSimOptions): DecisionSimResult {
  const parameters = drawDecisionParameters(options.seed, options);
  const root = new Prng(options.seed);
  root.split(); // the parameters' stream
  // One stream per concern, so that turning one fault off does not reshuffle the others.
  const rng = {
    network: root.split(),
    partition: root.split(),
    crash: root.split(),
    start: root.split(),
    order: root.split(),
    intruder: root.split(),
  };
  const names = Object.keys(parameters.positions);
  const expected: DecisionLocation[] = names.map((name) => ({ name, address: `${name}.example:8000` }));
  const checker = new DecisionChecker(
    names.map((name) => ({ name, position: parameters.positions[name]! })),
    parameters.failoverTimeoutMs,
    options.disabledCheckers,
  );
  const trace: string[] = [];
  let step = 0;
  const nowMs = (): number => step * STEP_MS;
  const log = (line: string): void => {
    trace.push(`${String(nowMs()).padStart(6)} ms  ${line}`);
  };
  log(
    `locations ${names.map((n) => `${n}@${parameters.positions[n]!.view}.${parameters.positions[n]!.seqno}`).join(' ')}; best ${checker.best}; ` +
      `retry ${parameters.retryIntervalMs} ms; failover ${parameters.failoverTimeoutMs ? `${parameters.failoverTimeoutMs} ms` : 'off'}; faults ${parameters.enabled.join(',') || 'none'}`,
  );

  const locations = new Map<string, SimLocation>(
    names.map((name) => [
      name,
      {
        name,
        position: parameters.positions[name]!,
        startAtMs: parameters.startSkewMs > 0 ? rng.start.int(0, parameters.startSkewMs / STEP_MS) * STEP_MS : 0,
        alive: false,
        instance: undefined,
        instanceId: 0,
        instanceStartedAtMs: 0,
        voteTraced: false,
      },
    ]),
  );
  let nextInstanceId = 1;
  let inFlight: InFlight[] = [];
  const blocked = new Set<string>();
  let faults: NetworkFaults = { ...parameters.network };
  let messagesSent = 0;
  let crashes = 0;
  const opens: { location: string; openKind: string; atMs: number }[] = [];
  let joins = 0;

  const transmit = (from: string, to: string, text: string): void => {
    for (const delay of deliveryDelays(rng.network, faults)) {
      if (inFlight.length >= MAX_MESSAGES_IN_FLIGHT) return;
      inFlight.push({ deliverAtStep: step + delay, from, to, text });
    }
  };

  /** Everything one call on an instance returned, judged and carried out. */
  const handle = (location: SimLocation, output: DecisionOutput): void => {
    const instance = location.instance!;
    checker.observeVote(location.name, location.instanceId, instance.vote);
    if (instance.vote !== undefined && !location.voteTraced) {
      location.voteTraced = true;
      log(`${location.name} votes for ${instance.vote.candidate}${instance.vote.heardAll ? ' (heard all)' : ' (failover)'}`);
    }
    for (const { to, message } of output.send) {
      checker.observeSent(location.name, location.instanceId, to, message);
      const text = JSON.stringify(message);
      let parsed: DecisionMessage | undefined;
      try {
        parsed = parseDecisionMessage(JSON.parse(text));
      } catch (e) {
        checker.fail('codec', `${location.name} sent ${text}, which does not parse: ${String(e)}`);
      }
      if (parsed !== undefined && JSON.stringify(parsed) !== text) checker.fail('codec', `${text} parses as ${JSON.stringify(parsed)}`);
      messagesSent++;
      if (options.traceMessages) log(`${location.name} -> ${to} ${text}`);
      transmit(location.name, to, text);
    }
    if (output.decision !== undefined) {
      const decision: Decision = output.decision;
      checker.observeDecision(location.name, location.instanceId, decision, nowMs(), nowMs() - location.instanceStartedAtMs);
      if (decision.kind === 'Open') {
        opens.push({ location: location.name, openKind: decision.openKind, atMs: nowMs() });
        log(`${location.name} OPENS (${decision.openKind}) after ${nowMs() - location.instanceStartedAtMs} ms of its instance; ${instance.status()}`);
      } else {
        joins++;
        log(`${location.name} joins ${decision.target}`);
      }
    }
    if (output.warning !== undefined) log(`${location.name} warns: ${output.warning}`);
    checker.observeState(location.name, location.instanceId, instance.decision);
  };

  const start = (location: SimLocation): void => {
    location.alive = true;
    if (location.instance === undefined) {
      location.instanceId = nextInstanceId++;
      location.instanceStartedAtMs = nowMs();
      location.voteTraced = false;
      location.instance = new RecoveryDecision({
        self: location.name,
        expected,
        position: location.position,
        failoverTimeoutMs: parameters.failoverTimeoutMs,
        retryIntervalMs: parameters.retryIntervalMs,
        ...(options.bug !== undefined ? { bug: options.bug } : {}),
      });
      log(`${location.name} starts (instance ${location.instanceId})`);
      handle(location, location.instance.tick(0));
    } else {
      log(`${location.name} restarts, still ${location.instance.phase}`);
    }
  };

  const crash = (location: SimLocation): void => {
    location.alive = false;
    crashes++;
    // A location that has not decided loses its protocol state; one that decided keeps the decision.
    if (location.instance?.decision === undefined) location.instance = undefined;
    log(`${location.name} crashes`);
  };

  const deliver = (): void => {
    const due: InFlight[] = [];
    const later: InFlight[] = [];
    for (const m of inFlight) (m.deliverAtStep > step ? later : due).push(m);
    inFlight = later;
    for (const m of rng.network.shuffle(due)) {
      if (blocked.has(`${m.from}>${m.to}`)) continue;
      const location = locations.get(m.to)!;
      if (!location.alive || location.instance === undefined) continue;
      let message: DecisionMessage;
      try {
        message = parseDecisionMessage(JSON.parse(m.text));
      } catch (e) {
        if (m.from !== INTRUDER && !isRecoveryError(e, 'InvalidDecisionMessage')) throw e;
        continue;
      }
      if (m.from === INTRUDER) {
        const before = { phase: location.instance.phase, vote: JSON.stringify(location.instance.vote) };
        const output = location.instance.receive(m.from, message);
        if (output.send.length > 0 || output.decision !== undefined || location.instance.phase !== before.phase || JSON.stringify(location.instance.vote) !== before.vote) {
          checker.fail('ignores-unknown', `${m.to} acted on ${m.text} from ${INTRUDER}, which is not an expected location`);
        }
        continue;
      }
      handle(location, location.instance.receive(m.from, message));
    }
  };

  const tickAll = (): void => {
    for (const location of rng.order.shuffle([...locations.values()])) {
      // An instance started during this step has had its tick(0): its clock then runs with the simulation's.
      if (location.alive && location.instance !== undefined && location.instanceStartedAtMs < nowMs()) handle(location, location.instance.tick(STEP_MS));
    }
  };

  const injectFaults = (): void => {
    if (options.initialPartition === undefined) {
      if (blocked.size === 0 && rng.partition.chance(parameters.partitionRate)) {
        const ids = [...names];
        const kind = rng.partition.pick(['split', 'isolate', 'one-way', 'one-way-node']);
        if (kind === 'split' || kind === 'isolate') {
          rng.partition.shuffle(ids);
          const cut = kind === 'isolate' ? 1 : rng.partition.int(1, Math.max(1, ids.length - 1));
          cutBetween(ids.slice(0, cut), ids.slice(cut));
        } else if (kind === 'one-way') {
          const from = rng.partition.pick(ids);
          const to = rng.partition.pick(ids);
          if (from !== to) blocked.add(`${from}>${to}`);
        } else {
          const victim = rng.partition.pick(ids);
          const inbound = rng.partition.chance(0.5);
          for (const other of ids) if (other !== victim) blocked.add(inbound ? `${other}>${victim}` : `${victim}>${other}`);
        }
        if (blocked.size > 0) log(`partition ${kind}: blocked ${[...blocked].sort().join(' ')}`);
      } else if (blocked.size > 0 && rng.partition.chance(parameters.healRate)) {
        blocked.clear();
        log('network heals');
      }
    }
    for (const location of locations.values()) {
      if (!location.alive && location.instance === undefined && location.instanceId === 0) {
        if (nowMs() >= location.startAtMs) start(location);
      } else if (location.alive && rng.crash.chance(parameters.crashRate)) {
        // A location that joined has left the protocol (it restarts as a joiner): its crashes change nothing here.
        if (location.instance?.decision?.kind === 'Join') continue;
        crash(location);
      } else if (!location.alive && rng.crash.chance(parameters.restartRate)) {
        start(location);
      }
    }
    if (rng.intruder.chance(parameters.intruderRate)) {
      const to = rng.intruder.pick(names);
      const message: DecisionMessage = rng.intruder.pick<DecisionMessage>([
        { kind: 'IAmOpen', open_kind: 'Election' },
        { kind: 'Vote', candidate: to, heard_all: true },
        { kind: 'Gossip', position: { view: 99, seqno: 999 } },
      ]);
      inFlight.push({ deliverAtStep: step + 1, from: INTRUDER, to, text: JSON.stringify(message) });
    }
    if (rng.intruder.chance(parameters.garbageRate)) {
      const garbage = rng.intruder.pick(GARBAGE);
      try {
        parseDecisionMessage(garbage);
        checker.fail('codec', `the malformed message ${JSON.stringify(garbage)} was accepted`);
      } catch (e) {
        if (!isRecoveryError(e, 'InvalidDecisionMessage')) checker.fail('codec', `the malformed message ${JSON.stringify(garbage)} failed with ${String(e)}, not InvalidDecisionMessage`);
      }
    }
  };

  const cutBetween = (groupA: readonly string[], groupB: readonly string[]): void => {
    for (const a of groupA) {
      for (const b of groupB) {
        blocked.add(`${a}>${b}`);
        blocked.add(`${b}>${a}`);
      }
    }
  };

  const decisions = (): Map<string, Decision | undefined> => new Map([...locations.values()].map((l) => [l.name, l.instance?.decision]));
  const allDecided = (): boolean => [...locations.values()].every((l) => l.instance?.decision !== undefined);

  let violation: DecisionSimResult['violation'];
  try {
    if (options.initialPartition !== undefined) {
      const groups = options.initialPartition;
      for (const name of groups.flat()) if (!locations.has(name)) throw new RangeError(`the scripted partition names ${name}, which is not one of ${names.join(', ')}`);
      for (let i = 0; i < groups.length; i++) for (let j = i + 1; j < groups.length; j++) cutBetween(groups[i]!, groups[j]!);
      log(`scripted partition ${groups.map((g) => g.join(',')).join(' | ')}`);
    }
    for (; step < options.steps; step++) {
      injectFaults();
      tickAll();
      deliver();
    }
    // Liveness: the network heals, every location runs; every one must decide within the bound.
    blocked.clear();
    faults = { lossProbability: 0, duplicateProbability: 0, minDelayTicks: 1, maxDelayTicks: parameters.network.maxDelayTicks };
    log('liveness phase: network healed, every location up');
    for (const location of locations.values()) if (!location.alive) start(location);
    const roundTripMs = parameters.retryIntervalMs + 2 * parameters.network.maxDelayTicks * STEP_MS;
    const boundMs = 20 * roundTripMs + 3 * parameters.failoverTimeoutMs + 500;
    const endStep = step + Math.ceil(boundMs / STEP_MS);
    for (; step < endStep && !allDecided(); step++) {
      tickAll();
      deliver();
    }
    checker.checkOutcome(decisions(), boundMs);
  } catch (e) {
    if (!(e instanceof DecisionViolation)) throw e;
    log(`VIOLATION ${e.message}`);
    violation = { checker: e.checker, message: e.message, atMs: nowMs() };
  }
  return {
    seed: options.seed,
    parameters,
    violation,
    elapsedMs: nowMs(),
    best: checker.best,
    opens,
    joins,
    forked: new Set(opens.map((o) => o.location)).size > 1,
    messagesSent,
    crashes,
    checks: checker.checks,
    trace,
  };
}

/** The command that replays a run exactly. */
export function decisionReplayCommand(options: DecisionSimOptions, result: DecisionSimResult): string {
  const parts = [`npm run sim:decision -- --seed ${options.seed} --locations ${result.parameters.locationCount} --steps ${options.steps}`];
  if (options.failover) parts.push('--failover');
  if (options.bug !== undefined) parts.push(`--bug ${options.bug}`);
  if (options.disabled !== undefined && options.disabled.size > 0) parts.push(`--disable ${[...options.disabled].join(',')}`);
  if (options.disabledCheckers !== undefined && options.disabledCheckers.size > 0) parts.push(`--disable-checker ${[...options.disabledCheckers].join(',')}`);
  if (options.initialPartition !== undefined) parts.push(`--partition '${options.initialPartition.map((g) => g.join(',')).join('|')}'`);
  return parts.join(' ');
}

/**
 * Shrinks a failing run: stops the fault phase just after the violation, then turns off, one at a
 * time, every fault kind whose absence still fails. Returns the smallest failing variant found.
 */
export function shrinkDecisionRun(options: DecisionSimOptions, failing: DecisionSimResult): { options: DecisionSimOptions; result: DecisionSimResult } {
  let best = { options, result: failing };
  const cutSteps = Math.floor(failing.violation!.atMs / STEP_MS) + 1;
  if (cutSteps < options.steps) {
    const cut = { ...options, steps: cutSteps };
    const result = runDecisionSim(cut);
    if (result.violation !== undefined) best = { options: cut, result };
  }
  for (const kind of DECISION_FAULT_KINDS) {
    if (!best.result.parameters.enabled.includes(kind)) continue;
    const candidate: DecisionSimOptions = { ...best.options, disabled: new Set([...(best.options.disabled ?? []), kind]) };
    const result = runDecisionSim(candidate);
    if (result.violation !== undefined && result.trace.length <= best.result.trace.length) best = { options: candidate, result };
  }
  return best;
}
