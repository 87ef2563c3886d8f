/**
 * The recovery decision protocol's messages (docs/recovery-decision.md, "Messages"): plain
 * JSON-serialisable objects with a `kind`, and the one check every message from a peer goes
 * through before the protocol sees it. The sender's location name is not part of a message: the
 * transport that carried it authenticates the sender and passes its name to
 * `RecoveryDecision.receive(from, message)`.
 *
 *   {"kind": "Gossip",  "position": {"view": 4, "seqno": 1207}}
 *   {"kind": "Vote",    "candidate": "b", "heard_all": true}
 *   {"kind": "IAmOpen", "open_kind": "Election"}
 *
 * `parseDecisionMessage` accepts exactly these shapes (no other fields, integers within the safe
 * range, names of at most LOCATION_NAME_LENGTH_MAX characters) and throws RecoveryError
 * `InvalidDecisionMessage` for anything else: a peer's bad message must not crash a node.
 */
import { RecoveryError } from './errors.js';

/** Where a location's recovered ledger ends: the transaction id of its last recovered signature. */
export interface LedgerPosition {
  readonly view: number;
  readonly seqno: number;
}

/** How the service was opened: by a majority of votes cast after hearing every location, or with a timeout. */
export type OpenKind = 'Election' | 'Failover';
export const OPEN_KINDS: readonly OpenKind[] = ['Election', 'Failover'];

/** A location's ledger position, sent to every expected location until this node decides. */
export interface GossipMessage {
  readonly kind: 'Gossip';
  readonly position: LedgerPosition;
}

/**
 * A vote for the location with the best ledger, sent to that location until this node decides.
 * `heard_all` is true when the voter had heard every expected location's position (the election
 * path), false when it voted after the failover timeout without having heard from all.
 */
export interface VoteMessage {
  readonly kind: 'Vote';
  readonly candidate: string;
  readonly heard_all: boolean;
}

/** Sent by a node that opened the service: its receivers restart as joiners of the sender. */
export interface IAmOpenMessage {
  readonly kind: 'IAmOpen';
  readonly open_kind: OpenKind;
}

export type DecisionMessage = GossipMessage | VoteMessage | IAmOpenMessage;
export type DecisionMessageKind = DecisionMessage['kind'];

/** Longest location name accepted, in characters (in messages and in the configuration). */
export const LOCATION_NAME_LENGTH_MAX = 256;

function invalid(message: string): RecoveryError {
  return new RecoveryError('InvalidDecisionMessage', `invalid recovery decision message: ${message}`);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return false;
  const prototype = Object.getPrototypeOf(value) as unknown;
  return prototype === Object.prototype || prototype === null;
}

function expectFields(value: Record<string, unknown>, fields: readonly string[], what: string): void {
  for (const key of Object.keys(value)) if (!fields.includes(key)) throw invalid(`${what} has an unexpected field "${key.slice(0, 64)}"`);
  for (const key of fields) if (!(key in value)) throw invalid(`${what} lacks "${key}"`);
}

function nonNegativeInteger(value: unknown, what: string): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) throw invalid(`${what} is not a non-negative safe integer`);
  return value;
}

/** A location name as it may appear in a message or the configuration. */
export function isLocationName(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= LOCATION_NAME_LENGTH_MAX;
}

/** Checks a position's fields (a Gossip's, or one given to the protocol). */
export function isLedgerPosition(value: unknown): value is LedgerPosition {
  if (!isPlainObject(value)) return false;
  const keys = Object.keys(value);
  return (
    keys.length === 2 &&
    typeof value.view === 'number' &&
    Number.isSafeInteger(value.view) &&
    value.view >= 0 &&
    typeof value.seqno === 'number' &&
    Number.isSafeInteger(value.seqno) &&
    value.seqno >= 0
  );
}

/**
 * A message from a peer (already JSON-parsed), checked field by field; the result is a fresh
 * object holding only the documented fields. Throws RecoveryError `InvalidDecisionMessage`.
 */
export function parseDecisionMessage(value: unknown): DecisionMessage {
  if (!isPlainObject(value)) throw invalid('not a JSON object');
  switch (value.kind) {
    case 'Gossip': {
      expectFields(value, ['kind', 'position'], 'Gossip');
      const position = value.position;
      if (!isPlainObject(position)) throw invalid('Gossip position is not an object');
      expectFields(position, ['view', 'seqno'], 'Gossip position');
      return {
        kind: 'Gossip',
        position: { view: nonNegativeInteger(position.view, 'Gossip position view'), seqno: nonNegativeInteger(position.seqno, 'Gossip position seqno') },
      };
    }
    case 'Vote': {
      expectFields(value, ['kind', 'candidate', 'heard_all'], 'Vote');
      if (!isLocationName(value.candidate)) throw invalid(`Vote candidate is not a location name of 1 to ${LOCATION_NAME_LENGTH_MAX} characters`);
      if (typeof value.heard_all !== 'boolean') throw invalid('Vote heard_all is not a boolean');
      return { kind: 'Vote', candidate: value.candidate, heard_all: value.heard_all };
    }
    case 'IAmOpen': {
      expectFields(value, ['kind', 'open_kind'], 'IAmOpen');
      if (!OPEN_KINDS.includes(value.open_kind as OpenKind)) throw invalid(`IAmOpen open_kind is not one of ${OPEN_KINDS.join(', ')}`);
      return { kind: 'IAmOpen', open_kind: value.open_kind as OpenKind };
    }
    default:
      throw invalid(typeof value.kind === 'string' ? `unknown kind "${value.kind.slice(0, 64)}"` : 'no kind');
  }
}

/**
 * The order of ledgers (docs/recovery-decision.md, "Which ledger is best"), Raft's up-to-date rule:
 * the higher view of the last signature wins, then the higher seqno. Negative when `a` is better
 * than `b`, positive when worse, 0 when equal (the caller breaks ties by location name).
 */
export function compareLedgerPositions(a: LedgerPosition, b: LedgerPosition): number {
  if (a.view !== b.view) return b.view - a.view;
  return b.seqno - a.seqno;
}
