/**
 * Where the time of a commit round goes: three nodes under `x-covenant-consistency: committed`
 * writes (autocannon, 200-byte values over 1,000 keys), then the primary's
 * covenant_commit_stage_seconds histogram (GET /node/metrics, text; src/node/write/commit-stages.ts)
 * read before and after the load: for each stage, the median and p99 of the time from a write's
 * request read to that stage (interpolated within the fixed buckets), and the step from the
 * stage before (difference of medians). The ledger syncs of the primary and of the backups
 * (covenant_ledger_fsync_duration_seconds) are shown beside, with the same reading.
 *
 *   node dist/bench/commit-stages.js [--duration 8] [--connections 32] [--rounds 1] [--curve Secp256R1]
 */
import autocannon from 'autocannon';
import { numberArg } from './args.js';
import { startNetwork } from '../src/testing/network.js';
import type { StartedNode } from '../src/testing/node-process.js';
import { COMMIT_STAGES } from '../src/node/write/commit-stages.js';

const durationS = numberArg('--duration', 8);
const connections = numberArg('--connections', 32);
const rounds = numberArg('--rounds', 1);
const curveAt = process.argv.indexOf('--curve');
const curve = curveAt === -1 ? undefined : process.argv[curveAt + 1];

/** Cumulative bucket counts of one histogram series: upper bound (seconds) → count. */
type Buckets = Map<number, number>;

/** The series of `name` in a Prometheus text, by the value of `label` (or '' without). */
function histograms(text: string, name: string, label: string | undefined): Map<string, Buckets> {
  const out = new Map<string, Buckets>();
  const line = new RegExp(`^${name}_bucket\\{([^}]*)\\} (\\S+)$`);
  for (const row of text.split('\n')) {
    const m = line.exec(row);
    if (m === null) continue;
    const labels = Object.fromEntries([...m[1]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
    const key = label === undefined ? '' : (labels[label] ?? '');
    const le = labels.le === '+Inf' ? Number.POSITIVE_INFINITY : Number(labels.le);
    const series = out.get(key) ?? new Map<number, number>();
    series.set(le, Number(m[2]));
    out.set(key, series);
  }
  return out;
}

function minus(after: Buckets, before: Buckets | undefined): Buckets {
  const out = new Map<number, number>();
  for (const [le, count] of after) out.set(le, count - (before?.get(le) ?? 0));
  return out;
}

/** The q-quantile (seconds) of cumulative buckets, interpolated linearly within its bucket. */
function quantile(buckets: Buckets, q: number): number {
  const bounds = [...buckets.keys()].sort((a, b) => a - b);
  const total = buckets.get(Number.POSITIVE_INFINITY) ?? 0;
  if (total === 0) return Number.NaN;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const le of bounds) {
    const count = buckets.get(le)!;
    if (count >= rank) {
      if (!Number.isFinite(le)) return lower;
      return lower + ((le - lower) * (rank - below)) / Math.max(1, count - below);
    }
    lower = le;
    below = count;
  }
  return lower;
}

async function metricsText(node: StartedNode): Promise<string> {
  const answer = await node.client.request('GET', '/node/metrics', { headers: { accept: 'text/plain' } });
  return answer.text;
}

const ms = (seconds: number): string => (seconds * 1000).toFixed(2);

async function round(): Promise<void> {
  const network = await startNetwork(3, { logging: { level: 'fail' }, ...(curve ? { node_certificate: { curve_id: curve } } : {}) });
  try {
    const primary = await network.primary();
    const backups = network.nodes.filter((n) => n !== primary);
    let next = 0;
    const target: autocannon.Options = {
      url: `https://${primary.address}/app/log/private`,
      method: 'POST',
      connections,
      headers: { 'content-type': 'application/json', 'x-covenant-consistency': 'committed' },
      tlsOptions: { ca: primary.serviceCertificatePem, cert: primary.user.certificatePem, key: primary.user.privateKeyPem },
      requests: [{ setupRequest: (request) => ({ ...request, body: JSON.stringify({ id: next++ % 1000, msg: 'v'.repeat(200) }) }) }],
    };
    // Warm-up (JIT, caches), unmeasured.
    await autocannon({ ...target, duration: 2 });
    const before = await Promise.all(network.nodes.map((n) => metricsText(n)));
    const result = await autocannon({ ...target, duration: durationS });
    const after = await Promise.all(network.nodes.map((n) => metricsText(n)));
    const at = network.nodes.indexOf(primary);
    const stagesBefore = histograms(before[at]!, 'covenant_commit_stage_seconds', 'stage');
    const stagesAfter = histograms(after[at]!, 'covenant_commit_stage_seconds', 'stage');
    console.log(`${result['2xx']} committed writes in ${durationS} s (${Math.round(result['2xx'] / durationS)}/s), client p50 ${result.latency.p50} ms, p99 ${result.latency.p99} ms, ${connections} connections`);
    console.log('| stage (time from the request read) | median ms | p99 ms | step from the stage before (medians) ms | writes |');
    console.log('|---|---|---|---|---|');
    let previous = 0;
    for (const stage of COMMIT_STAGES) {
      const series = minus(stagesAfter.get(stage) ?? new Map(), stagesBefore.get(stage));
      const median = quantile(series, 0.5);
      console.log(`| ${stage} | ${ms(median)} | ${ms(quantile(series, 0.99))} | ${ms(median - previous)} | ${series.get(Number.POSITIVE_INFINITY) ?? 0} |`);
      if (!Number.isNaN(median)) previous = median;
    }
    for (const [name, i] of [['primary', at], ...backups.map((b, k) => [`backup ${k + 1}`, network.nodes.indexOf(b)] as const)] as const) {
      const syncs = minus(histograms(after[i]!, 'covenant_ledger_fsync_duration_seconds', undefined).get('') ?? new Map(), histograms(before[i]!, 'covenant_ledger_fsync_duration_seconds', undefined).get(''));
      console.log(`${name}: ${syncs.get(Number.POSITIVE_INFINITY) ?? 0} ledger syncs, median ${ms(quantile(syncs, 0.5))} ms, p99 ${ms(quantile(syncs, 0.99))} ms`);
    }
  } finally {
    await network.stopAll();
  }
}

for (let i = 0; i < rounds; i++) await round();
process.exit(0);
