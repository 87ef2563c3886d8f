/**
 * Checkers of the recovery decision protocol's simulator (decision-sim.ts). They judge the
 * locations from the outside — the votes each protocol instance cast, the messages it sent, the
 * decisions it made and when — against an oracle computed independently of the protocol (which
 * ledger is best), and throw a DecisionViolation naming the property that broke:
 *
 * - heard-all-votes-agree: every vote cast or sent with heard_all names the best ledger of all the
 *   expected locations (the safety argument: positions are fixed, so a restarted node that votes
 *   again votes the same), and every Election open is by that location;
 * - vote-once: an instance casts at most one vote, and every Vote it sends is that vote;
 * - election-majority: a location opens by election only once distinct locations forming a
 *   majority of the expected ones have cast heard_all votes for it;
 * - election-unique: at most one location ever opens by election;
 * - no-fork: with failover off, at most one location ever opens;
 * - failover-after-timeout: a Failover open happens only with failover on, and only once its
 *   instance has run for the failover timeout; with failover off no vote is cast without heard_all;
 * - join-target-open: a location joins only an expected location (not itself) that had opened;
 * - decision-final: an instance's decision never changes, and its output reports it once;
 * - ignores-unknown: a message from a location that is not expected changes nothing and is not answered;
 * - codec: every message sent parses back as itself, and every malformed one is refused with
 *   InvalidDecisionMessage;
 * - liveness: once faults heal, every location decides; with failover off exactly one opens (by
 *   election, the best ledger) and every other joins it; with failover on at least one opens.
 */
import type { CastVote, Decision, DecisionMessage, LedgerPosition } from '../../recovery/index.js';

export const DECISION_CHECKERS = [
  'heard-all-votes-agree',
  'vote-once',
  'election-majority',
  'election-unique',
  'no-fork',
  'failover-after-timeout',
  'join-target-open',
  'decision-final',
  'ignores-unknown',
  'codec',
  'liveness',
] as const;
export type DecisionCheckerName = (typeof DECISION_CHECKERS)[number];

export class DecisionViolation extends Error {
  constructor(
    readonly checker: DecisionCheckerName,
    message: string,
  ) {
    super(`${checker}: ${message}`);
    this.name = 'DecisionViolation';
  }
}

export interface CheckedLocation {
  readonly name: string;
  readonly position: LedgerPosition;
}

export interface DecisionRecord {
  readonly location: string;
  readonly decision: Decision;
  readonly atMs: number;
  /** How long the deciding instance had run (simulated ms since it was created). */
  readonly instanceElapsedMs: number;
}

/**
 * The best ledger, computed here independently of the protocol's code: highest view of the last
 * signature, then highest seqno, then the smallest location name.
 */
export function bestLocationOracle(locations: readonly CheckedLocation[]): string {
  const sorted = [...locations].sort((a, b) => b.position.view - a.position.view || b.position.seqno - a.position.seqno || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return sorted[0]!.name;
}

export class DecisionChecker {
  readonly best: string;
  readonly majority: number;
  readonly decisions: DecisionRecord[] = [];
  checks = 0;
  readonly #names: ReadonlySet<string>;
  readonly #failoverTimeoutMs: number;
  readonly #disabled: ReadonlySet<DecisionCheckerName>;
  /** Candidate -> locations that ever cast a heard_all vote for it (any instance). */
  readonly #heardAllVoters = new Map<string, Set<string>>();
  /** Instance id -> the vote it cast. */
  readonly #votes = new Map<number, CastVote>();
  /** Instance id -> its decision. */
  readonly #instanceDecisions = new Map<number, Decision>();
  readonly #opened = new Set<string>();

  constructor(locations: readonly CheckedLocation[], failoverTimeoutMs: number, disabled: ReadonlySet<DecisionCheckerName> = new Set()) {
    this.#names = new Set(locations.map((l) => l.name));
    this.best = bestLocationOracle(locations);
    this.majority = Math.floor(locations.length / 2) + 1;
    this.#failoverTimeoutMs = failoverTimeoutMs;
    this.#disabled = disabled;
  }

  fail(checker: DecisionCheckerName, message: string): void {
    this.checks++;
    if (!this.#disabled.has(checker)) throw new DecisionViolation(checker, message);
  }

  get opened(): ReadonlySet<string> {
    return this.#opened;
  }

  /** After every call on an instance: the vote it holds now (if any). */
  observeVote(location: string, instanceId: number, vote: CastVote | undefined): void {
    this.checks++;
    const previous = this.#votes.get(instanceId);
    if (previous !== undefined) {
      if (vote === undefined || vote.candidate !== previous.candidate || vote.heardAll !== previous.heardAll || vote.castAtMs !== previous.castAtMs) {
        this.fail('vote-once', `${location} (instance ${instanceId}) changed its vote from ${JSON.stringify(previous)} to ${JSON.stringify(vote)}`);
      }
      return;
    }
    if (vote === undefined) return;
    this.#votes.set(instanceId, vote);
    this.#judgeVote(location, vote.candidate, vote.heardAll, 'cast');
  }

  /** A message an instance handed to the network. */
  observeSent(from: string, instanceId: number, to: string, message: DecisionMessage): void {
    this.checks++;
    if (!this.#names.has(to) || to === from) this.fail('codec', `${from} sends ${message.kind} to ${to}, which is not another expected location`);
    if (message.kind !== 'Vote') return;
    const vote = this.#votes.get(instanceId);
    if (vote === undefined || vote.candidate !== message.candidate || vote.heardAll !== message.heard_all || to !== message.candidate) {
      this.fail('vote-once', `${from} sends ${JSON.stringify(message)} to ${to}, but its instance ${instanceId} cast ${JSON.stringify(vote)}`);
    }
    this.#judgeVote(from, message.candidate, message.heard_all, 'sent');
  }

  #judgeVote(voter: string, candidate: string, heardAll: boolean, how: string): void {
    if (!this.#names.has(candidate)) this.fail('heard-all-votes-agree', `${voter} ${how} a vote for ${candidate}, which is not an expected location`);
    if (!heardAll) {
      if (this.#failoverTimeoutMs === 0) this.fail('failover-after-timeout', `${voter} ${how} a vote without heard_all although failover is off`);
      return;
    }
    if (candidate !== this.best) this.fail('heard-all-votes-agree', `${voter} ${how} a heard_all vote for ${candidate}, but the best ledger is ${this.best}'s`);
    const voters = this.#heardAllVoters.get(candidate) ?? new Set<string>();
    voters.add(voter);
    this.#heardAllVoters.set(candidate, voters);
  }

  /** A decision reported in an instance's output. */
  observeDecision(location: string, instanceId: number, decision: Decision, atMs: number, instanceElapsedMs: number): void {
    this.checks++;
    const previous = this.#instanceDecisions.get(instanceId);
    if (previous !== undefined) {
      this.fail('decision-final', `${location} (instance ${instanceId}) reported a second decision ${JSON.stringify(decision)} after ${JSON.stringify(previous)}`);
      return;
    }
    this.#instanceDecisions.set(instanceId, decision);
    this.decisions.push({ location, decision, atMs, instanceElapsedMs });
    if (decision.kind === 'Join') {
      if (decision.target === location || !this.#names.has(decision.target)) this.fail('join-target-open', `${location} joins ${decision.target}, not another expected location`);
      if (!this.#opened.has(decision.target)) this.fail('join-target-open', `${location} joins ${decision.target}, which has not opened`);
      return;
    }
    if (decision.openKind === 'Election') {
      const voters = this.#heardAllVoters.get(location)?.size ?? 0;
      if (voters < this.majority) this.fail('election-majority', `${location} opened by election with heard_all votes from ${voters} locations (majority ${this.majority})`);
      if (location !== this.best) this.fail('heard-all-votes-agree', `${location} opened by election, but the best ledger is ${this.best}'s`);
      const otherElection = this.decisions.find((d) => d.location !== location && d.decision.kind === 'Open' && d.decision.openKind === 'Election');
      if (otherElection !== undefined) this.fail('election-unique', `${location} and ${otherElection.location} both opened by election`);
    } else {
      if (this.#failoverTimeoutMs === 0) this.fail('failover-after-timeout', `${location} opened by failover although failover is off`);
      else if (instanceElapsedMs < this.#failoverTimeoutMs) {
        this.fail('failover-after-timeout', `${location} opened by failover after ${instanceElapsedMs} ms, before its failover timeout of ${this.#failoverTimeoutMs} ms`);
      }
    }
    this.#opened.add(location);
    if (this.#failoverTimeoutMs === 0 && this.#opened.size > 1) this.fail('no-fork', `with failover off, ${[...this.#opened].sort().join(' and ')} both opened the service`);
  }

  /** The instance's state after a call: its `decision` getter agrees with what its output reported. */
  observeState(location: string, instanceId: number, decision: Decision | undefined): void {
    this.checks++;
    const reported = this.#instanceDecisions.get(instanceId);
    if (JSON.stringify(reported) !== JSON.stringify(decision)) {
      this.fail('decision-final', `${location} (instance ${instanceId}) holds ${JSON.stringify(decision)} but reported ${JSON.stringify(reported)}`);
    }
  }

  /** After the liveness phase: every location decided, and the outcome fits the mode. */
  checkOutcome(decidedByLocation: ReadonlyMap<string, Decision | undefined>, boundMs: number): void {
    this.checks++;
    const undecided = [...decidedByLocation].filter(([, d]) => d === undefined).map(([name]) => name);
    if (undecided.length > 0) {
      this.fail('liveness', `${undecided.join(', ')} undecided ${boundMs} ms after every fault healed`);
      return;
    }
    const openers = [...decidedByLocation].filter(([, d]) => d!.kind === 'Open').map(([name]) => name);
    if (openers.length === 0) this.fail('liveness', 'every location decided, but none opened');
    if (this.#failoverTimeoutMs > 0) return;
    if (openers.length !== 1 || openers[0] !== this.best) {
      this.fail('liveness', `with failover off, the best ledger ${this.best} should open alone; opened: ${openers.join(', ') || 'none'}`);
    }
    for (const [name, d] of decidedByLocation) {
      if (d!.kind === 'Join' && d!.target !== this.best) this.fail('liveness', `${name} joined ${d!.target}, not ${this.best}`);
    }
  }
}
