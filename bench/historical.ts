/**
 * Historical reads of an application (docs/apps.md "Historical endpoints"): one node, a bundle
 * with a private map indexed by seqnos_by_key and a historical endpoint returning a record as a
 * past transaction left it. It writes `--writes` records over 100 ids, waits for commit, then
 * `--clients` clients each read the record of distinct old transactions (each answered 202 until
 * the node read its entries, then 200) for `--duration` seconds: completed historical reads per
 * second, cold (transactions not read before: each costs ledger reads) and warm (the same
 * transactions again, within the cache's bound).
 *
 *   npm run bench:historical [-- --writes 3000 --clients 16 --duration 5]
 */
import { HttpsClient } from '../src/platform/https-client.js';
import { deployApp } from '../src/cli/app.js';
import { memberConnectionOf, removeDir, startNode, type StartedNode } from '../src/testing/node-process.js';
import { waitCommitted } from '../src/testing/network.js';

const arg = (name: string, fallback: number) => {
  const at = process.argv.indexOf(name);
  return at === -1 ? fallback : Number(process.argv[at + 1]) || fallback;
};
const writes = arg('--writes', 3000);
const clients = arg('--clients', 16);
const durationMs = arg('--duration', 5) * 1000;

const BUNDLE = {
  metadata: {
    endpoints: {
      '/records/{id}': { put: { js_module: 'app.js', js_function: 'put', authn_policies: ['user_cert'], mode: 'readwrite' } },
      '/records/{id}/at': { get: { js_module: 'app.js', js_function: 'at', authn_policies: ['user_cert'], mode: 'historical' } },
    },
    indexes: { byKey: { strategy: 'seqnos_by_key', map: 'records' } },
  },
  modules: [
    {
      name: 'app.js',
      module: `
export function put(request) {
  covenant.kv['records'].set(covenant.strToBuf(request.params.id), request.body.arrayBuffer());
  return { body: true };
}
export function at(request) {
  const value = covenant.historicalState.kv['records'].get(covenant.strToBuf(request.params.id));
  return { body: value === undefined ? null : covenant.bufToJsonCompatible(value) };
}`,
    },
  ],
};

async function readAll(node: StartedNode, targets: readonly { id: number; txId: string }[], ms: number) {
  let next = 0;
  let done = 0;
  let pending = 0;
  const deadline = performance.now() + ms;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: clients }, async () => {
      const client = new HttpsClient(node.address, node.serviceCertificatePem);
      try {
        while (performance.now() < deadline) {
          const target = targets[next++ % targets.length]!;
          for (;;) {
            const answer = await client.request('GET', `/app/records/${target.id}/at`, { identity: node.user, headers: { 'x-covenant-transaction-id': target.txId } });
            if (answer.status === 200) break;
            if (answer.status !== 202) throw new Error(`historical read answered ${answer.status}: ${answer.text}`);
            pending++;
            // Retry-After says 1 s; a benchmark client asks again sooner to measure the node, not the wait.
            await new Promise((r) => setTimeout(r, 5));
          }
          done++;
        }
      } finally {
        client.close();
      }
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  return { reads: done, answered_202: pending, seconds: Math.round(seconds * 100) / 100, reads_per_second: Math.round(done / seconds) };
}

const node = await startNode({ configPatch: { logging: { level: 'fail' }, ledger_signatures: { delay: '20ms' } } });
try {
  await deployApp(BUNDLE, [memberConnectionOf(node)], () => undefined);
  const written: { id: number; txId: string }[] = [];
  for (let i = 0; i < writes; i++) {
    const answer = await node.client.request('PUT', `/app/records/${i % 100}`, { identity: node.user, body: { i, msg: 'x'.repeat(100) } });
    written.push({ id: (i * 7) % 100, txId: answer.headers['x-covenant-transaction-id'] as string });
  }
  await waitCommitted(node, written.at(-1)!.txId);
  const cache = (await node.client.request('GET', '/node/historical_cache')).body as { max_entries: number };
  // Cold: every transaction once, in an order that defeats the cache. Warm: a set that fits it.
  const shuffled = written.map((w, i) => ({ w, k: (i * 7919) % written.length })).sort((a, b) => a.k - b.k).map((x) => x.w);
  const cold = await readAll(node, shuffled, durationMs);
  const warmSet = written.slice(-Math.floor(cache.max_entries / 4));
  await readAll(node, warmSet, 1000);
  const warm = await readAll(node, warmSet, durationMs);
  const after = (await node.client.request('GET', '/node/historical_cache')).body;
  console.log(JSON.stringify({ writes, clients, cold, warm, historical_cache: after }));
} finally {
  await node.stop();
  removeDir(node.dir);
}
