/**
 * End to end: disaster recovery with member shares (spec "Disaster recovery procedure"), real
 * processes. A service with three recovery members (threshold 2) writes private and public
 * records across several chunks and is killed; a recover node on a copy of its ledger reads the
 * public domain under a new service identity; members open it and submit shares (bad shares are
 * refused and change nothing); every old record is readable, new writes commit, an old receipt
 * verifies with only the new service certificate, recovery_count is 1, the previous identity is
 * served.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ACCEPT_BALLOT, GovRequestFailed, propose, signedPost, submitRecoveryShare, vote } from '../../src/cli/member.js';
import { verifyReceipt, verifySignatureReceipt } from '../../src/merkle/index.js';
import { memberConnectionOf, removeDir, restartNode, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { until, waitCommitted } from '../../src/testing/network.js';
import { prepareRecoveryMembers, recoveryMemberConnection, removeRecoverDir, startRecoverNode, type RecoveryMember } from '../../src/testing/recovery.js';

const FAST = {
  ledger_signatures: { delay: '20ms' },
  consensus: { election_timeout: '500ms', message_timeout: '50ms' },
  ledger: { chunk_size: '4KB' },
};

async function write(node: StartedNode, scope: 'private' | 'public', id: number, msg: string): Promise<string> {
  const answer = await node.client.request('POST', `/app/log/${scope}`, { body: { id, msg }, identity: node.user });
  assert.equal(answer.status, 200, `write ${scope} ${id}: ${answer.text}`);
  return answer.headers['x-covenant-transaction-id'] as string;
}

async function read(node: StartedNode, scope: 'private' | 'public', id: number): Promise<string | undefined> {
  const answer = await node.client.request('GET', `/app/log/${scope}?id=${id}`, { identity: node.user });
  return answer.status === 200 ? (answer.body.msg as string) : undefined;
}

async function expectRefused(what: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(what, (e: unknown) => e instanceof GovRequestFailed && e.code === code, `expected ${code}`);
}

describe('disaster recovery with member shares', () => {
  test('a killed service is recovered from its ledger, opened with two of three shares, and keeps every record and receipt', async () => {
    const oldDir = mkdtempSync(join(tmpdir(), 'covenant-old-'));
    const { members, startPatch } = await prepareRecoveryMembers(oldDir, 3, 2);
    const old = await startNode({ dir: oldDir, configPatch: { ...FAST, command: { start: startPatch } } });
    members[0]!.identity = old.member;
    let recovered: StartedNode | undefined;
    try {
      // The service issues shares to its three recovery members once it is open.
      await until('recovery shares issued', async () => {
        const answer = await old.client.request('GET', `/gov/recovery/encrypted-shares/${old.member.id}`);
        return answer.status === 200 ? true : undefined;
      });
      let last = '';
      const early = await write(old, 'private', 0, 'the first private record');
      for (let i = 1; i < 60; i++) {
        last = await write(old, 'private', i, `private record ${i} ${'p'.repeat(80)}`);
        last = await write(old, 'public', i, `public record ${i} ${'q'.repeat(80)}`);
      }
      await waitCommitted(old, last);
      // The commit lands on a signature transaction of the old service: its receipt is signed by an old node.
      const oldSignature = String((await old.client.request('GET', '/node/commit')).body.transaction_id);
      const chunks = readdirSync(join(old.dir, 'ledger')).filter((f) => f.endsWith('.committed'));
      assert.ok(chunks.length >= 3, `the old ledger spans several chunks (${chunks.join(', ')})`);
      await old.kill();

      recovered = await startRecoverNode({ from: old.dir, previousServiceCertificatePem: old.serviceCertificatePem, user: old.user, member: old.member, configPatch: FAST });
      assert.notEqual(recovered.serviceCertificatePem, old.serviceCertificatePem, 'the recovered service has a new identity');
      const state = await recovered.client.request('GET', '/node/state');
      assert.ok(state.body.last_signed_seqno > 0, 'the recover node reports the last signed seqno it read');
      assert.ok(readdirSync(join(recovered.dir, 'ledger')).some((f) => f.endsWith('.recovery')), 'new ledger files carry .recovery while recovering');
      const network = await recovered.client.request('GET', '/node/network');
      assert.equal(network.body.service_status, 'Recovering');
      assert.equal(await read(recovered, 'public', 1), undefined, 'the application is closed while recovering');
      const nodes = await recovered.client.request('GET', '/node/network/nodes');
      assert.deepEqual(
        nodes.body.nodes.map((n: { node_id: string }) => n.node_id),
        [state.body.node_id],
        'the old nodes are deleted: only the recover node is listed',
      );

      // Shares are refused before members open the recovery.
      const m1 = recoveryMemberConnection(recovered, members[1]!);
      await expectRefused(submitRecoveryShare(m1, members[1]!.encryptionPrivateKeyPem), 'NotWaitingForShares');

      const m0 = memberConnectionOf(recovered);
      const proposal = await propose(m0, [
        { name: 'transition_service_to_open', args: { previous_service_identity: old.serviceCertificatePem, next_service_identity: recovered.serviceCertificatePem } },
      ]);
      if (proposal.body.state === 'Open') await vote(m0, proposal.body.proposal_id, ACCEPT_BALLOT);
      const waiting = await recovered.client.request('GET', '/node/network');
      assert.equal(waiting.body.service_status, 'WaitingForRecoveryShares');

      await checkBadShares(recovered, members);
      const first = await submitRecoveryShare(m1, members[1]!.encryptionPrivateKeyPem);
      assert.equal(first.body.submitted_count, 1);
      assert.match(first.body.message, /1 more needed/);
      await expectRefused(submitRecoveryShare(m1, members[1]!.encryptionPrivateKeyPem), 'ShareAlreadySubmitted');
      const second = await submitRecoveryShare(recoveryMemberConnection(recovered, members[2]!), members[2]!.encryptionPrivateKeyPem);
      assert.equal(second.body.submitted_count, 2);

      const node = recovered;
      await until('the recovered service is open', async () => ((await node.client.request('GET', '/node/network')).body.service_status === 'Open' ? true : undefined), 60_000);
      assert.equal((await node.client.request('GET', '/node/network')).body.recovery_count, 1);
      assert.equal((await node.client.request('GET', '/node/state')).body.state, 'PartOfNetwork');
      assert.equal((await node.client.request('GET', '/node/service/previous_identity')).body.previous_service_identity, old.serviceCertificatePem);
      assert.equal(await read(node, 'private', 0), 'the first private record');
      assert.equal(await read(node, 'private', 59), `private record 59 ${'p'.repeat(80)}`);
      assert.equal(await read(node, 'public', 59), `public record 59 ${'q'.repeat(80)}`);
      const fresh = await write(node, 'private', 1000, 'written after the recovery');
      await waitCommitted(node, fresh);
      assert.equal(await read(node, 'private', 1000), 'written after the recovery');
      assert.ok(!readdirSync(join(node.dir, 'ledger')).some((f) => f.endsWith('.recovery')), 'no .recovery file is left once the service is open');

      // A receipt of a transaction of the old service verifies with only the new certificate; so
      // does the receipt of an old signature, signed by an old node, through the endorsement of
      // the old service by the new one.
      const receiptOf = (txId: string) =>
        until(`a receipt of ${txId}`, async () => {
          const answer = await node.client.request('GET', `/node/receipt?transaction_id=${txId}`);
          return answer.status === 200 ? answer.body.receipt : undefined;
        });
      verifyReceipt(await receiptOf(early), node.serviceCertificatePem);
      const signed = await receiptOf(oldSignature);
      assert.equal(signed.service_endorsements?.length, 1, 'the old signature\'s receipt carries the new service\'s endorsement of the old one');
      verifySignatureReceipt(signed, node.serviceCertificatePem);
      assert.throws(() => verifySignatureReceipt({ ...signed, service_endorsements: undefined }, node.serviceCertificatePem));

      // Run again with its Recover configuration, the node resumes the recovered service as itself.
      await node.stop();
      recovered = await restartNode(node);
      assert.equal(await read(recovered, 'private', 1000), 'written after the recovery');
      assert.equal((await recovered.client.request('GET', '/node/network')).body.recovery_count, 1);
    } finally {
      await old.kill();
      if (recovered) {
        await recovered.kill();
        removeRecoverDir(recovered);
      }
      removeDir(oldDir);
    }
  });
});

/** Every bad share is refused with its code, and none counts. */
async function checkBadShares(node: StartedNode, members: RecoveryMember[]): Promise<void> {
  const m1 = recoveryMemberConnection(node, members[1]!);
  const post = (share: Uint8Array) => signedPost(m1, `/gov/recovery/members/${m1.memberId}:recover`, 'recovery_share', { share: Buffer.from(share).toString('base64') });
  await expectRefused(post(new Uint8Array([1, 2, 3])), 'MalformedShare');
  // A share of another sharing: right layout, another sharing id.
  const foreign = new Uint8Array(67);
  foreign[0] = 2;
  foreign[1] = 1;
  foreign[2] = 2;
  await expectRefused(post(foreign), 'ShareOfAnotherSharing');
  // The share of a member decrypted with another member's key does not decrypt at all; a member
  // that is not a recovery member (a user key signing) is not a member.
  const notMember = { ...m1, certificatePem: node.user.certificatePem, privateKeyPem: node.user.privateKeyPem, memberId: node.user.id };
  await assert.rejects(signedPost(notMember, `/gov/recovery/members/${node.user.id}:recover`, 'recovery_share', { share: 'AAAA' }), (e: unknown) => e instanceof GovRequestFailed && e.status === 401);
  const status = await node.client.request('GET', '/node/network');
  assert.equal(status.body.service_status, 'WaitingForRecoveryShares', 'refused shares change nothing');
}
