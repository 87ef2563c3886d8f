/**
 * End to end: networks of real node processes over loopback mutual TLS. Replication, reads from
 * every node, forwarding, failover after SIGKILL of the primary, restart from the ledger, crash
 * tolerance of a minority, no commit without a majority, and byte-identical committed chunks.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { joinOptionsOf, startJoiningNode, type StartedNode } from '../../src/testing/node-process.js';
import { startNetwork, until, waitCommitted } from '../../src/testing/network.js';
import { verifyCoseReceipt } from '../../src/merkle/index.js';
import { parseTxId } from '../../src/base/ids.js';

const FAST = {
  ledger_signatures: { delay: '20ms' },
  consensus: { election_timeout: '500ms', message_timeout: '50ms' },
  ledger: { chunk_size: '4KB' },
};

async function write(node: StartedNode, id: number, msg: string): Promise<string> {
  const answer = await node.client.request('POST', '/app/log/private', { body: { id, msg }, identity: node.user });
  assert.equal(answer.status, 200, `write ${id}: ${answer.text}`);
  const txId = answer.headers['x-covenant-transaction-id'];
  assert.equal(typeof txId, 'string');
  return txId as string;
}

function committedChunks(node: StartedNode): Map<string, Buffer> {
  const dir = join(node.dir, 'ledger');
  return new Map(readdirSync(dir).filter((f) => f.endsWith('.committed')).map((f) => [f, readFileSync(join(dir, f))]));
}

function alive(node: StartedNode): boolean {
  return node.process.exitCode === null && node.process.signalCode === null;
}

describe('a three-node network', () => {
  test('replicates, forwards, fails over, restarts a node from its ledger, and keeps identical chunks', async () => {
    // The first node writes several chunks before the others join: joiners catch up on them.
    const network = await startNetwork(1, FAST);
    const [first] = network.nodes as [StartedNode];
    try {
      let last = '';
      for (let i = 0; i < 150; i++) last = await write(first, i, `early message ${i} ${'x'.repeat(60)}`);
      await waitCommitted(first, last);
      for (let i = 0; i < 2; i++) {
        network.nodes.push(
          await startJoiningNode({ ...joinOptionsOf(first), configPatch: FAST }),
        );
      }
      const nodes = network.nodes;

      // Every node reads what the primary wrote; commit agrees.
      const txId = await write(first, 1000, 'replicated');
      for (const node of nodes) {
        await waitCommitted(node, txId);
        const read = await node.client.request('GET', '/app/log/private?id=1000', { identity: node.user });
        assert.equal(read.body.msg, 'replicated');
        assert.equal((await node.client.request('GET', '/app/log/private?id=42', { identity: node.user })).body.msg.startsWith('early message 42'), true);
        // Historical queries are answered from each node's own ledger files (the joiners' replicated ones).
        const historical = await node.client.request('GET', '/app/log/private/historical?id=1000', {
          identity: node.user,
          headers: { 'x-covenant-transaction-id': txId },
        });
        assert.equal(historical.status, 200);
        assert.equal(historical.body.msg, 'replicated');
      }
      // Every node holds the service key: a backup answers COSE receipts the service certificate verifies.
      const receipt = await until('a COSE receipt from a backup', async () => {
        const answer = await nodes[2]!.client.request('GET', `/node/receipt/cose?transaction_id=${txId}`);
        return answer.status === 200 ? answer : undefined;
      });
      assert.equal(`${verifyCoseReceipt(receipt.bytes, first.serviceCertificatePem).seqno}`, txId.split('.')[1]);

      // Operator view: one primary, three trusted nodes, one configuration.
      const listing = await nodes[1]!.client.request('GET', '/node/network/nodes');
      assert.equal(listing.body.nodes.length, 3);
      assert.equal(listing.body.nodes.filter((n: any) => n.primary).length, 1);
      assert.ok(listing.body.nodes.every((n: any) => n.status === 'Trusted'));
      const consensus = await nodes[2]!.client.request('GET', '/node/consensus');
      assert.equal(consensus.body.configs.length, 1);
      assert.equal(Object.keys(consensus.body.configs[0].nodes).length, 3);
      // Backups applied the live write's private write set from the primary's copy in clear, and
      // decrypted the early ones (read back from the primary's ledger as they caught up).
      for (const backup of nodes.slice(1)) {
        const applied = (await backup.client.request('GET', '/node/consensus')).body.private_write_sets_applied;
        assert.ok(applied.in_clear >= 1, `a write set applied in clear (${JSON.stringify(applied)})`);
        assert.ok(applied.decrypted >= 1, `write sets decrypted while catching up (${JSON.stringify(applied)})`);
        // The primary's signatures were verified on the thread pool, beside the syncs (durability Synced).
        const verified = (await backup.client.request('GET', '/node/consensus')).body.signatures_verified;
        assert.ok(verified.while_syncing >= 1, `signatures verified while syncing (${JSON.stringify(verified)})`);
      }
      // The primary's view of its peers: both acknowledged the write, neither needs a snapshot.
      const acks = (await first.client.request('GET', '/node/consensus')).body.acks as Record<string, { seqno: number; needs_snapshot: boolean }>;
      assert.equal(Object.keys(acks).length, 2);
      for (const peer of Object.values(acks)) {
        assert.ok(peer.seqno >= Number(txId.split('.')[1]), 'each peer acknowledged the write');
        assert.equal(peer.needs_snapshot, false);
      }

      // A backup forwards writes to the primary; HEAD /node/primary redirects there.
      const forwarded = await write(nodes[2]!, 1001, 'through a backup');
      await waitCommitted(nodes[1]!, forwarded);
      const redirect = await nodes[1]!.client.request('HEAD', '/node/primary');
      assert.equal(redirect.status, 308);
      assert.equal(redirect.headers.location, `https://${first.address}/node/primary`);

      // SIGKILL the primary: a new one is elected among the others, committed writes survive.
      const n2nAddresses = async (node: StartedNode) => (await node.client.request('GET', '/node/consensus')).body.configs[0].nodes as Record<string, { address: string }>;
      const n2nBefore = await n2nAddresses(nodes[1]!);
      const oldPrimary = await network.primary();
      assert.equal(oldPrimary, first);
      const oldId = (await first.client.request('GET', '/node/state')).body.node_id;
      await first.kill();
      const survivors = nodes.filter(alive);
      const newPrimary = await until('a new primary', async () => {
        for (const node of survivors) {
          const c = await node.client.request('GET', '/node/consensus', { timeoutMs: 1000 });
          if (c.body.role === 'Primary' && c.body.primary_id !== oldId) return node;
        }
        return undefined;
      });
      for (const node of survivors) {
        assert.equal((await node.client.request('GET', '/app/log/private?id=1000', { identity: node.user })).body.msg, 'replicated');
      }
      const afterFailover = await write(newPrimary, 1002, 'after failover');
      for (const node of survivors) await waitCommitted(node, afterFailover);
      const view = Number(afterFailover.split('.')[0]);
      assert.ok(view > Number(txId.split('.')[0]), 'the new primary writes in a later view');

      // Restart the killed node from its ledger directory: it catches up.
      const restarted = await startJoiningNode({
        dir: first.dir,
        target: newPrimary.address,
        serviceCertificatePem: first.serviceCertificatePem,
        user: first.user,
        member: first.member,
        configPatch: FAST,
      });
      nodes[0] = restarted;
      // It binds the ports it had (the configuration says port 0): peers and clients find it where it was.
      assert.equal(restarted.address, first.address);
      assert.deepEqual(await n2nAddresses(newPrimary), n2nBefore);
      const afterRestart = await write(newPrimary, 1003, 'after restart');
      await waitCommitted(restarted, afterRestart);
      assert.equal((await restarted.client.request('GET', '/app/log/private?id=1002', { identity: first.user })).body.msg, 'after failover');
      const commits = await Promise.all(nodes.map((n) => n.client.request('GET', '/node/commit')));
      await until('commit to agree on every node', async () => {
        const answers = await Promise.all(nodes.map((n) => n.client.request('GET', '/node/commit')));
        return answers.every((a) => a.body.transaction_id === answers[0]!.body.transaction_id) ? true : undefined;
      });
      assert.equal(commits.length, 3);

      // Same-named committed chunks are byte-identical on every node (spec invariant 2).
      const chunks = nodes.map(committedChunks);
      let compared = 0;
      for (const [name, bytes] of chunks[0]!) {
        for (const other of chunks.slice(1)) {
          const theirs = other.get(name);
          if (!theirs) continue;
          assert.ok(bytes.equals(theirs), `${name} is identical`);
          compared++;
        }
      }
      assert.ok(compared >= 6, `several chunks compared (${compared})`);
    } finally {
      await network.stopAll();
    }
  });

  test('unsigned transactions of a dead primary become Invalid', async () => {
    const network = await startNetwork(3, { ...FAST, ledger_signatures: { tx_count: 100000, delay: '3s' } });
    try {
      const primary = await network.primary();
      // Membership changes are signed at once: the three-node configuration is committed.
      await until('one committed configuration of three nodes', async () => {
        const c = await primary.client.request('GET', '/node/consensus');
        return c.body.configs.length === 1 && Object.keys(c.body.configs[0].nodes).length === 3 ? true : undefined;
      });
      const unsigned = await write(primary, 7, 'never signed');
      const primaryId = (await primary.client.request('GET', '/node/state')).body.node_id;
      await primary.kill();
      const others = network.nodes.filter(alive);
      await until('the unsigned write to be Invalid', async () => {
        for (const node of others) {
          const c = await node.client.request('GET', '/node/consensus', { timeoutMs: 1000 });
          if (c.body.role !== 'Primary' || c.body.primary_id === primaryId) continue;
          const status = await node.client.request('GET', `/app/tx?transaction_id=${unsigned}`);
          if (status.body.status === 'Invalid') return true;
        }
        return undefined;
      });
      for (const node of others) {
        const read = await node.client.request('GET', '/app/log/private?id=7', { identity: node.user });
        assert.equal(read.status, 404, 'the unsigned write was rolled back');
      }
    } finally {
      await network.stopAll();
    }
  });
});

describe('a primary deposed while alive', () => {
  test('drops what it could not propose; every acknowledged write ends Committed or Invalid; nodes converge', async () => {
    // The framing worker answers late, so that the old primary still has transactions on their
    // way to consensus when it learns of the new view (the pipeline must be abandoned, not proposed).
    process.env['COVENANT_BUGGIFY_FRAME_DELAY_MS'] = '150';
    const network = await startNetwork(3, FAST).finally(() => delete process.env['COVENANT_BUGGIFY_FRAME_DELAY_MS']);
    const stopLoad = { value: false };
    try {
      const old = await network.primary();
      const oldId = (await old.client.request('GET', '/node/state')).body.node_id as string;
      // Writes keep coming to the old primary before, during and after its freeze: its framing
      // pipeline holds transactions when it finds out that it is no longer primary.
      const acknowledged: string[] = [];
      let next = 0;
      const loop = async (): Promise<void> => {
        while (!stopLoad.value) {
          const id = next++;
          const answer = await old.client
            .request('POST', '/app/log/private', { body: { id, msg: `load ${id}` }, identity: old.user, timeoutMs: 5000 })
            .catch(() => undefined);
          const txId = answer?.headers['x-covenant-transaction-id'];
          if (answer?.status === 200 && typeof txId === 'string') acknowledged.push(txId);
        }
      };
      const loops = Array.from({ length: 16 }, loop);
      await until('writes under way', async () => (acknowledged.length >= 200 ? true : undefined));
      // A write is acknowledged before it commits: let the first 200 commit (commit is a prefix of
      // the old primary's view, so the highest seqno among them suffices), while the load goes on.
      const committedBeforeFreeze = acknowledged.slice(0, 200);
      const highest = committedBeforeFreeze.reduce((a, b) => (parseTxId(b)!.seqno > parseTxId(a)!.seqno ? b : a));
      await waitCommitted(old, highest);
      old.process.kill('SIGSTOP');
      const others = network.nodes.filter((n) => n !== old);
      const newPrimary = await until('a new primary while the old one is frozen', async () => {
        for (const node of others) {
          const c = await node.client.request('GET', '/node/consensus', { timeoutMs: 1000 });
          if (c.body.role === 'Primary' && c.body.primary_id !== oldId) return node;
        }
        return undefined;
      });
      const fresh = await write(newPrimary, 1_000_000, 'written by the new primary');
      old.process.kill('SIGCONT');
      // The old primary resumes with answers of its worker, client requests and the new view's
      // messages all waiting: it must step down without losing or inventing anything.
      await waitCommitted(old, fresh);
      stopLoad.value = true;
      await Promise.all(loops);
      assert.ok(alive(old), 'the deposed primary is still running');
      const last = await write(newPrimary, 1_000_001, 'after the old primary resumed');
      for (const node of network.nodes) await waitCommitted(node, last);

      const statuses = new Map<string, number>();
      const finalStatus = new Map<string, string>();
      for (const txId of acknowledged) {
        const status = await until(`a final status for ${txId}`, async () => {
          const answer = await newPrimary.client.request('GET', `/app/tx?transaction_id=${txId}`);
          return answer.body.status === 'Committed' || answer.body.status === 'Invalid' ? (answer.body.status as string) : undefined;
        });
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
        finalStatus.set(txId, status);
      }
      assert.ok((statuses.get('Committed') ?? 0) >= 200, `most acknowledged writes committed (${JSON.stringify([...statuses])})`);
      for (const txId of committedBeforeFreeze) assert.equal(finalStatus.get(txId), 'Committed', `${txId}, committed before the freeze, stays committed`);
      // The store of every node agrees with the ledger: each committed write reads back everywhere.
      const committed = acknowledged.filter((_, i) => i % 25 === 0);
      for (const txId of committed) {
        const status = await newPrimary.client.request('GET', `/app/tx?transaction_id=${txId}`);
        if (status.body.status !== 'Committed') continue;
        for (const node of network.nodes) {
          const tx = await node.client.request('GET', `/app/tx?transaction_id=${txId}`);
          assert.equal(tx.body.status, 'Committed', `${txId} is committed on ${node.address}`);
        }
      }
      const commits = await until('commit to agree on every node', async () => {
        const answers = await Promise.all(network.nodes.map((n) => n.client.request('GET', '/node/commit')));
        return answers.every((a) => a.body.transaction_id === answers[0]!.body.transaction_id) ? answers : undefined;
      });
      assert.equal(commits.length, 3);
      const chunks = network.nodes.map(committedChunks);
      for (const [name, bytes] of chunks[1]!) {
        for (const other of [chunks[0]!, chunks[2]!]) {
          const theirs = other.get(name);
          if (theirs) assert.ok(bytes.equals(theirs), `${name} is identical`);
        }
      }
    } finally {
      stopLoad.value = true;
      await network.stopAll();
    }
  });
});

describe('a five-node network', () => {
  test('keeps committing with two nodes down and never commits with three down', async () => {
    const network = await startNetwork(5, FAST);
    try {
      const primary = await network.primary();
      const backups = network.nodes.filter((n) => n !== primary);
      await Promise.all(backups.slice(0, 2).map((n) => n.kill()));
      const txId = await write(primary, 1, 'two down');
      await waitCommitted(primary, txId);

      await backups[2]!.kill();
      const survivors = network.nodes.filter(alive);
      assert.equal(survivors.length, 2);
      const before = (await survivors[0]!.client.request('GET', '/node/commit')).body.transaction_id;
      const attempt = await survivors[0]!.client.request('POST', '/app/log/private', { body: { id: 2, msg: 'no quorum' }, identity: primary.user });
      // The write may be accepted as Pending or refused; it must never commit.
      const pending = attempt.headers['x-covenant-transaction-id'] as string | undefined;
      await new Promise((r) => setTimeout(r, 2000));
      for (const node of survivors) {
        const commit = (await node.client.request('GET', '/node/commit')).body.transaction_id;
        assert.equal(Number(commit.split('.')[1]), Number(before.split('.')[1]), 'commit did not advance without a majority');
        if (pending) assert.notEqual((await node.client.request('GET', `/app/tx?transaction_id=${pending}`)).body.status, 'Committed');
      }
    } finally {
      await network.stopAll();
    }
  });
});
