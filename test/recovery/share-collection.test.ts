import { test } from 'node:test';
import assert from 'node:assert/strict';
import { generateEcKeyPair } from '../../src/crypto/index.js';
import {
  decodeShare,
  decryptShare,
  decryptSubmittedShare,
  encodeShareV1,
  encryptSubmittedShare,
  isRecoveryError,
  issueRecoveryShares,
  notWaitingForShares,
  sealPreviousSecret,
  ShareCollection,
  splitSecret,
  submittedShareStorageKey,
  wrapLatestSecret,
  type ChainSecret,
  type RecordedSharing,
  type RecoveryErrorCode,
  type SubmitOutcome,
} from '../../src/recovery/index.js';
import { recoveryMembers, seededRandomBytes } from './helpers.js';

const code = (c: RecoveryErrorCode) => (e: unknown) => isRecoveryError(e, c);

/** A service with a chain of three secrets whose shares were issued 3 of 5; each member's decrypted share. */
function setUp(seed: string) {
  const random = seededRandomBytes(seed);
  const { members, privateKeys } = recoveryMembers(5);
  const secrets: ChainSecret[] = [0, 50, 90].map((fromSeqno) => ({ fromSeqno, secret: random(32) }));
  const previousSecretRecords = [sealPreviousSecret(secrets[1]!, secrets[0]!, random), sealPreviousSecret(secrets[2]!, secrets[1]!, random)];
  const issued = issueRecoveryShares(secrets[2]!, members, 3, random);
  const sharing: RecordedSharing = {
    recoveryMemberIds: members.map((m) => m.memberId),
    threshold: issued.threshold,
    sharingId: issued.sharingId,
    wrappedLatestSecret: issued.wrappedLatestSecret,
    previousSecretRecords,
  };
  const shares = new Map(issued.encryptedShares.map((e) => [e.memberId, decryptShare(e.encryptedShare, privateKeys.get(e.memberId)!)]));
  const storageKey = submittedShareStorageKey(generateEcKeyPair('P-384').privateKeyPem);
  const collection = new ShareCollection(sharing, storageKey, random);
  return { random, members, secrets, sharing, shares, storageKey, collection };
}

/** The collection's visible state, to show that a refusal changed nothing. */
function stateOf(c: ShareCollection) {
  return { count: c.submittedCount, members: c.submittedMemberIds(), waiting: c.waiting };
}

function refusesWithoutChange(c: ShareCollection, submit: () => SubmitOutcome, expected: RecoveryErrorCode): void {
  const before = stateOf(c);
  assert.throws(submit, code(expected));
  assert.deepEqual(stateOf(c), before, `${expected} changed nothing`);
}

test('the threshold-th share recovers the whole chain; shares before it come back encrypted for the store', () => {
  const { collection, shares, secrets, storageKey } = setUp('happy');
  const first = collection.submit('member3', shares.get('member3')!);
  assert.equal(first.status, 'Accepted');
  assert.equal(first.submittedCount, 1);
  assert.equal(first.threshold, 3);
  assert.deepEqual(decryptSubmittedShare(storageKey, 'member3', first.status === 'Accepted' ? first.storedShare : new Uint8Array()), shares.get('member3'));
  assert.equal(collection.submit('member0', shares.get('member0')!).status, 'Accepted');
  const last = collection.submit('member4', shares.get('member4')!);
  assert.equal(last.status, 'Recovered');
  assert.deepEqual(last.status === 'Recovered' && last.ledgerSecrets, secrets);
  assert.equal(collection.waiting, false);
  refusesWithoutChange(collection, () => collection.submit('member1', shares.get('member1')!), 'NotWaitingForShares');
});

test('every bad share is refused with its own code and changes nothing', () => {
  const { collection, shares, random, members } = setUp('bad shares');
  collection.submit('member0', shares.get('member0')!);
  // A share from a non-member (even a real share).
  refusesWithoutChange(collection, () => collection.submit('stranger', shares.get('member1')!), 'ShareFromNonMember');
  // The same member twice, with its share or any other bytes.
  refusesWithoutChange(collection, () => collection.submit('member0', shares.get('member0')!), 'ShareAlreadySubmitted');
  refusesWithoutChange(collection, () => collection.submit('member0', shares.get('member1')!), 'ShareAlreadySubmitted');
  // Another member's copy of a share already in.
  refusesWithoutChange(collection, () => collection.submit('member1', shares.get('member0')!), 'ShareIndexAlreadySubmitted');
  // Garbage of many shapes.
  for (const garbage of [new Uint8Array(0), random(1), random(32), random(34), random(66), random(68), new Uint8Array([0x03, ...random(66)]), new Uint8Array(67)]) {
    refusesWithoutChange(collection, () => collection.submit('member1', garbage), 'MalformedShare');
  }
  const zeroIndex = new Uint8Array(shares.get('member1')!);
  zeroIndex[1] = 0;
  refusesWithoutChange(collection, () => collection.submit('member1', zeroIndex), 'MalformedShare');
  // A share of another sharing (another issue to the same members), refused by its header before combining.
  const other = issueRecoveryShares({ fromSeqno: 90, secret: random(32) }, members, 3, random);
  const { privateKeys } = recoveryMembers(5);
  const otherShare = decryptShare(other.encryptedShares[1]!.encryptedShare, privateKeys.get('member1')!);
  refusesWithoutChange(collection, () => collection.submit('member1', otherShare), 'ShareOfAnotherSharing');
  const otherThreshold = new Uint8Array(shares.get('member1')!);
  otherThreshold[2] = 2;
  refusesWithoutChange(collection, () => collection.submit('member1', otherThreshold), 'ShareOfAnotherSharing');
  // The collection still completes with good shares.
  assert.equal(collection.submit('member1', shares.get('member1')!).status, 'Accepted');
  assert.equal(collection.submit('member2', shares.get('member2')!).status, 'Recovered');
});

test('shares that reassemble into the wrong key are detected by the wrapped secret and change nothing', () => {
  const { collection, shares } = setUp('wrong key');
  collection.submit('member0', shares.get('member0')!);
  collection.submit('member1', shares.get('member1')!);
  // A corrupted y value passes every header check; only the reconstruction can tell.
  const corrupted = new Uint8Array(shares.get('member2')!);
  corrupted[40]! ^= 0x5a;
  refusesWithoutChange(collection, () => collection.submit('member2', corrupted), 'ShareReconstructionFailed');
  // A v1 share has no header to check: one of another sharing is caught the same way.
  const strayV1 = encodeShareV1(splitSecret(new Uint8Array(32).fill(9), 5, 3, seededRandomBytes('stray'))[4]!);
  refusesWithoutChange(collection, () => collection.submit('member3', strayV1), 'ShareReconstructionFailed');
  assert.equal(collection.submit('member2', shares.get('member2')!).status, 'Recovered');
});

test('v1 shares (the old format) are accepted, alone or mixed with v2 ones', () => {
  const { collection, shares, secrets } = setUp('v1');
  const asV1 = (memberId: string) => encodeShareV1(decodeShare(shares.get(memberId)!));
  assert.equal(asV1('member0').byteLength, 33);
  assert.equal(decodeShare(asV1('member0')).version, 1);
  collection.submit('member0', asV1('member0'));
  collection.submit('member1', shares.get('member1')!);
  const outcome = collection.submit('member2', asV1('member2'));
  assert.deepEqual(outcome.status === 'Recovered' && outcome.ledgerSecrets, secrets);
  // A sharing recorded by old code (no sharing id) is collected from old shares alone.
  const old = setUp('v1 only');
  const oldCollection = new ShareCollection({ ...old.sharing, sharingId: undefined }, old.storageKey, old.random);
  for (const m of ['member4', 'member2']) oldCollection.submit(m, encodeShareV1(decodeShare(old.shares.get(m)!)));
  const oldOutcome = oldCollection.submit('member1', encodeShareV1(decodeShare(old.shares.get('member1')!)));
  assert.deepEqual(oldOutcome.status === 'Recovered' && oldOutcome.ledgerSecrets, old.secrets);
});

test('a new primary rebuilds the collection from the stored shares and completes it', () => {
  const { collection, shares, sharing, storageKey, random, secrets } = setUp('primary change');
  const stored = ['member1', 'member3'].map((memberId) => {
    const outcome = collection.submit(memberId, shares.get(memberId)!);
    assert.equal(outcome.status, 'Accepted');
    return { memberId, storedShare: outcome.status === 'Accepted' ? outcome.storedShare : new Uint8Array() };
  });
  const rebuilt = ShareCollection.fromStore(sharing, storageKey, stored, random);
  assert.deepEqual(stateOf(rebuilt), stateOf(collection));
  refusesWithoutChange(rebuilt, () => rebuilt.submit('member1', shares.get('member1')!), 'ShareAlreadySubmitted');
  const outcome = rebuilt.submit('member0', shares.get('member0')!);
  assert.deepEqual(outcome.status === 'Recovered' && outcome.ledgerSecrets, secrets);
  // Stored shares under another service key, moved to another member's row, or tampered.
  const otherKey = submittedShareStorageKey(generateEcKeyPair('P-384').privateKeyPem);
  assert.throws(() => ShareCollection.fromStore(sharing, otherKey, stored, random), code('StoredShareDecryptionFailed'));
  assert.throws(() => ShareCollection.fromStore(sharing, storageKey, [{ memberId: 'member2', storedShare: stored[0]!.storedShare }], random), code('StoredShareDecryptionFailed'));
  assert.throws(() => ShareCollection.fromStore(sharing, storageKey, [{ memberId: 'member1', storedShare: stored[0]!.storedShare.subarray(0, 20) }], random), code('MalformedStoredShare'));
});

test('the storage key is the same from any encoding of the service key, and differs between services', () => {
  const pair = generateEcKeyPair('P-384');
  const { privateKey } = pair;
  const sec1 = privateKey.export({ format: 'pem', type: 'sec1' }).toString();
  assert.deepEqual(submittedShareStorageKey(sec1), submittedShareStorageKey(pair.privateKeyPem));
  assert.notDeepEqual(submittedShareStorageKey(generateEcKeyPair('P-384').privateKeyPem), submittedShareStorageKey(pair.privateKeyPem));
  const { privateKeys } = recoveryMembers(1);
  assert.throws(() => submittedShareStorageKey(privateKeys.get('member0')!), code('InvalidEncryptionKey'));
  const random = seededRandomBytes('storage');
  const key = submittedShareStorageKey(pair.privateKeyPem);
  const share = random(67);
  const a = encryptSubmittedShare(key, 'member0', share, random);
  const b = encryptSubmittedShare(key, 'member0', share, random);
  assert.notDeepEqual(a, b, 'a fresh IV each time');
  assert.deepEqual(decryptSubmittedShare(key, 'member0', b), share);
});

test('a closed collection, and a service not recovering, refuse shares', () => {
  const { collection, shares } = setUp('closed');
  collection.submit('member0', shares.get('member0')!);
  collection.close();
  assert.equal(collection.submittedCount, 0, 'closing forgets the shares held in memory');
  assert.throws(() => collection.submit('member1', shares.get('member1')!), code('NotWaitingForShares'));
  const error = notWaitingForShares();
  assert.equal(error.code, 'NotWaitingForShares');
  assert.equal(error.status, 403);
});

test('a broken chain of previous secrets keeps its own code and changes nothing', () => {
  const { shares, sharing, storageKey, random } = setUp('broken chain');
  const stray = sealPreviousSecret({ fromSeqno: 70, secret: random(32) }, { fromSeqno: 60, secret: random(32) }, random);
  const collection = new ShareCollection({ ...sharing, previousSecretRecords: [...sharing.previousSecretRecords, stray] }, storageKey, random);
  collection.submit('member0', shares.get('member0')!);
  collection.submit('member1', shares.get('member1')!);
  refusesWithoutChange(collection, () => collection.submit('member2', shares.get('member2')!), 'SecretChainBroken');
  // And the wrapped record itself is checked as the ledger's, not as the shares'.
  const wrongRecord = wrapLatestSecret(random(32), { fromSeqno: 90, secret: random(32) }, random);
  const other = new ShareCollection({ ...sharing, wrappedLatestSecret: wrongRecord }, storageKey, random);
  other.submit('member0', shares.get('member0')!);
  other.submit('member1', shares.get('member1')!);
  refusesWithoutChange(other, () => other.submit('member2', shares.get('member2')!), 'ShareReconstructionFailed');
});
