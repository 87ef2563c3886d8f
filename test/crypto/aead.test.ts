import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { toHex, fromHex, isCovenantError } from '../../src/base/index.js';
import { sealAesGcm, openAesGcm, ivFromTxId, hkdfSha256, randomAesKey, AES_GCM_TAG_LENGTH_BYTES } from '../../src/crypto/index.js';

const isDecryptionFailed = (e: unknown) => isCovenantError(e) && e.code === 'DecryptionFailed' && e.status === 400;

test('AES-256-GCM matches the NIST GCM test case 14 (256-bit key, zero plaintext block)', () => {
  const key = new Uint8Array(32);
  const iv = new Uint8Array(12);
  const sealed = sealAesGcm(key, iv, new Uint8Array(16));
  assert.equal(toHex(sealed), 'cea7403d4d606b6e074ec5d3baf39d18' + 'd0d1c8a799996bf0265b98b5d48ab919');
});

test('sealed data opens to the plaintext, with and without AAD', () => {
  fc.assert(
    fc.property(fc.uint8Array({ maxLength: 200 }), fc.option(fc.uint8Array({ maxLength: 40 }), { nil: undefined }), (plaintext, aad) => {
      const key = randomAesKey();
      const iv = ivFromTxId(3, 42);
      const sealed = sealAesGcm(key, iv, plaintext, aad);
      assert.equal(sealed.byteLength, plaintext.byteLength + AES_GCM_TAG_LENGTH_BYTES);
      assert.deepEqual(openAesGcm(key, iv, sealed, aad), plaintext);
    }),
  );
});

test('any flipped bit of ciphertext, tag, iv, aad or key is a DecryptionFailed error', () => {
  const key = randomAesKey();
  const iv = ivFromTxId(1, 7);
  const aad = new TextEncoder().encode('header');
  const sealed = sealAesGcm(key, iv, new TextEncoder().encode('private record'), aad);
  fc.assert(
    fc.property(fc.constantFrom('sealed', 'iv', 'aad', 'key'), fc.nat(), fc.integer({ min: 0, max: 7 }), (which, at, bit) => {
      const parts = { sealed: sealed.slice(), iv: iv.slice(), aad: aad.slice(), key: key.slice() };
      const target = parts[which];
      target[at % target.length] = target[at % target.length]! ^ (1 << bit);
      assert.throws(() => openAesGcm(parts.key, parts.iv, parts.sealed, parts.aad), isDecryptionFailed);
    }),
  );
  assert.throws(() => openAesGcm(key, iv, sealed), isDecryptionFailed);
  assert.throws(() => openAesGcm(key, iv, sealed.subarray(0, 10), aad), isDecryptionFailed);
  assert.throws(() => sealAesGcm(new Uint8Array(16), iv, new Uint8Array(1)), (e) => isCovenantError(e) && e.code === 'InvalidKey');
});

test('IV layout: seqno u64 little-endian, then view u32 little-endian with bit 31 for snapshots', () => {
  assert.equal(toHex(ivFromTxId(2, 0x0102030405)), '0504030201000000' + '02000000');
  assert.equal(toHex(ivFromTxId(2, 5, 'snapshot')), '0500000000000000' + '02000080');
  assert.equal(toHex(ivFromTxId(0x7fffffff, Number.MAX_SAFE_INTEGER)), 'ffffffffffff1f00' + 'ffffff7f');
  assert.throws(() => ivFromTxId(0x80000000, 1), /view/);
  assert.throws(() => ivFromTxId(1, -1), /seqno/);
});

test('distinct transaction ids and purposes give distinct IVs', () => {
  fc.assert(
    fc.property(
      fc.tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.nat(), fc.boolean()),
      fc.tuple(fc.integer({ min: 0, max: 0x7fffffff }), fc.nat(), fc.boolean()),
      ([v1, s1, p1], [v2, s2, p2]) => {
        const a = toHex(ivFromTxId(v1, s1, p1 ? 'snapshot' : 'ledger-entry'));
        const b = toHex(ivFromTxId(v2, s2, p2 ? 'snapshot' : 'ledger-entry'));
        assert.equal(a === b, v1 === v2 && s1 === s2 && p1 === p2);
      },
    ),
  );
});

test('HKDF-SHA256 matches RFC 5869 test case 1', () => {
  const okm = hkdfSha256(new Uint8Array(22).fill(0x0b), fromHex('000102030405060708090a0b0c'), fromHex('f0f1f2f3f4f5f6f7f8f9'), 42);
  assert.equal(toHex(okm), '3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865');
});
