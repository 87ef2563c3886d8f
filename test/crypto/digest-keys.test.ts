import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import fc from 'fast-check';
import { toHex, fromHex, isCovenantError } from '../../src/base/index.js';
import {
  sha256, sha384, sha512, sha256Hex, digest, createHasher, hmacSha256, keyedHmacSha256,
  generateEcKeyPair, generateRsaKeyPair, publicKeyDer, nodeIdFromPublicKey, signEcdsa, verifyEcdsa,
  loadPrivateKey, loadPublicKey, wrapRsaOaep, unwrapRsaOaep, ecCurveOf,
} from '../../src/crypto/index.js';

test('SHA-2 digests match the FIPS 180 "abc" vectors', () => {
  assert.equal(toHex(sha256('abc')), 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  assert.equal(toHex(sha384('abc')), 'cb00753f45a35e8bb5a03d699ac65007272c32ab0eded1631a8b605a43ff5bed8086072ba1e7cc2358baeca134c825a7');
  assert.equal(
    toHex(sha512('abc')),
    'ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f',
  );
  assert.equal(sha256Hex('abc'), toHex(sha256('abc')));
  assert.deepEqual(digest('sha-384', 'abc'), sha384('abc'));
});

test('the incremental hasher equals the one-shot digest however the input is split', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 300 }), fc.array(fc.nat(300), { maxLength: 5 }), (data, cuts) => {
      for (const alg of ['sha-256', 'sha-384', 'sha-512'] as const) {
        const hasher = createHasher(alg);
        const points = [...new Set(cuts.map((c) => c % (data.length + 1)))].sort((a, b) => a - b);
        let from = 0;
        for (const p of [...points, data.length]) {
          hasher.update(data.subarray(from, p));
          from = p;
        }
        assert.deepEqual(hasher.digest(), digest(alg, data));
      }
    }),
  );
});

test('HMAC-SHA256 matches RFC 4231 test case 2, one-off and under a reused key', () => {
  const key = new TextEncoder().encode('Jefe');
  const expected = '5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843';
  assert.equal(toHex(hmacSha256(key, 'what do ya want for nothing?')), expected);
  const keyed = keyedHmacSha256(key);
  for (let i = 0; i < 3; i++) assert.equal(toHex(keyed('what do ya want for nothing?')), expected);
  assert.notEqual(toHex(keyed('what do ya want for nothing!')), expected);
  assert.equal(keyedHmacSha256(key, 'hex')('what do ya want for nothing?'), expected);
});

test('HMAC-SHA256 under a reused key equals createHmac for any key and message length', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 150 }), fc.oneof(fc.uint8Array({ maxLength: 400 }), fc.string({ maxLength: 200, unit: 'binary' })), (key, message) => {
      const expected = nodeCrypto.createHmac('sha256', key).update(message).digest('hex');
      assert.equal(toHex(keyedHmacSha256(key)(message)), expected);
      const keyed = keyedHmacSha256(key, 'hex');
      assert.equal(keyed(message), expected);
      assert.equal(keyed(message), expected, 'a second message under the same key');
    }),
  );
});

test('node id is the hex SHA-256 of the DER SubjectPublicKeyInfo, from a key or a PEM', () => {
  const pair = generateEcKeyPair('P-384');
  const expected = nodeCrypto.createHash('sha256').update(pair.publicKey.export({ format: 'der', type: 'spki' })).digest('hex');
  assert.equal(nodeIdFromPublicKey(pair.publicKey), expected);
  assert.equal(nodeIdFromPublicKey(pair.publicKeyPem), expected);
  assert.equal(nodeIdFromPublicKey(pair.privateKey), expected);
  assert.match(expected, /^[0-9a-f]{64}$/);
  assert.equal(publicKeyDer(pair.publicKey)[0], 0x30);
});

test('ECDSA signs with the hash of the curve, in both encodings, and rejects other data and keys', () => {
  for (const curve of ['P-384', 'P-256'] as const) {
    const pair = generateEcKeyPair(curve);
    const other = generateEcKeyPair(curve);
    assert.equal(ecCurveOf(pair.publicKey), curve);
    const data = new TextEncoder().encode('root');
    const hash = curve === 'P-384' ? 'sha384' : 'sha256';
    for (const encoding of ['der', 'ieee-p1363'] as const) {
      const sig = signEcdsa(pair.privateKey, data, encoding);
      assert.equal(verifyEcdsa(pair.publicKey, data, sig, encoding), true);
      // Independent check that the curve's hash was used.
      assert.equal(nodeCrypto.verify(hash, data, { key: pair.publicKey, dsaEncoding: encoding }, sig), true);
      assert.equal(verifyEcdsa(pair.publicKeyPem, data, sig, encoding), true);
      assert.equal(verifyEcdsa(other.publicKey, data, sig, encoding), false);
      assert.equal(verifyEcdsa(pair.publicKey, new TextEncoder().encode('rooT'), sig, encoding), false);
      assert.equal(verifyEcdsa(pair.publicKey, data, sig.subarray(1), encoding), false);
    }
    assert.equal(signEcdsa(pair.privateKey, data, 'ieee-p1363').byteLength, curve === 'P-384' ? 96 : 64);
  }
});

test('PEM keys load once and are cached; bad PEM is a typed InvalidKey error', () => {
  const pair = generateEcKeyPair('P-256');
  assert.equal(loadPrivateKey(pair.privateKeyPem), loadPrivateKey(pair.privateKeyPem));
  assert.equal(loadPublicKey(pair.publicKeyPem), loadPublicKey(pair.publicKeyPem));
  assert.equal(nodeIdFromPublicKey(loadPrivateKey(pair.privateKeyPem)), nodeIdFromPublicKey(pair.publicKey));
  assert.throws(() => loadPrivateKey('not a key'), (e) => isCovenantError(e) && e.code === 'InvalidKey');
  assert.throws(() => loadPublicKey('-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n'), (e) => isCovenantError(e) && e.code === 'InvalidKey');
  const rsa = generateRsaKeyPair(2048);
  assert.throws(() => signEcdsa(rsa.privateKey, new Uint8Array(1)), (e) => isCovenantError(e) && e.code === 'InvalidKey');
});

test('RSA-OAEP-SHA256 wraps and unwraps; a wrong key or tampered ciphertext is DecryptionFailed', () => {
  const rsa = generateRsaKeyPair(2048);
  const other = generateRsaKeyPair(2048);
  const secret = fromHex('00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff');
  const wrapped = wrapRsaOaep(rsa.publicKeyPem, secret);
  assert.equal(wrapped.byteLength, 256);
  assert.deepEqual(unwrapRsaOaep(rsa.privateKey, wrapped), secret);
  assert.deepEqual(unwrapRsaOaep(rsa.privateKeyPem, wrapped), secret);
  // Independent decryption with OAEP SHA-256 parameters proves the padding choice.
  const plain = nodeCrypto.privateDecrypt({ key: rsa.privateKey, padding: nodeCrypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, wrapped);
  assert.deepEqual(new Uint8Array(plain), secret);
  assert.throws(() => unwrapRsaOaep(other.privateKey, wrapped), (e) => isCovenantError(e) && e.code === 'DecryptionFailed');
  const tampered = wrapped.slice();
  tampered[10] = tampered[10]! ^ 1;
  assert.throws(() => unwrapRsaOaep(rsa.privateKey, tampered), (e) => isCovenantError(e) && e.code === 'DecryptionFailed');
  assert.throws(() => generateRsaKeyPair(1024), (e) => isCovenantError(e) && e.code === 'InvalidKey');
});
