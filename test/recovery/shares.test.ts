import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import { generateEcKeyPair } from '../../src/crypto/index.js';
import {
  decodeShare,
  decryptRsaOaepSha256,
  decryptShare,
  encodeShareV1,
  encodeShareV2,
  encryptRsaOaepSha256,
  isRecoveryError,
  issueRecoveryShares,
  issueShares,
  loadEncryptionPublicKey,
  SHARE_V2_LENGTH_BYTES,
  sharingIdOf,
  ShareCollection,
  unwrapLatestSecret,
  type RecoverySharing,
  type RecoveryErrorCode,
} from '../../src/recovery/index.js';
import { memberKeys, recoveryMembers, seededRandomBytes } from './helpers.js';

const code = (c: RecoveryErrorCode) => (e: unknown) => isRecoveryError(e, c);

function collectionFor(sharing: RecoverySharing, memberIds: string[], random: (n: number) => Uint8Array): ShareCollection {
  return new ShareCollection(
    { recoveryMemberIds: memberIds, threshold: sharing.threshold, sharingId: sharing.sharingId, wrappedLatestSecret: sharing.wrappedLatestSecret, previousSecretRecords: [] },
    random(32),
    random,
  );
}

test('RSA-OAEP-SHA256 is OpenSSL\'s: each side decrypts the other, and the ciphertexts are fresh each time', () => {
  const [pair] = memberKeys(1);
  const random = seededRandomBytes('oaep');
  const publicKey = loadEncryptionPublicKey(pair!.publicKeyPem);
  for (const length of [0, 1, 67, 190]) {
    const message = random(length);
    const ours = encryptRsaOaepSha256(publicKey, message);
    assert.equal(ours.byteLength, 256);
    assert.deepEqual(
      new Uint8Array(nodeCrypto.privateDecrypt({ key: pair!.privateKeyPem, padding: nodeCrypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, ours)),
      message,
    );
    const theirs = nodeCrypto.publicEncrypt({ key: pair!.publicKeyPem, padding: nodeCrypto.constants.RSA_PKCS1_OAEP_PADDING, oaepHash: 'sha256' }, message);
    assert.deepEqual(decryptRsaOaepSha256(pair!.privateKeyPem, theirs), message);
    assert.notDeepEqual(encryptRsaOaepSha256(publicKey, message), ours, 'a fresh OAEP seed each time');
  }
  assert.throws(() => encryptRsaOaepSha256(publicKey, random(191)), code('InvalidEncryptionKey'));
});

test('shares round trip for thresholds 1..5 of 1..7 members: any threshold of them recover the chain', async () => {
  const { members, privateKeys } = recoveryMembers(7);
  for (let count = 1; count <= 7; count++) {
    for (let threshold = 1; threshold <= Math.min(5, count); threshold++) {
      const random = seededRandomBytes(`round trip ${threshold}/${count}`);
      const latest = { fromSeqno: 42, secret: random(32) };
      const sharing = await issueRecoveryShares(latest, members.slice(0, count), threshold, random);
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
        const collection = collectionFor(sharing, members.slice(0, count).map((m) => m.memberId), random);
        for (const [i, s] of subset.entries()) {
          const outcome = await collection.submit(s.memberId, s.share);
          if (i < threshold - 1) {
            assert.equal(outcome.status, 'Accepted', `${threshold}/${count}: share ${i + 1} waits for more`);
            assert.equal(outcome.submittedCount, i + 1);
          } else {
            assert.equal(outcome.status, 'Recovered', `${threshold}/${count}: share ${i + 1} completes`);
            assert.deepEqual(outcome.status === 'Recovered' && outcome.ledgerSecrets, [latest]);
          }
        }
      }
    }
  }
});

test('threshold 1: every member\'s share holds the wrapping key, and any one share recovers alone', async () => {
  const { members, privateKeys } = recoveryMembers(3);
  for (const count of [1, 3]) {
    const random = seededRandomBytes(`threshold one of ${count}`);
    const latest = { fromSeqno: 7, secret: random(32) };
    const sharing = await issueRecoveryShares(latest, members.slice(0, count), 1, random);
    const decoded = sharing.encryptedShares.map((e) => decodeShare(decryptShare(e.encryptedShare, privateKeys.get(e.memberId)!)));
    assert.deepEqual(decoded.map((d) => d.x), Array.from({ length: count }, (_, i) => i + 1), 'indexes 1..count in the members\' order');
    for (const d of decoded) {
      assert.equal(d.threshold, 1);
      assert.deepEqual(unwrapLatestSecret(d.y, sharing.wrappedLatestSecret), latest, 'the y values are the wrapping key itself');
    }
    for (const [i, m] of members.slice(0, count).entries()) {
      const collection = collectionFor(sharing, members.slice(0, count).map((x) => x.memberId), random);
      const outcome = await collection.submit(m.memberId, i % 2 === 0 ? encodeShareV2(decoded[i]!, 1, sharing.sharingId) : encodeShareV1(decoded[i]!));
      assert.deepEqual(outcome.status === 'Recovered' && outcome.ledgerSecrets, [latest], `member ${m.memberId} alone`);
    }
  }
});

test('a share decrypts only with its own member\'s key', async () => {
  const { members, privateKeys } = recoveryMembers(2);
  const random = seededRandomBytes('own key');
  const issued = await issueShares(random(32), members, 2);
  assert.throws(() => decryptShare(issued.encryptedShares[0]!.encryptedShare, privateKeys.get('member1')!), code('ShareDecryptionFailed'));
  const tampered = new Uint8Array(issued.encryptedShares[0]!.encryptedShare);
  tampered[100]! ^= 0x01;
  assert.throws(() => decryptShare(tampered, privateKeys.get('member0')!), code('ShareDecryptionFailed'));
  assert.throws(() => decryptShare(issued.encryptedShares[0]!.encryptedShare, generateEcKeyPair().privateKeyPem), code('InvalidEncryptionKey'));
});

test('issuing refuses a threshold the members cannot meet, and keys that are not RSA-2048 or more', async () => {
  const { members } = recoveryMembers(3);
  const random = seededRandomBytes('refusals');
  const key = random(32);
  for (const threshold of [0, 4, 1.5, 256]) await assert.rejects(issueShares(key, members, threshold), code('InvalidRecoveryThreshold'), `threshold ${threshold}`);
  await assert.rejects(issueShares(key, [], 1), code('InvalidRecoveryThreshold'));
  await assert.rejects(issueRecoveryShares({ fromSeqno: 1, secret: random(32) }, members, 4, random), code('InvalidRecoveryThreshold'));
  const manyMembers = Array.from({ length: 256 }, (_, i) => ({ memberId: `m${i}`, encryptionPublicKeyPem: members[0]!.encryptionPublicKeyPem }));
  await assert.rejects(issueShares(key, manyMembers, 2), code('TooManyRecoveryMembers'));
  const ecMember = { memberId: 'ec', encryptionPublicKeyPem: generateEcKeyPair().publicKeyPem };
  await assert.rejects(issueShares(key, [...members, ecMember], 2), (e) => isRecoveryError(e, 'InvalidEncryptionKey') && e.details?.['memberId'] === 'ec');
  const small = nodeCrypto.generateKeyPairSync('rsa', { modulusLength: 1024 }).publicKey.export({ format: 'pem', type: 'spki' }).toString();
  await assert.rejects(issueShares(key, [{ memberId: 'small', encryptionPublicKeyPem: small }], 1), code('InvalidEncryptionKey'));
  await assert.rejects(issueShares(key, [{ memberId: 'garbage', encryptionPublicKeyPem: 'not a pem' }], 1), code('InvalidEncryptionKey'));
});

test('the seed fixes the wrapping key, sharing id and wrapped secret; the encrypted shares are fresh each issue', async () => {
  const { members, privateKeys } = recoveryMembers(3);
  const latest = { fromSeqno: 1, secret: new Uint8Array(32).fill(7) };
  const a = await issueRecoveryShares(latest, members, 2, seededRandomBytes('same'));
  const b = await issueRecoveryShares(latest, members, 2, seededRandomBytes('same'));
  assert.deepEqual(a.sharingId, b.sharingId);
  assert.deepEqual(a.wrappedLatestSecret, b.wrappedLatestSecret);
  assert.deepEqual(a.encryptedShares.map((e) => e.memberId), b.encryptedShares.map((e) => e.memberId));
  for (const [i, e] of a.encryptedShares.entries()) {
    assert.equal(e.encryptedShare.byteLength, 256, 'as long as the RSA-2048 modulus');
    assert.notDeepEqual(e.encryptedShare, b.encryptedShares[i]!.encryptedShare, 'OpenSSL\'s OAEP seed, not the injected source');
  }
  // Their shares still recover the secret.
  const share = (s: RecoverySharing, i: number) => decryptShare(s.encryptedShares[i]!.encryptedShare, privateKeys.get(`member${i}`)!);
  const collection = collectionFor(a, members.map((m) => m.memberId), seededRandomBytes('mixed'));
  await collection.submit('member0', share(a, 0));
  const outcome = await collection.submit('member2', share(a, 2));
  assert.deepEqual(outcome.status === 'Recovered' && outcome.ledgerSecrets, [latest]);
  const c = await issueRecoveryShares(latest, members, 2, seededRandomBytes('other'));
  assert.notDeepEqual(a.sharingId, c.sharingId, 'a fresh wrapping key per issue');
  assert.notDeepEqual(sharingIdOf(new Uint8Array(32)), sharingIdOf(new Uint8Array(32).fill(1)));
});
