/**
 * Token helpers for end-to-end tests and the bench: governance proposals by member0 (one member
 * accepts), and requests with a bearer token.
 */
import { ACCEPT_BALLOT, GovRequestFailed, propose, vote } from '../cli/member.js';
import { memberConnectionOf, type StartedNode } from './node-process.js';

/** member0 proposes `actions` and votes for them; returns the proposal's final state (and failure). */
export async function applyActions(node: StartedNode, actions: unknown[]): Promise<{ state: string; failure?: string; refused?: string }> {
  const connection = memberConnectionOf(node);
  let proposal;
  try {
    proposal = await propose(connection, actions);
  } catch (e) {
    if (e instanceof GovRequestFailed) return { state: 'Refused', refused: e.message };
    throw e;
  }
  const id = (proposal.body as { proposal_id: string }).proposal_id;
  let body = proposal.body as { state: string; failure?: { reason: string } };
  if (body.state === 'Open') body = (await vote(connection, id, ACCEPT_BALLOT)).body as typeof body;
  return body.failure === undefined ? { state: body.state } : { state: body.state, failure: body.failure.reason };
}

/** applyActions, which must be Accepted. */
export async function mustApply(node: StartedNode, actions: unknown[]): Promise<void> {
  const outcome = await applyActions(node, actions);
  if (outcome.state !== 'Accepted') throw new Error(`proposal ${JSON.stringify(actions).slice(0, 200)} is ${outcome.state}: ${outcome.failure ?? outcome.refused ?? ''}`);
}

export function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}
