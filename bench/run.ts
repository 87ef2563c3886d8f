/**
 * `npm run bench`: committed logging-app writes against a one-node and a three-node network (real
 * node processes) over keep-alive HTTPS, and in the same run the same load against a minimal
 * node:https server answering a constant JSON. Prints the throughputs, their ratios to the bare
 * server, the commit latency (write sent → commit observed through GET /node/commit, polled every
 * 2 ms), and the time a three-node network takes to commit again after its primary is SIGKILLed.
 *
 * A shared machine's speed drifts (the bare server alone was seen anywhere between 15,000 and
 * 46,000 req/s on the same box within an hour), so the bare server and the nodes are measured in
 * alternation: bare, node, bare, node, ..., bare. Each round's ratio divides the node's throughput
 * by the mean of the bare measurements just before and just after it; the reported ratio is the
 * median over the rounds, and every round is printed, with the CPU time (user + system, from
 * /proc) each server process spent per request, and [in brackets] its main thread alone (the rest
 * is the sealing worker, V8's helper threads and libuv's): a measure of cost that drifts less than
 * throughput.
 *
 *   npm run bench -- [--duration 8] [--rounds 3] [--connections 64] [--writes N] [--skip-network]
 *
 * With --writes N it instead writes N 200-byte messages over 1,000 ids and reports the node's RSS.
 */
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSelfSignedCertificate, generateEcKeyPair } from '../src/crypto/index.js';
import { removeDir, startNode, type StartedNode } from '../src/testing/node-process.js';
import { startNetwork, until } from '../src/testing/network.js';
import { buildRequest, percentile, runLoad, type LoadTarget } from './load.js';
import { cpuUs, rssMb } from './proc.js';

interface Args {
  durationS: number;
  rounds: number;
  connections: number;
  writes: number;
  skipNetwork: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { durationS: 8, rounds: 3, connections: 64, writes: 0, skipNetwork: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--skip-network') {
      args.skipNetwork = true;
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


/** Seqnos awaiting commit at once stay far below this (the ring of send times, see measureNode). */
const SEQNO_RING = 1 << 21;
/** As the node writes it (lower case). */
const TX_ID_HEADER = '\r\nx-covenant-transaction-id: ';

/** `nodes`: whose CPU per write to report, the loaded node first (its backups after it). */
async function measureNode(node: StartedNode, args: Args, nodes: readonly StartedNode[] = [node]) {
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
      const answer = await node.client.request('GET', '/node/commit');
      const commitSeqno = Number(String(answer.body.transaction_id).split('.')[1]);
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
  const cpuBefore = nodes.map((n) => cpuUs(n.process.pid!));
  // The main thread's id is the process id: what is left on the request thread.
  const mainBefore = nodes.map((n) => cpuUs(n.process.pid!, n.process.pid!));
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
  const cpuUsPerWrite = nodes.map((n, i) => (cpuUs(n.process.pid!) - cpuBefore[i]!) / Math.max(1, result.requests));
  const mainThreadCpuUsPerWrite = nodes.map((n, i) => (cpuUs(n.process.pid!, n.process.pid!) - mainBefore[i]!) / Math.max(1, result.requests));
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
    committed,
    commitP50Ms: percentile(commitLatencies, 50),
    commitP99Ms: percentile(commitLatencies, 99),
    commitCatchUpMs: catchUpMs,
    cpuUsPerWrite,
    mainThreadCpuUsPerWrite,
    generatorCpuUs,
    rssMb: rssMb(node.process.pid!),
  };
}

/** The bare node:https server, kept running for the whole benchmark; measure() runs one load. */
async function startBaseline(args: Args, dir: string) {
  const keys = generateEcKeyPair('P-384');
  const cert = await createSelfSignedCertificate({ keyPair: keys, subjectCommonName: 'baseline', subjectAltNames: ['iPAddress:127.0.0.1'], validityDays: 1, isCa: false });
  writeFileSync(join(dir, 'baseline_key.pem'), keys.privateKeyPem);
  writeFileSync(join(dir, 'baseline_cert.pem'), cert);
  const script = fileURLToPath(new URL('./baseline-server.js', import.meta.url));
  const child = spawn(process.execPath, [script, join(dir, 'baseline_key.pem'), join(dir, 'baseline_cert.pem')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim()))));
  const target: LoadTarget = { host: '127.0.0.1', port, ca: cert };
  return {
    async measure() {
      await runLoad(target, { connections: args.connections, durationMs: 2000, request: writeRequest('127.0.0.1') });
      const before = cpuUs(child.pid!);
      const generatorBefore = process.cpuUsage();
      const result = await runLoad(target, { connections: args.connections, durationMs: args.durationS * 1000, request: writeRequest('127.0.0.1') });
      const generator = process.cpuUsage(generatorBefore);
      return {
        ...result,
        cpuUsPerRequest: (cpuUs(child.pid!) - before) / Math.max(1, result.requests),
        generatorCpuUs: (generator.user + generator.system) / Math.max(1, result.requests),
      };
    },
    stop() {
      child.kill('SIGTERM');
    },
  };
}

type Baseline = Awaited<ReturnType<typeof startBaseline>>;
type NodeResult = Awaited<ReturnType<typeof measureNode>>;

interface Alternation {
  /** Per round: the node's result and its ratio to the mean of the bare runs around it. */
  readonly rounds: { node: NodeResult; bareRps: number; bareCpuUs: number; ratio: number }[];
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

const median = (values: readonly number[]): number => percentile([...values].sort((a, b) => a - b), 50);

/** bare, node, bare, node, ..., bare: see the header of this file. */
async function alternate(label: string, args: Args, baseline: Baseline, measure: () => Promise<NodeResult>): Promise<Alternation> {
  let bareBefore = await baseline.measure();
  let before = bareBefore.requestsPerSecond;
  const rounds: Alternation['rounds'] = [];
  for (let i = 0; i < args.rounds; i++) {
    const node = await measure();
    const bareAfter = await baseline.measure();
    const after = bareAfter.requestsPerSecond;
    const bareRps = (before + after) / 2;
    rounds.push({ node, bareRps, bareCpuUs: (bareBefore.cpuUsPerRequest + bareAfter.cpuUsPerRequest) / 2, ratio: node.requestsPerSecond / bareRps });
    console.log(
      `  round ${i + 1}: bare ${Math.round(before)} / ${Math.round(after)} req/s, ${label} ${Math.round(node.requestsPerSecond)} committed writes/s ` +
        `(${round(node.requestsPerSecond / bareRps, 3)}x), commit p50 ${round(node.commitP50Ms)} ms p99 ${round(node.commitP99Ms)} ms; ` +
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

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
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

  const single = await startNode({ configPatch: { logging: { level: 'fail' } } });
  const baseline = await startBaseline(args, single.dir);
  try {
    console.log(`1 node: ${args.rounds} rounds of ${args.durationS} s, alternating with the bare server`);
    let one: Alternation;
    try {
      one = await alternate('1 node', args, baseline, () => measureNode(single, args));
    } finally {
      await single.stop();
    }
    const last = one.rounds.at(-1)!.node;
    const report: Record<string, unknown> = {
      bench: 'committed writes',
      connections: args.connections,
      duration_s: args.durationS,
      rounds: args.rounds,
      bare_https_rps: Math.round(one.bareRps),
      one_node_rps: Math.round(one.nodeRps),
      one_node_ratio: round(one.ratio, 3),
      one_node_ratios: one.rounds.map((r) => round(r.ratio, 3)),
      one_node_errors: one.rounds.reduce((n, r) => n + r.node.errors + r.node.non2xx, 0),
      one_node_commit_p50_ms: round(one.commitP50Ms),
      one_node_commit_p99_ms: round(one.commitP99Ms),
      one_node_commit_catch_up_ms: Math.round(Math.max(...one.rounds.map((r) => r.node.commitCatchUpMs))),
      one_node_rss_mb: round(last.rssMb, 1),
      bare_cpu_us_per_request: round(one.bareCpuUs, 1),
      one_node_cpu_us_per_write: round(one.nodeCpuUs[0]!, 1),
      one_node_main_thread_cpu_us_per_write: round(one.nodeMainThreadCpuUs[0]!, 1),
    };
    console.log(
      `bare node:https ${report.bare_https_rps} req/s | 1 node ${report.one_node_rps} committed writes/s (${report.one_node_ratio}x, median of ${args.rounds}) | ` +
        `commit p50 ${report.one_node_commit_p50_ms} ms p99 ${report.one_node_commit_p99_ms} ms`,
    );

    if (!args.skipNetwork) {
      const network = await startNetwork(3, { logging: { level: 'fail' } });
      try {
        const primary = await network.primary();
        console.log(`3 nodes: ${args.rounds} rounds of ${args.durationS} s, alternating with the bare server`);
        const three = await alternate('3 nodes', args, baseline, () => measureNode(primary, args, [primary, ...network.nodes.filter((n) => n !== primary)]));
        Object.assign(report, {
          three_node_bare_https_rps: Math.round(three.bareRps),
          three_node_rps: Math.round(three.nodeRps),
          three_node_ratio: round(three.ratio, 3),
          three_node_ratios: three.rounds.map((r) => round(r.ratio, 3)),
          three_node_vs_one: round(three.ratio / one.ratio, 3),
          three_node_errors: three.rounds.reduce((n, r) => n + r.node.errors + r.node.non2xx, 0),
          three_node_commit_p50_ms: round(three.commitP50Ms),
          three_node_commit_p99_ms: round(three.commitP99Ms),
          three_node_commit_catch_up_ms: Math.round(Math.max(...three.rounds.map((r) => r.node.commitCatchUpMs))),
          three_node_cpu_us_per_write: three.nodeCpuUs.map((c) => round(c, 1)),
          three_node_main_thread_cpu_us_per_write: three.nodeMainThreadCpuUs.map((c) => round(c, 1)),
        });
        console.log(
          `bare node:https ${report.three_node_bare_https_rps} req/s | 3 nodes ${report.three_node_rps} committed writes/s (${report.three_node_ratio}x bare, median of ${args.rounds}) | ` +
            `commit p50 ${report.three_node_commit_p50_ms} ms p99 ${report.three_node_commit_p99_ms} ms`,
        );
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
    removeDir(single.dir);
  }
}

await main();
