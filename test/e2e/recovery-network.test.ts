/**
 * End to end: disaster recovery of a three-node network (spec "Disaster recovery procedure" 1–4),
 * real processes. Every node is killed, one of them earlier than the others (its ledger is
 * behind); a recover node on each of two old ledgers reports its last_signed_seqno, the one with
 * the higher is kept and the other stopped; two new nodes join the kept one (PartOfPublicNetwork);
 * members open the recovery; every recover node starts from the old service's newest snapshot, which
 * the kept one endorses for the new identity and the joiners fetch; after the first share the primary is killed, and the second share,
 * submitted to the new primary, completes the collection (the first was kept in the store). Every
 * record is readable on the surviving nodes, and new writes commit.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ACCEPT_BALLOT, GovRequestFailed, propose, submitRecoveryShare, vote } from '../../src/cli/member.js';
import { joinOptionsOf, memberConnectionOf, removeDir, startJoiningNode, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { until, waitCommitReaches, waitCommitted } from '../../src/testing/network.js';
import { prepareRecoveryMembers, recoveryMemberConnection, startRecoverNode } from '../../src/testing/recovery.js';

const FAST = {
  ledger_signatures: { delay: '20ms' },
  consensus: { election_timeout: '500ms', message_timeout: '50ms' },
  ledger: { chunk_size: '4KB' },
  // The old service takes snapshots: the recover nodes start from one, the joiners fetch it.
  snapshots: { tx_count: 25 },
};

async function write(node: StartedNode, id: number, msg: string): Promise<string> {
  const answer = await node.client.request('POST', '/app/log/private', { body: { id, msg }, identity: node.user });
  assert.equal(answer.status, 200, `write ${id}: ${answer.text}`);
  return answer.headers['x-covenant-transaction-id'] as string;
}

async function read(node: StartedNode, id: number): Promise<string | undefined> {
  const answer = await node.client.request('GET', `/app/log/private?id=${id}`, { identity: node.user });
  return answer.status === 200 ? (answer.body.msg as string) : undefined;
}

async function stateOf(node: StartedNode): Promise<{ state: string; last_signed_seqno: number }> {
  return (await node.client.request('GET', '/node/state')).body;
}

describe('disaster recovery of a three-node network', () => {
  test('keeps the best ledger, joins new nodes, and survives a primary killed during share collection', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'covenant-old-'));
    const { members, startPatch } = await prepareRecoveryMembers(dir, 3, 2);
    const first = await startNode({ dir, configPatch: { ...FAST, command: { start: startPatch } } });
    members[0]!.identity = first.member;
    const all: StartedNode[] = [first];
    try {
      for (let i = 0; i < 2; i++) all.push(await startJoiningNode({ ...joinOptionsOf(first), configPatch: FAST }));
      let last = '';
      for (let i = 0; i < 40; i++) last = await write(first, i, `before ${i} ${'x'.repeat(60)}`);
      await waitCommitted(all[2]!, last);
      // One backup dies first: its ledger misses what follows.
      await all[2]!.kill();
      for (let i = 40; i < 80; i++) last = await write(first, i, `after ${i} ${'y'.repeat(60)}`);
      await waitCommitted(all[1]!, last);
      // The recover node starts from a committed snapshot: the backup holds one once the evidence of a
      // snapshot and a signature after it are committed, which may come after the last write.
      await until('a committed snapshot on the backup', async () => (readdirSync(join(all[1]!.dir, 'snapshots')).some((f) => f.endsWith('.committed')) ? true : undefined), 20_000);
      await all[0]!.kill();
      await all[1]!.kill();

      // A recover node per old ledger; the operator keeps the one with the highest last_signed_seqno.
      const recoverOn = (old: StartedNode) => startRecoverNode({ from: old.dir, previousServiceCertificatePem: first.serviceCertificatePem, user: first.user, member: first.member, configPatch: FAST });
      const behind = await recoverOn(all[2]!);
      const ahead = await recoverOn(all[1]!);
      all.push(behind, ahead);
      const [behindState, aheadState] = [await stateOf(behind), await stateOf(ahead)];
      assert.ok(aheadState.last_signed_seqno > behindState.last_signed_seqno, `${aheadState.last_signed_seqno} > ${behindState.last_signed_seqno}`);
      await behind.kill();

      const joiners: StartedNode[] = [];
      for (let i = 0; i < 2; i++) {
        // Trusted at once (the service is not open); no member vote is needed to let them in.
        const joiner = await startJoiningNode({ ...joinOptionsOf(ahead), configPatch: FAST, waitUntilJoined: false, trust: false });
        all.push(joiner);
        await until('the joiner is part of the public network', async () => {
          const state = await joiner.client.request('GET', '/node/state').catch(() => undefined);
          return state?.body?.state === 'PartOfPublicNetwork' ? true : undefined;
        }, 60_000);
        joiners.push(joiner);
      }
      assert.match(ahead.output(), /its receipt now carries the new service's endorsement of the previous identity/);
      for (const j of joiners) {
        assert.match(j.output(), /fetched snapshot snapshot_\d+_\d+\.committed/);
        assert.ok((await j.client.request('GET', '/node/state')).body.startup_seqno > 0, 'the joiner started from the endorsed snapshot');
      }

      const m0 = memberConnectionOf(ahead);
      const proposal = await propose(m0, [
        { name: 'transition_service_to_open', args: { previous_service_identity: first.serviceCertificatePem, next_service_identity: ahead.serviceCertificatePem } },
      ]);
      if (proposal.body.state === 'Open') await vote(m0, proposal.body.proposal_id, ACCEPT_BALLOT);
      const firstShare = await submitRecoveryShare(recoveryMemberConnection(ahead, members[1]!), members[1]!.encryptionPrivateKeyPem);
      assert.equal(firstShare.body.submitted_count, 1);
      // Wait until the stored share is replicated to a majority, then kill the primary.
      assert.ok(firstShare.transactionId, 'the answer names the transaction that kept the share');
      await waitCommitReaches(joiners[0]!, firstShare.transactionId);
      await ahead.kill();

      const primary = await until('a new primary among the joined nodes', async () => {
        for (const j of joiners) {
          const answer = await j.client.request('GET', '/node/network/nodes/primary').catch(() => undefined);
          const id = answer?.status === 200 ? answer.body.node_id : undefined;
          const self = await j.client.request('GET', '/node/network/nodes/self').catch(() => undefined);
          if (id !== undefined && self?.body?.node_id === id) return j;
        }
        return undefined;
      }, 30_000);
      const second = await until('the second share is accepted by the new primary', async () => {
        try {
          return await submitRecoveryShare(recoveryMemberConnection(primary, members[2]!), members[2]!.encryptionPrivateKeyPem);
        } catch (e) {
          if (e instanceof GovRequestFailed && e.status === 503) return undefined;
          throw e;
        }
      });
      assert.equal(second.body.submitted_count, 2, 'the first share was kept through the change of primary');

      await until('the recovered service is open', async () => ((await primary.client.request('GET', '/node/network')).body.service_status === 'Open' ? true : undefined), 60_000);
      for (const j of joiners) {
        await until('the joiner read its private ledger', async () => ((await stateOf(j)).state === 'PartOfNetwork' ? true : undefined), 60_000);
        // A joiner may be PartOfNetwork before it applied the primary's opening of the service (its
        // application answers 503 FrontendNotOpen until then): wait for that, not for a record.
        await until('the joiner sees the service open', async () => ((await j.client.request('GET', '/node/ready/app')).status === 204 ? true : undefined), 30_000);
        assert.equal(await read(j, 0), `before 0 ${'x'.repeat(60)}`);
        assert.equal(await read(j, 79), `after 79 ${'y'.repeat(60)}`);
      }
      const fresh = await write(primary, 500, 'after the recovery');
      for (const j of joiners) await waitCommitted(j, fresh);
      assert.equal((await primary.client.request('GET', '/node/network')).body.recovery_count, 1);
    } finally {
      for (const node of all) await node.kill();
      for (const node of all) removeDir(node.dir);
    }
  });
});
