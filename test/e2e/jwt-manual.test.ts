/**
 * End to end: a manual token issuer on a real node process. Keys registered by governance (an
 * x5c certificate chain, RSA key parameters, another issuer's key with a constraint), tokens that
 * write and read in the logging app, the caller endpoint, hostile tokens each refused with its
 * reason (and nothing written), key sets that do not parse refused, and remove_jwt_issuer.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import { SignJWT, base64url } from 'jose';
import { generateIdentity } from '../../src/crypto/index.js';
import { removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { applyActions, bearer, mustApply } from '../../src/testing/jwt.js';

const ISSUER = 'https://manual.example';
const OTHER = 'https://other.example';
const nowS = () => Math.floor(Date.now() / 1000);

describe('a manual token issuer', () => {
  let node: StartedNode;
  let ecKey: nodeCrypto.KeyObject;
  const rsa = nodeCrypto.generateKeyPairSync('rsa', { modulusLength: 2048 });
  const otherKey = nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });

  const sign = (claims: Record<string, unknown>, header: Record<string, unknown> = { alg: 'ES256', kid: 'x5c-key' }, key: nodeCrypto.KeyObject = ecKey) =>
    new SignJWT(claims).setProtectedHeader(header as { alg: string }).sign(key);
  const claims = (extra: Record<string, unknown> = {}) => ({ iss: ISSUER, sub: 'alice', exp: nowS() + 300, ...extra });
  const write = (token: string, id: number, msg = 'hi') => node.client.request('POST', '/app/log/private', { body: { id, msg }, headers: bearer(token) });

  before(async () => {
    node = await startNode();
    const identity = await generateIdentity({ commonName: 'token signer', curve: 'P-256' });
    ecKey = nodeCrypto.createPrivateKey(identity.privateKeyPem);
    const der = new nodeCrypto.X509Certificate(identity.certificatePem).raw.toString('base64');
    const rsaJwk = rsa.publicKey.export({ format: 'jwk' });
    const otherJwk = otherKey.publicKey.export({ format: 'jwk' });
    await mustApply(node, [
      { name: 'set_jwt_issuer', args: { issuer: ISSUER, jwks: { keys: [{ kty: 'EC', kid: 'x5c-key', x5c: [der] }, { ...rsaJwk, kid: 'rsa-key' }] } } },
      { name: 'set_jwt_issuer', args: { issuer: OTHER, jwks: { keys: [{ ...otherJwk, kid: 'other-key', issuer: 'https://other.example/{tenantid}' }] } } },
    ]);
  });
  after(async () => {
    if (!node) return;
    await node.stop();
    removeDir(node.dir);
  });

  test('governance stores the keys; key sets that do not parse are refused and change nothing', async () => {
    const jwk = (await node.client.request('GET', '/gov/service/jwk')).body;
    assert.deepEqual(Object.keys(jwk.keys).sort(), ['other-key', 'rsa-key', 'x5c-key']);
    assert.equal(jwk.keys['x5c-key'][0].issuer, ISSUER);
    assert.match(jwk.keys['x5c-key'][0].cert, /BEGIN CERTIFICATE/);
    assert.match(jwk.keys['rsa-key'][0].public_key, /BEGIN PUBLIC KEY/);
    assert.equal(jwk.keys['other-key'][0].constraint, 'https://other.example/{tenantid}');
    const priv = otherKey.privateKey.export({ format: 'jwk' });
    for (const jwks of [{ keys: [{ ...priv, kid: 'leak' }] }, { keys: [{ kty: 'EC', kid: 'bad', x5c: ['!!'] }] }, { keys: [{ kty: 'RSA', kid: 'short', n: 'AQAB', e: 'AQAB' }] }]) {
      const outcome = await applyActions(node, [{ name: 'set_jwt_public_signing_keys', args: { issuer: ISSUER, jwks } }]);
      assert.notEqual(outcome.state, 'Accepted', JSON.stringify(jwks));
    }
    const unknown = await applyActions(node, [{ name: 'set_jwt_public_signing_keys', args: { issuer: 'https://nobody.example', jwks: { keys: [{ ...otherKey.publicKey.export({ format: 'jwk' }), kid: 'n' }] } } }]);
    assert.notEqual(unknown.state, 'Accepted');
    assert.deepEqual((await node.client.request('GET', '/gov/service/jwk')).body, jwk);
  });

  test('a token writes and reads; the caller endpoint shows its issuer, subject and claims', async () => {
    const token = await sign(claims());
    const written = await write(token, 1, 'by token');
    assert.equal(written.status, 200, written.text);
    const read = await node.client.request('GET', '/app/log/private?id=1', { headers: bearer(token) });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.msg, 'by token');
    const caller = await node.client.request('GET', '/app/caller', { headers: bearer(token) });
    assert.equal(caller.status, 200, caller.text);
    assert.deepEqual([caller.body.policy, caller.body.issuer, caller.body.subject], ['jwt', ISSUER, 'alice']);
    assert.equal(caller.body.claims.sub, 'alice');
    const rsaToken = await sign(claims({ sub: 'bob' }), { alg: 'PS256', kid: 'rsa-key' }, rsa.privateKey);
    assert.equal((await node.client.request('GET', '/app/caller', { headers: bearer(rsaToken) })).body.subject, 'bob');
    const byCert = await node.client.request('GET', '/app/caller', { identity: node.user });
    assert.deepEqual(byCert.body, { policy: 'user_cert', user_id: node.user.id });
    const otherTenant = await sign({ iss: 'https://other.example/t1', sub: 'tenant', exp: nowS() + 60 }, { alg: 'ES256', kid: 'other-key' }, otherKey.privateKey);
    assert.equal((await node.client.request('GET', '/app/caller', { headers: bearer(otherTenant) })).body.issuer, 'https://other.example/t1');
  });

  test('hostile tokens: 401 with the reason and WWW-Authenticate, nothing written, the node unharmed', async () => {
    const b64 = (v: unknown) => base64url.encode(JSON.stringify(v));
    const rsaPem = rsa.publicKey.export({ format: 'pem', type: 'spki' }).toString();
    const truncated = await sign(claims());
    const cases: [string, string, string][] = [
      ['expired', await sign(claims({ exp: nowS() - 60 })), 'TokenExpired'],
      ['nbf in the future', await sign(claims({ nbf: nowS() + 3600 })), 'TokenNotYetValid'],
      ['no exp', await sign({ iss: ISSUER, sub: 'alice' }), 'TokenMalformed'],
      ['unknown kid', await sign(claims(), { alg: 'ES256', kid: 'nope' }), 'TokenKeyUnknown'],
      ['wrong issuer', await sign(claims({ iss: 'https://evil.example' })), 'TokenIssuerInvalid'],
      ['kid of another issuer, constraint not met', await sign(claims({ iss: 'https://evil.example/t1' }), { alg: 'ES256', kid: 'other-key' }, otherKey.privateKey), 'TokenIssuerInvalid'],
      ['signed by another key', await sign(claims(), { alg: 'ES256', kid: 'x5c-key' }, otherKey.privateKey), 'TokenSignatureInvalid'],
      ['alg none', `${b64({ alg: 'none', kid: 'x5c-key' })}.${b64(claims())}.`, 'TokenAlgorithmNotAllowed'],
      ['HS256 keyed with the RSA public key', await new SignJWT(claims()).setProtectedHeader({ alg: 'HS256', kid: 'rsa-key' }).sign(new TextEncoder().encode(rsaPem)), 'TokenAlgorithmNotAllowed'],
      ['truncated signature', truncated.slice(0, truncated.length - 12), 'TokenSignatureInvalid'],
      ['garbage base64', '%%%.$$$.&&&', 'TokenMalformed'],
      ['not Bearer', '', 'TokenMalformed'],
    ];
    for (const [what, token, code] of cases) {
      const answer = token === ''
        ? await node.client.request('POST', '/app/log/private', { body: { id: 2, msg: 'x' }, headers: { authorization: 'Basic YWxpY2U6c2VjcmV0' } })
        : await write(token, 2, what);
      assert.equal(answer.status, 401, `${what}: ${answer.text}`);
      assert.equal(answer.body.error.code, code, `${what}: ${answer.text}`);
      if (code !== 'TokenMalformed' || token !== '') assert.match(String(answer.headers['www-authenticate']), /^Bearer .*error="invalid_token"/, what);
    }
    const huge = await node.client.request('POST', '/app/log/private', { body: { id: 2, msg: 'x' }, headers: bearer('a'.repeat(1024 * 1024)) }).catch((e: Error) => e);
    assert.ok(!(huge instanceof Error), `a 1 MB token gets an answer: ${String(huge)}`);
    assert.equal(huge.status, 431);
    assert.equal(huge.body.error.code, 'RequestHeaderTooLarge');
    const read = await node.client.request('GET', '/app/log/private?id=2', { identity: node.user });
    assert.equal(read.status, 404, 'nothing was written');
    assert.equal((await node.client.request('GET', '/node/state')).body.state, 'PartOfNetwork');
  });

  test('remove_jwt_issuer makes its tokens unusable at once', async () => {
    const token = await sign(claims({ sub: 'soon gone' }));
    assert.equal((await write(token, 3)).status, 200);
    await mustApply(node, [{ name: 'remove_jwt_issuer', args: { issuer: ISSUER } }]);
    const answer = await write(token, 4);
    assert.equal(answer.status, 401, answer.text);
    assert.equal(answer.body.error.code, 'TokenKeyUnknown');
    const jwk = (await node.client.request('GET', '/gov/service/jwk')).body;
    assert.deepEqual(Object.keys(jwk.keys), ['other-key']);
    assert.deepEqual(Object.keys(jwk.issuers), [OTHER]);
  });
});
