/**
 * Quorum arithmetic over one or several active configurations. Pure functions: the Raft state
 * machine decides what counts as a vote or an acknowledgement, this module only counts.
 * Joint rule: a decision needs a majority of *every* active configuration.
 */
import { assert, type NodeId, type Seqno } from '../base/index.js';
import type { Configuration } from './types.js';

export type VoteOutcome = 'won' | 'lost' | 'pending';

/** More than half of the configuration's nodes answer yes. */
export function hasMajority(nodes: readonly NodeId[], isYes: (id: NodeId) => boolean): boolean {
  assert(nodes.length > 0, 'a configuration has at least one node');
  let yes = 0;
  for (const id of nodes) if (isYes(id)) yes++;
  return yes * 2 > nodes.length;
}

/** A majority of every configuration answers yes. */
export function hasJointMajority(configs: readonly Configuration[], isYes: (id: NodeId) => boolean): boolean {
  assert(configs.length > 0, 'at least one configuration is active');
  return configs.every((c) => hasMajority(c.nodes, isYes));
}

/**
 * The outcome of an election given the answers received so far (absent = not yet answered).
 * Won when every configuration has a majority of grants; lost when some configuration can no
 * longer reach one.
 */
export function voteOutcome(configs: readonly Configuration[], votes: ReadonlyMap<NodeId, boolean>): VoteOutcome {
  assert(configs.length > 0, 'at least one configuration is active');
  let won = true;
  for (const c of configs) {
    let granted = 0;
    let rejected = 0;
    for (const id of c.nodes) {
      const v = votes.get(id);
      if (v === true) granted++;
      else if (v === false) rejected++;
    }
    if ((c.nodes.length - rejected) * 2 <= c.nodes.length) return 'lost';
    if (granted * 2 <= c.nodes.length) won = false;
  }
  return won ? 'won' : 'pending';
}

/** The highest seqno that a majority of this configuration holds. */
export function majorityMatchSeqno(nodes: readonly NodeId[], matchOf: (id: NodeId) => Seqno): Seqno {
  assert(nodes.length > 0, 'a configuration has at least one node');
  const matches = nodes.map(matchOf).sort((a, b) => b - a);
  // The (floor(n/2) + 1)-th highest: that many nodes, a majority, hold at least this seqno.
  return matches[Math.floor(nodes.length / 2)]!;
}

/** The highest seqno that a majority of every active configuration holds. */
export function jointMatchSeqno(configs: readonly Configuration[], matchOf: (id: NodeId) => Seqno): Seqno {
  assert(configs.length > 0, 'at least one configuration is active');
  let result = Number.MAX_SAFE_INTEGER;
  for (const c of configs) result = Math.min(result, majorityMatchSeqno(c.nodes, matchOf));
  return result;
}

/** Every node of any of the configurations, once each, in first-seen order. */
export function nodesOf(configs: readonly Configuration[]): NodeId[] {
  const seen = new Set<NodeId>();
  for (const c of configs) for (const id of c.nodes) seen.add(id);
  return [...seen];
}
