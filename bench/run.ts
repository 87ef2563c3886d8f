/**
 * `npm run bench`: committed logging-app writes against a one-node and a three-node network (real
 * node processes) over keep-alive HTTPS, and in the same run the same load against a minimal
 * node:https server answering a constant JSON. Prints the throughputs, their ratios to the bare
 * server, the commit latency (write sent → commit observed through GET /node/commit, polled every
 * 2 ms), and the time a three-node network takes to commit again after its primary is SIGKILLed.
 *
 *   npm run bench -- [--duration 10] [--connections 64] [--writes N] [--skip-network]
 *
 * With --writes N it instead writes N 200-byte messages over 1,000 ids and reports the node's RSS.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSelfSignedCertificate, generateEcKeyPair } from '../src/crypto/index.js';
import { removeDir, startNode, type StartedNode } from '../src/testing/node-process.js';
import { startNetwork, until } from '../src/testing/network.js';
import { buildRequest, percentile, runLoad, type LoadTarget } from './load.js';
import { NODE_PROCESS_FLAGS } from '../src/platform/runtime-flags.js';

interface Args {
  durationS: number;
  connections: number;
  writes: number;
  skipNetwork: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { durationS: 10, connections: 64, writes: 0, skipNetwork: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--skip-network') {
      args.skipNetwork = true;
      continue;
    }
    const value = Number(argv[i + 1]);
    if (argv[i] === '--duration') args.durationS = value;
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

function rssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const m = /VmRSS:\s+(\d+)\s+kB/.exec(status);
  return m ? Number(m[1]) / 1024 : NaN;
}

async function measureNode(node: StartedNode, args: Args) {
  const [host, port] = node.address.split(':') as [string, string];
  const target: LoadTarget = { host, port: Number(port), ca: node.serviceCertificatePem, cert: node.user.certificatePem, key: node.user.privateKeyPem };

  const pending: { seqno: number; sentAt: number }[] = [];
  let head = 0;
  const commitLatencies: number[] = [];
  let lastWriteSeqno = 0;
  let polling = true;
  const poller = (async () => {
    while (polling) {
      const answer = await node.client.request('GET', '/node/commit');
      const commitSeqno = Number(String(answer.body.transaction_id).split('.')[1]);
      const now = performance.now();
      while (head < pending.length && pending[head]!.seqno <= commitSeqno) commitLatencies.push(now - pending[head++]!.sentAt);
      if (head > 100_000) {
        pending.splice(0, head);
        head = 0;
      }
      await new Promise((r) => setTimeout(r, 2));
    }
  })();

  // Warm-up (JIT, TLS sessions), not measured.
  await runLoad(target, { connections: args.connections, durationMs: 2000, request: writeRequest(host) });
  const result = await runLoad(target, {
    connections: args.connections,
    durationMs: args.durationS * 1000,
    request: writeRequest(host),
    onResponse: (status, headers, sentAt) => {
      if (status !== 200) return;
      const m = /x-covenant-transaction-id: \d+\.(\d+)/i.exec(headers);
      if (!m) return;
      const seqno = Number(m[1]);
      lastWriteSeqno = Math.max(lastWriteSeqno, seqno);
      // Responses arrive nearly in seqno order; keep the queue sorted for the commit scan.
      let i = pending.length;
      while (i > head && pending[i - 1]!.seqno > seqno) i--;
      pending.splice(i, 0, { seqno, sentAt });
    },
  });
  const loadEnd = performance.now();
  let catchUpMs = 0;
  while (head < pending.length) {
    await new Promise((r) => setTimeout(r, 5));
    catchUpMs = performance.now() - loadEnd;
    if (catchUpMs > 10_000) break;
  }
  polling = false;
  await poller;
  commitLatencies.sort((a, b) => a - b);
  return {
    ...result,
    committed: head,
    commitP50Ms: percentile(commitLatencies, 50),
    commitP99Ms: percentile(commitLatencies, 99),
    commitCatchUpMs: catchUpMs,
    rssMb: rssMb(node.process.pid!),
  };
}

async function measureBaseline(args: Args, dir: string) {
  const keys = generateEcKeyPair('P-384');
  const cert = await createSelfSignedCertificate({ keyPair: keys, subjectCommonName: 'baseline', subjectAltNames: ['iPAddress:127.0.0.1'], validityDays: 1, isCa: false });
  writeFileSync(join(dir, 'baseline_key.pem'), keys.privateKeyPem);
  writeFileSync(join(dir, 'baseline_cert.pem'), cert);
  const script = fileURLToPath(new URL('./baseline-server.js', import.meta.url));
  const child = spawn(process.execPath, [...NODE_PROCESS_FLAGS, script, join(dir, 'baseline_key.pem'), join(dir, 'baseline_cert.pem')], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) => child.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim()))));
  try {
    const target: LoadTarget = { host: '127.0.0.1', port, ca: cert };
    await runLoad(target, { connections: args.connections, durationMs: 2000, request: writeRequest('127.0.0.1') });
    return await runLoad(target, { connections: args.connections, durationMs: args.durationS * 1000, request: writeRequest('127.0.0.1') });
  } finally {
    child.kill('SIGTERM');
  }
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
  let one: Awaited<ReturnType<typeof measureNode>>;
  let bare: Awaited<ReturnType<typeof measureBaseline>>;
  try {
    one = await measureNode(single, args);
    bare = await measureBaseline(args, single.dir);
  } finally {
    await single.stop();
    removeDir(single.dir);
  }
  const report: Record<string, unknown> = {
    bench: 'committed writes',
    connections: args.connections,
    duration_s: args.durationS,
    bare_https_rps: Math.round(bare.requestsPerSecond),
    one_node_rps: Math.round(one.requestsPerSecond),
    one_node_ratio: round(one.requestsPerSecond / bare.requestsPerSecond, 3),
    one_node_errors: one.errors + one.non2xx,
    one_node_commit_p50_ms: round(one.commitP50Ms),
    one_node_commit_p99_ms: round(one.commitP99Ms),
    one_node_commit_catch_up_ms: Math.round(one.commitCatchUpMs),
    one_node_rss_mb: round(one.rssMb, 1),
  };
  console.log(
    `bare node:https ${report.bare_https_rps} req/s | 1 node ${report.one_node_rps} committed writes/s (${report.one_node_ratio}x) | ` +
      `commit p50 ${report.one_node_commit_p50_ms} ms p99 ${report.one_node_commit_p99_ms} ms`,
  );

  if (!args.skipNetwork) {
    const network = await startNetwork(3, { logging: { level: 'fail' } });
    try {
      const primary = await network.primary();
      const three = await measureNode(primary, args);
      Object.assign(report, {
        three_node_rps: Math.round(three.requestsPerSecond),
        three_node_ratio: round(three.requestsPerSecond / bare.requestsPerSecond, 3),
        three_node_vs_one: round(three.requestsPerSecond / one.requestsPerSecond, 3),
        three_node_errors: three.errors + three.non2xx,
        three_node_commit_p50_ms: round(three.commitP50Ms),
        three_node_commit_p99_ms: round(three.commitP99Ms),
        three_node_commit_catch_up_ms: Math.round(three.commitCatchUpMs),
      });
      console.log(
        `3 nodes ${report.three_node_rps} committed writes/s (${report.three_node_ratio}x bare) | ` +
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
}

await main();
