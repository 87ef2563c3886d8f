/**
 * A normal client under attacks, against a three-node network with default limits. The client
 * sends GET /node/commit to the primary every 20 ms (a new connection each time, so it needs a
 * free session); meanwhile attackers on other loopback addresses (127.0.0.2-5), for `--seconds`
 * each:
 *   1. half-open connections: TCP only, never TLS (reopened as the node closes them);
 *   2. idle TLS sessions: handshake done, no request (reopened likewise);
 *   3. pipelined linearizable reads: `--pipelines` user connections, each keeping `--depth`
 *      GETs with x-covenant-consistency: linearizable and a `--header-kb` header unanswered;
 *   4. pipelined committed writes: the same with POSTs asking x-covenant-consistency: committed;
 *   5. idle node-to-node connections: `--n2n-connections` TCP connections to the primary's
 *      node-to-node port that never authenticate;
 *   6. a flood at a high request rate: `--rate-connections` connections, each keeping `--rate-depth`
 *      GET /node/commit (cheap, unauthenticated) unanswered, a new one sent for every answer.
 * Prints per phase the longest gap between the client's answers, its failures, the primary's
 * VmRSS and open descriptors before and after, whether it kept its view, and what the attackers
 * got. Run after a build:
 *   node dist/bench/hostile.js [--connections 1200] [--pipelines 640] [--depth 100] [--header-kb 14]
 *     [--n2n-connections 3000] [--rate-connections 64] [--rate-depth 16] [--seconds 15] [--addresses 4]
 *     [--phases tcp,tls,reads,writes,n2n,rate] [--nodes 3] [--rate-per-address N]
 * `--rate-per-address` sets rpc_interfaces.primary.max_requests_per_second_per_address (default:
 * the node's own default; the normal client connects from 127.0.0.1, exempt by default).
 * Against another build's node (the attackers and the client stay this build's):
 *   COVENANT_NODE_CLI=<other checkout>/dist/src/cli/main.js node dist/bench/hostile.js --phases rate
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { idleFlood, normalClientInWorker, openFdCount, pipelineFlood, rssKb, type Flood } from '../src/testing/hostile-clients.js';
import { startNetwork } from '../src/testing/network.js';
import type { StartedNode } from '../src/testing/node-process.js';

const args = process.argv.slice(2);
const arg = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  return i === -1 ? fallback : Number(args[i + 1]);
};
const connections = arg('--connections', 1200);
const pipelines = arg('--pipelines', 640);
const depth = arg('--depth', 100);
const headerKb = arg('--header-kb', 14);
const n2nConnections = arg('--n2n-connections', 3000);
const rateConnections = arg('--rate-connections', 64);
const rateDepth = arg('--rate-depth', 16);
const seconds = arg('--seconds', 15);
const phasesAt = args.indexOf('--phases');
const phases = new Set(phasesAt === -1 ? ['tcp', 'tls', 'reads', 'writes', 'n2n', 'rate'] : args[phasesAt + 1]!.split(','));
// With one address the attack meets max_sessions_per_address; with four it reaches max_open_sessions.
const ATTACKERS = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'].slice(0, arg('--addresses', 4));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Attack = (primary: StartedNode) => Flood | undefined;

function hostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  return { host: address.slice(0, i), port: Number(address.slice(i + 1)) };
}

async function view(node: StartedNode): Promise<number> {
  return (await node.client.request('GET', '/node/consensus', { timeoutMs: 30_000 })).body.current_view as number;
}

async function phase(primary: StartedNode, name: string, attack: Attack): Promise<void> {
  const pid = primary.process.pid!;
  const target = { ...hostPort(primary.address), ca: primary.serviceCertificatePem };
  const viewBefore = await view(primary);
  const rssBefore = rssKb(pid);
  const fdsBefore = openFdCount(pid);
  const flood = attack(primary);
  const client = normalClientInWorker(target, { method: 'GET', path: '/node/commit', expected: 200 });
  let rssPeak = rssBefore;
  let fdsPeak = fdsBefore;
  const deadline = performance.now() + seconds * 1000;
  while (performance.now() < deadline) {
    await sleep(250);
    rssPeak = Math.max(rssPeak, rssKb(pid));
    fdsPeak = Math.max(fdsPeak, openFdCount(pid));
  }
  const seen = await client.stop();
  const metrics = await primary.client
    .request('GET', '/node/metrics', { timeoutMs: 30_000 })
    .then((answer) => answer.body)
    .catch((e: Error) => ({ unavailable: e.message }));
  const attackers = flood?.counts();
  flood?.stop();
  await sleep(2000);
  console.log(
    JSON.stringify({
      phase: name,
      seconds,
      answered: seen.answered,
      failures: seen.failures,
      longest_gap_ms: seen.longestGapMs,
      rss_kb_before: rssBefore,
      rss_kb_peak: rssPeak,
      rss_kb_after: rssKb(pid),
      fds_before: fdsBefore,
      fds_peak: fdsPeak,
      fds_after: openFdCount(pid),
      view_before: viewBefore,
      view_after: await view(primary),
      attackers,
      node_metrics_at_end: metrics,
    }),
  );
}

const ratePerAddress = arg('--rate-per-address', 0);
const network = await startNetwork(arg('--nodes', 3), {
  logging: { level: 'fail' },
  output_files: { node_to_node_address_file: 'node_to_node_address.json' },
  ...(ratePerAddress > 0 ? { rpc_interfaces: { primary: { max_requests_per_second_per_address: ratePerAddress } } } : {}),
});
try {
  const primary = await network.primary();
  const user = { cert: primary.user.certificatePem, key: primary.user.privateKeyPem };
  const { host, port } = hostPort(primary.address);
  const padding = `x-padding: ${'p'.repeat(headerKb * 1024)}\r\n`;
  const read = Buffer.from(
    `GET /app/log/private?id=7 HTTP/1.1\r\nhost: ${primary.address}\r\nx-covenant-consistency: linearizable\r\n${padding}\r\n`,
  );
  const body = JSON.stringify({ id: 8, msg: 'flood' });
  const write = Buffer.from(
    `POST /app/log/private HTTP/1.1\r\nhost: ${primary.address}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nx-covenant-consistency: committed\r\n${padding}\r\n${body}`,
  );
  const pipelined = (request: Buffer): Attack => () =>
    pipelineFlood({ host, port, ca: primary.serviceCertificatePem, ...user }, { connections: pipelines, depth, request, localAddresses: ATTACKERS });
  const n2nAddress = (node: StartedNode) => Object.values(JSON.parse(readFileSync(join(node.dir, 'node_to_node_address.json'), 'utf8')) as Record<string, string>)[0]!;

  await phase(primary, 'no attack', () => undefined);
  if (phases.has('tcp')) await phase(primary, 'half-open TCP connections', () => idleFlood(host, port, { connections, localAddresses: ATTACKERS }));
  if (phases.has('tls')) {
    await phase(primary, 'idle TLS sessions', () => idleFlood(host, port, { connections, localAddresses: ATTACKERS, tls: { ca: primary.serviceCertificatePem } }));
  }
  if (phases.has('reads')) await phase(primary, 'pipelined linearizable reads', pipelined(read));
  if (phases.has('writes')) await phase(primary, 'pipelined committed writes', pipelined(write));
  if (phases.has('n2n')) {
    await phase(primary, 'idle node-to-node connections', (p) => {
      const n2n = hostPort(n2nAddress(p));
      return idleFlood(n2n.host, n2n.port, { connections: n2nConnections, localAddresses: ATTACKERS });
    });
  }
  if (phases.has('rate')) {
    const commit = Buffer.from(`GET /node/commit HTTP/1.1\r\nhost: ${primary.address}\r\n\r\n`);
    await phase(primary, 'high request rate', () =>
      pipelineFlood({ host, port, ca: primary.serviceCertificatePem }, { connections: rateConnections, depth: rateDepth, request: commit, localAddresses: ATTACKERS }),
    );
  }
  await phase(primary, 'no attack, after', () => undefined);
} finally {
  await network.stopAll();
}
