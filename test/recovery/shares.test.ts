import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import { generateEcKeyPair } from '../../src/crypto/index.js';
import {
  decodeShare,
  decryptRsaOaepSha256,
  decryptShare,
  encryptRsaOaepSha256,
  isRecoveryError,
  issueRecoveryShares,
  issueShares,
  loadEncryptionPublicKey,
  SHARE_V2_LENGTH_BYTES,
  sharingIdOf,
  ShareCollection,
  type RecoveryErrorCode,
} from '../../src/recovery/index.js';
import { memberKeys, recoveryMembers, seededRandomBytes } from './helpers.js';

const code = (c: RecoveryErrorCode) => (e: unknown) => isRecoveryError(e, c);

test('our RSA-OAEP-SHA256 decrypts with OpenSSL, and OpenSSL\'s with ours', () => {
  const [pair] = memberKeys(1);
  const random = seededRandomBytes('oaep');
  for (const length of [0, 1, 67, 190]) {
    const message = random(length);
    const ours = encryptRsaOaepSha256(loadEncryptionPublicKey(pair!.publicKeyPem), message, random);
    assert.equal(ours.byteLength, 256);
    assert.deepEqual(
      new Uint8Array(nodeCrypto.privateDecrypt({ key: pair!.privateKeyPem, padding: nodeCrypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, ours)),
      message,
    );
    const theirs = nodeCrypto.publicEncrypt({ key: pair!.publicKeyPem, padding: nodeCrypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, message);
    assert.deepEqual(decryptRsaOaepSha256(pair!.privateKeyPem, theirs), message);
  }
  assert.throws(() => encryptRsaOaepSha256(loadEncryptionPublicKey(pair!.publicKeyPem), random(191), random), code('InvalidEncryptionKey'));
});

test('shares round trip for thresholds 1..5 of 1..7 members: any threshold of them recover the chain', () => {
  const { members, privateKeys } = recoveryMembers(7);
  for (let count = 1; count <= 7; count++) {
    for (let threshold = 1; threshold <= Math.min(5, count); threshold++) {
      const random = seededRandomBytes(`round trip ${threshold}/${count}`);
      const latest = { fromSeqno: 42, secret: random(32) };
      const sharing = issueRecoveryShares(latest, members.slice(0, count), threshold, random);
      assert.equal(sharing.encryptedShares.length, count);
      const shares = sharing.encryptedShares.map((e) => ({ memberId: e.memberId, share: decryptShare(e.encryptedShare, privateKeys.get(e.memberId)!) }));
      for (const s of shares) {
        const decoded = decodeShare(s.share);
        assert.equal(s.share.byteLength, SHARE_V2_LENGTH_BYTES);
        assert.equal(decoded.version, 2);
        assert.equal(decoded.threshold, threshold);
        assert.deepEqual(decoded.sharingId, sharing.sharingId);
      }
      // Two different subsets of `threshold` members: the last ones, and every other one from the start.
      const subsets = [shares.slice(count - threshold), [...shares.filter((_, i) => i % 2 === 0), ...shares.filter((_, i) => i % 2 === 1)].slice(0, threshold)];
      for (const subset of subsets) {
        const collection = new ShareCollection(
          { recoveryMemberIds: members.slice(0, count).map((m) => m.memberId), threshold, sharingId: sharing.sharingId, wrappedLatestSecret: sharing.wrappedLatestSecret, previousSecretRecords: [] },
          random(32),
          random,
        );
        subset.forEach((s, i) => {
          const outcome = collection.submit(s.memberId, s.share);
          if (i < threshold - 1) {
            assert.equal(outcome.status, 'Accepted', `${threshold}/${count}: share ${i + 1} waits for more`);
            assert.equal(outcome.submittedCount, i + 1);
          } else {
            assert.equal(outcome.status, 'Recovered', `${threshold}/${count}: share ${i + 1} completes`);
            assert.deepEqual(outcome.status === 'Recovered' && outcome.ledgerSecrets, [latest]);
          }
        });
      }
    }
  }
});

test('a share decrypts only with its own member\'s key', () => {
  const { members, privateKeys } = recoveryMembers(2);
  const random = seededRandomBytes('own key');
  const issued = issueShares(random(32), members, 2, random);
  assert.throws(() => decryptShare(issued.encryptedShares[0]!.encryptedShare, privateKeys.get('member1')!), code('ShareDecryptionFailed'));
  const tampered = new Uint8Array(issued.encryptedShares[0]!.encryptedShare);
  tampered[100]! ^= 0x01;
  assert.throws(() => decryptShare(tampered, privateKeys.get('member0')!), code('ShareDecryptionFailed'));
  assert.throws(() => decryptShare(issued.encryptedShares[0]!.encryptedShare, generateEcKeyPair().privateKeyPem), code('InvalidEncryptionKey'));
});

test('issuing refuses a threshold the members cannot meet, and keys that are not RSA-2048 or more', () => {
  const { members } = recoveryMembers(3);
  const random = seededRandomBytes('refusals');
  const key = random(32);
  for (const threshold of [0, 4, 1.5, 256]) assert.throws(() => issueShares(key, members, threshold, random), code('InvalidRecoveryThreshold'), `threshold ${threshold}`);
  assert.throws(() => issueShares(key, [], 1, random), code('InvalidRecoveryThreshold'));
  const manyMembers = Array.from({ length: 256 }, (_, i) => ({ memberId: `m${i}`, encryptionPublicKeyPem: members[0]!.encryptionPublicKeyPem }));
  assert.throws(() => issueShares(key, manyMembers, 2, random), code('TooManyRecoveryMembers'));
  const ecMember = { memberId: 'ec', encryptionPublicKeyPem: generateEcKeyPair().publicKeyPem };
  assert.throws(() => issueShares(key, [...members, ecMember], 2, random), (e) => isRecoveryError(e, 'InvalidEncryptionKey') && e.details?.['memberId'] === 'ec');
  const small = nodeCrypto.generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'pem', type: 'spki' }).toString();
  assert.throws(() => issueShares(key, [{ memberId: 'small', encryptionPublicKeyPem: small }], 1, random), code('InvalidEncryptionKey'));
  assert.throws(() => issueShares(key, [{ memberId: 'garbage', encryptionPublicKeyPem: 'not a pem' }], 1, random), code('InvalidEncryptionKey'));
});

test('issuing draws all its randomness from the injected source: the same seed gives the same bytes', () => {
  const { members } = recoveryMembers(3);
  const latest = { fromSeqno: 1, secret: new Uint8Array(32).fill(7) };
  const a = issueRecoveryShares(latest, members, 2, seededRandomBytes('same'));
  const b = issueRecoveryShares(latest, members, 2, seededRandomBytes('same'));
  assert.deepEqual(a, b);
  const c = issueRecoveryShares(latest, members, 2, seededRandomBytes('other'));
  assert.notDeepEqual(a.sharingId, c.sharingId, 'a fresh wrapping key per issue');
  assert.notDeepEqual(sharingIdOf(new Uint8Array(32)), sharingIdOf(new Uint8Array(32).fill(1)));
});
