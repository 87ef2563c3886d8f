/**
 * End to end: snapshots on real node processes. Cadence by snapshots.tx_count and by
 * time_interval/min_tx_count, POST /node/snapshot:create (and its 404 without SnapshotCreate),
 * byte-identical snapshots on every node with their evidence committed, ledger invariants 3 and 4
 * on disk, and nodes joining from a local snapshot and from one fetched after StartupSeqnoIsOld.
 */
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { toHex } from '../../src/base/bytes.js';
import { sha256 } from '../../src/crypto/index.js';
import { type DecodedEntry, EntryFlags, hasFlag, parseSnapshotFile, parseSnapshotFileName, readLedgerDirectories } from '../../src/ledger/index.js';
import { FsDisk } from '../../src/platform/fs-disk.js';
import { verifySnapshotFile } from '../../src/node/snapshots.js';
import { verifyLedger } from '../../src/audit/verify-ledger.js';
import { joinOptionsOf, removeDir, startJoiningNode, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { startNetwork, until, type TestNetwork } from '../../src/testing/network.js';
import { ACCEPT_BALLOT, ack, propose, vote, type MemberConnection } from '../../src/cli/member.js';

const FAST = {
  ledger_signatures: { delay: '20ms' },
  consensus: { election_timeout: '500ms', message_timeout: '50ms' },
  // Large chunks: every chunk end on disk below comes from a snapshot.
  ledger: { chunk_size: '10MB' },
};

async function write(node: StartedNode, id: number, msg = `message ${id}`): Promise<string> {
  const answer = await node.client.request('POST', '/app/log/private', { body: { id, msg }, identity: node.user });
  assert.equal(answer.status, 200, `write ${id}: ${answer.text}`);
  return answer.headers['x-covenant-transaction-id'] as string;
}

function snapshotFiles(node: StartedNode, committed = true): string[] {
  const dir = join(node.dir, 'snapshots');
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => parseSnapshotFileName(f)?.committed === committed)
    .sort((a, b) => parseSnapshotFileName(a)!.seqno - parseSnapshotFileName(b)!.seqno);
}

function readSnapshot(node: StartedNode, name: string): Buffer {
  return readFileSync(join(node.dir, 'snapshots', name));
}

function ledgerEntry(node: StartedNode, seqno: number): DecodedEntry | undefined {
  for (const { entry } of readLedgerDirectories(new FsDisk(), [join(node.dir, 'ledger')], { fromSeqno: seqno, allowGaps: true })) {
    if (entry.seqno === seqno) return entry;
    break;
  }
  return undefined;
}

function chunkNames(node: StartedNode): string[] {
  return readdirSync(join(node.dir, 'ledger')).filter((f) => f.startsWith('ledger_'));
}

async function waitSnapshots(node: StartedNode, count: number, timeoutMs = 20_000): Promise<string[]> {
  return until(`${count} committed snapshots on ${node.address}`, async () => {
    const files = snapshotFiles(node);
    return files.length >= count ? files : undefined;
  }, timeoutMs);
}

describe('snapshots', () => {
  let network: TestNetwork | undefined;
  const extra: StartedNode[] = [];
  after(async () => {
    for (const n of extra) {
      await n.stop();
      removeDir(n.dir);
    }
    await network?.stopAll();
  });

  test('every tx_count transactions, byte-identical on all nodes, evidence committed, chunk ends at the snapshot; joins from snapshots', async () => {
    // min_interval of an hour: a second snapshot:create below is refused whatever the machine's speed.
    network = await startNetwork(3, { ...FAST, snapshots: { tx_count: 25, min_interval: '1h' } });
    const [first] = network.nodes as [StartedNode, StartedNode, StartedNode];
    for (let i = 0; i < 70; i++) await write(first, i);
    for (const node of network.nodes) await waitSnapshots(node, 2);
    const names = await until('the same committed snapshots on every node', async () => {
      const lists = network!.nodes.map((n) => snapshotFiles(n).join(','));
      return lists.every((l) => l === lists[0]) ? snapshotFiles(first) : undefined;
    });

    let previous = 0;
    for (const name of names) {
      const { seqno, evidenceSeqno } = parseSnapshotFileName(name)!;
      // Cadence: at the first signature at least tx_count after the previous snapshot.
      assert.ok(seqno - previous >= 25, `${name} follows ${previous} by at least tx_count`);
      previous = seqno;
      const bytes = readSnapshot(first, name);
      for (const node of network.nodes.slice(1)) assert.ok(readSnapshot(node, name).equals(bytes), `${name} is byte-identical on ${node.address}`);
      const verified = verifySnapshotFile(name, bytes, first.serviceCertificatePem);
      assert.equal(verified.parts.meta.tree.size, seqno);

      for (const node of network.nodes as StartedNode[]) {
        // Invariant 3: a signature; invariant 4: it ends its chunk and the next chunk starts after it.
        const at: DecodedEntry = ledgerEntry(node, seqno)!;
        assert.ok(hasFlag(at.flags, EntryFlags.SIGNATURE) && hasFlag(at.flags, EntryFlags.CHUNK_END), `entry ${seqno} is a chunk-ending signature`);
        const chunks = chunkNames(node);
        assert.ok(chunks.some((c) => c.endsWith(`-${seqno}.committed`)), `a committed chunk ends at ${seqno} on ${node.address}: ${chunks.join(' ')}`);
        assert.ok(chunks.some((c) => c.startsWith(`ledger_${seqno + 1}`)), `a chunk starts at ${seqno + 1} on ${node.address}`);
        // The evidence records this file's digest (without its receipt), also as its claims digest.
        const evidence: DecodedEntry = ledgerEntry(node, evidenceSeqno)!;
        assert.ok(hasFlag(evidence.flags, EntryFlags.SNAPSHOT_EVIDENCE));
        assert.equal(toHex(evidence.claimsDigest), toHex(parseSnapshotFile(bytes).digest));
      }
      assert.equal(toHex(sha256(bytes.subarray(0, parseSnapshotFile(bytes).evidenceCoveredBytes))), toHex(parseSnapshotFile(bytes).digest));
    }
    // A flipped bit anywhere makes the file unverifiable.
    const tampered = Buffer.from(readSnapshot(first, names[0]!));
    tampered[100]! ^= 1;
    assert.throws(() => verifySnapshotFile(names[0]!, tampered, first.serviceCertificatePem), /InvalidSnapshot|snapshot/);

    // The offline verifier accepts the ledger of every node together with the snapshot. It reads a
    // live node's directory here: first let every completed chunk take its `.committed` name, or
    // a rename between listing the directory and opening a file would be read as a missing file.
    await until('every completed chunk renamed .committed', async () => (chunkNames(first).every((c) => !/^ledger_\d+-\d+$/.test(c)) ? true : undefined));
    const report = verifyLedger(new FsDisk(), [join(first.dir, 'ledger')], { snapshot: { name: names[0]!, bytes: readSnapshot(first, names[0]!) } });
    assert.equal(report.problem, undefined, report.problem?.message);

    // snapshot:create (sent to a backup: forwarded) snapshots at the next signature, before tx_count.
    // Let every entry commit: nothing is then left unsigned, so no signature comes but the one
    // snapshot:create asks for, and it takes the next seqno. How far past the latest snapshot the
    // writes above leave the ledger depends on how many signatures fell among them (up to
    // tx_count - 1): when the next signature would be due a snapshot by tx_count anyway, more
    // writes make that snapshot first.
    const primary = await network.primary();
    const settle = async (): Promise<{ latest: number; settled: number }> => {
      await until('no snapshot in progress', async () => (snapshotFiles(first, false).length === 0 ? true : undefined));
      const settled = await until('every entry committed', async () => {
        const { body } = await primary.client.request('GET', '/node/consensus');
        return body.commit_seqno === body.last_seqno ? (body.last_seqno as number) : undefined;
      });
      await until('no snapshot in progress', async () => (snapshotFiles(first, false).length === 0 ? true : undefined));
      return { latest: parseSnapshotFileName(snapshotFiles(first).at(-1)!)!.seqno, settled };
    };
    let { latest, settled } = await settle();
    if (settled + 1 - latest >= 25) {
      const before = latest;
      for (let id = 1000; latest === before; id++) {
        assert.ok(id < 1025, 'tx_count more writes make a snapshot');
        await write(first, id);
        ({ latest, settled } = await settle());
      }
    }
    const withBody = await network.nodes[0]!.client.request('POST', '/node/snapshot:create', { body: { now: true } });
    assert.equal(withBody.status, 400, 'snapshot:create takes no body');
    assert.equal(withBody.body.error.code, 'UnexpectedBody');
    const create = await network.nodes[2]!.client.request('POST', '/node/snapshot:create');
    assert.equal(create.status, 204, create.text);
    assert.equal(create.headers['content-length'], undefined, 'a 204 carries no Content-Length (RFC 9110)');
    // More requests at once, to every node: each is coalesced with the pending one (204) or, once
    // that snapshot is written, refused within min_interval (429). Either way no second snapshot.
    const more = await Promise.all([0, 1, 2, 0, 1, 2].map((i) => network!.nodes[i]!.client.request('POST', '/node/snapshot:create')));
    for (const answer of more) assert.ok(answer.status === 204 || (answer.status === 429 && answer.body.error.code === 'TooManySnapshotRequests'), answer.text);
    const created = await until('a snapshot from snapshot:create', async () => {
      const newer = snapshotFiles(first).filter((f) => parseSnapshotFileName(f)!.seqno > latest);
      return newer.length > 0 ? newer[0] : undefined;
    });
    assert.equal(parseSnapshotFileName(created)!.seqno, settled + 1, 'at the signature snapshot:create asked for, the next seqno');
    assert.ok(parseSnapshotFileName(created)!.seqno - latest < 25, 'created before tx_count more transactions');
    // Within min_interval: 429 with Retry-After and a JSON error, also through a backup's forwarding.
    const tooSoon = await network.nodes[2]!.client.request('POST', '/node/snapshot:create');
    assert.equal(tooSoon.status, 429, tooSoon.text);
    assert.equal(tooSoon.body.error.code, 'TooManySnapshotRequests');
    assert.ok(Number(tooSoon.headers['retry-after']) >= 1, `Retry-After: ${String(tooSoon.headers['retry-after'])}`);
    await until('every entry committed after snapshot:create', async () => {
      const { body } = await primary.client.request('GET', '/node/consensus');
      return body.commit_seqno === body.last_seqno && snapshotFiles(first, false).length === 0 ? true : undefined;
    });
    assert.deepEqual(
      snapshotFiles(first).filter((f) => parseSnapshotFileName(f)!.seqno > latest),
      [created],
      'the rapid requests made one snapshot',
    );

    // A node joins from a committed snapshot copied into its snapshots directory: only the suffix is replicated.
    const newest = snapshotFiles(first).at(-1)!;
    const newestSeqno = parseSnapshotFileName(newest)!.seqno;
    const joinerDir = join(first.dir, '..', `${first.dir.split('/').pop()}-joiner`);
    mkdirSync(join(joinerDir, 'snapshots'), { recursive: true });
    copyFileSync(join(first.dir, 'snapshots', newest), join(joinerDir, 'snapshots', newest));
    // Started twice on the same directories: to join, then to restart.
    const startJoiner = () =>
      startJoiningNode({
        ...joinOptionsOf(first),
        dir: joinerDir,
        configPatch: { ...FAST, snapshots: { tx_count: 25 } },
      });
    const joiner = await startJoiner();
    extra.push(joiner);
    const state = await joiner.client.request('GET', '/node/state');
    assert.equal(state.body.startup_seqno, newestSeqno);
    await write(first, 5000, 'after the join');
    await until('the joiner reads the new write', async () => {
      const read = await joiner.client.request('GET', '/app/log/private?id=5000', { identity: joiner.user });
      return read.status === 200 && read.body.msg === 'after the join' ? true : undefined;
    });
    const early = await joiner.client.request('GET', '/app/log/private?id=3', { identity: joiner.user });
    assert.equal(early.body.msg, 'message 3', 'state from before the snapshot comes from the snapshot');
    const firstChunk = chunkNames(joiner).map((c) => Number(/^ledger_(\d+)/.exec(c)![1])).sort((a, b) => a - b)[0];
    assert.equal(firstChunk, newestSeqno + 1, 'the joiner holds only the suffix after the snapshot');

    // Restarted from its directories, the node starts from a snapshot again and replays its suffix.
    await joiner.kill();
    await write(first, 5001, 'while the joiner was down');
    // What a crash can leave in snapshots.directory: an uncommitted snapshot (only the run that
    // wrote one can complete it), one still being written, and an interrupted download. The
    // restart removes those only.
    const joinerSnapshots = join(joinerDir, 'snapshots');
    const leftovers = [`snapshot_${newestSeqno + 3}_${newestSeqno + 4}`, `snapshot_${newestSeqno + 5}.v2.uncommitted.writing`, `${newest}.download`];
    for (const name of leftovers) writeFileSync(join(joinerSnapshots, name), 'half written');
    writeFileSync(join(joinerSnapshots, 'notes.txt'), 'an operator file');
    const restarted = await startJoiner();
    extra[extra.indexOf(joiner)] = restarted;
    assert.equal((await restarted.client.request('GET', '/node/state')).body.startup_seqno, newestSeqno);
    const kept = readdirSync(joinerSnapshots);
    for (const name of leftovers) assert.ok(!kept.includes(name), `${name} removed at restart`);
    assert.ok(kept.includes(newest) && kept.includes('notes.txt'), kept.join(', '));
    assert.match(restarted.output(), /removed .*snapshot_\d+_\d+: an uncommitted snapshot an earlier run of this node left unfinished/);
    assert.match(restarted.output(), /removed .*snapshot_\d+\.v2\.uncommitted\.writing: a snapshot being written an earlier run of this node left unfinished/);
    await until('the restarted joiner catches up', async () => {
      const read = await restarted.client.request('GET', '/app/log/private?id=5001', { identity: restarted.user });
      return read.status === 200 ? true : undefined;
    });
    assert.equal((await restarted.client.request('GET', '/app/log/private?id=5000', { identity: restarted.user })).body.msg, 'after the join');
    assert.equal((await restarted.client.request('GET', '/app/log/private?id=3', { identity: restarted.user })).body.msg, 'message 3');
  });

  test('on the trigger_snapshot governance action, at the next signature; trigger_ledger_chunk cuts a chunk', async () => {
    const node = await startNode({ configPatch: { ...FAST, snapshots: { tx_count: 1_000_000 } } });
    extra.push(node);
    const member: MemberConnection = {
      address: node.address,
      caPem: node.serviceCertificatePem,
      certificatePem: node.member.certificatePem,
      privateKeyPem: node.member.privateKeyPem,
      memberId: node.member.id,
    };
    await ack(member);
    for (let i = 0; i < 5; i++) await write(node, i);
    assert.deepEqual(snapshotFiles(node), [], 'tx_count is far away: no snapshot yet');
    const chunksBefore = chunkNames(node).length;
    for (const name of ['trigger_snapshot', 'trigger_ledger_chunk']) {
      const proposal = await propose(member, [{ name, args: {} }]);
      const state = proposal.body.state === 'Open' ? (await vote(member, proposal.body.proposal_id, ACCEPT_BALLOT)).body.state : proposal.body.state;
      assert.equal(state, 'Accepted', name);
    }
    await write(node, 100);
    const [snapshot] = await waitSnapshots(node, 1);
    const seqno = parseSnapshotFileName(snapshot!)!.seqno;
    const atSnapshot = ledgerEntry(node, seqno)!;
    assert.ok(hasFlag(atSnapshot.flags, EntryFlags.SIGNATURE), 'the snapshot is at a signature');
    assert.ok(hasFlag(atSnapshot.flags, EntryFlags.CHUNK_END), 'that signature ends its chunk');
    await until('a new chunk after the triggers', async () => (chunkNames(node).length > chunksBefore ? true : undefined));
  });

  test('by time_interval once more than min_tx_count transactions passed', async () => {
    // min_ledger_fraction 0: with its default (0.5) the second snapshot also waits for half the
    // first one's size of ledger after it, which 8 small writes reach or not depending on how many
    // signatures their timing made (and on the first snapshot's size): it has tests of its own.
    const node = await startNode({ configPatch: { ...FAST, snapshots: { tx_count: 100_000, time_interval: '150ms', min_tx_count: 6, min_ledger_fraction: 0 } } });
    extra.push(node);
    for (let i = 0; i < 8; i++) await write(node, i);
    const [firstName] = await waitSnapshots(node, 1);
    for (let i = 8; i < 16; i++) await write(node, i);
    const names = await waitSnapshots(node, 2);
    const [a, b] = names.map((n) => parseSnapshotFileName(n)!.seqno) as [number, number];
    assert.equal(names[0], firstName);
    assert.ok(a > 6, `first snapshot at ${a}, after more than min_tx_count transactions`);
    assert.ok(b - a > 6, `second snapshot at ${b}, more than min_tx_count after ${a}`);
  });

  test('a node without a snapshot gets StartupSeqnoIsOld from a primary that started from one, fetches a snapshot and joins', async () => {
    const patch = { ...FAST, snapshots: { tx_count: 20 } };
    const origin = await startNode({ configPatch: patch });
    extra.push(origin);
    for (let i = 0; i < 30; i++) await write(origin, i);
    const [name] = await waitSnapshots(origin, 1);
    const seqno = parseSnapshotFileName(name!)!.seqno;
    // Two nodes join from that snapshot, then the only node holding the whole ledger is killed.
    const fromSnapshot: StartedNode[] = [];
    for (let i = 0; i < 2; i++) {
      const dir = `${origin.dir}-s${i}`;
      mkdirSync(join(dir, 'snapshots'), { recursive: true });
      copyFileSync(join(origin.dir, 'snapshots', name!), join(dir, 'snapshots', name!));
      const node = await startJoiningNode({ ...joinOptionsOf(origin), dir, configPatch: patch });
      extra.push(node);
      fromSnapshot.push(node);
      assert.equal((await node.client.request('GET', '/node/state')).body.startup_seqno, seqno);
    }
    // Kill the origin only once the three-node configuration is committed everywhere.
    await until('the three-node configuration committed on every node', async () => {
      for (const n of [origin, ...fromSnapshot]) {
        const c = (await n.client.request('GET', '/node/consensus')).body;
        if (c.configs.length !== 1 || Object.keys(c.configs[0].nodes).length !== 3) return undefined;
      }
      return true;
    });
    await origin.kill();
    const target = fromSnapshot[0]!;
    await until('a primary among the nodes started from the snapshot', async () => {
      for (const n of fromSnapshot) if ((await n.client.request('GET', '/node/consensus', { timeoutMs: 1000 })).body.role === 'Primary') return true;
      return undefined;
    });

    // Legacy behaviour: no snapshot and no fetching is a join failure.
    await assert.rejects(
      startJoiningNode({
        target: target.address,
        serviceCertificatePem: origin.serviceCertificatePem,
        user: origin.user,
        member: origin.member,
        configPatch: { ...patch, command: { join: { fetch_recent_snapshot: false } } },
      }).then((n) => {
        extra.push(n);
      }),
      /StartupSeqnoIsOld/,
    );

    const joiner = await startJoiningNode({
      target: target.address,
      serviceCertificatePem: origin.serviceCertificatePem,
      user: origin.user,
      member: origin.member,
      configPatch: { ...patch, rpc_interfaces: { primary: { enabled_operator_features: ['LedgerChunkRead', 'SnapshotRead'] } } },
    });
    extra.push(joiner);
    const state = await joiner.client.request('GET', '/node/state');
    assert.ok(state.body.startup_seqno >= seqno, `startup_seqno ${state.body.startup_seqno} is that of a fetched snapshot`);
    assert.match(joiner.output(), /fetched snapshot snapshot_\d+_\d+\.committed/);
    // Its evidence is recorded once the primary's file is written: some seqno after the snapshot's.
    assert.ok(snapshotFiles(joiner).some((f) => parseSnapshotFileName(f)!.seqno === state.body.startup_seqno), 'the fetched snapshot is kept');
    await write(target, 9000, 'after the fetch');
    await until('the joiner reads a later write', async () => {
      const read = await joiner.client.request('GET', '/app/log/private?id=9000', { identity: joiner.user });
      return read.status === 200 ? true : undefined;
    });
    assert.equal((await joiner.client.request('GET', '/app/log/private?id=3', { identity: joiner.user })).body.msg, 'message 3');
    const firstChunk = Math.min(...chunkNames(joiner).map((c) => Number(/^ledger_(\d+)/.exec(c)![1])));
    assert.equal(firstChunk, state.body.startup_seqno + 1, 'only the suffix after the snapshot is replicated');
    // Without SnapshotCreate on the interface the endpoint does not exist.
    assert.equal((await joiner.client.request('POST', '/node/snapshot:create')).status, 404);
  });
});
