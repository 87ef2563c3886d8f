/**
 * Replay protection of signed governance requests: the digest of every recent request is
 * remembered in a bounded table (keys `<created_at, fixed width>:<digest>`, so they sort by age),
 * and a request already remembered is refused. Once a table is full, a request older than
 * everything it remembers cannot be told apart from a replay and is refused as well.
 */
import { CovenantError } from '../base/errors.js';
import { toHex } from '../base/bytes.js';
import { sha256 } from '../crypto/index.js';
import type { TableDef, Tx } from '../kv/index.js';
import type { VerifiedGovRequest } from './cose-request.js';
import { GovTableDefs } from './tables.js';

const CREATED_AT_DIGITS = 16;

function badRequest(code: string, message: string): CovenantError {
  return new CovenantError(code, message, 400);
}

/** Refuses a proposal request whose digest is remembered (or too old to tell). */
export function refuseProposalReplay(tx: Tx, max: number, requestDigest: string, createdAtSeconds: number): void {
  const replayOf = findRecent(tx, GovTableDefs.recentProposals, max, requestDigest, createdAtSeconds, 'ProposalCreatedTooLongAgo', 'proposal');
  if (replayOf !== undefined) throw badRequest('ProposalReplay', `this proposal request was already submitted (proposal ${replayOf.proposal_id})`);
}

export function rememberProposal(tx: Tx, max: number, requestDigest: string, createdAtSeconds: number, proposalId: string): void {
  remember(tx, GovTableDefs.recentProposals, max, requestDigest, createdAtSeconds, { proposal_id: proposalId });
}

/**
 * The same for every other signed request (ballots, withdrawals, state digests, acks, recovery
 * shares): each request is accepted once. Checked before the request is executed, remembered in
 * the same transaction, so a refused request leaves nothing behind.
 */
export function refuseRequestReplay(tx: Tx, max: number, body: Uint8Array, verified: VerifiedGovRequest): void {
  const requestDigest = toHex(sha256(body));
  const replayOf = findRecent(tx, GovTableDefs.recentRequests, max, requestDigest, verified.createdAtSeconds, 'RequestCreatedTooLongAgo', verified.type);
  if (replayOf !== undefined) throw badRequest('RequestReplay', `this ${verified.type} request was already submitted`);
  remember(tx, GovTableDefs.recentRequests, max, requestDigest, verified.createdAtSeconds, { type: verified.type, member_id: verified.memberId });
}

/** The remembered value of the request with this digest, if any; throws `tooOldCode` when it cannot be told. */
function findRecent<V>(tx: Tx, table: TableDef<V>, max: number, requestDigest: string, createdAtSeconds: number, tooOldCode: string, what: string): V | undefined {
  const recent = tx.table(table);
  let oldest = Number.POSITIVE_INFINITY;
  let replayOf: V | undefined;
  recent.forEach((value, key) => {
    const [createdAt, digest] = key.split(':');
    oldest = Math.min(oldest, Number(createdAt));
    if (digest === requestDigest) replayOf = value;
  });
  if (replayOf !== undefined) return replayOf;
  if (recent.size >= max && createdAtSeconds < oldest) {
    throw badRequest(tooOldCode, `created_at ${createdAtSeconds} is older than every remembered recent ${what} request (${oldest}); sign it again`);
  }
  return undefined;
}

function remember<V>(tx: Tx, table: TableDef<V>, max: number, requestDigest: string, createdAtSeconds: number, value: V): void {
  const recent = tx.table(table);
  recent.put(`${String(createdAtSeconds).padStart(CREATED_AT_DIGITS, '0')}:${requestDigest}`, value);
  // Keys sort by created_at (fixed-width digits): evict from the front.
  let excess = recent.size - max;
  const evict: string[] = [];
  recent.forEach((_v, key) => {
    if (excess-- <= 0) return false;
    evict.push(key);
    return true;
  });
  for (const key of evict) recent.remove(key);
}
