/**
 * The production node (driver, replica, proposer, signatures, peers, start-up flows) under the
 * seeded simulator: fixed seeds with crashes, restarts, partitions, loss and duplication find no
 * violation of the checkers, a run is a function of its seed, and the checkers catch nodes that
 * disagree.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { NodeSim, rawConfigOf, runNodeSim, simConfig, type NodeSimReport } from '../../src/testing/sim/node-sim.js';
import { jsonCodec } from '../../src/kv/index.js';
import { Violation } from '../../src/testing/sim/checker.js';
import { toHex } from '../../src/base/bytes.js';
import { parseSnapshotFile, parseSnapshotFileName } from '../../src/ledger/index.js';

// Seed 16 found a node that restarted before replication brought it the node table: it knew no
// peer, accepted no frame and never caught up (fixed: the node state keeps the join answer's peers).
const SEEDS = [1, 2, 16, 23, 42];

test('fixed seeds: three production nodes under crashes, restarts, partitions and lossy links keep every checker green', async () => {
  let crashes = 0;
  let views = 0;
  for (const seed of SEEDS) {
    const report = await runNodeSim({ seed, nodes: 3, steps: 1500, livenessStepsMax: 1500 });
    assert.ok(report.writes > 100, `seed ${seed}: the client wrote (${report.writes})`);
    assert.ok(report.committedSeqno > report.writes / 2, `seed ${seed}: writes committed`);
    crashes += report.crashes;
    views += report.views;
  }
  assert.ok(crashes >= SEEDS.length, `faults were injected (${crashes} crashes)`);
  assert.ok(views > SEEDS.length, `primaries changed (${views} views in all)`);
});

test('five nodes, a longer run', async () => {
  const report = await runNodeSim({ seed: 7, nodes: 5, steps: 2000, livenessStepsMax: 1500 });
  assert.ok(report.crashes > 0 && report.restarts >= report.crashes);
});

test('a run is a function of its seed', async () => {
  const a = await runNodeSim({ seed: 11, nodes: 3, steps: 800, livenessStepsMax: 1500 });
  const b = await runNodeSim({ seed: 11, nodes: 3, steps: 800, livenessStepsMax: 1500 });
  assert.deepEqual(a.trace, b.trace);
  assert.equal(a.writes, b.writes);
});

test('the checkers catch a node whose committed entry differs from the others', async () => {
  const sim = new NodeSim({ seed: 3, nodes: 3, steps: 0, livenessStepsMax: 0 });
  try {
    await sim.setUp();
    for (let i = 0; i < 200; i++) await sim.advanceSettled(false);
    const [a, b] = sim.hosts;
    const seqno = Math.min(a!.node!.parts.replica.commitSeqno, b!.node!.parts.replica.commitSeqno);
    assert.ok(seqno > 2, 'something committed');
    // Make one node's view of history differ: what it committed is compared anew, against the others.
    a!.checkedSeqno = 0;
    b!.checkedSeqno = 0;
    const ledger = b!.node!.parts.replica.ledger;
    const original = ledger.getEntry.bind(ledger);
    ledger.getEntry = (s: number) => (s === 2 ? original(1) : original(s));
    assert.throws(() => sim.check(), (e: unknown) => e instanceof Violation && e.checker === 'committed-never-lost');
  } finally {
    sim.stopAll();
  }
});

test('power cuts of every node: with ledger.durability Synced no committed transaction is ever lost', async () => {
  let cuts = 0;
  for (const seed of [1, 5, 9]) {
    const report = await runNodeSim({ seed, nodes: 3, steps: 1500, livenessStepsMax: 2000, durability: 'Synced', powerCutProbability: 0.003 });
    cuts += report.powerCuts;
    assert.ok(report.committedSeqno > 300, `seed ${seed}: commit went on across the cuts`);
  }
  assert.ok(cuts >= 3, `every node lost power several times (${cuts} cuts)`);
});

test('power cuts of every node: with Replicated (acknowledged from the page cache) a committed transaction is lost, and the checker says so', async () => {
  await assert.rejects(
    runNodeSim({ seed: 1, nodes: 3, steps: 1500, livenessStepsMax: 2000, durability: 'Replicated', powerCutProbability: 0.003 }),
    (e: unknown) => e instanceof Violation && e.checker === 'committed-never-lost',
  );
});

/** Three nodes that take a snapshot every 25 transactions. */
class SnapshottingSim extends NodeSim {
  protected override configFor(index: number, type: 'Start' | 'Join') {
    const raw = rawConfigOf(index, type, 'Synced');
    raw.snapshots.tx_count = 25;
    return simConfig(raw);
  }
}

test('a node that joined from a snapshot restarts twice in a row (its node state keeps where its ledger starts)', async () => {
  const sim = new SnapshottingSim({ seed: 4, nodes: 3, steps: 0, livenessStepsMax: 0 });
  try {
    await sim.setUp();
    for (let i = 0; i < 300; i++) await sim.advanceSettled(false);
    const primary = sim.hosts.find((h) => h.node?.isPrimary())!;
    const raw = rawConfigOf(3, 'Join', 'Synced');
    raw.snapshots.tx_count = 25;
    // The operator copies the primary's newest committed snapshot into the new node's snapshots folder.
    const joiner = await sim.addJoiner(3, primary, raw, {
      prepare: (host) => {
        const from = primary.startConfig.snapshots.directory;
        const to = host.startConfig.snapshots.directory;
        const newest = primary.disk.listDirectory(from).filter((n) => n.endsWith('.committed')).sort((x, y) => Number(y.split('_')[1]) - Number(x.split('_')[1]))[0]!;
        host.disk.ensureDirectory(to);
        const copy = host.disk.createFile(host.disk.join(to, newest));
        copy.append([primary.disk.readAll(primary.disk.join(from, newest))]);
        copy.sync();
        copy.close();
      },
    });
    const startupSeqno = joiner.node!.parts.replica.startupSeqno;
    assert.ok(startupSeqno > 0, 'the joiner started from a snapshot');
    for (let i = 0; i < 50; i++) await sim.advanceSettled(false);
    // Crashed, restarted, and crashed again before anything else rewrote its node state.
    sim.crash(joiner);
    sim.restart(joiner);
    sim.crash(joiner);
    sim.restart(joiner);
    assert.equal(joiner.node!.parts.replica.startupSeqno, startupSeqno);
    const target = primary.node!.executeWrite((tx) => tx.map('records', jsonCodec<any>()).put('after', 1)).txId!.seqno;
    for (let i = 0; i < 300 && joiner.node!.parts.replica.commitSeqno < target; i++) await sim.advanceSettled(false);
    assert.ok(joiner.node!.parts.replica.commitSeqno >= target, 'the twice-restarted joiner caught up');
  } finally {
    sim.stopAll();
  }
});

test('snapshots every 60 transactions under crashes, restarts and partitions: written over later turns, evidence recorded after the snapshot point, byte-identical on every node', async () => {
  const sim = new NodeSim({ seed: 5, nodes: 3, steps: 1200, livenessStepsMax: 1500, snapshotTxCount: 60 });
  let report: NodeSimReport;
  try {
    await sim.setUp();
    for (let i = 0; i < 1200; i++) await sim.advanceSettled(true);
    await sim.checkLiveness();
    report = sim.report();
    const byName = new Map<string, string>();
    let committed = 0;
    let evidenceLater = 0;
    for (const host of sim.hosts) {
      const dir = '/sim/' + host.name + '/snapshots';
      if (!host.disk.exists(dir)) continue;
      for (const name of host.disk.listDirectory(dir)) {
        const parsed = parseSnapshotFileName(name);
        if (parsed?.committed !== true) continue;
        committed++;
        if (parsed.evidenceSeqno > parsed.seqno + 1) evidenceLater++;
        // The evidence covers the file without its receipt, which may differ between nodes (its signer).
        const digest = toHex(parseSnapshotFile(host.disk.readAll(host.disk.join(dir, name))).digest);
        const other = byName.get(name);
        if (other !== undefined) assert.equal(digest, other, `${name} differs between nodes`);
        byName.set(name, digest);
      }
    }
    assert.ok(committed >= 6, `${committed} committed snapshots`);
    assert.ok(evidenceLater > 0, 'some evidence was recorded transactions after its snapshot point');
  } finally {
    sim.stopAll();
  }
  assert.ok(report!.crashes > 0 && report!.views > 1, `faults were injected (${report!.crashes} crashes, ${report!.views} views)`);
});
