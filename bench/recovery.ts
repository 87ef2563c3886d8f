/**
 * `npm run bench -- --recovery` (also `npm run bench:recovery`): how fast a Recover node replays a
 * previous service's ledger (docs/recovery.md, "The recovery procedure").
 *
 * 1. A one-node service with two recovery members (threshold 2) is filled with N committed
 *    transactions (default 1,000,000): 200-byte private records of the logging application
 *    (POST /app/log/private) over 1,000 ids, from the built-in load generator (load.ts; ab would
 *    write one id only). Snapshots are off (snapshots.tx_count above N), so the recover node
 *    replays the whole ledger rather than the entries after the last snapshot; ledger.durability
 *    is Replicated, which fills faster here (no fdatasync per batch) and writes the same ledger (a
 *    SIGKILLed process loses nothing the kernel holds).
 * 2. The node is SIGKILLed; a Recover node starts on a copy of its ledger (startRecoverNode).
 *    (a) public replay: from the process's spawn until the node logs PartOfPublicNetwork;
 *    (b) members vote transition_service_to_open and submit their shares; private replay: from
 *        ReadingPrivateLedger until PartOfNetwork (both as the node logs its state changes);
 *    (c) from the process's spawn until the service is Open.
 *    Each rate is the number of ledger entries replayed (the N writes, their signatures and the
 *    service's own transactions) per second. The node's own timing lines (the read loop, and
 *    each phase) are printed alongside.
 * 3. A record written before the kill is read back from the recovered service.
 *
 * Prints JSON lines (one per stage) and a human summary. Target (the issue): each replay phase at
 * 100,000 transactions per second or more.
 *
 *   npm run bench -- --recovery [--transactions 1000000] [--connections 64] [--snapshot] [--floor] [--node-log]
 *
 * --snapshot takes one snapshot (POST /node/snapshot:create) after the fill and keeps it: the
 * recover node then starts from it and replays only the entries after it in its public phase
 * (the private phase reads the old entries from the snapshot on), as a real service's recovery
 * does (snapshots.tx_count defaults to 10,000); a node then joins the recovering service, fetching
 * the snapshot the recover node endorsed for the new identity, and its join is timed too.
 *
 * --floor also measures, on one thread of the bench process and before the recover node starts,
 * what any replay of this ledger costs per entry whatever the node does around it: reading and
 * checking the frames, hashing their Merkle leaves into a tree, and decrypting private write sets
 * of the ledger's sizes (AES-256-GCM, as the node does). --node-log prints the recover node's log.
 */
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseTxId } from '../src/base/ids.js';
import { LedgerEncryptor } from '../src/kv/index.js';
import { entryLeaf, Ledger } from '../src/ledger/index.js';
import { HistoryTree } from '../src/merkle/index.js';
import { FsDisk } from '../src/platform/fs-disk.js';
import { joinOptionsOf, removeDir, startJoiningNode, startNode, type StartedNode } from '../src/testing/node-process.js';
import { until } from '../src/testing/network.js';
import { openRecoveredService, prepareRecoveryMembers, removeRecoverDir, startRecoverNode } from '../src/testing/recovery.js';
import { buildRequest, runLoad } from './load.js';

const arg = (name: string, fallback: number): number => {
  const at = process.argv.indexOf(name);
  const value = at === -1 ? NaN : Number(process.argv[at + 1]);
  return Number.isFinite(value) && value > 0 ? Math.floor(value) : fallback;
};
const transactions = arg('--transactions', 1_000_000);
const withSnapshot = process.argv.includes('--snapshot');
const connections = arg('--connections', 64);
const TARGET_PER_S = 100_000;
const IDS = 1000;
const MESSAGE = 'x'.repeat(200);

const round = (value: number, digits = 2): number => Number(value.toFixed(digits));
const seqnoOf = (txId: unknown): number => parseTxId(String(txId))?.seqno ?? NaN;

function ledgerBytes(dir: string): number {
  let total = 0;
  for (const name of readdirSync(dir)) total += statSync(join(dir, name)).size;
  return total;
}

/** The time (ms since the epoch) of the node's first log line whose message matches `pattern`. */
function loggedAt(output: string, pattern: RegExp): { atMs: number; line: string } | undefined {
  for (const line of output.split('\n')) {
    if (!pattern.test(line)) continue;
    const atMs = Date.parse(line.slice(0, line.indexOf(' ')));
    if (Number.isFinite(atMs)) return { atMs, line };
  }
  return undefined;
}

/** The message of a log line (after the level and the [file:line] of its caller). */
const messageOf = (line: string): string => line.replace(/^\S+\s+\w+\s+(\[[^\]]*\]\s+)?/, '');

function mustLog(output: string, pattern: RegExp): { atMs: number; line: string } {
  const found = loggedAt(output, pattern);
  if (found === undefined) throw new Error(`the recover node did not log ${pattern}:\n${output.slice(-4000)}`);
  return found;
}

async function fill(node: StartedNode): Promise<{ ms: number; lastSeqno: number }> {
  const [host, port] = node.address.split(':') as [string, string];
  const target = { host, port: Number(port), ca: node.serviceCertificatePem, cert: node.user.certificatePem, key: node.user.privateKeyPem };
  let ok = 0;
  const started = performance.now();
  const progress = setInterval(() => {
    const s = (performance.now() - started) / 1000;
    console.log(JSON.stringify({ bench: 'recovery fill', written: ok, of: transactions, elapsed_s: round(s, 1), writes_per_s: Math.round(ok / s) }));
  }, 10_000);
  let result;
  try {
    result = await runLoad(target, {
      connections,
      durationMs: 3_600_000,
      maxRequests: transactions,
      request: (i) => buildRequest('POST', '/app/log/private', host, JSON.stringify({ id: i % IDS, msg: MESSAGE })),
      onResponse: (status) => {
        if (status === 200) ok++;
      },
    });
  } finally {
    clearInterval(progress);
  }
  if (result.errors > 0 || result.non2xx > 0 || ok !== transactions) {
    throw new Error(`the fill wrote ${ok} of ${transactions} (${result.non2xx} non-2xx answers, ${result.errors} connection errors)`);
  }
  // Every write answered is committed once a later write is.
  const last = await node.client.request('POST', '/app/log/private', { body: { id: 0, msg: MESSAGE }, identity: node.user });
  const lastSeqno = seqnoOf(last.headers['x-covenant-transaction-id']);
  await until('the fill to commit', async () => (seqnoOf((await node.client.request('GET', '/node/commit')).body.transaction_id) >= lastSeqno ? true : undefined), 60_000, 10);
  return { ms: performance.now() - started, lastSeqno };
}

/**
 * The cost per entry of what any replay of the ledger in `directory` does, on this thread: read
 * and check the frames (in the node's batches), hash each into its Merkle leaf and append it to a
 * tree, and decrypt private write sets of the entries' sizes (a sample, sealed beforehand under a
 * key of the bench's own: the old service's secret is not the bench's to read).
 */
function measureFloor(directory: string) {
  const disk = new FsDisk();
  // Read-only: the files stay as the recover node will find them (its committed chunks are read).
  const empty = mkdtempSync(join(tmpdir(), 'covenant-bench-floor-'));
  const ledger = new Ledger({ disk, directory: empty, readOnlyDirectories: [directory] });
  ledger.open();
  const last = ledger.lastSeqno;
  const sizes: number[] = [];
  let readMs = 0;
  let leafMs = 0;
  let treeMs = 0;
  const tree = new HistoryTree();
  for (let seqno = 1; seqno <= last; ) {
    let started = performance.now();
    const batch = ledger.getDecodedEntries(seqno, Math.min(last, seqno + 4095), 8 * 1024 * 1024);
    readMs += performance.now() - started;
    started = performance.now();
    const leaves = batch.map((entry) => entryLeaf(entry));
    leafMs += performance.now() - started;
    started = performance.now();
    for (const leaf of leaves) tree.append(leaf);
    treeMs += performance.now() - started;
    for (const entry of batch) if (sizes.length < FLOOR_DECRYPT_SAMPLE && entry.privateBytes.byteLength > 0) sizes.push(entry.privateBytes.byteLength);
    seqno += batch.length;
  }
  ledger.close();
  disk.close();
  rmSync(empty, { recursive: true, force: true });
  // Sealed beforehand (not timed), opened as the node opens private write sets.
  const encryptor = new LedgerEncryptor(new Uint8Array(32).fill(7));
  const sealed = sizes.map((size, i) => encryptor.encryptPrivate(1, i + 1, new Uint8Array(size - 16).fill(0x61)));
  const started = performance.now();
  for (let i = 0; i < sealed.length; i++) encryptor.decryptPrivate(1, i + 1, sealed[i]!);
  const decryptUs = ((performance.now() - started) * 1000) / Math.max(1, sealed.length);
  const perEntry = (ms: number) => round((ms * 1000) / last, 2);
  const total = perEntry(readMs) + perEntry(leafMs) + decryptUs;
  return {
    entries: last,
    read_check_us: perEntry(readMs),
    leaf_us: perEntry(leafMs),
    tree_append_us: perEntry(treeMs),
    decrypt_us: round(decryptUs, 2),
    decrypt_sample: sealed.length,
    read_leaf_decrypt_tx_per_s: Math.round(1e6 / total),
  };
}

const FLOOR_DECRYPT_SAMPLE = 200_000;

/** POST /node/snapshot:create, then waits for the committed snapshot file: its seqno and size. */
async function takeSnapshot(service: StartedNode): Promise<{ seqno: number; mib: number; take_s: number }> {
  const started = Date.now();
  const answer = await service.client.request('POST', '/node/snapshot:create');
  if (answer.status !== 204) throw new Error(`snapshot:create answered ${answer.status} ${answer.text}`);
  const dir = join(service.dir, 'snapshots');
  const name = await until('a committed snapshot', async () => (existsSync(dir) ? readdirSync(dir).find((f) => f.endsWith('.committed')) : undefined), 600_000);
  return { seqno: Number(name.split('_')[1]), mib: round(statSync(join(dir, name)).size / 2 ** 20, 1), take_s: round((Date.now() - started) / 1000) };
}

/** A node joins the recovering service (fetching its snapshot): seconds from spawn to PartOfPublicNetwork. */
async function joinRecovering(node: StartedNode): Promise<{ seconds: number; startupSeqno: number }> {
  const started = Date.now();
  const joiner = await startJoiningNode({ ...joinOptionsOf(node), waitUntilJoined: false, configPatch: { logging: { level: 'info' } } });
  try {
    const state = await until('the joiner PartOfPublicNetwork', async () => {
      const answer = await joiner.client.request('GET', '/node/state', { timeoutMs: 2000 }).catch(() => undefined);
      return answer?.status === 200 && answer.body.state === 'PartOfPublicNetwork' ? answer.body : undefined;
    }, 600_000);
    return { seconds: round((Date.now() - started) / 1000), startupSeqno: Number(state.startup_seqno) };
  } finally {
    await joiner.kill();
    removeDir(joiner.dir);
  }
}

async function main(): Promise<void> {
  const oldDir = mkdtempSync(join(tmpdir(), 'covenant-bench-old-'));
  const { members, startPatch } = await prepareRecoveryMembers(oldDir, 2, 2);
  console.log(`recovery: filling a one-node service with ${transactions} private writes (200 bytes, ${IDS} ids, ${connections} connections)`);
  let old: StartedNode | undefined;
  let recovered: StartedNode | undefined;
  try {
    old = await startNode({
      dir: oldDir,
      configPatch: {
        logging: { level: 'fail' },
        snapshots: { tx_count: Math.max(1_000_000_000, transactions * 10) },
        ledger: { durability: 'Replicated' },
        command: { start: startPatch },
      },
    });
    const service = old;
    members[0]!.identity = service.member;
    // The recovered ledger must record an issue of shares.
    await until('recovery shares issued', async () => ((await service.client.request('GET', `/gov/recovery/encrypted-shares/${service.member.id}`)).status === 200 ? true : undefined));
    const filled = await fill(service);
    const bytes = ledgerBytes(join(oldDir, 'ledger'));
    const fillReport = {
      bench: 'recovery fill',
      writes: transactions,
      ledger_entries: filled.lastSeqno,
      ledger_mib: round(bytes / 2 ** 20, 1),
      fill_s: round(filled.ms / 1000, 1),
      writes_per_s: Math.round(transactions / (filled.ms / 1000)),
    };
    console.log(JSON.stringify(fillReport));
    const snapshot = withSnapshot ? await takeSnapshot(service) : undefined;
    if (snapshot !== undefined) console.log(JSON.stringify({ bench: 'recovery snapshot', ...snapshot }));
    await service.kill();
    const floor = process.argv.includes('--floor') ? measureFloor(join(oldDir, 'ledger')) : undefined;
    if (floor !== undefined) console.log(JSON.stringify({ bench: 'recovery floor', ...floor }));

    // The Recover node: its spawn is the start of every figure below (the copy of the ledger is not timed).
    let spawnedAtMs = 0;
    recovered = await startRecoverNode({
      from: oldDir,
      previousServiceCertificatePem: service.serviceCertificatePem,
      user: service.user,
      member: service.member,
      configPatch: { logging: { level: 'info' } },
      readyTimeoutMs: 30 * 60_000,
      prepare: (dir) => {
        // Without --snapshot the whole ledger is replayed (the fill's settings take none).
        if (!withSnapshot && existsSync(join(dir, 'snapshots'))) rmSync(join(dir, 'snapshots'), { recursive: true, force: true });
        // Called just before the node is spawned.
        spawnedAtMs = Date.now();
      },
    });
    const node = recovered;
    const joined = withSnapshot ? await joinRecovering(node) : undefined;
    await openRecoveredService(node, service.serviceCertificatePem, members);
    const openSeenAtMs = Date.now();
    const check = await node.client.request('GET', `/app/log/private?id=${(transactions - 1) % IDS}`, { identity: node.user });
    if (check.status !== 200 || check.body.msg !== MESSAGE) throw new Error(`a record written before the kill reads back as ${check.status} ${check.text}`);

    const output = node.output();
    // The entries replayed: the old ledger up to its last signature, as the node says it recovers it.
    const lastSignedSeqno = Number(/recovering the service from seqno (\d+)/.exec(output)?.[1] ?? NaN);
    const reading = mustLog(output, /node state Initialized -> ReadingPublicLedger/);
    const publicDone = mustLog(output, /node state ReadingPublicLedger -> PartOfPublicNetwork/);
    const privateStart = mustLog(output, /node state PartOfPublicNetwork -> ReadingPrivateLedger/);
    const privateDone = mustLog(output, /node state ReadingPrivateLedger -> PartOfNetwork/);
    const opened = loggedAt(output, /the recovered service is open/);
    const openAtMs = opened?.atMs ?? openSeenAtMs;
    const privateEntries = lastSignedSeqno;
    // From a snapshot, the public phase replays the entries after it only.
    const publicEntries = lastSignedSeqno - (snapshot?.seqno ?? 0);
    const publicS = (publicDone.atMs - spawnedAtMs) / 1000;
    const privateS = (privateDone.atMs - privateStart.atMs) / 1000;
    const openS = (openAtMs - spawnedAtMs) / 1000;
    const nodeLines = [/public ledger read:/, /public phase:/, /private ledger read:/, /private phase:/]
      .map((p) => loggedAt(output, p))
      .filter((l) => l !== undefined)
      .map((l) => messageOf(l.line));
    const report = {
      bench: 'recovery',
      writes: transactions,
      ledger_entries: lastSignedSeqno,
      ledger_mib: fillReport.ledger_mib,
      fill_s: fillReport.fill_s,
      fill_writes_per_s: fillReport.writes_per_s,
      spawn_to_reading_s: round((reading.atMs - spawnedAtMs) / 1000),
      public_replay_s: round(publicS),
      ...(snapshot !== undefined ? { snapshot_seqno: snapshot.seqno, public_entries_after_snapshot: publicEntries } : {}),
      public_replay_tx_per_s: Math.round(publicEntries / publicS),
      private_replay_s: round(privateS),
      private_replay_tx_per_s: Math.round(privateEntries / privateS),
      start_to_open_s: round(openS),
      target_tx_per_s: TARGET_PER_S,
      ...(joined !== undefined ? { joiner_to_public_network_s: joined.seconds, joiner_startup_seqno: joined.startupSeqno } : {}),
      node_log: nodeLines,
    };
    if (process.argv.includes('--node-log')) console.log(output);
    console.log(JSON.stringify(report));
    const verdict = (rate: number) => (rate >= TARGET_PER_S ? 'meets' : 'below');
    console.log(
      [
        `recovery of ${lastSignedSeqno} ledger entries (${transactions} private writes, ${fillReport.ledger_mib} MiB):`,
        `  fill: ${fillReport.fill_s} s (${fillReport.writes_per_s} committed writes/s)`,
        `  public replay, spawn → PartOfPublicNetwork: ${round(publicS)} s, ${report.public_replay_tx_per_s} tx/s (${verdict(report.public_replay_tx_per_s)} the target of ${TARGET_PER_S}); ` +
          `of which spawn → ReadingPublicLedger ${report.spawn_to_reading_s} s`,
        `  private replay, ReadingPrivateLedger → PartOfNetwork: ${round(privateS)} s, ${report.private_replay_tx_per_s} tx/s (${verdict(report.private_replay_tx_per_s)} the target of ${TARGET_PER_S})`,
        ...(snapshot !== undefined
          ? [
              `  from the snapshot at ${snapshot.seqno} (${snapshot.mib} MiB): the public phase replayed ${publicEntries} entries; ` +
                `a joiner fetched the endorsed snapshot and was PartOfPublicNetwork in ${joined!.seconds} s (startup seqno ${joined!.startupSeqno})`,
            ]
          : []),
        `  spawn → service Open: ${round(openS)} s`,
        ...nodeLines.map((l) => `  node: ${l}`),
        ...(floor === undefined
          ? []
          : [
              `  floor, one thread, µs per entry: read and check ${floor.read_check_us}, Merkle leaf ${floor.leaf_us}, tree append ${floor.tree_append_us}, ` +
                `AES-GCM decrypt ${floor.decrypt_us} (≈ ${floor.read_leaf_decrypt_tx_per_s} entries/s for the three on one core)`,
            ]),
      ].join('\n'),
    );
  } finally {
    await old?.kill();
    if (recovered) {
      await recovered.kill();
      removeRecoverDir(recovered);
    }
    removeDir(oldDir);
  }
}

await main();
