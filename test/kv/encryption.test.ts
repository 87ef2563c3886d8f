import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createCipheriv } from 'node:crypto';
import fc from 'fast-check';
import { InvariantError } from '../../src/base/index.js';
import { KvErrorCode, LedgerEncryptor, LedgerSecrets } from '../../src/kv/index.js';
import { secret } from './helpers.js';

test('private write sets round-trip and are not in clear', () => {
  const encryptor = new LedgerEncryptor(secret(7));
  const plaintext = Buffer.from('private message in clear');
  const sealed = encryptor.encryptPrivate(3, 42, plaintext, Buffer.from('header'));
  assert.equal(sealed.byteLength, plaintext.byteLength + 16);
  assert.ok(!Buffer.from(sealed).toString('latin1').includes('private message'));
  assert.deepEqual(Buffer.from(encryptor.decryptPrivate(3, 42, sealed, Buffer.from('header'))), plaintext);
});

test('the IV is seqno (8 bytes LE) followed by view (4 bytes LE)', () => {
  const key = secret(1);
  const view = 0x01020304;
  const seqno = 0x0a0b0c0d0e0f;
  const iv = Buffer.from([0x0f, 0x0e, 0x0d, 0x0c, 0x0b, 0x0a, 0, 0, 0x04, 0x03, 0x02, 0x01]);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  const plaintext = Buffer.from('abc');
  const expected = Buffer.concat([cipher.update(plaintext), cipher.final(), cipher.getAuthTag()]);
  assert.deepEqual(Buffer.from(new LedgerEncryptor(key).encryptPrivate(view, seqno, plaintext)), expected);
});

test('any flipped bit, or another view, seqno, aad or secret, fails with DecryptionFailed', () => {
  const encryptor = new LedgerEncryptor(secret(7));
  fc.assert(
    fc.property(fc.uint8Array({ minLength: 1, maxLength: 64 }), fc.nat(), fc.integer({ min: 0, max: 7 }), (plaintext, position, bit) => {
      const sealed = Buffer.from(encryptor.encryptPrivate(2, 10, plaintext, Buffer.from('aad')));
      sealed[position % sealed.byteLength]! ^= 1 << bit;
      assert.throws(() => encryptor.decryptPrivate(2, 10, sealed, Buffer.from('aad')), { code: KvErrorCode.LedgerDecryptionFailed });
    }),
    { numRuns: 300 },
  );
  const sealed = encryptor.encryptPrivate(2, 10, Buffer.from('x'), Buffer.from('aad'));
  const failures: [number, number, string, LedgerEncryptor][] = [
    [3, 10, 'aad', encryptor],
    [2, 11, 'aad', encryptor],
    [2, 10, 'aaD', encryptor],
    [2, 10, 'aad', new LedgerEncryptor(secret(8))],
  ];
  for (const [view, seqno, aad, enc] of failures) {
    assert.throws(() => enc.decryptPrivate(view, seqno, sealed, Buffer.from(aad)), { code: KvErrorCode.LedgerDecryptionFailed });
  }
  assert.throws(() => encryptor.decryptPrivate(2, 10, new Uint8Array(5)), { code: KvErrorCode.LedgerDecryptionFailed });
});

test('an empty private part is empty bytes, not encrypted', () => {
  const encryptor = new LedgerEncryptor(secret(7));
  assert.equal(encryptor.encryptPrivate(1, 1, new Uint8Array(0)).byteLength, 0);
  assert.equal(encryptor.decryptPrivate(1, 1, new Uint8Array(0)).byteLength, 0);
});

test('each seqno uses the ledger secret that applies from the latest fromSeqno at or below it', () => {
  const secrets = new LedgerSecrets([{ fromSeqno: 1, secret: secret(1) }]);
  secrets.add(100, secret(2));
  const rotated = new LedgerEncryptor(secrets);
  const before = rotated.encryptPrivate(1, 99, Buffer.from('m'));
  const after = rotated.encryptPrivate(1, 100, Buffer.from('m'));
  assert.deepEqual(before, new LedgerEncryptor(secret(1)).encryptPrivate(1, 99, Buffer.from('m')));
  assert.deepEqual(after, new LedgerEncryptor(secret(2)).encryptPrivate(1, 100, Buffer.from('m')));
  assert.throws(() => rotated.encryptPrivate(1, 0, Buffer.from('m')), { code: KvErrorCode.NoLedgerSecret });
  assert.throws(() => secrets.add(50, secret(3)), InvariantError);
  assert.throws(() => secrets.add(200, new Uint8Array(16)), InvariantError);
  assert.equal(secrets.list().length, 2);
});

test('snapshot sections use a key distinct from transaction entries at the same view and seqno', () => {
  const encryptor = new LedgerEncryptor(secret(7));
  const plaintext = Buffer.from('same plaintext');
  const entry = encryptor.encryptPrivate(4, 500, plaintext, Buffer.from('a'));
  const snapshot = encryptor.encryptSnapshot(4, 500, plaintext, Buffer.from('a'));
  assert.notDeepEqual(entry, snapshot);
  assert.throws(() => encryptor.decryptPrivate(4, 500, snapshot, Buffer.from('a')), { code: KvErrorCode.LedgerDecryptionFailed });
  assert.deepEqual(Buffer.from(encryptor.decryptSnapshot(4, 500, snapshot, Buffer.from('a'))), plaintext);
});
