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
  submittedShareStorageKey,
  wrapLatestSecret,
  type ChainSecret,
  type RecordedSharing,
  type RecoveryErrorCode,
  type SubmitOutcome,
} from '../../src/recovery/index.js';
import { splitKey } from '../../src/recovery/key-sharing.js';
import { recoveryMembers, seededRandomBytes } from './helpers.js';

const code = (c: RecoveryErrorCode) => (e: unknown) => isRecoveryError(e, c);

/** A service with a chain of three secrets whose shares were issued 3 of 5; each member's decrypted share. */
async function setUp(seed: string) {
  const random = seededRandomBytes(seed);
  const { members, privateKeys } = recoveryMembers(5);
  const secrets: ChainSecret[] = [0, 50, 90].map((fromSeqno) => ({ fromSeqno, secret: random(32) }));
  const previousSecretRecords = [sealPreviousSecret(secrets[1]!, secrets[0]!, random), sealPreviousSecret(secrets[2]!, secrets[1]!, random)];
  const issued = await issueRecoveryShares(secrets[2]!, members, 3, random);
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

async function refusesWithoutChange(c: ShareCollection, submit: () => Promise<SubmitOutcome>, expected: RecoveryErrorCode): Promise<void> {
  const before = stateOf(c);
  await assert.rejects(submit(), code(expected));
  assert.deepEqual(stateOf(c), before, `${expected} changed nothing`);
}

test('the threshold-th share recovers the whole chain; shares before it come back encrypted for the store', async () => {
  const { collection, shares, secrets, storageKey } = await setUp('happy');
  const first = await collection.submit('member3', shares.get('member3')!);
  assert.equal(first.status, 'Accepted');
  assert.equal(first.submittedCount, 1);
  assert.equal(first.threshold, 3);
  assert.deepEqual(decryptSubmittedShare(storageKey, 'member3', first.status === 'Accepted' ? first.storedShare : new Uint8Array()), shares.get('member3'));
  assert.equal((await collection.submit('member0', shares.get('member0')!)).status, 'Accepted');
  const last = await collection.submit('member4', shares.get('member4')!);
  assert.equal(last.status, 'Recovered');
  assert.deepEqual(last.status === 'Recovered' && last.ledgerSecrets, secrets);
  assert.equal(collection.waiting, false);
  await refusesWithoutChange(collection, () => collection.submit('member1', shares.get('member1')!), 'NotWaitingForShares');
});

test('every bad share is refused with its own code and changes nothing', async () => {
  const { collection, shares, random, members } = await setUp('bad shares');
  await collection.submit('member0', shares.get('member0')!);
  // A share from a non-member (even a real share).
  await refusesWithoutChange(collection, () => collection.submit('stranger', shares.get('member1')!), 'ShareFromNonMember');
  // The same member twice, with its share or any other bytes.
  await refusesWithoutChange(collection, () => collection.submit('member0', shares.get('member0')!), 'ShareAlreadySubmitted');
  await refusesWithoutChange(collection, () => collection.submit('member0', shares.get('member1')!), 'ShareAlreadySubmitted');
  // Another member's copy of a share already in.
  await refusesWithoutChange(collection, () => collection.submit('member1', shares.get('member0')!), 'ShareIndexAlreadySubmitted');
  // Garbage of many shapes.
  for (const garbage of [new Uint8Array(0), random(1), random(32), random(34), random(66), random(68), new Uint8Array([0x03, ...random(66)]), new Uint8Array(67)]) {
    await refusesWithoutChange(collection, () => collection.submit('member1', garbage), 'MalformedShare');
  }
  const zeroIndex = new Uint8Array(shares.get('member1')!);
  zeroIndex[1] = 0;
  await refusesWithoutChange(collection, () => collection.submit('member1', zeroIndex), 'MalformedShare');
  // A share of another sharing (another issue to the same members), refused by its header before combining.
  const other = await issueRecoveryShares({ fromSeqno: 90, secret: random(32) }, members, 3, random);
  const { privateKeys } = recoveryMembers(5);
  const otherShare = decryptShare(other.encryptedShares[1]!.encryptedShare, privateKeys.get('member1')!);
  await refusesWithoutChange(collection, () => collection.submit('member1', otherShare), 'ShareOfAnotherSharing');
  const otherThreshold = new Uint8Array(shares.get('member1')!);
  otherThreshold[2] = 2;
  await refusesWithoutChange(collection, () => collection.submit('member1', otherThreshold), 'ShareOfAnotherSharing');
  // The collection still completes with good shares.
  assert.equal((await collection.submit('member1', shares.get('member1')!)).status, 'Accepted');
  assert.equal((await collection.submit('member2', shares.get('member2')!)).status, 'Recovered');
});

test('shares that reassemble into the wrong key are detected by the wrapped secret and change nothing', async () => {
  const { collection, shares } = await setUp('wrong key');
  await collection.submit('member0', shares.get('member0')!);
  await collection.submit('member1', shares.get('member1')!);
  // A corrupted y value passes every header check; only the reconstruction can tell.
  const corrupted = new Uint8Array(shares.get('member2')!);
  corrupted[40]! ^= 0x5a;
  await refusesWithoutChange(collection, () => collection.submit('member2', corrupted), 'ShareReconstructionFailed');
  // A v1 share has no header to check: one of another sharing is caught the same way.
  const strayV1 = encodeShareV1((await splitKey(new Uint8Array(32).fill(9), 5, 3))[4]!);
  await refusesWithoutChange(collection, () => collection.submit('member3', strayV1), 'ShareReconstructionFailed');
  assert.equal((await collection.submit('member2', shares.get('member2')!)).status, 'Recovered');
});

test('v1 shares (the old format) are accepted, alone or mixed with v2 ones', async () => {
  const { collection, shares, secrets } = await setUp('v1');
  const asV1 = (memberId: string) => encodeShareV1(decodeShare(shares.get(memberId)!));
  assert.equal(asV1('member0').byteLength, 33);
  assert.equal(decodeShare(asV1('member0')).version, 1);
  await collection.submit('member0', asV1('member0'));
  await collection.submit('member1', shares.get('member1')!);
  const outcome = await collection.submit('member2', asV1('member2'));
  assert.deepEqual(outcome.status === 'Recovered' && outcome.ledgerSecrets, secrets);
  // A sharing recorded by old code (no sharing id) is collected from old shares alone.
  const old = await setUp('v1 only');
  const oldCollection = new ShareCollection({ ...old.sharing, sharingId: undefined }, old.storageKey, old.random);
  for (const m of ['member4', 'member2']) await oldCollection.submit(m, encodeShareV1(decodeShare(old.shares.get(m)!)));
  const oldOutcome = await oldCollection.submit('member1', encodeShareV1(decodeShare(old.shares.get('member1')!)));
  assert.deepEqual(oldOutcome.status === 'Recovered' && oldOutcome.ledgerSecrets, old.secrets);
});

test('a new primary rebuilds the collection from the stored shares and completes it', async () => {
  const { collection, shares, sharing, storageKey, random, secrets } = await setUp('primary change');
  const stored: { memberId: string; storedShare: Uint8Array }[] = [];
  for (const memberId of ['member1', 'member3']) {
    const outcome = await collection.submit(memberId, shares.get(memberId)!);
    assert.equal(outcome.status, 'Accepted');
    stored.push({ memberId, storedShare: outcome.status === 'Accepted' ? outcome.storedShare : new Uint8Array() });
  }
  const rebuilt = await ShareCollection.fromStore(sharing, storageKey, stored, random);
  assert.deepEqual(stateOf(rebuilt), stateOf(collection));
  await refusesWithoutChange(rebuilt, () => rebuilt.submit('member1', shares.get('member1')!), 'ShareAlreadySubmitted');
  const outcome = await rebuilt.submit('member0', shares.get('member0')!);
  assert.deepEqual(outcome.status === 'Recovered' && outcome.ledgerSecrets, secrets);
  // Stored shares under another service key, moved to another member's row, or tampered.
  const otherKey = submittedShareStorageKey(generateEcKeyPair('P-384').privateKeyPem);
  await assert.rejects(ShareCollection.fromStore(sharing, otherKey, stored, random), code('StoredShareDecryptionFailed'));
  await assert.rejects(ShareCollection.fromStore(sharing, storageKey, [{ memberId: 'member2', storedShare: stored[0]!.storedShare }], random), code('StoredShareDecryptionFailed'));
  await assert.rejects(ShareCollection.fromStore(sharing, storageKey, [{ memberId: 'member1', storedShare: stored[0]!.storedShare.subarray(0, 20) }], random), code('MalformedStoredShare'));
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

test('a closed collection, and a service not recovering, refuse shares', async () => {
  const { collection, shares } = await setUp('closed');
  await collection.submit('member0', shares.get('member0')!);
  collection.close();
  assert.equal(collection.submittedCount, 0, 'closing forgets the shares held in memory');
  await assert.rejects(collection.submit('member1', shares.get('member1')!), code('NotWaitingForShares'));
  const error = notWaitingForShares();
  assert.equal(error.code, 'NotWaitingForShares');
  assert.equal(error.status, 403);
});

test('submissions made together are handled one at a time, in order', async () => {
  const { collection, shares, secrets } = await setUp('together');
  await collection.submit('member0', shares.get('member0')!);
  // Both would meet the threshold: the first recovers, the second finds the collection done.
  const [a, b, c] = await Promise.allSettled([
    collection.submit('member1', shares.get('member1')!),
    collection.submit('member2', shares.get('member2')!),
    collection.submit('member3', shares.get('member3')!),
  ]);
  assert.equal(a.status === 'fulfilled' && a.value.status, 'Accepted');
  assert.deepEqual(b.status === 'fulfilled' && b.value.status === 'Recovered' && b.value.ledgerSecrets, secrets);
  assert.ok(c.status === 'rejected' && isRecoveryError(c.reason, 'NotWaitingForShares'));
  // A refused submission does not hold up the ones after it.
  const other = await setUp('together, refused');
  const [bad, good] = await Promise.allSettled([other.collection.submit('stranger', other.shares.get('member0')!), other.collection.submit('member0', other.shares.get('member0')!)]);
  assert.ok(bad.status === 'rejected' && isRecoveryError(bad.reason, 'ShareFromNonMember'));
  assert.equal(good.status === 'fulfilled' && good.value.status, 'Accepted');
});

test('closing while the threshold-th share is pending or reassembling the key abandons the recovery', async () => {
  // 0 ticks: closed before the submission runs; 1 tick: closed while the key is being reassembled.
  for (const ticks of [0, 1]) {
    const { collection, shares } = await setUp(`close during ${ticks}`);
    await collection.submit('member0', shares.get('member0')!);
    await collection.submit('member1', shares.get('member1')!);
    const last = collection.submit('member2', shares.get('member2')!);
    for (let i = 0; i < ticks; i++) await null;
    collection.close();
    await assert.rejects(last, code('NotWaitingForShares'), `closed after ${ticks} ticks`);
    assert.equal(collection.waiting, false);
  }
});

test('a broken chain of previous secrets keeps its own code and changes nothing', async () => {
  const { shares, sharing, storageKey, random } = await setUp('broken chain');
  const stray = sealPreviousSecret({ fromSeqno: 70, secret: random(32) }, { fromSeqno: 60, secret: random(32) }, random);
  const collection = new ShareCollection({ ...sharing, previousSecretRecords: [...sharing.previousSecretRecords, stray] }, storageKey, random);
  await collection.submit('member0', shares.get('member0')!);
  await collection.submit('member1', shares.get('member1')!);
  await refusesWithoutChange(collection, () => collection.submit('member2', shares.get('member2')!), 'SecretChainBroken');
  // And the wrapped record itself is checked as the ledger's, not as the shares'.
  const wrongRecord = wrapLatestSecret(random(32), { fromSeqno: 90, secret: random(32) }, random);
  const other = new ShareCollection({ ...sharing, wrappedLatestSecret: wrongRecord }, storageKey, random);
  await other.submit('member0', shares.get('member0')!);
  await other.submit('member1', shares.get('member1')!);
  await refusesWithoutChange(other, () => other.submit('member2', shares.get('member2')!), 'ShareReconstructionFailed');
});
