import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { hasJointMajority, jointMatchSeqno, voteOutcome, type Configuration } from '../../src/consensus/index.js';

const ids = ['a', 'b', 'c', 'd', 'e', 'f', 'g'];
const config = fc.subarray(ids, { minLength: 1 }).map((nodes): Configuration => ({ seqno: 0, nodes }));
const configs = fc.array(config, { minLength: 1, maxLength: 3 });

/** Oracle: brute force over every subset. */
function isMajority(nodes: readonly string[], yes: ReadonlySet<string>): boolean {
  return nodes.filter((n) => yes.has(n)).length > nodes.length / 2;
}

test('joint majority means a strict majority of every configuration', () => {
  fc.assert(
    fc.property(configs, fc.subarray(ids), (cs, yesList) => {
      const yes = new Set(yesList);
      assert.equal(hasJointMajority(cs, (id) => yes.has(id)), cs.every((c) => isMajority(c.nodes, yes)));
    }),
    { numRuns: 2000 },
  );
});

test('the joint match seqno is the highest seqno a majority of every configuration holds', () => {
  fc.assert(
    fc.property(configs, fc.array(fc.nat(20), { minLength: ids.length, maxLength: ids.length }), (cs, matches) => {
      const matchOf = (id: string): number => matches[ids.indexOf(id)]!;
      const got = jointMatchSeqno(cs, matchOf);
      const holds = (s: number): boolean => cs.every((c) => isMajority(c.nodes, new Set(c.nodes.filter((n) => matchOf(n) >= s))));
      assert.ok(holds(got), `a majority of each configuration holds ${got}`);
      assert.ok(!holds(got + 1), `${got + 1} is not held by a majority of each configuration`);
    }),
    { numRuns: 2000 },
  );
});

test('an election is won with a majority of grants in every configuration, lost once one cannot get there', () => {
  fc.assert(
    fc.property(configs, fc.array(fc.constantFrom(true, false, undefined), { minLength: ids.length, maxLength: ids.length }), (cs, answers) => {
      const votes = new Map<string, boolean>();
      ids.forEach((id, i) => {
        if (answers[i] !== undefined) votes.set(id, answers[i]!);
      });
      const granted = new Set(ids.filter((id) => votes.get(id) === true));
      const possible = new Set(ids.filter((id) => votes.get(id) !== false));
      const expected = cs.every((c) => isMajority(c.nodes, granted)) ? 'won' : cs.every((c) => isMajority(c.nodes, possible)) ? 'pending' : 'lost';
      assert.equal(voteOutcome(cs, votes), expected);
    }),
    { numRuns: 2000 },
  );
});
