/**
 * A normal client under connection attacks, against one node with default limits. The client
 * sends GET /node/commit every 20 ms (a new connection each time, so it needs a free session);
 * meanwhile attackers on other loopback addresses (127.0.0.2-5) hold, for `--seconds` each:
 *   1. half-open connections: TCP only, never TLS (reopened as the node closes them);
 *   2. idle TLS sessions: handshake done, no request (reopened likewise).
 * Prints per phase the longest gap between the client's answers, its failures, and the node's
 * VmRSS before and after. Run after a build:
 *   node dist/bench/hostile.js [--connections 1200] [--seconds 15] [--addresses 4]
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { removeDir, startNode, type StartedNode } from '../src/testing/node-process.js';

const args = process.argv.slice(2);
const arg = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  return i === -1 ? fallback : Number(args[i + 1]);
};
const connections = arg('--connections', 1200);
const seconds = arg('--seconds', 15);
// With one address the attack meets max_sessions_per_address; with four it reaches max_open_sessions.
const ATTACKERS = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'].slice(0, arg('--addresses', 4));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function rssKb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, 'utf8').split('\n').find((l) => l.startsWith('VmRSS:'))!;
  return Number(line.split(/\s+/)[1]);
}

async function phase(node: StartedNode, name: string, kind: 'none' | 'tcp' | 'tls'): Promise<void> {
  const i = node.address.lastIndexOf(':');
  const host = node.address.slice(0, i);
  const port = Number(node.address.slice(i + 1));
  let running = true;
  const sockets = new Set<net.Socket>();
  let opened = 0;
  const open = (n: number): void => {
    if (!running) return;
    const localAddress = ATTACKERS[n % ATTACKERS.length]!;
    const socket =
      kind === 'tcp' ? net.connect({ host, port, localAddress }) : tls.connect({ host, port, ca: node.serviceCertificatePem, ...({ localAddress } as tls.ConnectionOptions) });
    opened++;
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.on('data', () => undefined);
    // Reopened a moment after the node closes it: the attack stays at full strength.
    socket.once('close', () => {
      sockets.delete(socket);
      setTimeout(() => open(n), 50);
    });
  };
  const rssBefore = rssKb(node.process.pid!);
  if (kind !== 'none') for (let n = 0; n < connections; n++) open(n);

  let answered = 0;
  let failed = 0;
  const statuses: Record<string, number> = {};
  let last = performance.now();
  let longestGapMs = 0;
  const deadline = performance.now() + seconds * 1000;
  while (performance.now() < deadline) {
    const status = await new Promise<number | string>((resolve) => {
      const req = https.request({ host, port, path: '/node/commit', ca: node.serviceCertificatePem, agent: false, timeout: 30_000 }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('timeout', () => req.destroy(new Error('timeout')));
      req.on('error', (e) => resolve((e as NodeJS.ErrnoException).code ?? e.message));
      req.end();
    });
    statuses[status] = (statuses[status] ?? 0) + 1;
    const now = performance.now();
    if (status === 200) {
      answered++;
      longestGapMs = Math.max(longestGapMs, now - last);
      last = now;
    } else failed++;
    await sleep(20);
  }
  longestGapMs = Math.max(longestGapMs, performance.now() - last);
  const rssDuring = rssKb(node.process.pid!);
  const metrics = (await node.client.request('GET', '/node/metrics')).body.sessions.primary;
  running = false;
  for (const socket of sockets) socket.destroy();
  await sleep(1000);
  console.log(
    JSON.stringify({
      phase: name,
      attack_connections: kind === 'none' ? 0 : connections,
      attack_addresses: kind === 'none' ? 0 : ATTACKERS.length,
      attack_connections_opened: kind === 'none' ? 0 : opened,
      seconds,
      answered,
      failed,
      statuses,
      longest_gap_ms: Math.round(longestGapMs),
      rss_kb_before: rssBefore,
      rss_kb_at_end: rssDuring,
      rss_kb_after: rssKb(node.process.pid!),
      node_sessions_at_end: metrics,
    }),
  );
}

const node = await startNode();
try {
  await phase(node, 'no attack', 'none');
  await phase(node, 'half-open TCP connections', 'tcp');
  await phase(node, 'idle TLS sessions', 'tls');
  await phase(node, 'no attack, after', 'none');
} finally {
  await node.stop();
  removeDir(node.dir);
}
