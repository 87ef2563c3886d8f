import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import fc from 'fast-check';
import { toHex, isCovenantError } from '../../src/base/index.js';
import { generateEcKeyPair, signCoseSign1, decodeCoseSign1, verifyCoseSign1, encodeCbor } from '../../src/crypto/index.js';

const isInvalid = (e: unknown) => isCovenantError(e) && e.code === 'InvalidCoseSign1';
const keys384 = generateEcKeyPair('P-384');
const keys256 = generateEcKeyPair('P-256');
const payload = new TextEncoder().encode('{"actions":[]}');

function governanceHeader(): Map<number | string, unknown> {
  return new Map<number | string, unknown>([
    [4, new TextEncoder().encode('member-id')],
    ['svc.gov.msg.type', 'proposal'],
    ['svc.gov.msg.created_at', 1_700_000_000],
  ]);
}

test('sign then decode round-trips headers and payload, and verifies with the signer key', () => {
  for (const [keys, alg] of [[keys384, -35], [keys256, -7]] as const) {
    const bytes = signCoseSign1({ protectedHeader: governanceHeader(), unprotectedHeader: new Map([[33, 'x']]), payload, privateKey: keys.privateKey, alg });
    assert.equal(bytes[0], 0xd2, 'tag 18');
    const decoded = decodeCoseSign1(bytes);
    assert.equal(decoded.alg, alg);
    assert.deepEqual([...decoded.protectedHeader.keys()], [1, 4, 'svc.gov.msg.type', 'svc.gov.msg.created_at']);
    assert.equal(decoded.protectedHeader.get(1), alg);
    assert.equal(decoded.protectedHeader.get('svc.gov.msg.type'), 'proposal');
    assert.equal(decoded.protectedHeader.get('svc.gov.msg.created_at'), 1_700_000_000);
    assert.equal(decoded.unprotectedHeader.get(33), 'x');
    assert.deepEqual(decoded.payload, payload);
    assert.equal(decoded.signature.byteLength, alg === -35 ? 96 : 64);
    assert.equal(verifyCoseSign1(decoded, keys.publicKey), true);
  }
});

test('the signature is over the RFC 9052 Sig_structure, checked independently with raw r||s ECDSA', () => {
  const bytes = signCoseSign1({ protectedHeader: governanceHeader(), payload, privateKey: keys384.privateKey });
  const decoded = decodeCoseSign1(bytes);
  // Sig_structure = ["Signature1", protected, h'', payload], encoded by hand to avoid trusting the encoder twice.
  const head = Buffer.from([0x84, 0x6a, ...Buffer.from('Signature1')]);
  const bstr = (b: Uint8Array) => {
    assert.ok(b.length < 256);
    return Buffer.concat([b.length < 24 ? Buffer.from([0x40 + b.length]) : Buffer.from([0x58, b.length]), b]);
  };
  const toBeSigned = Buffer.concat([head, bstr(decoded.protectedBytes), bstr(new Uint8Array(0)), bstr(payload)]);
  assert.equal(nodeCrypto.verify('sha384', toBeSigned, { key: keys384.publicKey, dsaEncoding: 'ieee-p1363' }, decoded.signature), true);
});

test('a detached payload is signed and verified out of band', () => {
  const bytes = signCoseSign1({ protectedHeader: new Map(), payload: null, detachedPayload: payload, privateKey: keys384.privateKey });
  const decoded = decodeCoseSign1(bytes);
  assert.equal(decoded.payload, null);
  assert.equal(verifyCoseSign1(decoded, keys384.publicKey, payload), true);
  assert.equal(verifyCoseSign1(decoded, keys384.publicKey, new TextEncoder().encode('other')), false);
  assert.throws(() => verifyCoseSign1(decoded, keys384.publicKey), isInvalid);
});

test('changing any byte of the envelope makes it either malformed or unverifiable', () => {
  const bytes = signCoseSign1({ protectedHeader: governanceHeader(), payload, privateKey: keys384.privateKey });
  // Even the unprotected header (not signed) cannot change here: its one byte is an empty map.
  for (let i = 0; i < bytes.length; i++) {
    for (const mask of [0x01, 0x80]) {
      const tampered = bytes.slice();
      tampered[i] = tampered[i]! ^ mask;
      let accepted = false;
      try {
        accepted = verifyCoseSign1(decodeCoseSign1(tampered), keys384.publicKey);
      } catch (e) {
        assert.ok(isInvalid(e), `byte ${i}: ${String(e)}`);
      }
      assert.equal(accepted, false, `byte ${i} mask ${mask} accepted`);
    }
  }
});

test('a different key, or a key of the other curve, does not verify', () => {
  const bytes = signCoseSign1({ protectedHeader: governanceHeader(), payload, privateKey: keys384.privateKey });
  assert.equal(verifyCoseSign1(decodeCoseSign1(bytes), generateEcKeyPair('P-384').publicKey), false);
  assert.equal(verifyCoseSign1(decodeCoseSign1(bytes), keys256.publicKey), false);
  assert.throws(() => signCoseSign1({ protectedHeader: new Map(), payload, privateKey: keys256.privateKey, alg: -35 }), (e) => isCovenantError(e) && e.code === 'InvalidKey');
  assert.throws(() => signCoseSign1({ protectedHeader: new Map([[1, -7]]), payload, privateKey: keys384.privateKey }), isInvalid);
});

test('malformed envelopes are rejected with InvalidCoseSign1', () => {
  const good = decodeCoseSign1(signCoseSign1({ protectedHeader: new Map(), payload, privateKey: keys384.privateKey }));
  const cases: Array<[string, Uint8Array]> = [
    ['not cbor', new Uint8Array([0xff, 0x00])],
    ['truncated', signCoseSign1({ protectedHeader: new Map(), payload, privateKey: keys384.privateKey }).subarray(0, 20)],
    ['not an array', encodeCbor(new Map())],
    ['three elements', encodeCbor([good.protectedBytes, new Map(), payload])],
    ['protected not bstr', encodeCbor([new Map([[1, -35]]), new Map(), payload, good.signature])],
    ['protected not a map', encodeCbor([encodeCbor([1]), new Map(), payload, good.signature])],
    ['unprotected not a map', encodeCbor([good.protectedBytes, [], payload, good.signature])],
    ['payload text', encodeCbor([good.protectedBytes, new Map(), 'text', good.signature])],
    ['signature missing', encodeCbor([good.protectedBytes, new Map(), payload, null])],
    ['no alg', encodeCbor([encodeCbor(new Map([[4, 'k']])), new Map(), payload, good.signature])],
    ['unsupported alg', encodeCbor([encodeCbor(new Map([[1, -8]])), new Map(), payload, good.signature])],
    // a2 01 38 22 01 38 22: a map declaring two entries that repeats label 1
    ['duplicate protected label', encodeCbor([Uint8Array.from([0xa2, 0x01, 0x38, 0x22, 0x01, 0x38, 0x22]), new Map(), payload, good.signature])],
    ['label in both headers', encodeCbor([good.protectedBytes, new Map([[1, -35]]), payload, good.signature])],
    ['wrong tag', Uint8Array.from([0xd1, ...encodeCbor([good.protectedBytes, new Map(), payload, good.signature])])],
  ];
  for (const [name, bytes] of cases) assert.throws(() => decodeCoseSign1(bytes), isInvalid, name);
  // An untagged COSE_Sign1 is accepted.
  const untagged = encodeCbor([good.protectedBytes, new Map(), payload, good.signature]);
  assert.equal(verifyCoseSign1(decodeCoseSign1(untagged), keys384.publicKey), true);
});

test('decoding never throws anything but InvalidCoseSign1 on random input', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
      try {
        decodeCoseSign1(bytes);
      } catch (e) {
        assert.ok(isInvalid(e), `${toHex(bytes)}: ${String(e)}`);
      }
    }),
    { numRuns: 2000 },
  );
});
