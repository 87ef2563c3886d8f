/**
 * What Prometheus scraping costs the write path: three nodes under the built-in load generator
 * (private 200-byte writes over 1,000 ids to the primary), rounds without and with a scraper that
 * fetches every node's GET /node/metrics in the text format once a second, alternately (A B B A ...).
 * After one unmeasured warm-up round, prints one JSON line per round (writes/s, latency, the
 * scrapes' size and time) and a summary with the ratio of the means. Then, with no load, what one
 * scrape costs the primary in CPU (user + system time from /proc, over `--cpu-scrapes` scrapes in
 * a row): at one scrape a second, that over 1 s is the share of a core a scraper takes, which does
 * not depend on how noisy the machine's throughput is.
 *
 *   node dist/bench/metrics-cost.js [--duration 8] [--rounds 4] [--connections 64] [--cpu-scrapes 300]
 */
import { readFileSync } from 'node:fs';
import { numberArg } from './args.js';
import { buildRequest, runLoad, type LoadTarget } from './load.js';
import { startNetwork } from '../src/testing/network.js';
import type { StartedNode } from '../src/testing/node-process.js';

const durationMs = numberArg('--duration', 8) * 1000;
const rounds = numberArg('--rounds', 4);
const connections = numberArg('--connections', 64);
const cpuScrapes = numberArg('--cpu-scrapes', 300);

/** User + system CPU time of a process so far, in ms (/proc/<pid>/stat, clock ticks of 10 ms). */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** CPU ms one text scrape costs `node`, scraped `count` times in a row without load. */
async function cpuPerScrape(node: StartedNode, count: number): Promise<{ cpu_ms_per_scrape: number; scrapes: number }> {
  const pid = node.process.pid!;
  const before = cpuMs(pid);
  for (let i = 0; i < count; i++) await node.client.request('GET', '/node/metrics', { headers: { accept: 'text/plain' } });
  return { cpu_ms_per_scrape: +((cpuMs(pid) - before) / count).toFixed(2), scrapes: count };
}

function targetOf(node: StartedNode): LoadTarget {
  const i = node.address.lastIndexOf(':');
  return { host: node.address.slice(0, i), port: Number(node.address.slice(i + 1)), ca: node.serviceCertificatePem, cert: node.user.certificatePem, key: node.user.privateKeyPem };
}

interface ScrapeStats {
  scrapes: number;
  bytes: number;
  totalMs: number;
  maxMs: number;
}

/** Scrapes every node once a second until stopped, as Prometheus with scrape_interval 1s would. */
function startScraper(nodes: readonly StartedNode[]): { stop(): Promise<ScrapeStats> } {
  const stats: ScrapeStats = { scrapes: 0, bytes: 0, totalMs: 0, maxMs: 0 };
  let running = true;
  const loop = (async () => {
    while (running) {
      const began = performance.now();
      await Promise.all(
        nodes.map(async (node) => {
          const t0 = performance.now();
          const answer = await node.client.request('GET', '/node/metrics', { headers: { accept: 'text/plain' } });
          const ms = performance.now() - t0;
          stats.scrapes++;
          stats.bytes += answer.bytes.length;
          stats.totalMs += ms;
          stats.maxMs = Math.max(stats.maxMs, ms);
        }),
      );
      await new Promise((r) => setTimeout(r, Math.max(0, 1000 - (performance.now() - began))));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      return stats;
    },
  };
}

const network = await startNetwork(3, { logging: { level: 'fail' } });
try {
  const primary = await network.primary();
  const target = targetOf(primary);
  const message = 'm'.repeat(200);
  const requests = Array.from({ length: 1000 }, (_, id) => buildRequest('POST', '/app/log/private', target.host, JSON.stringify({ id, msg: message })));
  // One round unmeasured first: the nodes' JIT and caches warm up (the first round ran 20-30% slower).
  await runLoad(target, { connections, durationMs, request: (i) => requests[i % requests.length]! });
  const results: { scraped: boolean; writesPerSecond: number }[] = [];
  for (let round = 0; round < rounds; round++) {
    // A B B A: without, with, with, without, ...
    const scraped = round % 4 === 1 || round % 4 === 2;
    const scraper = scraped ? startScraper(network.nodes) : undefined;
    const load = await runLoad(target, { connections, durationMs, request: (i) => requests[i % requests.length]! });
    const scrapes = scraper ? await scraper.stop() : undefined;
    results.push({ scraped, writesPerSecond: load.requestsPerSecond });
    process.stdout.write(
      JSON.stringify({
        round,
        scraped,
        writes_per_second: Math.round(load.requestsPerSecond),
        p50_ms: load.latencyP50Ms,
        p99_ms: load.latencyP99Ms,
        errors: load.errors + load.non2xx,
        ...(scrapes ? { scrapes: scrapes.scrapes, scrape_bytes_mean: Math.round(scrapes.bytes / Math.max(1, scrapes.scrapes)), scrape_ms_mean: +(scrapes.totalMs / Math.max(1, scrapes.scrapes)).toFixed(1), scrape_ms_max: +scrapes.maxMs.toFixed(1) } : {}),
      }) + '\n',
    );
  }
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
  const without = mean(results.filter((r) => !r.scraped).map((r) => r.writesPerSecond));
  const withScraper = mean(results.filter((r) => r.scraped).map((r) => r.writesPerSecond));
  process.stdout.write(JSON.stringify({ summary: true, without_scraper: Math.round(without), with_scraper: Math.round(withScraper), ratio: +(withScraper / without).toFixed(3) }) + '\n');
  if (cpuScrapes > 0) {
    // The same without the scrape's own work: a JSON GET /node/commit over the same client.
    const pid = primary.process.pid!;
    const before = cpuMs(pid);
    for (let i = 0; i < cpuScrapes; i++) await primary.client.request('GET', '/node/commit');
    const requestMs = (cpuMs(pid) - before) / cpuScrapes;
    process.stdout.write(JSON.stringify({ idle_primary: true, ...(await cpuPerScrape(primary, cpuScrapes)), cpu_ms_per_plain_request: +requestMs.toFixed(2) }) + '\n');
  }
} finally {
  await network.stopAll();
}
