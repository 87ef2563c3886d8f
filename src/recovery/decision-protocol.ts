/**
 * The recovery decision protocol of sealing-based recovery (docs/recovery-decision.md): after a
 * whole-service crash, the recovering nodes agree on which one opens the service (the one with the
 * best ledger) and the others restart as its joiners, without a member vote. This module is the
 * protocol's pure logic: no clock, no sockets, no randomness. Time enters only through `tick`,
 * messages only through `receive`, and every call returns what to send and, once, the decision.
 *
 * Interface (the node drives one instance per recovery attempt):
 *
 *   const decision = new RecoveryDecision({ self, expected, position, failoverTimeoutMs, retryIntervalMs });
 *   decision.tick(elapsedMs)          // ms since the previous tick (or since construction); call
 *                                     // tick(0) right after construction: it sends the first Gossip
 *   decision.receive(from, message)   // `from`: the sender's location name, authenticated by the
 *                                     // transport; `message`: parseDecisionMessage(untrusted JSON)
 *     -> { send: [{ to, message }], decision?: { kind: 'Open', openKind } | { kind: 'Join', target, targetAddress }, warning? }
 *   decision.phase                    // 'Gossip' | 'Vote' | 'Open' | 'Join'
 *   decision.decision                 // the decision once made (final for this instance), else undefined
 *   decision.vote                     // the vote this instance cast, if any
 *   decision.majority                 // votes needed to open: floor(expected / 2) + 1
 *   decision.status()                 // one line for GET /node/state and logs
 *
 * `decision` appears in the output of the one call that made it; afterwards the getter holds it.
 * An Open node keeps answering Gossip and Vote with IAmOpen, so late nodes learn of it; a Join
 * node ignores everything (it restarts as a joiner). Messages from locations that are not
 * expected (or claiming to be this one) are ignored. A `warning` is a line worth logging as a
 * warning: an IAmOpen from another location after this one opened (the service forked, which is
 * possible only on the failover path), or a location gossiping a position other than the one it
 * gossiped first (the first is kept: positions must not change during the protocol).
 *
 * The rules, in order, after every tick and every message (docs/recovery-decision.md "Phases"):
 *
 * 1. Gossip: every retry interval, send this location's position to every other location, until
 *    decided. Once every expected position is known, vote for the best ledger (the order of
 *    compareLedgerPositions, ties to the smallest location name) with `heard_all: true`.
 * 2. Failover (failoverTimeoutMs > 0 only): once failoverTimeoutMs has elapsed since
 *    construction without having heard every position, vote for the best ledger heard so far
 *    (this location's own included) with `heard_all: false`.
 * 3. Vote: a vote for another location is sent to it every retry interval until decided; a vote
 *    for this location counts at once. An instance votes at most once.
 * 4. Open: with `heard_all` votes for this location from a majority of the expected locations,
 *    open (openKind Election). On the failover path only, a location that voted for itself also
 *    opens (openKind Failover) once its own failover timeout has elapsed and votes of either kind
 *    from a majority are in, or once the failover timeout has elapsed again since it voted. An
 *    opening sends IAmOpen to every other location.
 * 5. Join: an IAmOpen from an expected location (before this one decided) is the decision Join.
 *
 * Why two locations never both open on the election path, even when nodes crash and restart
 * losing this state: a `heard_all` vote is cast only once every expected position is known, and
 * positions do not change while nodes recover (a recovering node writes nothing to its ledger
 * until it opens or joins). Every `heard_all` vote ever cast, before or after any restart, is
 * therefore for the same location, the best of the fixed set of positions, and only that location
 * can count a majority of them. Votes are counted per sender, so repeats and duplicates add
 * nothing. The simulator (src/testing/sim/decision-sim.ts) checks this claim and the rest.
 */
import { assert } from '../base/index.js';
import {
  compareLedgerPositions,
  isLedgerPosition,
  isLocationName,
  type DecisionMessage,
  type LedgerPosition,
  type OpenKind,
} from './decision-messages.js';
import { RecoveryError } from './errors.js';

export interface DecisionLocation {
  /** Persistent name (sealing_recovery.location.name), stable across restarts. */
  readonly name: string;
  /** Where the other nodes reach it during the protocol (sealing_recovery.location.address). */
  readonly address: string;
}

/** Deliberately wrong behaviours, used only by the simulator to show that its checkers catch them. */
export type DecisionBug =
  /** Vote as soon as a majority of positions is known, claiming to have heard all (with failover off). */
  'vote-before-all-heard';
export const DECISION_KNOWN_BUGS: readonly DecisionBug[] = ['vote-before-all-heard'];

export interface RecoveryDecisionInit {
  /** This location's name; must be one of `expected`. */
  readonly self: string;
  /** Every location expected to take part (expected_locations), this one included; names unique. */
  readonly expected: readonly DecisionLocation[];
  /** The transaction id of this location's last recovered signature. */
  readonly position: LedgerPosition;
  /** failover_timeout in milliseconds; 0 disables the failover path. */
  readonly failoverTimeoutMs: number;
  /** How often an unanswered message is sent again, in milliseconds (at least 1). */
  readonly retryIntervalMs: number;
  /** Simulator only: behave wrongly on purpose. */
  readonly bug?: DecisionBug;
}

export type DecisionPhase = 'Gossip' | 'Vote' | 'Open' | 'Join';

export type Decision =
  /** Open the service (transition to open without a member vote) and record openKind. */
  | { readonly kind: 'Open'; readonly openKind: OpenKind }
  /** Restart as a joiner of `target`, which opened the service. */
  | { readonly kind: 'Join'; readonly target: string; readonly targetAddress: string };

export interface OutgoingDecisionMessage {
  /** A location name of `expected`, never this one. */
  readonly to: string;
  readonly message: DecisionMessage;
}

export interface DecisionOutput {
  readonly send: readonly OutgoingDecisionMessage[];
  /** Present in the output of the call that made the decision, and only there. */
  readonly decision?: Decision;
  /** A line worth logging as a warning. */
  readonly warning?: string;
}

export interface CastVote {
  readonly candidate: string;
  /** True when cast after hearing every expected location (election path), false after the failover timeout. */
  readonly heardAll: boolean;
  /** When it was cast, in ms since the instance was constructed. */
  readonly castAtMs: number;
}

/** Most locations one protocol instance accepts: the protocol sends O(n²) messages per retry round. */
export const EXPECTED_LOCATIONS_MAX = 64;

function invalidConfiguration(message: string): RecoveryError {
  return new RecoveryError('InvalidDecisionConfiguration', `recovery decision protocol: ${message}`);
}

function validate(init: RecoveryDecisionInit): void {
  if (!isLocationName(init.self)) throw invalidConfiguration('the location name is empty or too long');
  if (!Array.isArray(init.expected) || init.expected.length === 0) throw invalidConfiguration('expected_locations is empty');
  if (init.expected.length > EXPECTED_LOCATIONS_MAX) throw invalidConfiguration(`more than ${EXPECTED_LOCATIONS_MAX} expected locations`);
  const names = new Set<string>();
  for (const location of init.expected) {
    if (!isLocationName(location.name)) throw invalidConfiguration('an expected location name is empty or too long');
    if (names.has(location.name)) throw invalidConfiguration(`expected location "${location.name}" is listed twice`);
    names.add(location.name);
  }
  if (!names.has(init.self)) throw invalidConfiguration(`this location "${init.self}" is not among the expected locations`);
  if (!isLedgerPosition({ view: init.position?.view, seqno: init.position?.seqno })) {
    throw invalidConfiguration('the ledger position is not a pair of non-negative safe integers');
  }
  if (!Number.isSafeInteger(init.failoverTimeoutMs) || init.failoverTimeoutMs < 0) throw invalidConfiguration('failover_timeout is not a whole number of ms ≥ 0');
  if (!Number.isSafeInteger(init.retryIntervalMs) || init.retryIntervalMs < 1) throw invalidConfiguration('the retry interval is not a whole number of ms ≥ 1');
}

export class RecoveryDecision {
  readonly #self: string;
  /** Expected locations by name, in the configuration's order. */
  readonly #expected: ReadonlyMap<string, DecisionLocation>;
  readonly #others: readonly string[];
  readonly #majority: number;
  readonly #failoverTimeoutMs: number;
  readonly #retryIntervalMs: number;
  readonly #bug: DecisionBug | undefined;

  /** Ms since construction, the sum of every tick's elapsedMs. */
  #nowMs = 0;
  #ticked = false;
  #gossipSentAtMs = 0;
  #voteSentAtMs = 0;
  /** Positions heard, this location's own included; the first one heard from a location stays. */
  readonly #positions = new Map<string, LedgerPosition>();
  #vote: CastVote | undefined;
  /** Voters for this location; true once one of its votes was cast after hearing all. */
  readonly #votesForSelf = new Map<string, boolean>();
  #decision: Decision | undefined;
  #decidedAtMs = 0;
  readonly #positionChangeWarned = new Set<string>();
  /** Locations that said IAmOpen after this one opened (a fork, failover path only). */
  readonly #alsoOpen = new Set<string>();

  constructor(init: RecoveryDecisionInit) {
    validate(init);
    this.#self = init.self;
    this.#expected = new Map(init.expected.map((l) => [l.name, { name: l.name, address: l.address }]));
    this.#others = init.expected.map((l) => l.name).filter((name) => name !== init.self);
    this.#majority = Math.floor(init.expected.length / 2) + 1;
    this.#failoverTimeoutMs = init.failoverTimeoutMs;
    this.#retryIntervalMs = init.retryIntervalMs;
    this.#bug = init.bug;
    this.#positions.set(init.self, { view: init.position.view, seqno: init.position.seqno });
  }

  get phase(): DecisionPhase {
    if (this.#decision !== undefined) return this.#decision.kind;
    return this.#vote === undefined ? 'Gossip' : 'Vote';
  }

  get decision(): Decision | undefined {
    return this.#decision;
  }

  get vote(): CastVote | undefined {
    return this.#vote;
  }

  /** Votes needed to open: a majority of the expected locations. */
  get majority(): number {
    return this.#majority;
  }

  /**
   * Time passes: `elapsedMs` since the previous tick (or since construction). Sends what is due
   * (the first call sends the first Gossip) and applies the failover timers.
   */
  tick(elapsedMs: number): DecisionOutput {
    assert(Number.isFinite(elapsedMs) && elapsedMs >= 0, () => `tick(${elapsedMs}): elapsed time is a finite number of ms ≥ 0`);
    this.#nowMs += elapsedMs;
    const out = new Output();
    this.#advance(out);
    if (this.#decision === undefined) this.#resend(out);
    this.#ticked = true;
    return out.done();
  }

  /** A message from the expected location `from` (checked by parseDecisionMessage). */
  receive(from: string, message: DecisionMessage): DecisionOutput {
    const out = new Output();
    if (from === this.#self || !this.#expected.has(from)) return out.done();
    if (this.#decision?.kind === 'Join') return out.done();
    if (this.#decision?.kind === 'Open') {
      if (message.kind === 'IAmOpen') {
        if (!this.#alsoOpen.has(from)) {
          this.#alsoOpen.add(from);
          out.warning = `${from} says it opened the service (${message.open_kind}) although this location opened it (${this.#decision.openKind}): the service has forked`;
        }
      } else {
        // A late node learns that the service is open (this is also IAmOpen's retry).
        out.send(from, { kind: 'IAmOpen', open_kind: this.#decision.openKind });
      }
      return out.done();
    }
    switch (message.kind) {
      case 'Gossip': {
        const known = this.#positions.get(from);
        if (known === undefined) this.#positions.set(from, { view: message.position.view, seqno: message.position.seqno });
        else if (compareLedgerPositions(known, message.position) !== 0 && !this.#positionChangeWarned.has(from)) {
          // The safety argument needs fixed positions: keep the first, and say so once.
          this.#positionChangeWarned.add(from);
          out.warning =
            `${from} now gossips position ${message.position.view}.${message.position.seqno} after ${known.view}.${known.seqno} (kept): ` +
            `a location's ledger must not change while the recovery decision protocol runs`;
        }
        break;
      }
      case 'Vote':
        // A vote for another location is misdirected: it is not this location's to count.
        if (message.candidate === this.#self) this.#votesForSelf.set(from, (this.#votesForSelf.get(from) ?? false) || message.heard_all);
        break;
      case 'IAmOpen':
        this.#decide(out, { kind: 'Join', target: from, targetAddress: this.#expected.get(from)!.address });
        return out.done();
    }
    this.#advance(out);
    return out.done();
  }

  /** One line for GET /node/state and the logs. */
  status(): string {
    const decision = this.#decision;
    if (decision?.kind === 'Join') return `Join: ${decision.target} opened the service; restarting as its joiner (${decision.targetAddress})`;
    if (decision?.kind === 'Open') {
      const fork = this.#alsoOpen.size > 0 ? `; FORK: also opened by ${[...this.#alsoOpen].sort().join(', ')}` : '';
      return `Open (${decision.openKind}): this location opened the service at ${this.#decidedAtMs} ms with votes from ${this.#voterList()}${fork}`;
    }
    const failover = this.#failoverTimeoutMs > 0;
    if (this.#vote === undefined) {
      const missing = this.#others.filter((name) => !this.#positions.has(name));
      const timer = failover ? `; failover vote in ${Math.max(0, this.#failoverTimeoutMs - this.#nowMs)} ms` : '';
      return `Gossip: heard ${this.#positions.size} of ${this.#expected.size} locations; waiting for gossip from ${missing.join(', ')}${timer}`;
    }
    const vote = this.#vote;
    const how = vote.heardAll ? 'having heard all' : 'after the failover timeout';
    if (vote.candidate !== this.#self) return `Vote: voted for ${vote.candidate} (${how}); waiting for IAmOpen`;
    const timer = failover ? `; failover opening in ${Math.max(0, vote.castAtMs + this.#failoverTimeoutMs - this.#nowMs)} ms` : '';
    return `Vote: voted for itself (${how}); votes from ${this.#voterList()} (${this.#votesForSelf.size} of ${this.#majority} needed)${timer}`;
  }

  #voterList(): string {
    return this.#votesForSelf.size === 0 ? 'none' : [...this.#votesForSelf.keys()].sort().join(', ');
  }

  /** The best ledger among the positions heard: the order of compareLedgerPositions, then the smallest name. */
  #bestHeard(): string {
    let best: string | undefined;
    for (const [name, position] of this.#positions) {
      if (best === undefined) {
        best = name;
        continue;
      }
      const order = compareLedgerPositions(position, this.#positions.get(best)!);
      if (order < 0 || (order === 0 && name < best)) best = name;
    }
    assert(best !== undefined, 'this location always knows its own position');
    return best;
  }

  #advance(out: Output): void {
    if (this.#decision !== undefined) return;
    if (this.#vote === undefined) {
      const failover = this.#failoverTimeoutMs > 0;
      if (this.#positions.size === this.#expected.size) this.#castVote(out, true);
      else if (this.#bug === 'vote-before-all-heard' && !failover && this.#positions.size >= this.#majority) this.#castVote(out, true);
      else if (failover && this.#nowMs >= this.#failoverTimeoutMs) this.#castVote(out, false);
    }
    let heardAllVotes = 0;
    for (const heardAll of this.#votesForSelf.values()) if (heardAll) heardAllVotes++;
    if (heardAllVotes >= this.#majority) {
      this.#decide(out, { kind: 'Open', openKind: 'Election' });
      return;
    }
    if (this.#failoverTimeoutMs > 0 && this.#vote?.candidate === this.#self) {
      const ownTimeoutElapsed = this.#nowMs >= this.#failoverTimeoutMs;
      const votePhaseTimedOut = this.#nowMs >= this.#vote.castAtMs + this.#failoverTimeoutMs;
      if ((ownTimeoutElapsed && this.#votesForSelf.size >= this.#majority) || votePhaseTimedOut) {
        this.#decide(out, { kind: 'Open', openKind: 'Failover' });
      }
    }
  }

  #castVote(out: Output, heardAll: boolean): void {
    assert(this.#vote === undefined, 'an instance votes at most once');
    const candidate = this.#bestHeard();
    this.#vote = { candidate, heardAll, castAtMs: this.#nowMs };
    if (candidate === this.#self) {
      this.#votesForSelf.set(this.#self, heardAll);
    } else {
      out.send(candidate, { kind: 'Vote', candidate, heard_all: heardAll });
      this.#voteSentAtMs = this.#nowMs;
    }
  }

  #decide(out: Output, decision: Decision): void {
    assert(this.#decision === undefined, 'a decision is final');
    this.#decision = decision;
    this.#decidedAtMs = this.#nowMs;
    out.decision = decision;
    if (decision.kind === 'Open') {
      for (const to of this.#others) out.send(to, { kind: 'IAmOpen', open_kind: decision.openKind });
    }
  }

  /** The retry timers: every message this undecided location has to say, again once its interval has passed. */
  #resend(out: Output): void {
    if (!this.#ticked || this.#nowMs - this.#gossipSentAtMs >= this.#retryIntervalMs) {
      const position = this.#positions.get(this.#self)!;
      for (const to of this.#others) out.send(to, { kind: 'Gossip', position: { view: position.view, seqno: position.seqno } });
      this.#gossipSentAtMs = this.#nowMs;
    }
    const vote = this.#vote;
    if (vote !== undefined && vote.candidate !== this.#self && this.#nowMs - this.#voteSentAtMs >= this.#retryIntervalMs) {
      out.send(vote.candidate, { kind: 'Vote', candidate: vote.candidate, heard_all: vote.heardAll });
      this.#voteSentAtMs = this.#nowMs;
    }
  }
}

/** What one call returns, gathered as it runs. */
class Output {
  readonly #send: OutgoingDecisionMessage[] = [];
  decision: Decision | undefined;
  warning: string | undefined;

  send(to: string, message: DecisionMessage): void {
    this.#send.push({ to, message });
  }

  done(): DecisionOutput {
    return {
      send: this.#send,
      ...(this.decision !== undefined ? { decision: this.decision } : {}),
      ...(this.warning !== undefined ? { warning: this.warning } : {}),
    };
  }
}
