/**
 * `npm run bench`: committed logging-app writes against a one-node network (a real node process)
 * over keep-alive HTTPS, and in the same run the same load against a minimal node:https server
 * answering a constant JSON. Prints both throughputs, their ratio, and the commit latency
 * (write sent → commit observed through GET /node/commit, polled every 2 ms).
 *
 *   npm run bench -- [--duration 10] [--connections 64] [--writes N]
 *
 * With --writes N it instead writes N 200-byte messages over 1,000 ids and reports the node's RSS.
 */
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSelfSignedCertificate, generateEcKeyPair } from '../src/crypto/index.js';
import { removeDir, startNode, type StartedNode } from '../src/testing/node-process.js';
import { buildRequest, percentile, runLoad, type LoadTarget } from './load.js';

interface Args {
  durationS: number;
  connections: number;
  writes: number;
}

function parseArgs(argv: string[]): Args {
  const args: Args = { durationS: 10, connections: 64, writes: 0 };
  for (let i = 0; i < argv.length; i++) {
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
  const child = spawn(process.execPath, [script, join(dir, 'baseline_key.pem'), join(dir, 'baseline_cert.pem')], { stdio: ['ignore', 'pipe', 'inherit'] });
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

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const node = await startNode({ configPatch: { logging: { level: 'fail' } } });
  try {
    if (args.writes > 0) {
      await measureMemory(node, args);
      return;
    }
    const single = await measureNode(node, args);
    const bare = await measureBaseline(args, node.dir);
    const ratio = single.requestsPerSecond / bare.requestsPerSecond;
    const report = {
      bench: 'one-node committed writes',
      connections: args.connections,
      duration_s: args.durationS,
      bare_https_rps: Math.round(bare.requestsPerSecond),
      node_rps: Math.round(single.requestsPerSecond),
      ratio: Number(ratio.toFixed(3)),
      node_errors: single.errors + single.non2xx,
      commit_p50_ms: Number(single.commitP50Ms.toFixed(2)),
      commit_p99_ms: Number(single.commitP99Ms.toFixed(2)),
      commit_catch_up_ms: Math.round(single.commitCatchUpMs),
      write_latency_p50_ms: Number(single.latencyP50Ms.toFixed(2)),
      write_latency_p99_ms: Number(single.latencyP99Ms.toFixed(2)),
      node_rss_mb: Number(single.rssMb.toFixed(1)),
    };
    console.log(JSON.stringify(report));
    console.log(
      `bare node:https ${report.bare_https_rps} req/s | covenant 1 node ${report.node_rps} committed writes/s | ratio ${report.ratio}\n` +
        `commit latency p50 ${report.commit_p50_ms} ms, p99 ${report.commit_p99_ms} ms (caught up ${report.commit_catch_up_ms} ms after the load stopped)`,
    );
  } finally {
    await node.stop();
    removeDir(node.dir);
  }
}

await main();
