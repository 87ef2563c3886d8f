/**
 * Token validation against stored key metadata, with a fake clock and an in-memory table: every
 * refusal has its code, a verified token is remembered until its key's stored bytes change.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import { CompactSign, SignJWT, base64url, exportJWK } from 'jose';
import { generateIdentity } from '../../src/crypto/index.js';
import { TOKEN_CLAIMS_DEPTH_MAX, TOKEN_ERROR_CODES, TokenValidator, metadataFromJwks, satisfiesConstraint, isTokenError, type KeyMetadata } from '../../src/jwt/index.js';

const ISSUER = 'https://issuer.example';
const NOW_MS = Date.UTC(2030, 0, 1);
const nowS = NOW_MS / 1000;

async function expectCode(p: unknown, code: string): Promise<void> {
  try {
    await p;
  } catch (e) {
    assert.ok(isTokenError(e), `a TokenError, not ${String(e)}`);
    assert.equal(e.code, code, e.message);
    assert.equal(e.status, 401);
    return;
  }
  assert.fail(`expected ${code}`);
}

function table() {
  const rows = new Map<string, Uint8Array>();
  return {
    rows,
    set(kid: string, list: KeyMetadata[]) {
      rows.set(kid, new TextEncoder().encode(JSON.stringify(list)));
    },
    lookup: (kid: string) => rows.get(kid),
  };
}

describe('TokenValidator', async () => {
  // node:crypto KeyObjects: one RSA key signs RS256 and PS256 alike (a CryptoKey is bound to one).
  const rsa = nodeCrypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const ec = nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const other = nodeCrypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const rsaJwk = { ...(await exportJWK(rsa.publicKey)), kid: 'rsa1' };
  const ecJwk = { ...(await exportJWK(ec.publicKey)), kid: 'ec1' };
  const keys = table();
  for (const [kid, m] of metadataFromJwks(ISSUER, { keys: [rsaJwk, ecJwk] })) keys.set(kid, [m]);
  let clock = NOW_MS;
  const validator = new TokenValidator({ lookup: keys.lookup, nowMs: () => clock });

  const sign = (claims: Record<string, unknown>, header: Record<string, unknown> = { alg: 'RS256', kid: 'rsa1' }, key: nodeCrypto.KeyObject = rsa.privateKey) =>
    new SignJWT(claims).setProtectedHeader(header as { alg: string }).sign(key);
  const good = (extra: Record<string, unknown> = {}) => ({ iss: ISSUER, sub: 'alice', exp: nowS + 60, ...extra });

  test('RS256, PS256 and ES256 tokens give their identity; a second use needs no signature check', async () => {
    const token = await sign(good());
    const first = await validator.validate(token);
    assert.deepEqual([first.issuer, first.subject], [ISSUER, 'alice']);
    const again = validator.validate(token);
    assert.ok(!(again instanceof Promise), 'remembered: answered synchronously');
    assert.equal(again.subject, 'alice');
    assert.equal((await validator.validate(await sign(good(), { alg: 'PS256', kid: 'rsa1' }))).subject, 'alice');
    assert.equal((await validator.validate(await sign(good({ sub: 'bob' }), { alg: 'ES256', kid: 'ec1' }, ec.privateKey))).subject, 'bob');
  });

  test('time: expired, not yet valid, no exp; a remembered token expires too', async () => {
    await expectCode(validator.validate(await sign(good({ exp: nowS - 1 }))), 'TokenExpired');
    await expectCode(validator.validate(await sign(good({ exp: nowS }))), 'TokenExpired');
    await expectCode(validator.validate(await sign(good({ nbf: nowS + 30 }))), 'TokenNotYetValid');
    await expectCode(validator.validate(await sign({ iss: ISSUER, sub: 'x' })), 'TokenMalformed');
    const token = await sign(good({ exp: nowS + 10 }));
    await validator.validate(token);
    clock = NOW_MS + 10_000;
    await expectCode(Promise.resolve().then(() => validator.validate(token)), 'TokenExpired');
    clock = NOW_MS;
  });

  test('exp and nbf: an integer number of seconds; Infinity (1e400), fractions and strings are TokenMalformed, even validly signed', async () => {
    // Signed over the payload text as written: 1e400 has no JSON form in JavaScript (it parses as Infinity).
    const signText = (payload: string) => new CompactSign(new TextEncoder().encode(payload)).setProtectedHeader({ alg: 'RS256', kid: 'rsa1' }).sign(rsa.privateKey);
    const cases: [string, RegExp][] = [
      [`{"iss":"${ISSUER}","sub":"a","exp":1e400}`, /exp claim must be an integer number of seconds since the epoch, not Infinity/],
      [`{"iss":"${ISSUER}","sub":"a","exp":${nowS + 60}.5}`, /exp claim .* not \d+\.5/],
      [`{"iss":"${ISSUER}","sub":"a","exp":"${nowS + 60}"}`, /exp claim .* not a string/],
      [`{"iss":"${ISSUER}","sub":"a","exp":${nowS + 60},"nbf":-1e400}`, /nbf claim .* not -Infinity/],
      [`{"iss":"${ISSUER}","sub":"a","exp":${nowS + 60},"nbf":1.5}`, /nbf claim .* not 1\.5/],
      [`{"iss":"${ISSUER}","sub":"a","exp":${nowS + 60},"nbf":null}`, /nbf claim .* not a object/],
    ];
    for (const [payload, reason] of cases) {
      const refused = await Promise.resolve(validator.validate(await signText(payload))).then(() => undefined, (e: unknown) => e);
      assert.ok(isTokenError(refused), payload);
      assert.equal(refused.code, 'TokenMalformed', payload);
      assert.match(refused.message, reason);
    }
    assert.equal((await validator.validate(await signText(`{"iss":"${ISSUER}","sub":"ok","exp":${nowS + 60},"nbf":${nowS - 1}}`))).subject, 'ok');
  });

  test('claims nested deeper than TOKEN_CLAIMS_DEPTH_MAX are TokenMalformed, however deep; at the bound they are accepted', async () => {
    const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);
    // The payload text as written (jose's token builder copies claims recursively); the payload object is level 1.
    const signNested = (depth: number) =>
      new CompactSign(new TextEncoder().encode(`{"iss":"${ISSUER}","sub":"deep","exp":${nowS + 60},"deep":${nested(depth)}}`)).setProtectedHeader({ alg: 'RS256', kid: 'rsa1' }).sign(rsa.privateKey);
    await expectCode(validator.validate(await signNested(5000)), 'TokenMalformed');
    await expectCode(validator.validate(await signNested(TOKEN_CLAIMS_DEPTH_MAX)), 'TokenMalformed');
    const atBound = await validator.validate(await signNested(TOKEN_CLAIMS_DEPTH_MAX - 1));
    assert.equal(atBound.subject, 'deep');
  });

  test('keys and issuers: unknown kid, wrong issuer, the other key, a constraint', async () => {
    await expectCode(validator.validate(await sign(good(), { alg: 'RS256', kid: 'nope' })), 'TokenKeyUnknown');
    await expectCode(validator.validate(await sign(good({ iss: 'https://elsewhere' }))), 'TokenIssuerInvalid');
    await expectCode(validator.validate(await sign(good(), { alg: 'RS256', kid: 'rsa1' }, other.privateKey)), 'TokenSignatureInvalid');
    // A key of another issuer with a constraint: iss must satisfy it.
    const multi = table();
    const jwk = { ...(await exportJWK(other.publicKey)), kid: 'shared', issuer: 'https://login.example/{tenantid}/v2.0' };
    for (const [kid, m] of metadataFromJwks('https://login.example/common/v2.0', { keys: [jwk] })) multi.set(kid, [m]);
    const v = new TokenValidator({ lookup: multi.lookup, nowMs: () => NOW_MS });
    const signOther = (iss: string) => new SignJWT({ iss, sub: 's', exp: nowS + 60 }).setProtectedHeader({ alg: 'RS256', kid: 'shared' }).sign(other.privateKey);
    assert.equal((await v.validate(await signOther('https://login.example/tenant-a/v2.0'))).issuer, 'https://login.example/tenant-a/v2.0');
    assert.equal((await v.validate(await signOther('https://login.example/common/v2.0'))).issuer, 'https://login.example/common/v2.0');
    await expectCode(v.validate(await signOther('https://evil.example/tenant-a/v2.0')), 'TokenIssuerInvalid');
    await expectCode(v.validate(await signOther('https://login.example/a/b/v2.0')), 'TokenIssuerInvalid');
  });

  test('hostile tokens: alg none, HS256 keyed with the public key, truncated signature, garbage, oversized', async () => {
    const b64 = (v: unknown) => base64url.encode(JSON.stringify(v));
    await expectCode(validator.validate(`${b64({ alg: 'none', kid: 'rsa1' })}.${b64(good())}.`), 'TokenAlgorithmNotAllowed');
    const pem = nodeCrypto.createPublicKey({ key: rsaJwk as nodeCrypto.JsonWebKey, format: 'jwk' }).export({ format: 'pem', type: 'spki' }).toString();
    const hs = await new SignJWT(good()).setProtectedHeader({ alg: 'HS256', kid: 'rsa1' }).sign(new TextEncoder().encode(pem));
    await expectCode(validator.validate(hs), 'TokenAlgorithmNotAllowed');
    // ES256 header on the RSA key.
    await expectCode(validator.validate(await sign(good(), { alg: 'ES256', kid: 'rsa1' }, ec.privateKey)), 'TokenAlgorithmNotAllowed');
    const token = await sign(good({ sub: 'truncated' }));
    await expectCode(validator.validate(token.slice(0, token.length - 20)), 'TokenSignatureInvalid');
    await expectCode(validator.validate('!!!.@@@.###'), 'TokenMalformed');
    await expectCode(validator.validate('a.b.c'), 'TokenMalformed');
    await expectCode(validator.validate(`${b64({ alg: 'RS256', kid: 'rsa1' })}.bm90IGpzb24.sig`), 'TokenMalformed');
    await expectCode(validator.validate('x'.repeat(20_000)), 'TokenMalformed');
  });

  test('a key removed or replaced in the store stops its tokens at once', async () => {
    const token = await sign(good({ sub: 'carol' }));
    await validator.validate(token);
    const saved = keys.rows.get('rsa1')!;
    keys.rows.delete('rsa1');
    await expectCode(Promise.resolve().then(() => validator.validate(token)), 'TokenKeyUnknown');
    const [, otherMeta] = [...metadataFromJwks(ISSUER, { keys: [{ ...(await exportJWK(other.publicKey)), kid: 'rsa1' }] })][0]!;
    keys.set('rsa1', [otherMeta]);
    await expectCode(Promise.resolve().then(() => validator.validate(token)), 'TokenSignatureInvalid');
    keys.rows.set('rsa1', saved);
  });
});

describe('stored key metadata', () => {
  test('x5c and key parameters give the same public key; private keys and bad key sets are refused', async () => {
    const identity = await generateIdentity({ commonName: 'signer', curve: 'P-256' });
    const der = new nodeCrypto.X509Certificate(identity.certificatePem).raw.toString('base64');
    const fromCert = metadataFromJwks(ISSUER, { keys: [{ kty: 'EC', kid: 'c', x5c: [der] }] }).get('c')!;
    const jwk = nodeCrypto.createPublicKey(identity.certificatePem).export({ format: 'jwk' });
    const fromParams = metadataFromJwks(ISSUER, { keys: [{ ...jwk, kid: 'c' }] }).get('c')!;
    assert.equal(fromCert.public_key, fromParams.public_key);
    assert.ok(fromCert.cert?.includes('BEGIN CERTIFICATE'));
    assert.equal(fromParams.cert, undefined);
    const priv = nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' }).privateKey.export({ format: 'jwk' });
    assert.throws(() => metadataFromJwks(ISSUER, { keys: [{ ...priv, kid: 'p' }] }), /private parameter/);
    assert.throws(() => metadataFromJwks(ISSUER, { keys: [{ kty: 'RSA', kid: 'k', x5c: ['!!'] }] }), /base64/);
    assert.throws(() => metadataFromJwks(ISSUER, { keys: [{ kty: 'EC', kid: 'k', x5c: [der] }, { kty: 'EC', kid: 'k', x5c: [der] }] }), /twice/);
    assert.throws(() => metadataFromJwks(ISSUER, { nokeys: [] }), /keys/);
    assert.throws(() => metadataFromJwks(ISSUER, { keys: [{ kty: 'RSA', kid: 'k', x5c: [der] }] }), /kty is RSA/);
  });

  test('constraints: exact, or {tenantid} for one path segment', () => {
    assert.ok(satisfiesConstraint('https://a/x', 'https://a/x'));
    assert.ok(!satisfiesConstraint('https://a/x', 'https://a/y'));
    assert.ok(satisfiesConstraint('https://a/{tenantid}/v2', 'https://a/t1/v2'));
    assert.ok(!satisfiesConstraint('https://a/{tenantid}/v2', 'https://a//v2'));
    assert.ok(!satisfiesConstraint('https://a/{tenantid}/v2', 'https://a/t/1/v2'));
  });

  test('the token error codes', () => {
    assert.deepEqual([...TOKEN_ERROR_CODES], [
      'TokenMalformed', 'TokenAlgorithmNotAllowed', 'TokenKeyUnknown', 'TokenIssuerInvalid', 'TokenSignatureInvalid', 'TokenExpired', 'TokenNotYetValid',
    ]);
  });
});
