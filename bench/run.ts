/**
 * `npm run bench`: committed logging-app writes against a one-node and a three-node network (real
 * node processes) over keep-alive HTTPS, and in the same run the same load against a minimal
 * node:https server answering a constant JSON. Prints the throughputs, their ratios to the bare
 * server, the commit latency (write sent → commit observed through GET /node/commit, polled every
 * 2 ms), and the time a three-node network takes to commit again after its primary is SIGKILLed.
 *
 * Each network is measured twice: with the built-in load generator (load.ts: 1,000 record ids,
 * and the commit latency of every write), and, when ApacheBench is installed, with `ab` (ab.ts: an
 * external generator in C, which leaves more of a small machine's CPU to the server measured; one
 * record id; commit checked at the end of each run).
 *
 * A shared machine's speed drifts (the bare server alone was seen anywhere between 15,000 and
 * 46,000 req/s on the same box within an hour), so the bare server and the nodes are measured in
 * alternation: bare, node, bare, node, ..., bare. Each round's ratio divides the node's throughput
 * by the mean of the bare measurements just before and just after it; the reported ratio is the
 * median over the rounds, and every round is printed, with the CPU time (user + system, from
 * /proc) each server process spent per request, and [in brackets] its main thread alone (the rest
 * is the framing worker, V8's helper threads and libuv's): a measure of cost that drifts less than
 * throughput.
 *
 * Between the two stands the floor (floor-server.ts): a server doing per write only what any
 * ledger of this design must (frame the entry on the framing worker, add its leaf to the Merkle
 * tree, append it to a file), measured the same way with the headline generator (ab when
 * installed). What separates a node from the floor is its store, routing, authentication,
 * consensus and signatures; what separates the floor from the bare server is the ledger itself.
 * Before the three-node network, the floor of three processes is measured the same way: the floor
 * server replicating each batch over TLS to two floor backups (floor-backup.ts: check, decrypt,
 * apply, hash, append, acknowledge), with the time until a majority held every write.
 *
 *   npm run bench -- [--duration 8] [--rounds 3] [--connections 64] [--writes N] [--skip-network] [--pin] [--write-modes] [--recovery] [--state N]
 *
 * It ends with one node under token-authenticated writes against certificate-authenticated ones
 * (bench/jwt-auth.ts), briefly, reads of a three-node network in the default mode against
 * linearizable ones (bench/linearizable-reads.ts), the built-in message log against the same log
 * as a JavaScript bundle (bench/js-app.ts), and, when ab is installed, three nodes with
 * ledger.durability Replicated against Synced and default writes against committed ones
 * (x-covenant-consistency: committed), alternating A B B A (writeModes; only that with
 * --write-modes).
 *
 * With --pin the ab measurements (bare server, floor and networks alike) run with their
 * processes placed on the two cores (placement.ts): a diagnostic reading of the same code without
 * the scheduler's placement of three nodes' threads on two cores.
 *
 * With --writes N it instead writes N 200-byte messages over 1,000 ids and reports the node's RSS.
 *
 * With --state N it instead fills N fresh records on three nodes with the default snapshot
 * settings and reports, as it goes, throughput, latency, view changes, refused writes, RSS, snapshot
 * size and generation time, and event-loop delay (bench/state.ts); with --restart (or
 * --restart-builds <cli>,<cli> and --restart-rounds N) it then restarts a backup and the node that
 * joined from the snapshot and reports how the RPC answered meanwhile.
 *
 * With --recovery it instead measures how fast a Recover node replays a ledger of N transactions
 * (bench/recovery.ts; `npm run bench -- --recovery [--transactions 1000000]`).
 *
 * With --vs-etcd it instead measures three nodes against three etcd members under autocannon,
 * default and committed writes against etcd puts (bench/vs-etcd.ts; `npm run bench -- --vs-etcd
 * [--duration 8] [--rounds 3] [--builds dist,other/dist]`).
 *
 * With --smallbank it instead drives examples/smallbank on three nodes with the SmallBank mix, in
 * default and committed modes (bench/smallbank.ts; `npm run bench -- --smallbank [--duration 4]
 * [--rounds 2] [--connections 32] [--accounts 1000]`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseTxId } from '../src/base/ids.js';
import { createSelfSignedCertificate, generateEcKeyPair } from '../src/crypto/index.js';
import { HttpsClient } from '../src/platform/https-client.js';
import { CLI_ENTRY, removeDir, startNode, type StartedNode } from '../src/testing/node-process.js';
import { startNetwork, until } from '../src/testing/network.js';
import { abAvailable, runAb, type AbResult } from './ab.js';
import { buildRequest, percentile, runLoad, type LoadTarget } from './load.js';
import { OTHER_CORE, placeServer, placementAvailable, REQUEST_CORE, unplace } from './placement.js';
import { cpuUs, rssMb } from './proc.js';
import { stateBench } from './state.js';

interface Args {
  durationS: number;
  rounds: number;
  connections: number;
  writes: number;
  skipNetwork: boolean;
  /** Place the processes of the ab measurements on the two cores (placement.ts). */
  pin: boolean;
  /** Only the last segment: durability modes and committed writes (writeModes). */
  writeModesOnly: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { durationS: 8, rounds: 3, connections: 64, writes: 0, skipNetwork: false, pin: false, writeModesOnly: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--skip-network') {
      args.skipNetwork = true;
      continue;
    }
    if (argv[i] === '--pin') {
      args.pin = true;
      continue;
    }
    if (argv[i] === '--write-modes') {
      args.writeModesOnly = true;
      continue;
    }
    const value = Number(argv[i + 1]);
    if (argv[i] === '--duration') args.durationS = value;
    else if (argv[i] === '--rounds') args.rounds = Math.max(1, Math.floor(value));
    else if (argv[i] === '--connections') args.connections = value;
    else if (argv[i] === '--writes') args.writes = value;
    else continue;
    i++;
  }
  return args;
}

const MESSAGE = 'x'.repeat(200);

function writeRequest(host: string) {
  return (i: number) => buildRequest('POST', '/app/log/private', host, JSON.stringify({ id: i % 1000, msg: MESSAGE }));
}


/** One measured load against a node (or a network, through its primary). */
interface NodeRun {
  /** Answered writes (2xx) per second: every one of them is committed (see commitCatchUpMs). */
  readonly requestsPerSecond: number;
  readonly errors: number;
  readonly non2xx: number;
  /** NaN when the generator cannot tell (ab: no per-write transaction ids). */
  readonly commitP50Ms: number;
  readonly commitP99Ms: number;
  /** From the end of the load until every acknowledged write was committed; NaN when nothing commits (the floor). */
  readonly commitCatchUpMs: number;
  /** Per node in `nodes` order: the process's CPU µs per write, and its main thread's. */
  readonly cpuUsPerWrite: number[];
  readonly mainThreadCpuUsPerWrite: number[];
  readonly generatorCpuUs: number;
  readonly rssMb: number;
  /** A floor's run (floorRun): it commits nothing; with backups, commitCatchUpMs is until a majority held every write. */
  readonly floor?: boolean;
}

/** The seqno of a `<view>.<seqno>` text (NaN if it is not one). */
function seqnoOf(txId: unknown): number {
  return parseTxId(String(txId))?.seqno ?? NaN;
}

async function committedSeqno(node: StartedNode): Promise<number> {
  return seqnoOf((await node.client.request('GET', '/node/commit')).body.transaction_id);
}

/**
 * Starts counting the CPU time of server processes (in total, and of their main threads); the
 * returned function gives what each spent per request since.
 */
function startCpuMeter(pids: readonly number[]): (requests: number) => Pick<NodeRun, 'cpuUsPerWrite' | 'mainThreadCpuUsPerWrite'> {
  const cpuBefore = pids.map((pid) => cpuUs(pid));
  // The main thread's id is the process id: what is left on the request thread.
  const mainBefore = pids.map((pid) => cpuUs(pid, pid));
  return (requests) => ({
    cpuUsPerWrite: pids.map((pid, i) => (cpuUs(pid) - cpuBefore[i]!) / Math.max(1, requests)),
    mainThreadCpuUsPerWrite: pids.map((pid, i) => (cpuUs(pid, pid) - mainBefore[i]!) / Math.max(1, requests)),
  });
}

const pidsOf = (nodes: readonly StartedNode[]): number[] => nodes.map((n) => n.process.pid!);

/** Seqnos awaiting commit at once stay far below this (the ring of send times, see measureNode). */
const SEQNO_RING = 1 << 21;
/** As the node writes it (lower case). */
const TX_ID_HEADER = '\r\nx-covenant-transaction-id: ';

/** `nodes`: whose CPU per write to report, the loaded node first (its backups after it). */
async function measureNode(node: StartedNode, args: Args, nodes: readonly StartedNode[] = [node]): Promise<NodeRun> {
  const [host, port] = node.address.split(':') as [string, string];
  const target: LoadTarget = { host, port: Number(port), ca: node.serviceCertificatePem, cert: node.user.certificatePem, key: node.user.privateKeyPem };

  // Commit latency of every acknowledged write, without an object per write (a harness that
  // allocates per write takes CPU from the node it measures): the time each write was sent, in
  // a ring indexed by its seqno (seqnos are dense), and a poller that walks the newly committed.
  const sentAtBySeqno = new Float64Array(SEQNO_RING);
  let acknowledged = 0;
  let committed = 0;
  let seenCommitSeqno = 0;
  const commitLatencies: number[] = [];
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const commitSeqno = await committedSeqno(node);
      const now = performance.now();
      for (let seqno = seenCommitSeqno + 1; seqno <= commitSeqno; seqno++) {
        const slot = seqno % SEQNO_RING;
        const sentAt = sentAtBySeqno[slot]!;
        if (sentAt === 0) continue;
        commitLatencies.push(now - sentAt);
        sentAtBySeqno[slot] = 0;
        committed++;
      }
      seenCommitSeqno = Math.max(seenCommitSeqno, commitSeqno);
      await new Promise((r) => setTimeout(r, 2));
    }
  })();

  // Warm-up (JIT, TLS sessions), not measured.
  await runLoad(target, { connections: args.connections, durationMs: 2000, request: writeRequest(host) });
  const cpu = startCpuMeter(pidsOf(nodes));
  const generatorBefore = process.cpuUsage();
  const result = await runLoad(target, {
    connections: args.connections,
    durationMs: args.durationS * 1000,
    request: writeRequest(host),
    onResponse: (status, headers, sentAt) => {
      if (status !== 200) return;
      const at = headers.indexOf(TX_ID_HEADER);
      if (at === -1) return;
      const lineEnd = headers.indexOf('\r\n', at + TX_ID_HEADER.length);
      const seqno = Number(headers.slice(headers.indexOf('.', at) + 1, lineEnd === -1 ? headers.length : lineEnd));
      acknowledged++;
      if (seqno <= seenCommitSeqno) {
        // Committed before its answer was read.
        commitLatencies.push(performance.now() - sentAt);
        committed++;
      } else {
        sentAtBySeqno[seqno % SEQNO_RING] = sentAt;
      }
    },
  });
  const loadEnd = performance.now();
  const cpuPerWrite = cpu(result.requests);
  const generator = process.cpuUsage(generatorBefore);
  const generatorCpuUs = (generator.user + generator.system) / Math.max(1, result.requests);
  let catchUpMs = 0;
  while (committed < acknowledged) {
    await new Promise((r) => setTimeout(r, 5));
    catchUpMs = performance.now() - loadEnd;
    if (catchUpMs > 10_000) break;
  }
  polling = false;
  await poller;
  commitLatencies.sort((a, b) => a - b);
  return {
    ...result,
    requestsPerSecond: ((result.requests - result.non2xx) / result.elapsedMs) * 1000,
    commitP50Ms: percentile(commitLatencies, 50),
    commitP99Ms: percentile(commitLatencies, 99),
    commitCatchUpMs: catchUpMs,
    ...cpuPerWrite,
    generatorCpuUs,
    rssMb: rssMb(node.process.pid!),
  };
}

/** Files ab needs: the client certificate with its key in one PEM, and the request body. */
interface AbFiles {
  readonly clientCertKeyFile: string;
  readonly bodyFile: string;
}

function writeAbFiles(dir: string, identity: { certificatePem: string; privateKeyPem: string }): AbFiles {
  const files = { clientCertKeyFile: join(dir, 'ab_client.pem'), bodyFile: join(dir, 'ab_body.json') };
  writeFileSync(files.clientCertKeyFile, identity.certificatePem + identity.privateKeyPem);
  writeFileSync(files.bodyFile, JSON.stringify({ id: 7, msg: MESSAGE }));
  return files;
}

/**
 * The same load from ab. ab reports no transaction ids, so commit is checked at the end: one more
 * write, and the time until the node reports it committed (and with it every write before it).
 */
async function measureNodeAb(node: StartedNode, args: Args, files: AbFiles, nodes: readonly StartedNode[] = [node]): Promise<NodeRun> {
  const options = { ...files, url: `https://${node.address}/app/log/private`, connections: args.connections, ...(args.pin ? { cores: OTHER_CORE } : {}) };
  await runAb({ ...options, durationS: 2 });
  if (args.pin) placeServer(node.process.pid!, pidsOf(nodes).slice(1));
  const cpu = startCpuMeter(pidsOf(nodes));
  const result = await runAb({ ...options, durationS: args.durationS });
  const cpuPerWrite = cpu(result.requests);
  if (args.pin) unplace(pidsOf(nodes));
  const loadEnd = performance.now();
  const last = await node.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'last' }, identity: node.user });
  const lastSeqno = seqnoOf(last.headers['x-covenant-transaction-id']);
  await until(
    'the writes of the ab run to commit',
    async () => ((await committedSeqno(node)) >= lastSeqno ? true : undefined),
    10_000,
    2,
  );
  return {
    requestsPerSecond: (result.requestsPerSecond * (result.requests - result.non2xx)) / result.requests,
    errors: result.errors,
    non2xx: result.non2xx,
    commitP50Ms: NaN,
    commitP99Ms: NaN,
    commitCatchUpMs: performance.now() - loadEnd,
    ...cpuPerWrite,
    generatorCpuUs: result.generatorCpuUs,
    rssMb: rssMb(node.process.pid!),
  };
}

/** One measured load against the bare server (or the floor). */
interface BareRun {
  readonly requests: number;
  readonly errors: number;
  readonly non2xx: number;
  readonly requestsPerSecond: number;
  /** Of the server's process; `cpu` has each process's (the floor's backups after it). */
  readonly cpuUsPerRequest: number;
  readonly mainThreadCpuUsPerRequest: number;
  readonly cpu: Pick<NodeRun, 'cpuUsPerWrite' | 'mainThreadCpuUsPerWrite'>;
  readonly generatorCpuUs: number;
  /** The floor with backups: from the end of the load until a majority held every write; NaN otherwise. */
  readonly replicatedCatchUpMs: number;
}

/** The floor's processes beyond its server: its backups (floor-backup.ts). */
interface ReferenceOptions {
  readonly name: string;
  readonly extraArguments?: readonly string[];
  readonly backups?: readonly ChildProcess[];
}

/** A key and a self-signed certificate for 127.0.0.1, written in `dir` as <name>_key.pem and <name>_cert.pem. */
async function writeIdentity(dir: string, name: string) {
  const keys = generateEcKeyPair('P-384');
  const cert = await createSelfSignedCertificate({ keyPair: keys, subjectCommonName: name, subjectAltNames: ['iPAddress:127.0.0.1'], validityDays: 1, isCa: false });
  const files = { key: join(dir, `${name}_key.pem`), cert: join(dir, `${name}_cert.pem`) };
  writeFileSync(files.key, keys.privateKeyPem);
  writeFileSync(files.cert, cert);
  return { ...files, certPem: cert };
}

/** Starts a bench script and reads the port it prints. */
async function spawnListening(script: string, argv: readonly string[]): Promise<{ child: ChildProcess; port: number }> {
  const path = fileURLToPath(new URL(`./${script}`, import.meta.url));
  const child = spawn(process.execPath, [path, ...argv], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`${script} exited (${code}) before listening`)));
    child.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
  });
  return { child, port };
}

/**
 * A reference server kept running for the whole benchmark (the bare node:https server, or the
 * floor: floor-server.ts, alone or with backups); measure() runs one load against it.
 */
async function startReference(args: Args, dir: string, script: 'baseline-server.js' | 'floor-server.js', options: ReferenceOptions) {
  const identity = await writeIdentity(dir, options.name);
  const { child, port } = await spawnListening(script, [identity.key, identity.cert, ...(options.extraArguments ?? [])]);
  const target: LoadTarget = { host: '127.0.0.1', port, ca: identity.certPem };
  const backups = options.backups ?? [];
  const pids = [child.pid!, ...backups.map((b) => b.pid!)];
  const client = new HttpsClient(`127.0.0.1:${port}`, identity.certPem);
  /** With backups: how long after the load a majority held every write answered in it. */
  const replicatedCatchUp = async (loadEnd: number): Promise<number> => {
    if (backups.length === 0) return NaN;
    const state = async () => (await client.request('GET', '/')).body as { seqno: number; replicated: number };
    const { seqno } = await state();
    await until('the floor backups to hold the writes', async () => ((await state()).replicated >= seqno ? true : undefined), 10_000, 2);
    return performance.now() - loadEnd;
  };
  const runOf = async (result: Omit<BareRun, 'cpuUsPerRequest' | 'mainThreadCpuUsPerRequest' | 'cpu' | 'replicatedCatchUpMs'>, cpu: ReturnType<typeof startCpuMeter>, loadEnd: number): Promise<BareRun> => {
    const perProcess = cpu(result.requests);
    return {
      ...result,
      cpuUsPerRequest: perProcess.cpuUsPerWrite[0]!,
      mainThreadCpuUsPerRequest: perProcess.mainThreadCpuUsPerWrite[0]!,
      cpu: perProcess,
      replicatedCatchUpMs: await replicatedCatchUp(loadEnd),
    };
  };
  return {
    /** With the built-in generator. */
    async measure(): Promise<BareRun> {
      await runLoad(target, { connections: args.connections, durationMs: 2000, request: writeRequest('127.0.0.1') });
      const cpu = startCpuMeter(pids);
      const generatorBefore = process.cpuUsage();
      const result = await runLoad(target, { connections: args.connections, durationMs: args.durationS * 1000, request: writeRequest('127.0.0.1') });
      const loadEnd = performance.now();
      const generator = process.cpuUsage(generatorBefore);
      return runOf({ ...result, generatorCpuUs: (generator.user + generator.system) / Math.max(1, result.requests) }, cpu, loadEnd);
    },
    /** With ab (the same request as against a node, with the node's user certificate). */
    async measureAb(files: AbFiles): Promise<BareRun> {
      const abOptions = { ...files, url: `https://127.0.0.1:${port}/app/log/private`, connections: args.connections, ...(args.pin ? { cores: OTHER_CORE } : {}) };
      await runAb({ ...abOptions, durationS: 2 });
      if (args.pin) placeServer(child.pid!, pids.slice(1));
      const cpu = startCpuMeter(pids);
      const result: AbResult = await runAb({ ...abOptions, durationS: args.durationS });
      const loadEnd = performance.now();
      if (args.pin) unplace(pids);
      return runOf(result, cpu, loadEnd);
    },
    stop() {
      client.close();
      child.kill('SIGTERM');
      for (const backup of backups) backup.kill('SIGTERM');
    },
  };
}

/**
 * The floor of a replicated network: the floor server sending its entries to `count` floor
 * backups (floor-backup.ts), which apply, hash, append and acknowledge them.
 */
async function startFloorNetwork(args: Args, dir: string, count: number) {
  const secret = randomBytes(32).toString('hex');
  const backups: ChildProcess[] = [];
  const ports: string[] = [];
  try {
    for (let i = 1; i <= count; i++) {
      const identity = await writeIdentity(dir, `floor_backup${i}`);
      const { child, port } = await spawnListening('floor-backup.js', [identity.key, identity.cert, join(dir, `floor_backup${i}_entries`), secret]);
      backups.push(child);
      ports.push(String(port));
    }
    return await startReference(args, dir, 'floor-server.js', { name: 'floor_primary', extraArguments: [join(dir, 'floor_primary_entries'), secret, ...ports], backups });
  } catch (e) {
    for (const backup of backups) backup.kill('SIGTERM');
    throw e;
  }
}

/** A load against the floor server, in the form of a node's (without backups it commits nothing: no commit figures). */
function floorRun(run: BareRun): NodeRun {
  return {
    requestsPerSecond: (run.requestsPerSecond * (run.requests - run.non2xx)) / Math.max(1, run.requests),
    errors: run.errors,
    non2xx: run.non2xx,
    commitP50Ms: NaN,
    commitP99Ms: NaN,
    commitCatchUpMs: run.replicatedCatchUpMs,
    ...run.cpu,
    generatorCpuUs: run.generatorCpuUs,
    rssMb: NaN,
    floor: true,
  };
}

interface Alternation {
  /** Per round: the node's result and its ratio to the mean of the bare runs around it. */
  readonly rounds: { node: NodeRun; bareRps: number; bareCpuUs: number; ratio: number }[];
  readonly ratio: number;
  readonly nodeRps: number;
  readonly bareRps: number;
  readonly commitP50Ms: number;
  readonly commitP99Ms: number;
  /** Median CPU µs per request of the bare server, and per committed write of each measured node. */
  readonly bareCpuUs: number;
  readonly nodeCpuUs: number[];
  /** The same, of each node's main (request) thread alone. */
  readonly nodeMainThreadCpuUs: number[];
}

/** The floor commits nothing: its answered writes are only that. */
function writesUnit(run: NodeRun): string {
  return run.floor ? 'writes/s' : 'committed writes/s';
}

function describeCommit(run: NodeRun): string {
  if (run.floor) return Number.isNaN(run.commitCatchUpMs) ? 'nothing to commit' : `a majority held every write ${Math.round(run.commitCatchUpMs)} ms after the load`;
  return Number.isNaN(run.commitP50Ms)
    ? `all committed ${Math.round(run.commitCatchUpMs)} ms after the load`
    : `commit p50 ${round(run.commitP50Ms)} ms p99 ${round(run.commitP99Ms)} ms`;
}

const median = (values: readonly number[]): number => percentile([...values].sort((a, b) => a - b), 50);

/** bare, node, bare, node, ..., bare: see the header of this file. */
async function alternate(label: string, args: Args, measureBare: () => Promise<BareRun>, measure: () => Promise<NodeRun>): Promise<Alternation> {
  let bareBefore = await measureBare();
  let before = bareBefore.requestsPerSecond;
  const rounds: Alternation['rounds'] = [];
  for (let i = 0; i < args.rounds; i++) {
    const node = await measure();
    const bareAfter = await measureBare();
    const after = bareAfter.requestsPerSecond;
    const bareRps = (before + after) / 2;
    rounds.push({ node, bareRps, bareCpuUs: (bareBefore.cpuUsPerRequest + bareAfter.cpuUsPerRequest) / 2, ratio: node.requestsPerSecond / bareRps });
    console.log(
      `  round ${i + 1}: bare ${Math.round(before)} / ${Math.round(after)} req/s, ${label} ${Math.round(node.requestsPerSecond)} ${writesUnit(node)} ` +
        `(${round(node.requestsPerSecond / bareRps, 3)}x), ${describeCommit(node)}; ` +
        `CPU µs per request: bare ${round(bareAfter.cpuUsPerRequest, 1)} (load generator ${round(bareAfter.generatorCpuUs, 1)}), ` +
        `${label} ${node.cpuUsPerWrite.map((c, n) => `${round(c, 1)} [main thread ${round(node.mainThreadCpuUsPerWrite[n]!, 1)}]`).join(' + ')} ` +
        `(load generator ${round(node.generatorCpuUs, 1)})`,
    );
    before = after;
    bareBefore = bareAfter;
  }
  return {
    rounds,
    ratio: median(rounds.map((r) => r.ratio)),
    nodeRps: median(rounds.map((r) => r.node.requestsPerSecond)),
    bareRps: median(rounds.map((r) => r.bareRps)),
    commitP50Ms: median(rounds.map((r) => r.node.commitP50Ms)),
    commitP99Ms: median(rounds.map((r) => r.node.commitP99Ms)),
    bareCpuUs: median(rounds.map((r) => r.bareCpuUs)),
    nodeCpuUs: rounds[0]!.node.cpuUsPerWrite.map((_, i) => median(rounds.map((r) => r.node.cpuUsPerWrite[i]!))),
    nodeMainThreadCpuUs: rounds[0]!.node.mainThreadCpuUsPerWrite.map((_, i) => median(rounds.map((r) => r.node.mainThreadCpuUsPerWrite[i]!))),
  };
}

async function measureMemory(node: StartedNode, args: Args) {
  const [host, port] = node.address.split(':') as [string, string];
  const target: LoadTarget = { host, port: Number(port), ca: node.serviceCertificatePem, cert: node.user.certificatePem, key: node.user.privateKeyPem };
  let sent = 0;
  const started = performance.now();
  while (sent < args.writes) {
    const result = await runLoad(target, { connections: args.connections, durationMs: 5000, request: writeRequest(host) });
    sent += result.requests;
    console.log(JSON.stringify({ bench: 'memory', writes: sent, rss_mb: Number(rssMb(node.process.pid!).toFixed(1)), elapsed_s: Number(((performance.now() - started) / 1000).toFixed(1)) }));
  }
}

const ELECTION_TIMEOUT_MS = 1000;

/** SIGKILLs the primary of a running network and times how long until a write commits again. */
async function measureFailover(nodes: StartedNode[], primary: StartedNode) {
  const oldId = (await primary.client.request('GET', '/node/state')).body.node_id as string;
  const started = performance.now();
  await primary.kill();
  const survivors = nodes.filter((n) => n !== primary);
  const newPrimary = await until(
    'a new primary',
    async () => {
      for (const node of survivors) {
        const c = await node.client.request('GET', '/node/consensus', { timeoutMs: 1000 });
        if (c.body.role === 'Primary' && c.body.primary_id !== oldId) return node;
      }
      return undefined;
    },
    30_000,
    5,
  );
  const elected = performance.now() - started;
  const write = await newPrimary.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'after failover' }, identity: newPrimary.user });
  const txId = write.headers['x-covenant-transaction-id'];
  await until('the write after failover to commit', async () => {
    const status = await newPrimary.client.request('GET', `/app/tx?transaction_id=${txId}`);
    return status.body.status === 'Committed' ? true : undefined;
  }, 30_000, 2);
  const committing = performance.now() - started;
  return { electedMs: elected, committingMs: committing };
}

function round(value: number, digits = 2): number {
  return Number(value.toFixed(digits));
}

/** The report fields of one alternation, under a prefix ("one_node", "three_node_ab", ...). */
function reportOf(prefix: string, alternation: Alternation): Record<string, unknown> {
  const fields: Record<string, unknown> = {
    bare_https_rps: Math.round(alternation.bareRps),
    rps: Math.round(alternation.nodeRps),
    ratio: round(alternation.ratio, 3),
    ratios: alternation.rounds.map((r) => round(r.ratio, 3)),
    errors: alternation.rounds.reduce((n, r) => n + r.node.errors + r.node.non2xx, 0),
    commit_p50_ms: round(alternation.commitP50Ms),
    commit_p99_ms: round(alternation.commitP99Ms),
    commit_catch_up_ms: Math.round(Math.max(...alternation.rounds.map((r) => r.node.commitCatchUpMs))),
    bare_cpu_us_per_request: round(alternation.bareCpuUs, 1),
    cpu_us_per_write: alternation.nodeCpuUs.map((c) => round(c, 1)),
    main_thread_cpu_us_per_write: alternation.nodeMainThreadCpuUs.map((c) => round(c, 1)),
  };
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(fields)) {
    if (typeof value === 'number' && Number.isNaN(value)) continue;
    out[`${prefix}_${key}`] = value;
  }
  return out;
}

function summary(label: string, alternation: Alternation, rounds: number): string {
  const first = alternation.rounds[0]!.node;
  const commit = first.floor
    ? Number.isNaN(first.commitCatchUpMs)
      ? 'nothing to commit'
      : `a majority held every write ${Math.round(Math.max(...alternation.rounds.map((r) => r.node.commitCatchUpMs)))} ms after the load (at most)`
    : Number.isNaN(alternation.commitP50Ms)
    ? 'commit kept up'
    : `commit p50 ${round(alternation.commitP50Ms)} ms p99 ${round(alternation.commitP99Ms)} ms`;
  return (
    `bare node:https ${Math.round(alternation.bareRps)} req/s | ${label} ${Math.round(alternation.nodeRps)} ${writesUnit(alternation.rounds[0]!.node)} ` +
    `(${round(alternation.ratio, 3)}x, median of ${rounds}) | ${commit}`
  );
}

async function main(): Promise<void> {
  if (process.argv.includes('--recovery')) {
    await benchScript('recovery.js', process.argv.slice(2).filter((a) => a !== '--recovery'));
    return;
  }
  if (process.argv.includes('--vs-etcd')) {
    await benchScript('vs-etcd.js', process.argv.slice(2).filter((a) => a !== '--vs-etcd'));
    return;
  }
  if (process.argv.includes('--smallbank')) {
    await benchScript('smallbank.js', process.argv.slice(2).filter((a) => a !== '--smallbank'));
    return;
  }
  const stateAt = process.argv.indexOf('--state');
  if (stateAt !== -1) {
    const option = (name: string, fallback: number) => {
      const i = process.argv.indexOf(name);
      return i === -1 ? fallback : Number(process.argv[i + 1]);
    };
    const records = Number(process.argv[stateAt + 1]);
    if (!Number.isSafeInteger(records) || records <= 0) throw new Error('--state needs a number of records');
    const buildsAt = process.argv.indexOf('--restart-builds');
    const restartBuilds = buildsAt !== -1 ? process.argv[buildsAt + 1]!.split(',') : process.argv.includes('--restart') ? [CLI_ENTRY] : [];
    await stateBench({ records, connections: option('--connections', 64), reportEveryS: option('--report-every', 10), restartBuilds, restartRounds: option('--restart-rounds', 1) });
    return;
  }
  const args = parseArgs(process.argv.slice(2));
  if (args.writeModesOnly) {
    await writeModes(args);
    return;
  }
  if (args.writes > 0) {
    const node = await startNode({ configPatch: { logging: { level: 'fail' } } });
    try {
      await measureMemory(node, args);
    } finally {
      await node.stop();
      removeDir(node.dir);
    }
    return;
  }

  const withAb = abAvailable();
  if (!withAb) console.log('ab not found (Debian: apt-get install apache2-utils): measuring with the built-in load generator only');
  if (args.pin && !placementAvailable()) throw new Error('--pin needs taskset (util-linux) and at least two cores');
  if (args.pin) console.log(`--pin: in the ab measurements, each loaded server's request thread runs on core ${REQUEST_CORE}; its framing worker, backups and ab on core ${OTHER_CORE}`);
  const single = await startNode({ configPatch: { logging: { level: 'fail' } } });
  const baseline = await startReference(args, single.dir, 'baseline-server.js', { name: 'baseline' });
  const floor = await startReference(args, single.dir, 'floor-server.js', { name: 'floor', extraArguments: [join(single.dir, 'floor_entries')] });
  const abFiles = writeAbFiles(single.dir, single.user);
  const report: Record<string, unknown> = { bench: 'committed writes', connections: args.connections, duration_s: args.durationS, rounds: args.rounds, pinned: args.pin };
  try {
    let one: Alternation;
    try {
      console.log(`1 node: ${args.rounds} rounds of ${args.durationS} s, alternating with the bare server (built-in load generator)`);
      one = await alternate('1 node', args, () => baseline.measure(), () => measureNode(single, args));
      Object.assign(report, reportOf('one_node', one), { one_node_rss_mb: round(one.rounds.at(-1)!.node.rssMb, 1) });
      console.log(summary('1 node', one, args.rounds));
      if (withAb) {
        console.log(`1 node: ${args.rounds} rounds of ${args.durationS} s, alternating with the bare server (ab)`);
        const oneAb = await alternate('1 node', args, () => baseline.measureAb(abFiles), () => measureNodeAb(single, args, abFiles));
        Object.assign(report, reportOf('one_node_ab', oneAb));
        console.log(summary('1 node', oneAb, args.rounds));
      }
    } finally {
      await single.stop();
    }
    // The floor: what any ledger of this design must do per write (floor-server.ts), with the
    // headline generator. A node's distance to it is the cost of its store, routing,
    // authentication, consensus and signatures.
    const generator = withAb ? 'ab' : 'built-in load generator';
    console.log(`floor: ${args.rounds} rounds of ${args.durationS} s, alternating with the bare server (${generator})`);
    const floorRuns = withAb
      ? await alternate('floor', args, () => baseline.measureAb(abFiles), async () => floorRun(await floor.measureAb(abFiles)))
      : await alternate('floor', args, () => baseline.measure(), async () => floorRun(await floor.measure()));
    Object.assign(report, reportOf(withAb ? 'floor_ab' : 'floor', floorRuns));
    console.log(summary('floor', floorRuns, args.rounds));

    if (!args.skipNetwork) {
      // The floor of three processes: the floor server replicating to two floor backups.
      const floorNetwork = await startFloorNetwork(args, single.dir, 2);
      try {
        console.log(`floor, 3 processes: ${args.rounds} rounds of ${args.durationS} s, alternating with the bare server (${generator})`);
        const floorThree = withAb
          ? await alternate('floor, 3 processes', args, () => baseline.measureAb(abFiles), async () => floorRun(await floorNetwork.measureAb(abFiles)))
          : await alternate('floor, 3 processes', args, () => baseline.measure(), async () => floorRun(await floorNetwork.measure()));
        Object.assign(report, reportOf(withAb ? 'floor_three_ab' : 'floor_three', floorThree));
        console.log(summary('floor, 3 processes', floorThree, args.rounds));
      } finally {
        floorNetwork.stop();
      }
      const network = await startNetwork(3, { logging: { level: 'fail' } });
      try {
        const primary = await network.primary();
        const nodes = [primary, ...network.nodes.filter((n) => n !== primary)];
        console.log(`3 nodes: ${args.rounds} rounds of ${args.durationS} s, alternating with the bare server (built-in load generator)`);
        const three = await alternate('3 nodes', args, () => baseline.measure(), () => measureNode(primary, args, nodes));
        Object.assign(report, reportOf('three_node', three), { three_node_vs_one: round(three.ratio / one.ratio, 3) });
        console.log(summary('3 nodes', three, args.rounds));
        if (withAb) {
          const files = writeAbFiles(primary.dir, primary.user);
          console.log(`3 nodes: ${args.rounds} rounds of ${args.durationS} s, alternating with the bare server (ab)`);
          const threeAb = await alternate('3 nodes', args, () => baseline.measureAb(files), () => measureNodeAb(primary, args, files, nodes));
          Object.assign(report, reportOf('three_node_ab', threeAb));
          console.log(summary('3 nodes', threeAb, args.rounds));
        }
        const failover = await measureFailover(network.nodes, primary);
        Object.assign(report, {
          failover_elected_ms: Math.round(failover.electedMs),
          failover_committing_ms: Math.round(failover.committingMs),
          failover_election_timeouts: round(failover.committingMs / ELECTION_TIMEOUT_MS),
        });
        console.log(
          `failover: new primary after ${report.failover_elected_ms} ms, committing after ${report.failover_committing_ms} ms ` +
            `(${report.failover_election_timeouts} election timeouts of ${ELECTION_TIMEOUT_MS} ms)`,
        );
      } finally {
        await network.stopAll();
      }
    }
    console.log(JSON.stringify(report));
  } finally {
    baseline.stop();
    floor.stop();
    removeDir(single.dir);
  }
  await tokenAuthenticatedWrites(args);
  await linearizableReads(args);
  await javascriptApplication(args);
  await writeModes(args);
}

/** What bench/three-node-ab.ts prints for one run. */
interface ThreeNodeRun {
  readonly writes_per_s: number;
  readonly cpu_us_per_write: number[];
  readonly non2xx: number;
}

/** One run of bench/three-node-ab.ts (a three-node network of its own), its JSON line. */
async function threeNodeAb(durationS: number, extra: readonly string[]): Promise<ThreeNodeRun> {
  const script = fileURLToPath(new URL('./three-node-ab.js', import.meta.url));
  const child = spawn(process.execPath, [script, '--duration', String(durationS), ...extra], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const line = out.trim().split('\n').at(-1) ?? '';
  if (code !== 0 || !line.startsWith('{')) throw new Error(`three-node-ab ${extra.join(' ')} exited with ${code}: ${out.trim().slice(-500)}`);
  return JSON.parse(line) as ThreeNodeRun;
}

/**
 * Three nodes under ab, briefly: ledger.durability Replicated against Synced (the default; target:
 * Synced at 0.8x Replicated or more), then default writes against writes sent with
 * `x-covenant-consistency: committed` (answered once committed), each pair alternating A B B A so
 * that the machine's drift falls on both; a network of its own per run (bench/three-node-ab.ts).
 * Skipped without ab.
 */
async function writeModes(args: Args): Promise<void> {
  if (!abAvailable()) {
    console.log('write modes: ab not found (Debian: apt-get install apache2-utils): skipped');
    return;
  }
  const durationS = Math.min(args.durationS, 3);
  const mean = (values: readonly number[]) => values.reduce((a, b) => a + b, 0) / values.length;
  const alternate = async (label: string, a: [string, string[]], b: [string, string[]]) => {
    console.log(`3 nodes, ${label}: ${a[0]} against ${b[0]}, A B B A, ${durationS} s each (ab, a network per run)`);
    const runs: Record<string, number[]> = { [a[0]]: [], [b[0]]: [] };
    for (const [name, extra] of [a, b, b, a]) {
      const run = await threeNodeAb(durationS, extra);
      runs[name]!.push(run.writes_per_s);
      console.log(`  ${name}: ${run.writes_per_s} writes/s, CPU µs per write ${run.cpu_us_per_write.join(' + ')}${run.non2xx > 0 ? `, ${run.non2xx} non-2xx` : ''}`);
    }
    const ratio = mean(runs[b[0]]!) / mean(runs[a[0]]!);
    console.log(`  ${b[0]} / ${a[0]}: ${round(ratio, 3)}x (means ${Math.round(mean(runs[b[0]]!))} and ${Math.round(mean(runs[a[0]]!))} writes/s)`);
    return { runs, ratio };
  };
  const durability = await alternate('ledger.durability', ['Replicated', ['--durability', 'Replicated']], ['Synced', ['--durability', 'Synced']]);
  const consistency = await alternate('write consistency', ['default', []], ['committed', ['--committed']]);
  console.log(
    JSON.stringify({
      bench: 'write modes',
      duration_s: durationS,
      replicated_writes_per_s: durability.runs['Replicated'],
      synced_writes_per_s: durability.runs['Synced'],
      synced_vs_replicated: round(durability.ratio, 3),
      default_writes_per_s: consistency.runs['default'],
      committed_writes_per_s: consistency.runs['committed'],
      committed_vs_default: round(consistency.ratio, 3),
    }),
  );
  console.log(
    `write modes: Synced ${round(durability.ratio, 3)}x Replicated (target 0.8x or more); ` +
      `x-covenant-consistency: committed ${round(consistency.ratio, 3)}x default writes`,
  );
}

/**
 * Runs another bench script of this folder in its own process, with `args`: `--recovery` (how
 * fast a Recover node replays a ledger, bench/recovery.ts, also `npm run bench:recovery`) and
 * `--smallbank` (bench/smallbank.ts) instead of the write benches, and the JavaScript
 * application's bench at the end of them.
 */
async function benchScript(name: string, args: readonly string[]): Promise<void> {
  const script = fileURLToPath(new URL(`./${name}`, import.meta.url));
  const child = spawn(process.execPath, [script, ...args], { stdio: 'inherit' });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`bench/${name} exited with ${code}`);
}

/**
 * Three nodes: the built-in message log against examples/logging, the same log as a JavaScript
 * bundle, alternating, briefly (bench/js-app.ts, also `npm run bench:js`).
 */
async function javascriptApplication(args: Args): Promise<void> {
  const durationS = Math.min(args.durationS, 4);
  console.log(`3 nodes, the built-in message log against examples/logging: ${args.rounds} rounds of ${durationS} s`);
  await benchScript('js-app.js', ['--duration', String(durationS), '--rounds', String(args.rounds), '--connections', String(Math.min(args.connections, 32))]);
}

/**
 * Three nodes: default reads against linearizable ones (on the primary and through a backup),
 * alternating, briefly (bench/linearizable-reads.ts, also `npm run bench:reads`).
 */
async function linearizableReads(args: Args): Promise<void> {
  const durationS = Math.min(args.durationS, 3);
  console.log(`3 nodes, default reads against linearizable reads: ${args.rounds} rounds of ${durationS} s`);
  const script = fileURLToPath(new URL('./linearizable-reads.js', import.meta.url));
  const child = spawn(process.execPath, [script, '--duration', String(durationS), '--rounds', String(args.rounds), '--connections', String(args.connections)], { stdio: 'inherit' });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`the read bench exited with ${code}`);
}

/**
 * One node: token-authenticated writes against certificate-authenticated ones, alternating
 * (bench/jwt-auth.ts, also `npm run bench:jwt`); its own process, so that its node and provider
 * keys are its own. Target: tokens at 0.9x the certificates' throughput or more.
 */
async function tokenAuthenticatedWrites(args: Args): Promise<void> {
  console.log(`1 node, bearer tokens against client certificates: ${args.rounds} rounds of ${args.durationS} s`);
  const script = fileURLToPath(new URL('./jwt-auth.js', import.meta.url));
  const child = spawn(process.execPath, [script, '--duration', String(args.durationS), '--rounds', String(args.rounds), '--connections', String(args.connections)], { stdio: 'inherit' });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`the token bench exited with ${code}`);
}

await main();
