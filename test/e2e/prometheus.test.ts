/**
 * End to end: a real Prometheus (Debian's package, installed by .ci/run) scrapes a three-node
 * network through /node/metrics over TLS, trusting only the service certificate, and loads the
 * alert rules of ops/alerts.yml. Through its HTTP query API: the series exist, the commit moves
 * under writes, the primary flag moves when the primary is killed, the rules load and evaluate,
 * and every expression of the Grafana dashboard is accepted. `promtool check rules` passes.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startNetwork, until } from '../../src/testing/network.js';
import { waitForExit } from '../../src/testing/node-process.js';

const OPS = fileURLToPath(new URL('../../../ops/', import.meta.url));

function binary(name: string): string {
  const found = spawnSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).stdout.trim();
  assert.ok(found !== '', `${name} is not installed: install the Debian package prometheus (.ci/run does)`);
  return found;
}

async function freePort(): Promise<number> {
  return new Promise((resolvePort, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as AddressInfo).port;
      server.close(() => resolvePort(port));
    });
  });
}

interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

/** An instant query through Prometheus' HTTP API. */
async function query(port: number, expr: string): Promise<Sample[]> {
  const answer = await fetch(`http://127.0.0.1:${port}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = (await answer.json()) as { status: string; error?: string; data: { result: Sample[] } };
  assert.equal(body.status, 'success', `${expr}: ${body.error}`);
  return body.data.result;
}

test('a real Prometheus scrapes three nodes: series exist and move, the primary flag follows a failover, alert rules and dashboard load', async () => {
  const prometheus = binary('prometheus');
  const promtool = binary('promtool');
  const check = spawnSync(promtool, ['check', 'rules', join(OPS, 'alerts.yml')], { encoding: 'utf8' });
  assert.equal(check.status, 0, check.stdout + check.stderr);

  const network = await startNetwork(3);
  const dir = mkdtempSync(join(tmpdir(), 'covenant-prometheus-'));
  let scraper: ChildProcess | undefined;
  try {
    const [first] = network.nodes;
    // JSON stays the default; text when asked for it, on every node.
    const asJson = await first!.client.request('GET', '/node/metrics');
    assert.ok(asJson.body.sessions, 'JSON by default');
    const asText = await first!.client.request('GET', '/node/metrics', { headers: { accept: 'text/plain' } });
    assert.match(String(asText.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    assert.match(asText.text, /^# HELP covenant_node_is_primary /m);

    writeFileSync(join(dir, 'service_cert.pem'), first!.serviceCertificatePem);
    copyFileSync(join(OPS, 'alerts.yml'), join(dir, 'alerts.yml'));
    const targets = network.nodes.map((n) => `'${n.address}'`).join(', ');
    writeFileSync(
      join(dir, 'prometheus.yml'),
      [
        'global: {scrape_interval: 1s, evaluation_interval: 1s}',
        'rule_files: [alerts.yml]',
        'scrape_configs:',
        '  - job_name: covenant',
        '    scheme: https',
        '    metrics_path: /node/metrics',
        `    tls_config: {ca_file: ${join(dir, 'service_cert.pem')}}`,
        `    static_configs: [{targets: [${targets}]}]`,
      ].join('\n') + '\n',
    );
    const port = await freePort();
    scraper = spawn(prometheus, [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let scraperLog = '';
    scraper.stderr!.on('data', (c: Buffer) => (scraperLog = (scraperLog + c.toString()).slice(-4000)));

    await until('three targets up', async () => ((await query(port, 'up == 1')).length === 3 ? true : undefined), 60_000, 500).catch((e: unknown) => {
      throw new Error(`${String(e)}; prometheus said:\n${scraperLog}`);
    });
    const commitOf = async () => Math.max(...(await query(port, 'covenant_consensus_commit_seqno')).map((s) => Number(s.value[1])));
    const before = await commitOf();
    const primary = await network.primary();
    for (let id = 0; id < 20; id++) {
      const write = await primary.client.request('POST', '/app/log/private', { body: { id, msg: `metric ${id}` }, identity: primary.user });
      assert.equal(write.status, 200);
    }
    await until('the commit to advance in Prometheus', async () => ((await commitOf()) >= before + 20 ? true : undefined), 30_000, 500);
    // The commit counts signatures too: the scrape that saw it may predate the last writes' answers.
    await until('request counts per route and status', async () => {
      const routes = await query(port, 'covenant_http_request_duration_seconds_count{route="/app/log/private", method="POST", status="200"}');
      return routes.some((s) => Number(s.value[1]) >= 20) ? true : undefined;
    }, 30_000, 500);
    assert.ok((await query(port, 'covenant_ledger_fsync_duration_seconds_count > 0')).length >= 1, 'fsync durations');
    assert.equal((await query(port, 'covenant_service_is_open == 1')).length, 3);
    assert.ok((await query(port, 'process_resident_memory_bytes')).length === 3, 'process metrics');
    assert.ok((await query(port, 'covenant_certificate_expiry_timestamp_seconds{certificate="service"} > time()')).length === 3);

    const leading = await until('one primary in Prometheus', async () => {
      const flags = await query(port, 'covenant_node_is_primary == 1');
      return flags.length === 1 ? flags[0]!.metric['instance'] : undefined;
    }, 20_000, 500);
    assert.equal(leading, primary.address);
    await primary.kill();
    const next = await until('another primary in Prometheus', async () => {
      const flags = await query(port, 'covenant_node_is_primary == 1');
      const other = flags.find((s) => s.metric['instance'] !== primary.address);
      return other?.metric['instance'];
    }, 60_000, 500);
    assert.notEqual(next, primary.address);
    assert.ok((await query(port, `covenant_consensus_view{instance="${next}"}`)).every((s) => Number(s.value[1]) > 0));

    const rules = (await (await fetch(`http://127.0.0.1:${port}/api/v1/rules`)).json()) as { data: { groups: { rules: { name: string; health: string }[] }[] } };
    const loaded = rules.data.groups.flatMap((g) => g.rules);
    assert.equal(loaded.length, 8, 'every alert rule is loaded');
    await until('every rule evaluated', async () => {
      const now = (await (await fetch(`http://127.0.0.1:${port}/api/v1/rules`)).json()) as typeof rules;
      return now.data.groups.flatMap((g) => g.rules).every((r) => r.health === 'ok') ? true : undefined;
    }, 30_000, 500);

    const dashboard = JSON.parse(readFileSync(join(OPS, 'grafana-dashboard.json'), 'utf8')) as { panels: { title: string; targets: { expr: string }[] }[] };
    // Every metric a panel names is one the nodes declare (some have no sample until, say, a snapshot or an issuer exists).
    const declared = new Set([...asText.text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => m[1]!));
    for (const panel of dashboard.panels) {
      for (const target of panel.targets) {
        await query(port, target.expr);
        for (const name of target.expr.match(/\b(covenant_[a-z_]+|process_[a-z_]+)/g) ?? []) {
          assert.ok(declared.has(name.replace(/_(bucket|count|sum)$/, '')), `${panel.title}: ${name} is declared by the nodes`);
        }
      }
    }
  } finally {
    if (scraper !== undefined && scraper.exitCode === null) {
      scraper.kill('SIGTERM');
      await Promise.race([waitForExit(scraper), new Promise((r) => setTimeout(r, 10_000))]);
      if (scraper.exitCode === null) scraper.kill('SIGKILL');
    }
    await network.stopAll();
    rmSync(dir, { recursive: true, force: true });
  }
});
