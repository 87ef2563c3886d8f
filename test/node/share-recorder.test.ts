/**
 * The recovery machine's share effects (src/node/recovery/share-recorder.ts) over a real store:
 * a share is checked and recorded with its request in one transaction; at the threshold the key
 * is reassembled outside any transaction and the transaction that records the chain checks the
 * share and the key again against the store as it is then, so that a share recorded meanwhile,
 * a second reassembly, or a wrong share records nothing.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import { generateEcKeyPair } from '../../src/crypto/index.js';
import { Store, type Tx } from '../../src/kv/index.js';
import {
  decryptShare,
  isRecoveryError,
  issueRecoveryShares,
  sealPreviousSecret,
  type ChainSecret,
  type RecoveryErrorCode,
} from '../../src/recovery/index.js';
import { ShareRecorder, type ShareSubmission, type SubmittedShare } from '../../src/node/recovery/share-recorder.js';
import type { ServiceIdentity } from '../../src/node/identity/service-identity.js';
import { SINGLETON_KEY, TableDefs, type ServiceInfo } from '../../src/node/tables.js';
import { recoveryMembers, seededRandomBytes } from '../recovery/helpers.js';

const code = (c: RecoveryErrorCode) => (e: unknown) => isRecoveryError(e, c);

/** A recovering service waiting for 2 of 3 shares over a chain of two secrets, and a recorder whose reassemblies are held until released. */
async function setUp() {
  const random = seededRandomBytes('share-recorder');
  const { members, privateKeys } = recoveryMembers(3);
  const secrets: ChainSecret[] = [0, 40].map((fromSeqno) => ({ fromSeqno, secret: random(32) }));
  const issued = await issueRecoveryShares(secrets[1]!, members, 2, random);
  const shares = new Map(issued.encryptedShares.map((e) => [e.memberId, decryptShare(e.encryptedShare, privateKeys.get(e.memberId)!)]));
  const store = new Store();
  const serviceKeyPem = generateEcKeyPair('P-384').privateKeyPem;
  const write = (fn: (tx: Tx) => void) => {
    const tx = store.beginTx();
    fn(tx);
    const applied = tx.apply();
    return { txId: applied === undefined ? undefined : { view: 2, seqno: applied.version } };
  };
  write((tx) => {
    const info: ServiceInfo = { status: 'WaitingForRecoveryShares', cert: '', recovery_count: 0, service_data: null, current_service_create_txid: '2.1', previous_service_identity_version: 1 };
    tx.table(TableDefs.serviceInfo).put(SINGLETON_KEY, info);
    tx.table(TableDefs.recoveryShares).put(SINGLETON_KEY, {
      issued_for: '',
      threshold: issued.threshold,
      sharing_id: Buffer.from(issued.sharingId).toString('hex'),
      wrapped_latest_secret: Buffer.from(issued.wrappedLatestSecret).toString('base64'),
      latest_secret_from_seqno: 40,
      encrypted_shares: Object.fromEntries(issued.encryptedShares.map((e) => [e.memberId, Buffer.from(e.encryptedShare).toString('base64')])),
    });
    tx.table(TableDefs.previousLedgerSecrets).put('0', Buffer.from(sealPreviousSecret(secrets[1]!, secrets[0]!, random)).toString('base64'));
  });
  const reassembled: (() => void)[] = [];
  const recorder: ShareRecorder = new ShareRecorder({
    logger: new MemoryLogger(),
    service: { keyPem: serviceKeyPem } as ServiceIdentity,
    randomBytes: random,
    isPrimary: () => true,
    executeWrite: write,
    recoveredRecordOf: (chain) => ({ encrypted_chain: JSON.stringify(chain.map((s) => s.fromSeqno)), last_recovered_seqno: 40 }),
    // The machine would post `key-reassembled`; here it waits for the test to release it.
    keyReassembled: (submission, key, error) =>
      void reassembled.push(() => {
        try {
          recorder.recordChain(submission, key, error);
        } catch (e) {
          submission.reject(e);
        }
      }),
  });
  const ids = members.map((m) => m.memberId);
  return { store, recorder, shares, ids, reassembled };
}

/** Submits a share as the machine's effect does; `recorded` counts the requests recorded with it. */
function submit(recorder: ShareRecorder, memberId: string, share: Uint8Array, recorded: string[]): Promise<ShareSubmission> {
  return new Promise((resolve, reject) => {
    const submission: SubmittedShare = { memberId, share, record: () => void recorded.push(memberId), resolve, reject };
    try {
      recorder.checkAndRecord(submission);
    } catch (e) {
      reject(e);
    }
  });
}

async function untilReassembled(reassembled: (() => void)[], count: number): Promise<void> {
  for (let i = 0; i < 1000 && reassembled.length < count; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.equal(reassembled.length, count, `${count} reassembly(ies) ended`);
}

function submittedIds(store: Store): string[] {
  const ids: string[] = [];
  store.beginTx().table(TableDefs.submittedShares).forEach((_, id) => void ids.push(id));
  return ids;
}

test('below the threshold a share is recorded with its request in one transaction; a second one from the same member records nothing', async () => {
  const { store, recorder, shares, ids } = await setUp();
  const recorded: string[] = [];
  const answer = await submit(recorder, ids[0]!, shares.get(ids[0]!)!, recorded);
  assert.equal(answer.submitted_count, 1);
  assert.equal(answer.txId?.seqno, store.version, 'the answer names the transaction that recorded the share');
  assert.deepEqual(submittedIds(store), [ids[0]]);
  assert.deepEqual(recorded, [ids[0]]);
  const version = store.version;
  await assert.rejects(submit(recorder, ids[0]!, shares.get(ids[0]!)!, recorded), code('ShareAlreadySubmitted'));
  assert.equal(store.version, version, 'a refused share writes nothing');
  assert.deepEqual(recorded, [ids[0]]);
});

test('at the threshold nothing is written until the key is reassembled; then the chain is recorded and the stored shares dropped', async () => {
  const { store, recorder, shares, ids, reassembled } = await setUp();
  const recorded: string[] = [];
  await submit(recorder, ids[0]!, shares.get(ids[0]!)!, recorded);
  const version = store.version;
  const answer = submit(recorder, ids[1]!, shares.get(ids[1]!)!, recorded);
  await untilReassembled(reassembled, 1);
  assert.equal(store.version, version, 'the threshold-th share is not recorded before its key is checked');
  reassembled[0]!();
  const recovered = await answer;
  assert.equal(recovered.submitted_count, 2);
  const record = store.beginTx().table(TableDefs.recoveredLedgerSecrets).get(SINGLETON_KEY);
  assert.equal(record?.encrypted_chain, '[0,40]', 'the whole chain, oldest first');
  assert.deepEqual(submittedIds(store), []);
  assert.deepEqual(recorded, [ids[0], ids[1]]);
  await assert.rejects(submit(recorder, ids[2]!, shares.get(ids[2]!)!, recorded), code('NotWaitingForShares'), 'no share is taken once the secrets are recovered');
});

test('two reassemblies at once: the first records the chain, the second is refused when its transaction checks again', async () => {
  const { store, recorder, shares, ids, reassembled } = await setUp();
  const recorded: string[] = [];
  await submit(recorder, ids[0]!, shares.get(ids[0]!)!, recorded);
  const second = submit(recorder, ids[1]!, shares.get(ids[1]!)!, recorded);
  const third = submit(recorder, ids[2]!, shares.get(ids[2]!)!, recorded);
  await untilReassembled(reassembled, 2);
  reassembled[0]!();
  await second;
  const version = store.version;
  reassembled[1]!();
  await assert.rejects(third, code('NotWaitingForShares'));
  assert.equal(store.version, version, 'the refused one wrote nothing');
  assert.deepEqual(recorded, [ids[0], ids[1]]);
});

test('a wrong share at the threshold is refused when its key is checked, and the shares accepted before it stay', async () => {
  const { store, recorder, shares, ids, reassembled } = await setUp();
  const recorded: string[] = [];
  await submit(recorder, ids[0]!, shares.get(ids[0]!)!, recorded);
  const wrong = new Uint8Array(shares.get(ids[1]!)!);
  wrong[wrong.length - 1]! ^= 0x01;
  const version = store.version;
  const refused = submit(recorder, ids[1]!, wrong, recorded);
  await untilReassembled(reassembled, 1);
  reassembled[0]!();
  await assert.rejects(refused, code('ShareReconstructionFailed'));
  assert.equal(store.version, version);
  assert.deepEqual(submittedIds(store), [ids[0]]);
  const right = submit(recorder, ids[1]!, shares.get(ids[1]!)!, recorded);
  await untilReassembled(reassembled, 2);
  reassembled[1]!();
  assert.equal((await right).submitted_count, 2);
});
