/**
 * The default constitution's resolve against a simple oracle: Accepted with a strict majority of
 * Active members in favour, Rejected once that majority is out of reach, Open otherwise; votes of
 * members who are not Active do not count.
 */
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { Store, jsonCodec } from '../../src/kv/index.js';
import { createConstitutionHost } from '../../src/gov/constitution-host.js';
import { DEFAULT_CONSTITUTION, GovTables, type JsEngine, loadJsEngine } from '../../src/gov/index.js';
import { TEST_LIMITS } from './helpers.js';

const json = jsonCodec<any>();

describe('default constitution: resolve', () => {
  let engine: JsEngine;
  before(async () => {
    engine = await loadJsEngine();
  });

  test('matches the majority oracle', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ active: fc.boolean(), vote: fc.constantFrom(true, false, undefined) }), { minLength: 1, maxLength: 7 }),
        (members) => {
          const store = new Store();
          const tx = store.beginTx();
          members.forEach((m, i) => tx.map(GovTables.membersInfo, json).put(`m${i}`, { status: m.active ? 'Active' : 'Accepted', member_data: null }));
          const votes = members.flatMap((m, i) => (m.vote === undefined ? [] : [{ member_id: `m${i}`, vote: m.vote }]));
          const host = createConstitutionHost(tx);
          const state = engine.run(
            { source: DEFAULT_CONSTITUTION, filename: 'constitution', prelude: host.prelude, host: host.functions, limits: TEST_LIMITS },
            (m) => m.call('resolve', ['{"actions":[]}', 'm0', votes]),
          );
          const active = members.filter((m) => m.active);
          const needed = Math.floor(active.length / 2) + 1;
          const inFavour = active.filter((m) => m.vote === true).length;
          const against = active.filter((m) => m.vote === false).length;
          const expected = inFavour >= needed ? 'Accepted' : active.length - against < needed ? 'Rejected' : 'Open';
          assert.equal(state, expected);
        },
      ),
      { numRuns: 60 },
    );
  });
});
