/**
 * End to end: sealing-based recovery (spec "Local sealing", "Recovery decision protocol"), real
 * processes. A three-node network with sealing_recovery configured (every node a location, each
 * with its own virtual CPU key file) writes private and public records and is rekeyed; every node
 * is killed. Three Recover nodes on copies of the old ledgers, each on its old location and CPU
 * key, run the decision protocol: exactly one opens the service by election, the other two go on
 * as its joiners, every private record of both ledger secrets is readable, and no member voted
 * or submitted a share. A Recover node whose virtual CPU key differs cannot unseal, says why, and
 * its service is recovered with member shares instead.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ACCEPT_BALLOT, propose, vote } from '../../src/cli/member.js';
import { sealingConfigOf, sealingLocations, type SealingLocation } from '../../src/cli/sandbox-nodes.js';
import { HttpsClient } from '../../src/platform/https-client.js';
import { joinOptionsOf, memberConnectionOf, removeDir, spawnNode, startJoiningNode, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { until, waitCommitted } from '../../src/testing/network.js';
import { openRecoveredService, prepareRecoveryMembers, startRecoverNode } from '../../src/testing/recovery.js';

const FAST = {
  ledger_signatures: { delay: '20ms' },
  consensus: { election_timeout: '500ms', message_timeout: '50ms' },
  ledger: { chunk_size: '4KB' },
};

const locations = sealingLocations;

function sealingOf(all: SealingLocation[], i: number, cpuKeyFile: string, failover = '0ms'): Record<string, unknown> {
  return { sealing_recovery: sealingConfigOf(all, i, cpuKeyFile, failover) };
}

async function write(node: StartedNode, scope: 'private' | 'public', id: number): Promise<string> {
  const answer = await node.client.request('POST', `/app/log/${scope}`, { body: { id, msg: `${scope} ${id}` }, identity: node.user });
  assert.equal(answer.status, 200, answer.text);
  return answer.headers['x-covenant-transaction-id'] as string;
}

/** A Recover node on a copy of `old`'s ledger, as an operator would start it: its address and service certificate once it answers. */
interface RecoverProcess {
  readonly dir: string;
  readonly spawned: ReturnType<typeof spawnNode>;
}

function spawnRecover(old: StartedNode, patch: Record<string, unknown>): RecoverProcess {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-sealed-recover-'));
  cpSync(join(old.dir, 'ledger'), join(dir, 'ledger'), { recursive: true });
  if (existsSync(join(old.dir, 'snapshots'))) cpSync(join(old.dir, 'snapshots'), join(dir, 'snapshots'), { recursive: true });
  writeFileSync(join(dir, 'previous_service_cert.pem'), old.serviceCertificatePem);
  const config = {
    command: { type: 'Recover', service_certificate_file: 'service_cert.pem', recover: { previous_service_identity_file: 'previous_service_cert.pem' } },
    node_certificate: { subject_alt_names: ['iPAddress:127.0.0.1'] },
    node_certificate_file: 'node_cert.pem',
    rpc_interfaces: { primary: { bind_address: '127.0.0.1:0' } },
    node_to_node_interface: { bind_address: '127.0.0.1:0' },
    ledger: { directory: 'ledger', chunk_size: '4KB' },
    snapshots: { directory: 'snapshots' },
    output_files: { rpc_addresses_file: 'rpc_addresses.json' },
    ledger_signatures: FAST.ledger_signatures,
    consensus: FAST.consensus,
    ...patch,
  };
  writeFileSync(join(dir, 'node.json'), JSON.stringify(config, null, 2));
  return { dir, spawned: spawnNode(join(dir, 'node.json'), dir) };
}

/** A recovered service that opened (while a node reads the old ledger, its store says what the old service was). */
function isRecoveredOpen(network: any): boolean {
  return network?.service_status === 'Open' && network.recovery_count === 1;
}

/** The one of `processes` (not rejoined) whose recovered service opened, once there is one. */
function openerAmong(processes: readonly RecoverProcess[], timeoutMs: number): Promise<RecoverProcess> {
  return until(
    'a recovered node whose service is open',
    async () => {
      for (const p of processes) {
        if (existsSync(join(p.dir, 'joined'))) continue;
        if (isRecoveredOpen(await getOn(p, '/node/network'))) return p;
      }
      return undefined;
    },
    timeoutMs,
    200,
  );
}

/** A three-node network with sealing_recovery, every node a location with its own virtual CPU key file. */
async function startSealedNetwork(where: SealingLocation[]): Promise<StartedNode[]> {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-sealed-'));
  const first = await startNode({ dir, configPatch: { ...FAST, ...sealingOf(where, 0, 'cpu_key') } });
  const old: StartedNode[] = [first];
  for (let i = 1; i < where.length; i++) old.push(await startJoiningNode({ ...joinOptionsOf(first), configPatch: { ...FAST, ...sealingOf(where, i, 'cpu_key') } }));
  return old;
}

/** GET on a recovering or rejoined node, trusting whichever service certificate it has now. */
async function getOn(p: RecoverProcess, path: string): Promise<any> {
  const addressFile = join(p.dir, 'rpc_addresses.json');
  // The service certificate once there is one; before, the node's self-signed certificate.
  const certFile = [join(p.dir, 'joined', 'service_cert.pem'), join(p.dir, 'service_cert.pem'), join(p.dir, 'node_cert.pem')].find((f) => existsSync(f)) ?? '';
  if (!existsSync(addressFile) || !existsSync(certFile)) return undefined;
  const address = Object.values(JSON.parse(readFileSync(addressFile, 'utf8')) as Record<string, string>)[0]!;
  const client = new HttpsClient(address, readFileSync(certFile, 'utf8'));
  try {
    const answer = await client.request('GET', path, { timeoutMs: 2000 });
    return answer.status === 200 ? answer.body : undefined;
  } catch {
    return undefined;
  } finally {
    client.close();
  }
}

describe('sealing-based recovery', () => {
  test('three nodes recover their service with no member action: one opens by election, the others join it', async () => {
    const where = await locations(3);
    const old = await startSealedNetwork(where);
    const first = old[0]!;
    const recovering: RecoverProcess[] = [];
    try {
      for (const node of old) assert.equal(statMode(join(node.dir, 'cpu_key')), 0o600, 'the virtual CPU key file is created with mode 0600');
      let last = '';
      for (let i = 0; i < 15; i++) last = await write(first, 'private', i);
      // A rekey: recovery must bring back both secrets.
      const m0 = memberConnectionOf(first);
      const rekey = await propose(m0, [{ name: 'trigger_ledger_rekey', args: {} }]);
      if (rekey.body.state === 'Open') await vote(m0, rekey.body.proposal_id, ACCEPT_BALLOT);
      for (let i = 15; i < 30; i++) last = await write(first, 'private', i);
      last = await write(first, 'public', 1);
      for (const node of old) await waitCommitted(node, last);
      // The primary issued sealed shares to the three nodes for the new secret.
      await until('sealed shares for three nodes after the rekey', async () => (/sealed shares issued to 3 node\(s\) for the ledger secret from seqno [1-9]/.test(first.output()) ? true : undefined), 30_000);
      last = await write(first, 'private', 30);
      for (const node of old) await waitCommitted(node, last);
      for (const node of old) await node.kill();

      for (const [i, node] of old.entries()) recovering.push(spawnRecover(node, sealingOf(where, i, join(node.dir, 'cpu_key'))));
      const opener = await openerAmong(recovering, 90_000);
      const network = await getOn(opener, '/node/network');
      assert.equal(network.recovery_count, 1);
      assert.deepEqual(network.recovery_decision?.open_kind, 'Election');
      const others = recovering.filter((p) => p !== opener);
      for (const p of others) {
        await until('a location that restarted as a joiner is part of the network', async () => ((await getOn(p, '/node/state'))?.state === 'PartOfNetwork' ? true : undefined), 60_000, 200).catch((e) => {
          throw new Error(`${e}\n${p.spawned.output().slice(-3000)}`);
        });
        assert.match(p.spawned.output(), /opened the recovered service at .*: this node restarts as its joiner/);
        assert.ok(existsSync(join(p.dir, 'node.joined.json')), 'the joiner\'s configuration is written beside the Recover one');
      }
      assert.match(opener.spawned.output(), /sealing: unsealed the recovery key of node/);
      assert.match(opener.spawned.output(), /the service opens with the unsealed ledger secrets \(open_kind Election\), no member share needed/);
      // Every private record, of both secrets, on every node; no member took part.
      const user = first.user;
      for (const p of recovering) {
        const address = Object.values(JSON.parse(readFileSync(join(p.dir, 'rpc_addresses.json'), 'utf8')) as Record<string, string>)[0]!;
        const client = new HttpsClient(address, readFileSync(join(opener.dir, 'service_cert.pem'), 'utf8'));
        try {
          for (const id of [0, 14, 15, 29, 30]) {
            const answer = await until(`record ${id}`, async () => {
              const a = await client.request('GET', `/app/log/private?id=${id}`, { identity: user });
              return a.status === 200 ? a : undefined;
            });
            assert.equal(answer.body.msg, `private ${id}`);
          }
        } finally {
          client.close();
        }
      }
      for (const p of recovering) assert.doesNotMatch(p.spawned.output(), /recovery shares: \d+ of \d+ submitted/, 'no member submitted a share');
    } finally {
      for (const node of old) await node.kill();
      for (const p of recovering) p.spawned.process.kill('SIGKILL');
      for (const node of old) removeDir(node.dir);
      for (const p of recovering) removeDir(p.dir);
    }
  });

  test('the best ledger opens; a missing location holds the election until it comes back, unless failover is on', async () => {
    const where = await locations(3);
    const old = await startSealedNetwork(where);
    const first = old[0]!;
    const recovering: RecoverProcess[] = [];
    try {
      let last = '';
      for (let i = 0; i < 10; i++) last = await write(first, 'private', i);
      for (const node of old) await waitCommitted(node, last);
      // Location 2 dies first: its ledger is behind the others'.
      await old[2]!.kill();
      for (let i = 10; i < 20; i++) last = await write(first, 'private', i);
      for (const node of old.slice(0, 2)) await waitCommitted(node, last);
      await old[0]!.kill();
      await old[1]!.kill();

      // Failover off, location 1 missing: the others gossip, and wait for it, and say so.
      const [behind, ahead] = [spawnRecover(old[2]!, sealingOf(where, 2, join(old[2]!.dir, 'cpu_key'))), spawnRecover(old[0]!, sealingOf(where, 0, join(old[0]!.dir, 'cpu_key')))];
      recovering.push(behind, ahead);
      for (const p of [behind, ahead]) {
        const state = await until('waiting for the missing location', async () => {
          const s = await getOn(p, '/node/state').catch(() => undefined);
          return typeof s?.recovery_decision === 'string' && /heard 2 of 3 locations; waiting for gossip from location1/.test(s.recovery_decision) ? s : undefined;
        }, 60_000, 200);
        assert.equal(state.state, 'ReadingPublicLedger', 'nothing opened while a location is missing');
      }
      assert.match(ahead.spawned.output(), /recovery decision protocol: location "location0" listening on/);
      // Location 1 comes back: the election completes, for the best ledger (location 0 or 1, never 2).
      const back = spawnRecover(old[1]!, sealingOf(where, 1, join(old[1]!.dir, 'cpu_key')));
      recovering.push(back);
      const opener = await openerAmong([ahead, back, behind], 60_000);
      assert.notEqual(opener, behind, 'the location whose ledger is behind does not open');
      assert.equal((await getOn(opener, '/node/network')).recovery_decision.open_kind, 'Election');
      await until('the behind location rejoined', async () => ((await getOn(behind, '/node/state'))?.state === 'PartOfNetwork' ? true : undefined), 60_000, 200);

      // Again from the old ledgers, failover on, location 0 missing: the others open after the timeout.
      for (const p of recovering.splice(0)) {
        p.spawned.process.kill('SIGKILL');
        removeDir(p.dir);
      }
      const late = [1, 2].map((i) => spawnRecover(old[i]!, sealingOf(where, i, join(old[i]!.dir, 'cpu_key'), '1500ms')));
      recovering.push(...late);
      const failedOver = await openerAmong(late, 60_000);
      assert.equal((await getOn(failedOver, '/node/network')).recovery_decision.open_kind, 'Failover');
      assert.match(failedOver.spawned.output(), /open_kind Failover/);
    } finally {
      for (const node of old) await node.kill();
      for (const p of recovering) p.spawned.process.kill('SIGKILL');
      for (const node of old) removeDir(node.dir);
      for (const p of recovering) removeDir(p.dir);
    }
  });

  for (const variant of ['virtual CPU key', 'host data'] as const) {
    test(`a node whose ${variant} differs cannot unseal, says why, and its service is recovered with member shares`, async () => {
      const where = await locations(1);
      const dir = mkdtempSync(join(tmpdir(), 'covenant-sealed-'));
      const { members, startPatch } = await prepareRecoveryMembers(dir, 1, 1);
      const node = await startNode({ dir, configPatch: { ...FAST, ...sealingOf(where, 0, 'cpu_key'), command: { start: startPatch } } });
      members[0]!.identity = node.member;
      let recovered: StartedNode | undefined;
      try {
        const last = await write(node, 'private', 7);
        await waitCommitted(node, last);
        await until('sealed shares', async () => (/sealed shares issued to 1 node\(s\)/.test(node.output()) ? true : undefined), 30_000);
        await node.kill();
        const otherKey = join(mkdtempSync(join(tmpdir(), 'covenant-cpu-')), 'cpu_key');
        const cpuKey = variant === 'virtual CPU key' ? otherKey : join(node.dir, 'cpu_key');
        const env = variant === 'host data' ? { COVENANT_VIRTUAL_HOST_DATA: 'ab'.repeat(32) } : undefined;
        recovered = await startRecoverNode({
          from: node.dir,
          previousServiceCertificatePem: node.serviceCertificatePem,
          user: node.user,
          member: node.member,
          configPatch: { ...FAST, ...sealingOf(where, 0, cpuKey) },
          ...(env ? { env } : {}),
        });
        assert.match(recovered.output(), /sealing: cannot unseal the ledger secrets: .*UnsealFailed|sealing: cannot unseal the ledger secrets: .*(measurement|host data|CPU key).*falling back to member shares/);
        const state = await recovered.client.request('GET', '/node/network');
        assert.equal(state.body.service_status, 'Recovering', 'it opened nothing by itself');
        await openRecoveredService(recovered, node.serviceCertificatePem, members);
        const answer = await recovered.client.request('GET', '/app/log/private?id=7', { identity: node.user });
        assert.equal(answer.body.msg, 'private 7');
        assert.equal((await recovered.client.request('GET', '/node/network')).body.recovery_decision, undefined, 'opened by its members, not by the protocol');
        rmSync(join(otherKey, '..'), { recursive: true, force: true });
      } finally {
        await node.kill();
        if (recovered) {
          await recovered.kill();
          removeDir(recovered.dir);
        }
        removeDir(dir);
      }
    });
  }
});

function statMode(path: string): number {
  return statSync(path).mode & 0o777;
}
