/**
 * Reads of one record on a three-node network, default against linearizable
 * (x-covenant-consistency: linearizable), in the same run: the built-in load generator reads
 * alternately in each mode (D L L D ...), so that drift of the machine falls on both, on the
 * primary and (linearizable, forwarded to the primary) through a backup. Prints one JSON line per
 * measurement and a summary with reads/s of each mode and their ratio.
 *
 *   npm run bench:reads [-- --duration 4 --rounds 2 --connections 32]
 */
import { runLoad, type LoadTarget } from './load.js';
import { startNetwork } from '../src/testing/network.js';
import type { StartedNode } from '../src/testing/node-process.js';
import { numberArg } from './args.js';

const durationMs = numberArg('--duration', 4) * 1000;
const rounds = numberArg('--rounds', 2);
const connections = numberArg('--connections', 32);

type Mode = 'default' | 'linearizable' | 'linearizable-via-backup';

function targetOf(node: StartedNode): LoadTarget {
  const i = node.address.lastIndexOf(':');
  return { host: node.address.slice(0, i), port: Number(node.address.slice(i + 1)), ca: node.serviceCertificatePem, cert: node.user.certificatePem, key: node.user.privateKeyPem };
}

function readRequest(node: StartedNode, linearizable: boolean): Buffer {
  const header = linearizable ? 'x-covenant-consistency: linearizable\r\n' : '';
  return Buffer.from(`GET /app/log/private?id=7 HTTP/1.1\r\nhost: ${node.address}\r\nconnection: keep-alive\r\n${header}\r\n`);
}

const network = await startNetwork(3, { logging: { level: 'fail' } });
try {
  const primary = await network.primary();
  const backup = network.nodes.find((n) => n !== primary)!;
  const seeded = await primary.client.request('POST', '/app/log/private', { body: { id: 7, msg: 'x'.repeat(200) }, identity: primary.user, headers: { 'x-covenant-consistency': 'committed' } });
  if (seeded.status !== 200) throw new Error(`the record could not be written: ${seeded.status} ${seeded.text}`);
  const measure = async (mode: Mode, ms: number) => {
    const node = mode === 'linearizable-via-backup' ? backup : primary;
    const raw = readRequest(node, mode !== 'default');
    return runLoad(targetOf(node), { connections, durationMs: ms, request: () => raw });
  };
  for (const mode of ['default', 'linearizable', 'linearizable-via-backup'] as const) await measure(mode, 1500);
  const totals: Record<Mode, number[]> = { default: [], linearizable: [], 'linearizable-via-backup': [] };
  for (let r = 0; r < rounds; r++) {
    const order: Mode[] = r % 2 === 0 ? ['default', 'linearizable', 'linearizable-via-backup'] : ['linearizable-via-backup', 'linearizable', 'default'];
    for (const mode of order) {
      const result = await measure(mode, durationMs);
      const ok = Math.round((result.requestsPerSecond * (result.requests - result.non2xx - result.errors)) / Math.max(1, result.requests));
      totals[mode].push(ok);
      console.log(JSON.stringify({ bench: 'reads', mode, reads_per_s: ok, p50_ms: result.latencyP50Ms, p99_ms: result.latencyP99Ms, non2xx: result.non2xx, errors: result.errors }));
    }
  }
  const mean = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
  const plain = mean(totals.default);
  const linear = mean(totals.linearizable);
  const viaBackup = mean(totals['linearizable-via-backup']);
  console.log(
    JSON.stringify({
      bench: 'reads-summary',
      default_reads_per_s: plain,
      linearizable_reads_per_s: linear,
      linearizable_via_backup_reads_per_s: viaBackup,
      linearizable_vs_default: Math.round((linear / plain) * 100) / 100,
    }),
  );
} finally {
  await network.stopAll();
}
