/**
 * Token issuers through governance with large key sets: an issuer with the most keys it may have
 * (JWT_ISSUER_KEYS_MAX) is set with an inline JWKS and removed within the member JavaScript budget
 * (300 ms here as in a node); one more key is refused with the reason; an issuer whose thousands of
 * keys were stored before the bound existed is still removed. Other issuers' keys are kept.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import { CovenantError } from '../../src/base/errors.js';
import { GovTables } from '../../src/gov/index.js';
import { JWT_ISSUER_KEYS_MAX, metadataFromJwks, type KeyMetadata } from '../../src/jwt/index.js';
import { jsonCodec } from '../../src/kv/index.js';
import { fixture, type Fixture } from './helpers.js';

const json = jsonCodec<any>();
const ISSUER = 'https://idp.example';
const OTHER = 'https://other.example';

function ecKeys(count: number, prefix: string): Record<string, unknown>[] {
  return Array.from({ length: count }, (_, i) => {
    const { publicKey } = nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    return { ...publicKey.export({ format: 'jwk' }), kid: `${prefix}${i}` };
  });
}

function signingKeys(f: Fixture): Map<string, KeyMetadata[]> {
  const out = new Map<string, KeyMetadata[]>();
  f.read((tx) => tx.map(GovTables.jwtPublicSigningKeys, json).forEach((v: KeyMetadata[], k: string) => void out.set(k, v)));
  return out;
}

/**
 * The first evaluation on a fresh sandbox worker pays for starting the engine, which on a busy
 * machine alone can pass the budget; what these tests measure is the work on an issuer's keys.
 * A proposal without actions is refused either way: only the engine's start is wanted. Then, as
 * the HTTP frontend does before each request, the test waits for a ready worker.
 */
async function warmUp(f: Fixture): Promise<void> {
  await f.gov.ready();
  try {
    f.propose(f.members[0]!, []);
  } catch (e) {
    // Refused for having no action, or because the engine's start alone took the budget.
    assert.ok(e instanceof CovenantError && ['ProposalFailedToValidate', 'ConstitutionFailure'].includes(e.code), String(e));
  }
  await f.gov.ready();
}

/** Proposes and votes for `actions`, waiting for a ready sandbox worker before each request as the HTTP frontend does. */
async function proposeAndVote(f: Fixture, actions: unknown[]) {
  const [m] = f.members as [typeof f.members[0]];
  await f.gov.ready();
  const id = f.propose(m, actions);
  await f.gov.ready();
  return f.vote(m, id, true);
}

const kidsOf = (f: Fixture, issuer: string) => [...signingKeys(f)].filter(([, list]) => list.some((m) => m.issuer === issuer)).length;

describe('token issuers with large key sets', () => {
  const keys = ecKeys(JWT_ISSUER_KEYS_MAX + 1, 'k');

  test('an issuer with the most keys it may have is set and removed; the other issuer\u2019s entry under a shared kid stays', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    await warmUp(f);
    const accepted = async (actions: unknown[]) => {
      const after = await proposeAndVote(f, actions);
      assert.equal(after.state, 'Accepted', JSON.stringify(after.failure));
    };
    await accepted([{ name: 'set_jwt_issuer', args: { issuer: OTHER, jwks: { keys: [keys[0]] } } }]);
    await accepted([{ name: 'set_jwt_issuer', args: { issuer: ISSUER, jwks: { keys: keys.slice(0, JWT_ISSUER_KEYS_MAX) } } }]);
    assert.equal(kidsOf(f, ISSUER), JWT_ISSUER_KEYS_MAX);
    // What the constitution stores is what the primary's refresh would store for the same set.
    const expected = metadataFromJwks(ISSUER, { keys: keys.slice(0, JWT_ISSUER_KEYS_MAX) });
    assert.deepEqual(signingKeys(f).get('k7'), [expected.get('k7')]);
    assert.deepEqual(signingKeys(f).get('k0')!.map((m) => m.issuer), [OTHER, ISSUER]);
    await accepted([{ name: 'set_jwt_public_signing_keys', args: { issuer: ISSUER, jwks: { keys: keys.slice(1, 3) } } }]);
    assert.equal(kidsOf(f, ISSUER), 2, 'replaced, not added to');
    await accepted([{ name: 'set_jwt_public_signing_keys', args: { issuer: ISSUER, jwks: { keys: keys.slice(0, JWT_ISSUER_KEYS_MAX) } } }]);
    await accepted([{ name: 'remove_jwt_issuer', args: { issuer: ISSUER } }]);
    assert.equal(kidsOf(f, ISSUER), 0);
    assert.deepEqual([...signingKeys(f).keys()], ['k0']);
    assert.deepEqual(signingKeys(f).get('k0')!.map((m) => m.issuer), [OTHER]);
  });

  test('one key more than the bound, or a duplicate kid, is refused at validation with the reason', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    await warmUp(f);
    const reason = async (args: unknown) => {
      await f.gov.ready();
      const before = f.store.version;
      try {
        f.propose(m, [{ name: 'set_jwt_issuer', args }]);
      } catch (e) {
        assert.ok(e instanceof CovenantError);
        assert.equal(e.code, 'ProposalFailedToValidate');
        assert.equal(f.store.version, before);
        return e.message;
      }
      assert.fail('refused');
    };
    assert.match(await reason({ issuer: ISSUER, jwks: { keys } }), new RegExp(`"jwks.keys" has ${JWT_ISSUER_KEYS_MAX + 1} keys, more than the ${JWT_ISSUER_KEYS_MAX} an issuer may have`));
    assert.match(await reason({ issuer: ISSUER, jwks: { keys: [keys[0], keys[1], { ...keys[2], kid: 'k0' }] } }), /"jwks.keys\[2\].kid": kid k0 appears twice/);
    assert.match(await reason({ issuer: ISSUER, jwks: { keys: [{ kty: 'EC', kid: 'c', x5c: ['AAAA'] }] } }), /"jwks.keys\[0\].x5c\[0\]": invalid certificate/);
    assert.match(await reason({ issuer: ISSUER, jwks: { keys: [] } }), /"jwks.keys" must be a non-empty array/);
  });

  test('an issuer with thousands of keys stored before the bound existed is removed within the budget', async () => {
    const f = await fixture();
    const [m] = f.members as [typeof f.members[0]];
    f.activate(m);
    await warmUp(f);
    const [one] = ecKeys(1, 'x');
    const metadata = metadataFromJwks(ISSUER, { keys: [one] }).get('x0')!;
    f.write((tx) => {
      tx.map(GovTables.jwtIssuers, json).put(ISSUER, { auto_refresh: false });
      const table = tx.map(GovTables.jwtPublicSigningKeys, json);
      for (let i = 0; i < 7000; i++) table.put(`old${i}`, [metadata]);
    });
    const after = await proposeAndVote(f, [{ name: 'remove_jwt_issuer', args: { issuer: ISSUER } }]);
    assert.equal(after.state, 'Accepted', JSON.stringify(after.failure));
    assert.equal(signingKeys(f).size, 0);
  });
});
