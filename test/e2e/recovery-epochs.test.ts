/**
 * End to end: what a disaster recovery must bring back beyond one ledger secret, real processes.
 * A ledger rekeyed twice recovers every epoch's private records, from ledger.read_only_directories
 * only; the recovered service is recovered again (recovery_count 2, endorsements chained, both
 * epochs readable), both times from a snapshot of the first service, which a joiner of the second
 * recovery fetches and verifies with the newest certificate. A recovery starts from a snapshot when the chunks before it are gone, and a
 * tampered ledger is recovered up to the last good signature, with the place it stopped logged.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifySignatureReceipt } from '../../src/merkle/index.js';
import { mustApply } from '../../src/testing/jwt.js';
import { joinOptionsOf, removeDir, startJoiningNode, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { until, waitCommitted } from '../../src/testing/network.js';
import { openRecoveredService, prepareRecoveryMembers, startRecoverNode, type RecoveryMember } from '../../src/testing/recovery.js';

const FAST = {
  ledger_signatures: { delay: '20ms' },
  consensus: { election_timeout: '500ms', message_timeout: '50ms' },
  ledger: { chunk_size: '4KB' },
};

async function write(node: StartedNode, id: number, msg: string): Promise<string> {
  const answer = await node.client.request('POST', '/app/log/private', { body: { id, msg }, identity: node.user });
  assert.equal(answer.status, 200, `write ${id}: ${answer.text}`);
  return answer.headers['x-covenant-transaction-id'] as string;
}

async function writeMany(node: StartedNode, from: number, to: number): Promise<string> {
  let last = '';
  for (let i = from; i < to; i++) last = await write(node, i, `record ${i} ${'r'.repeat(60)}`);
  await waitCommitted(node, last);
  return last;
}

async function assertReadable(node: StartedNode, from: number, to: number): Promise<void> {
  for (let i = from; i < to; i++) {
    const answer = await node.client.request('GET', `/app/log/private?id=${i}`, { identity: node.user });
    assert.equal(answer.body?.msg, `record ${i} ${'r'.repeat(60)}`, `record ${i} on ${node.address}`);
  }
}

/** Waits until the service issued new shares (each issue re-encrypts member 0's share). */
async function sharesReissued(node: StartedNode, before: string | undefined): Promise<string> {
  return until('new recovery shares', async () => {
    const answer = await node.client.request('GET', `/gov/recovery/encrypted-shares/${node.member.id}`);
    const share = answer.status === 200 ? (answer.body.encrypted_share as string) : undefined;
    return share !== undefined && share !== before ? share : undefined;
  });
}

async function committedTxId(node: StartedNode): Promise<string> {
  return String((await node.client.request('GET', '/node/commit')).body.transaction_id);
}

async function oneMemberService(): Promise<{ node: StartedNode; dir: string; members: RecoveryMember[] }> {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-old-'));
  const { members, startPatch } = await prepareRecoveryMembers(dir, 1, 1);
  const node = await startNode({ dir, configPatch: { ...FAST, snapshots: { tx_count: 25 }, command: { start: startPatch } } });
  members[0]!.identity = node.member;
  return { node, dir, members };
}

describe('disaster recovery across epochs', () => {
  test('a ledger rekeyed twice is recovered from read-only directories, then recovered again', async () => {
    const { node: old, dir, members } = await oneMemberService();
    const cleanup: StartedNode[] = [old];
    try {
      let share = await sharesReissued(old, undefined);
      await writeMany(old, 0, 10);
      let lastRecord = '';
      for (const epoch of [1, 2]) {
        await mustApply(old, [{ name: 'trigger_ledger_rekey', args: {} }]);
        share = await sharesReissued(old, share);
        lastRecord = await writeMany(old, epoch * 10, epoch * 10 + 10);
      }
      const oldSignature = await committedTxId(old);
      // Read-only directories hold completed chunks: end the chunk in progress (it completes at the
      // next signature, which one more committed write passes).
      await mustApply(old, [{ name: 'trigger_ledger_chunk', args: {} }]);
      await write(old, 999, 'ends the chunk');
      // The recovery reads completed chunks only: the one that holds oldSignature must be complete
      // (a chunk that ends at a snapshot after the last record may be, while the next one is not).
      const lastSeqno = Math.max(Number(lastRecord.split('.')[1]), Number(oldSignature.split('.')[1]));
      const completedUpTo = () => Math.max(0, ...readdirSync(join(dir, 'ledger')).map((f) => Number(/^ledger_\d+-(\d+)\.committed$/.exec(f)?.[1] ?? 0)));
      await until('the chunk of the last record and of the signature is completed', async () => (completedUpTo() >= lastSeqno ? true : undefined));
      await old.kill();

      const first = await startRecoverNode({
        from: dir,
        previousServiceCertificatePem: old.serviceCertificatePem,
        user: old.user,
        member: old.member,
        readOnlyLedger: true,
        configPatch: { ...FAST, ledger: { directory: 'ledger', read_only_directories: ['old_ledger'], chunk_size: '4KB' } },
      });
      cleanup.push(first);
      const recoveredFrom = Number(/recovering the service from seqno (\d+)/.exec(first.output())?.[1]);
      assert.ok(recoveredFrom >= lastSeqno, `the copy holds the signature ${oldSignature} asked for below: recovered up to ${recoveredFrom}`);
      await openRecoveredService(first, old.serviceCertificatePem, members);
      await assertReadable(first, 0, 30);
      share = await sharesReissued(first, share);
      await writeMany(first, 30, 40);
      await first.kill();

      // The second recovery reads both the old ledger and what the first recovered service wrote.
      const second = await startRecoverNode({
        from: first.dir,
        previousServiceCertificatePem: first.serviceCertificatePem,
        user: old.user,
        member: old.member,
        prepare: (copy) => {
          cpSync(join(first.dir, 'old_ledger'), join(copy, 'old_ledger'), { recursive: true });
          // Without the first recovered service's own snapshots, the second recovery starts from
          // the first service's, which it endorses a second time.
          for (const name of readdirSync(join(copy, 'snapshots'))) if (Number(name.split('_')[1]) > recoveredFrom) rmSync(join(copy, 'snapshots', name));
        },
        configPatch: { ...FAST, ledger: { directory: 'ledger', read_only_directories: ['old_ledger'], chunk_size: '4KB' } },
      });
      cleanup.push(second);
      // Both recoveries started from a snapshot of the first service: the second one from the copy
      // the first recovered service endorsed, which a joiner of the second fetches and verifies
      // with the newest certificate through its two endorsements.
      for (const node of [first, second]) assert.match(node.output(), /starting from snapshot .*snapshot_\d+_\d+\.committed/);
      assert.match(first.output(), /its receipt now carries the new service's endorsement of the previous identity \(1 endorsement/);
      assert.match(second.output(), /its receipt now carries the new service's endorsement of the previous identity \(2 endorsement/);
      const joiner = await startJoiningNode({ ...joinOptionsOf(second), configPatch: FAST, waitUntilJoined: false });
      cleanup.push(joiner);
      await until('the joiner of the recovering service', async () => {
        const state = await joiner.client.request('GET', '/node/state', { timeoutMs: 2000 }).catch(() => undefined);
        return state?.status === 200 && state.body.state === 'PartOfPublicNetwork' ? state.body : undefined;
      }).catch((e: Error) => {
        throw new Error(`${e.message}:\n${joiner.output().slice(-3000)}`);
      });
      assert.match(joiner.output(), /fetched snapshot snapshot_\d+_\d+\.committed/);
      await openRecoveredService(second, first.serviceCertificatePem, members);
      assert.equal((await second.client.request('GET', '/node/network')).body.recovery_count, 2);
      await assertReadable(second, 0, 40);
      await until('the joiner reads the private records', async () => ((await joiner.client.request('GET', '/node/state')).body.state === 'PartOfNetwork' ? true : undefined));
      assert.ok((await joiner.client.request('GET', '/node/state')).body.startup_seqno > 0, 'the joiner started from the snapshot');
      await assertReadable(joiner, 0, 40);
      let lastAnswer = '';
      const receipt = await until('the receipt of a first-epoch signature', async () => {
        const answer = await second.client.request('GET', `/node/receipt?transaction_id=${oldSignature}`);
        lastAnswer = `${answer.status} ${answer.text}`;
        return answer.status === 200 ? answer.body.receipt : undefined;
      }).catch((e: Error) => {
        throw new Error(`${e.message}: ${lastAnswer}`);
      });
      assert.equal(receipt.service_endorsements?.length, 2, 'two endorsements chain the first service to the third');
      verifySignatureReceipt(receipt, second.serviceCertificatePem);
    } finally {
      for (const node of cleanup) await node.kill();
      for (const node of cleanup.slice(1)) removeDir(node.dir);
      removeDir(dir);
    }
  });

  test('a recovery starts from a snapshot when the chunks before it are gone', async () => {
    const { node: old, dir, members } = await oneMemberService();
    let recovered: StartedNode | undefined;
    try {
      await sharesReissued(old, undefined);
      await writeMany(old, 0, 60);
      // A snapshot is written over later turns and committed once its evidence is: wait for one.
      await until('a committed snapshot', async () => (readdirSync(join(dir, 'snapshots')).some((f) => f.endsWith('.committed')) ? true : undefined));
      await old.kill();
      const snapshots = readdirSync(join(dir, 'snapshots')).filter((f) => f.endsWith('.committed'));
      assert.ok(snapshots.length > 0, 'the old service made a committed snapshot');
      recovered = await startRecoverNode({
        from: dir,
        previousServiceCertificatePem: old.serviceCertificatePem,
        user: old.user,
        member: old.member,
        configPatch: FAST,
        prepare: (copy) => {
          const newest = Math.max(...readdirSync(join(copy, 'snapshots')).filter((f) => f.endsWith('.committed')).map((f) => Number(f.split('_')[1])));
          for (const chunk of readdirSync(join(copy, 'ledger'))) {
            const last = Number(/^ledger_\d+-(\d+)\.committed$/.exec(chunk)?.[1] ?? Infinity);
            if (last < newest) rmSync(join(copy, 'ledger', chunk));
          }
        },
      });
      const state = (await recovered.client.request('GET', '/node/state')).body;
      assert.ok(state.startup_seqno > 0, `the recovery read from the snapshot at ${state.startup_seqno}`);
      await openRecoveredService(recovered, old.serviceCertificatePem, members);
      await assertReadable(recovered, 0, 60);
    } finally {
      await old.kill();
      if (recovered) {
        await recovered.kill();
        removeDir(recovered.dir);
      }
      removeDir(dir);
    }
  });

  test('a tampered ledger is recovered up to the last good signature, and the node says where it stopped', async () => {
    const { node: old, dir } = await oneMemberService();
    let recovered: StartedNode | undefined;
    try {
      await writeMany(old, 0, 60);
      const oldLast = Number((await committedTxId(old)).split('.')[1]);
      await old.kill();
      rmSync(join(dir, 'snapshots'), { recursive: true, force: true });
      let tampered = '';
      recovered = await startRecoverNode({
        from: dir,
        previousServiceCertificatePem: old.serviceCertificatePem,
        user: old.user,
        member: old.member,
        configPatch: FAST,
        prepare: (copy) => {
          const chunks = readdirSync(join(copy, 'ledger')).filter((f) => f.endsWith('.committed')).sort((a, b) => Number(a.split(/[_-]/)[1]) - Number(b.split(/[_-]/)[1]));
          tampered = chunks.at(-2)!;
          const path = join(copy, 'ledger', tampered);
          const bytes = readFileSync(path);
          bytes[Math.floor(bytes.length / 2)] ^= 0xff;
          writeFileSync(path, bytes);
        },
      });
      const state = (await recovered.client.request('GET', '/node/state')).body;
      assert.ok(state.last_signed_seqno > 0 && state.last_signed_seqno < oldLast, `recovered up to ${state.last_signed_seqno}, before ${oldLast}`);
      assert.match(recovered.output(), new RegExp(`reading the ledger stopped at ${tampered.replace('.', '\\.')}:\\d+`));
    } finally {
      await old.kill();
      if (recovered) {
        await recovered.kill();
        removeDir(recovered.dir);
      }
      removeDir(dir);
    }
  });
});
