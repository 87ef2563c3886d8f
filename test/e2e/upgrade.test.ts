/**
 * End to end: the spec's live code-upgrade procedure on a three-node network under a steady
 * write load. New code is registered (add_snp_host_data), three new nodes join (Pending, since
 * the service is open) and are trusted by proposal, the old nodes are retired one at a time (the
 * primary moves; writes pause and resume), appear in removable_nodes, are stopped and deleted,
 * and the old code is removed. Every committed write is still readable at the end.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { ACCEPT_BALLOT, propose, vote, type MemberConnection } from '../../src/cli/member.js';
import { startJoiningNode, type StartedNode } from '../../src/testing/node-process.js';
import { startNetwork, until } from '../../src/testing/network.js';

const FAST = {
  ledger_signatures: { delay: '20ms' },
  consensus: { election_timeout: '500ms', message_timeout: '50ms' },
};

function alive(node: StartedNode): boolean {
  return node.process.exitCode === null && node.process.signalCode === null;
}

test('the code-upgrade procedure replaces every node under load without losing a committed write', async () => {
  const network = await startNetwork(3, FAST);
  const oldNodes = [...network.nodes];
  const first = oldNodes[0]!;
  const member = (address: string): MemberConnection => ({
    address,
    caPem: first.serviceCertificatePem,
    certificatePem: first.member.certificatePem,
    privateKeyPem: first.member.privateKeyPem,
    memberId: first.member.id,
  });
  /** Any live node: proposals are forwarded to the primary. */
  const live = () => network.nodes.find(alive)!;
  const passProposal = async (actions: unknown[]) => {
    const proposal = await propose(member(live().address), actions);
    const id = proposal.body.proposal_id as string;
    const state = proposal.body.state === 'Open' ? (await vote(member(live().address), id, ACCEPT_BALLOT)).body.state : proposal.body.state;
    assert.equal(state, 'Accepted', JSON.stringify(actions));
  };

  // Steady load: one writer always in flight, through whichever node is alive.
  const committed = new Map<number, string>();
  let stop = false;
  let failures = 0;
  const load = (async () => {
    for (let id = 0; !stop; id++) {
      const node = live();
      try {
        const answer = await node.client.request('POST', '/app/log/private', { body: { id, msg: `load ${id}` }, identity: first.user, timeoutMs: 5000 });
        if (answer.status === 200) committed.set(id, answer.headers['x-covenant-transaction-id'] as string);
        else failures++;
      } catch {
        failures++;
      }
      await new Promise((r) => setTimeout(r, 10));
    }
  })();

  const newNodes: StartedNode[] = [];
  try {
    const oldHostData = (await first.client.request('GET', '/node/quotes/self')).body.host_data as string;
    const newHostData = createHash('sha256').update('covenant code version 2').digest('hex');

    // 1. Register the new code.
    await passProposal([{ name: 'add_snp_host_data', args: { host_data: newHostData } }]);

    // 2. Add as many new nodes, reporting the new host data; members trust them.
    for (let i = 0; i < 3; i++) {
      const node = await startJoiningNode({
        target: live().address,
        serviceCertificatePem: first.serviceCertificatePem,
        user: first.user,
        member: first.member,
        configPatch: FAST,
        env: { COVENANT_VIRTUAL_HOST_DATA: newHostData },
        waitUntilJoined: false,
      });
      newNodes.push(node);
      network.nodes.push(node);
      const pendingId = await until('the new node to be Pending', async () => {
        const pending = await live().client.request('GET', '/node/network/nodes?status=Pending');
        return pending.body.nodes[0]?.node_id as string | undefined;
      });
      await passProposal([{ name: 'transition_node_to_trusted', args: { node_id: pendingId } }]);
      await until('the new node to be part of the network', async () => {
        const state = await node.client.request('GET', '/node/state', { timeoutMs: 1000 });
        return state.body.state === 'PartOfNetwork' ? true : undefined;
      });
    }
    const listing = await live().client.request('GET', '/node/network/nodes?status=Trusted');
    assert.equal(listing.body.nodes.length, 6);

    // 3. Retire the old nodes one at a time; 4. stop and delete each once removable.
    for (const old of oldNodes) {
      const id = (await old.client.request('GET', '/node/state')).body.node_id as string;
      const helper = newNodes[0]!;
      await passProposal([{ name: 'remove_node', args: { node_id: id } }]);
      await until(`node ${id.slice(0, 8)} in removable_nodes`, async () => {
        const removable = await helper.client.request('GET', '/node/network/removable_nodes');
        return removable.body.nodes.some((n: { node_id: string }) => n.node_id === id) ? true : undefined;
      });
      await old.stop();
      const deleted = await helper.client.request('DELETE', `/node/network/nodes/${id}`);
      assert.equal(deleted.status, 200, deleted.text);
      // The delete went to the primary; this backup sees it once replicated.
      await until('the deleted node to be gone', async () => {
        const gone = await helper.client.request('GET', `/node/network/nodes/${id}`);
        return gone.status === 404 ? true : undefined;
      });
    }
    const primary = await network.primary();
    assert.ok(newNodes.includes(primary), 'a new node is primary');

    // 6. Remove the old code.
    await passProposal([{ name: 'remove_snp_host_data', args: { host_data: oldHostData } }]);
    const remaining = await primary.client.request('GET', '/node/network/nodes');
    assert.equal(remaining.body.nodes.length, 3);
    assert.ok(remaining.body.nodes.every((n: { status: string }) => n.status === 'Trusted'));
  } catch (e) {
    stop = true;
    await load;
    await network.stopAll();
    throw e;
  }
  stop = true;
  await load;
  try {
    // Every write acknowledged during the procedure commits and is readable on every new node.
    assert.ok(committed.size > 20, `the load wrote ${committed.size} times (${failures} attempts failed while the primary moved)`);
    const lastTx = [...committed.values()].sort((a, b) => Number(a.split('.')[1]) - Number(b.split('.')[1])).at(-1)!;
    const reader = newNodes[2]!;
    await until('the last write to commit', async () => {
      const status = await reader.client.request('GET', `/app/tx?transaction_id=${lastTx}`);
      return status.body.status === 'Committed' ? true : undefined;
    });
    for (const [id, txId] of committed) {
      const status = await reader.client.request('GET', `/app/tx?transaction_id=${txId}`);
      if (status.body.status !== 'Committed') {
        // A write answered just before a primary change may have been rolled back: it is Invalid, never lost silently.
        assert.equal(status.body.status, 'Invalid', `write ${id} (${txId})`);
        continue;
      }
      const read = await reader.client.request('GET', `/app/log/private?id=${id}`, { identity: first.user });
      assert.equal(read.body?.msg, `load ${id}`, `write ${id} (${txId}) is readable`);
    }
  } finally {
    await network.stopAll();
  }
});
