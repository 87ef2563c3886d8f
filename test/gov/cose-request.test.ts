/**
 * Verification of signed governance requests: the good case, then every kind of bad request,
 * each refused with its own code and status.
 */
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Encoder, Tag } from 'cbor-x';
import { CovenantError } from '../../src/base/errors.js';
import { decodeCbor, encodeCbor, generateIdentity, type Identity, signCoseSign1, loadPrivateKey } from '../../src/crypto/index.js';
import { signGovRequest, verifyGovRequest, type VerifyGovRequestOptions } from '../../src/gov/index.js';

const NOW_MS = 1_700_000_000_000;
const NOW_S = NOW_MS / 1000;

function refusal(fn: () => unknown): { code: string; status: number; message: string } {
  try {
    fn();
  } catch (e) {
    assert.ok(e instanceof CovenantError, String(e));
    return { code: e.code, status: e.status, message: e.message };
  }
  assert.fail('expected the request to be refused');
}

describe('governance request verification', () => {
  let alice: Identity;
  let bob: Identity;
  let carol256: Identity;
  let options: VerifyGovRequestOptions;

  before(async () => {
    [alice, bob, carol256] = await Promise.all([
      generateIdentity({ commonName: 'alice' }),
      generateIdentity({ commonName: 'bob' }),
      generateIdentity({ commonName: 'carol', curve: 'P-256' }),
    ]);
    const certs = new Map([alice, carol256].map((m) => [m.id, m.certificatePem]));
    options = { contentType: 'application/cose', expectedType: 'proposal', nowMs: NOW_MS, memberCertificate: (id) => certs.get(id) };
  });

  const sign = (m: Identity, extra: Partial<Parameters<typeof signGovRequest>[0]> = {}) =>
    signGovRequest({ type: 'proposal', payload: '{"actions":[]}', privateKeyPem: m.privateKeyPem, memberId: m.id, createdAtSeconds: NOW_S, ...extra });

  test('a well-signed request verifies and yields its fields (P-384 and P-256 keys)', () => {
    const v = verifyGovRequest(sign(alice), options);
    assert.equal(v.memberId, alice.id);
    assert.equal(v.type, 'proposal');
    assert.equal(v.createdAtSeconds, NOW_S);
    assert.equal(Buffer.from(v.payload).toString(), '{"actions":[]}');
    assert.equal(v.envelope.alg, -35);
    const ballot = signGovRequest({ type: 'ballot', payload: '{}', privateKeyPem: carol256.privateKeyPem, memberId: carol256.id, createdAtSeconds: NOW_S, proposalId: 'p1' });
    const vb = verifyGovRequest(ballot, { ...options, expectedType: 'ballot', proposalId: 'p1', memberIdInPath: carol256.id });
    assert.equal(vb.envelope.alg, -7);
    assert.equal(vb.proposalId, 'p1');
    // Content type parameters are tolerated.
    assert.equal(verifyGovRequest(sign(alice), { ...options, contentType: 'application/cose; charset=binary' }).memberId, alice.id);
  });

  test('the header is tagged COSE_Sign1 with the names of the design', () => {
    const decoded = decodeCbor(sign(alice, { proposalId: 'p' })) as Tag;
    assert.equal(decoded.tag, 18);
    const header = decodeCbor((decoded.value as Uint8Array[])[0]!) as Map<unknown, unknown>;
    assert.deepEqual([...header.keys()], [1, 4, 'svc.gov.msg.type', 'svc.gov.msg.created_at', 'svc.gov.msg.proposal_id']);
    assert.equal(Buffer.from(header.get(4) as Uint8Array).toString(), alice.id);
  });

  test('an unknown signer is refused', () => {
    const r = refusal(() => verifyGovRequest(sign(bob), options));
    assert.deepEqual([r.code, r.status], ['InvalidAuthenticationInfo', 401]);
    assert.match(r.message, /no member/);
  });

  test('a signature by another key (kid of a member, key of someone else) is refused', () => {
    const forged = signGovRequest({ type: 'proposal', payload: '{}', privateKeyPem: bob.privateKeyPem, memberId: alice.id, createdAtSeconds: NOW_S });
    const r = refusal(() => verifyGovRequest(forged, options));
    assert.deepEqual([r.code, r.status], ['InvalidAuthenticationInfo', 401]);
    assert.match(r.message, /signature does not verify/);
  });

  test('any flipped bit of payload or signature is refused', () => {
    const good = sign(alice);
    for (const index of [good.length - 1, good.length - 50, good.length - 110]) {
      const bad = good.slice();
      bad[index]! ^= 0x01;
      const r = refusal(() => verifyGovRequest(bad, options));
      assert.equal(r.status, 401, `byte ${index}`);
    }
  });

  test('a payload swapped under a valid signature is refused', () => {
    const tag = decodeCbor(sign(alice)) as Tag;
    const [p, u, , s] = tag.value as unknown[];
    const swapped = encodeCbor(new Tag([p, u, Buffer.from('{"actions":[{"name":"evil"}]}'), s], 18));
    assert.equal(refusal(() => verifyGovRequest(swapped, options)).code, 'InvalidAuthenticationInfo');
  });

  test('an untagged COSE_Sign1, valid otherwise, is refused with 400 UntaggedCoseSign1', () => {
    const tag = decodeCbor(sign(alice)) as Tag;
    const untagged = encodeCbor(tag.value);
    const r = refusal(() => verifyGovRequest(untagged, options));
    assert.deepEqual([r.code, r.status], ['UntaggedCoseSign1', 400]);
    assert.equal(verifyGovRequest(sign(alice), options).memberId, alice.id, 'the tagged envelope is accepted');
  });

  test('a message type that does not match the endpoint is refused', () => {
    const r = refusal(() => verifyGovRequest(sign(alice, { type: 'ballot', proposalId: 'x' }), options));
    assert.deepEqual([r.code, r.status], ['InvalidAuthenticationInfo', 401]);
    assert.match(r.message, /does not match/);
  });

  test('created_at far from the clock is refused; within five minutes it is accepted', () => {
    for (const delta of [-301, 301, -86_400]) {
      const r = refusal(() => verifyGovRequest(sign(alice, { createdAtSeconds: NOW_S + delta }), options));
      assert.deepEqual([r.code, r.status], ['InvalidCreatedAt', 400]);
    }
    for (const delta of [-300, 300]) assert.equal(verifyGovRequest(sign(alice, { createdAtSeconds: NOW_S + delta }), options).memberId, alice.id);
  });

  test('a ballot must name the proposal of the path, and a member path must name the signer', () => {
    const ballot = (proposalId?: string) =>
      signGovRequest({ type: 'ballot', payload: '{}', privateKeyPem: alice.privateKeyPem, memberId: alice.id, createdAtSeconds: NOW_S, ...(proposalId ? { proposalId } : {}) });
    const ballotOptions = { ...options, expectedType: 'ballot' as const, proposalId: 'p1' };
    assert.match(refusal(() => verifyGovRequest(ballot(), ballotOptions)).message, /required/);
    assert.match(refusal(() => verifyGovRequest(ballot('p2'), ballotOptions)).message, /does not match proposal p1/);
    assert.match(refusal(() => verifyGovRequest(ballot('p1'), { ...ballotOptions, memberIdInPath: carol256.id })).message, /path names member/);
  });

  test('missing or malformed headers are refused', () => {
    const key = loadPrivateKey(alice.privateKeyPem);
    const build = (entries: [number | string, unknown][]) => signCoseSign1({ protectedHeader: new Map(entries), payload: Buffer.from('{}'), privateKey: key });
    const kid = Buffer.from(alice.id);
    const cases: [string, Uint8Array][] = [
      ['no kid', build([['svc.gov.msg.type', 'proposal'], ['svc.gov.msg.created_at', NOW_S]])],
      ['kid not a member id', build([[4, Buffer.from('someone')], ['svc.gov.msg.type', 'proposal'], ['svc.gov.msg.created_at', NOW_S]])],
      ['no type', build([[4, kid], ['svc.gov.msg.created_at', NOW_S]])],
      ['no created_at', build([[4, kid], ['svc.gov.msg.type', 'proposal']])],
      ['created_at as text', build([[4, kid], ['svc.gov.msg.type', 'proposal'], ['svc.gov.msg.created_at', String(NOW_S)]])],
    ];
    for (const [what, bytes] of cases) {
      const r = refusal(() => verifyGovRequest(bytes, options));
      assert.deepEqual([r.code, r.status], ['InvalidAuthenticationInfo', 401], what);
    }
  });

  test('bytes that are not COSE_Sign1, and the wrong content type, are refused', () => {
    for (const bytes of [Buffer.from('{"actions":[]}'), Buffer.alloc(0), new Encoder().encode([1, 2, 3])]) {
      assert.equal(refusal(() => verifyGovRequest(bytes, options)).code, 'InvalidAuthenticationInfo');
    }
    for (const contentType of ['application/json', undefined]) {
      const r = refusal(() => verifyGovRequest(sign(alice), { ...options, contentType }));
      assert.deepEqual([r.code, r.status], ['UnsupportedContentType', 415]);
    }
  });
});
