/**
 * One measurement of a three-node network (or `--nodes N`) of this build under `ab` (the write path as
 * `npm run bench` loads it): a 2 s warm-up, then `--duration` seconds; prints one JSON line with
 * committed writes per second and the CPU per write of each node (primary first); `--durability
 * Synced|Replicated` sets ledger.durability, `--committed` sends every write with
 * `x-covenant-consistency: committed` (answered once committed). Meant to be run
 * alternately from two builds to compare them (A B B A, see docs/performance.md "Measuring"):
 *
 *   node <build A>/dist/bench/three-node-ab.js --duration 8
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runAb } from './ab.js';
import { cpuUs } from './proc.js';
import { startNetwork, until } from '../src/testing/network.js';
import { parseTxId } from '../src/base/ids.js';

const durationS = Number(process.argv[process.argv.indexOf('--duration') + 1] ?? 8) || 8;
const nodesAt = process.argv.indexOf('--nodes');
const nodeCount = nodesAt === -1 ? 3 : Number(process.argv[nodesAt + 1]);
const durabilityAt = process.argv.indexOf('--durability');
const durability = durabilityAt === -1 ? undefined : process.argv[durabilityAt + 1];
const network = await startNetwork(nodeCount, { logging: { level: 'fail' }, ...(durability ? { ledger: { durability } } : {}) });
try {
  const primary = await network.primary();
  const nodes = [primary, ...network.nodes.filter((n) => n !== primary)];
  const files = { clientCertKeyFile: join(primary.dir, 'ab_client.pem'), bodyFile: join(primary.dir, 'ab_body.json') };
  writeFileSync(files.clientCertKeyFile, primary.user.certificatePem + primary.user.privateKeyPem);
  writeFileSync(files.bodyFile, JSON.stringify({ id: 7, msg: 'x'.repeat(200) }));
  const committed = process.argv.includes('--committed');
  const options = { ...files, url: `https://${primary.address}/app/log/private`, connections: 64, ...(committed ? { headers: ['x-covenant-consistency: committed'] } : {}) };
  await runAb({ ...options, durationS: 2 });
  const before = nodes.map((n) => cpuUs(n.process.pid!));
  const result = await runAb({ ...options, durationS });
  const ok = result.requests - result.non2xx;
  const cpu = nodes.map((n, i) => Math.round(((cpuUs(n.process.pid!) - before[i]!) / Math.max(1, ok)) * 10) / 10);
  const last = await primary.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'last' }, identity: primary.user });
  const lastSeqno = parseTxId(String(last.headers['x-covenant-transaction-id']))?.seqno ?? NaN;
  await until('the writes to commit', async () => {
    const commit = parseTxId(String((await primary.client.request('GET', '/node/commit')).body.transaction_id))?.seqno ?? 0;
    return commit >= lastSeqno ? true : undefined;
  }, 10_000, 2);
  console.log(JSON.stringify({ writes_per_s: Math.round((result.requestsPerSecond * ok) / result.requests), cpu_us_per_write: cpu, non2xx: result.non2xx }));
} finally {
  await network.stopAll();
}
