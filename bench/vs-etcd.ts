/**
 * `npm run bench -- --vs-etcd`: three Covenant nodes against three etcd members, on this machine's
 * loopback, under the same closed-loop generator (autocannon, in this process): 200-byte values
 * over 1,000 keys, 32 and 64 connections. Covenant is measured with default writes (answered once
 * the primary executed them) and with `x-covenant-consistency: committed` writes (answered once
 * committed, hence on the disks of a majority with ledger.durability Synced); etcd with puts
 * through its v3 JSON gateway (`POST /v3/kv/put`, answered once committed and fsync'd on a
 * majority). The modes run in alternation, forwards then backwards (A B C C B A ...), each on a
 * fresh network or cluster; the medians, each round's ratio to etcd of the same round, and the
 * CPU (user + system, every server process) per write are printed.
 *
 *   npm run bench -- --vs-etcd [--duration 8] [--rounds 3] [--builds dist,/other/checkout/dist] [--curve Secp256R1]
 *
 * --builds compares Covenant builds as well (each build's dist folder; the first is this one by
 * default). --curve sets node_certificate.curve_id (builds that know it). etcd comes from
 * Debian's etcd-server package: when `etcd` is missing and the bench runs as root it runs
 * `apt-get update` and `apt-get install -y etcd-server` first; otherwise it says how to and stops.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { cpuUs } from './proc.js';

const KEYS = 1_000;
const VALUE = 'v'.repeat(200);
const CONNECTIONS = [32, 64] as const;
const WARM_UP_S = 2;

function option(name: string): string | undefined {
  const i = process.argv.indexOf(name);
  return i === -1 ? undefined : process.argv[i + 1];
}

const durationS = Number(option('--duration') ?? 8);
const rounds = Number(option('--rounds') ?? 3);
const curve = option('--curve');
const ownDist = resolve(fileURLToPath(new URL('..', import.meta.url)));
const builds = (option('--builds') ?? ownDist).split(',').map((d) => resolve(d));

interface Measured {
  readonly writesPerS: number;
  readonly p50Ms: number;
  readonly cpuUsPerWrite: number;
  readonly failed: number;
}

interface System {
  readonly pids: number[];
  /** The request autocannon sends (the body made per request by setupRequest). */
  readonly target: autocannon.Options;
  stop(): Promise<void>;
}

/** One closed-loop measurement: warm-up, then `durationS` seconds, with the servers' CPU. */
async function measure(system: System, connections: number): Promise<Measured> {
  await run(system.target, connections, WARM_UP_S);
  const before = system.pids.map((pid) => cpuUs(pid));
  const result = await run(system.target, connections, durationS);
  const ok = result['2xx'];
  const cpu = system.pids.reduce((sum, pid, i) => sum + (cpuUs(pid) - before[i]!), 0);
  return { writesPerS: ok / durationS, p50Ms: result.latency.p50, cpuUsPerWrite: cpu / Math.max(1, ok), failed: result.non2xx + result.errors + result.timeouts };
}

function run(target: autocannon.Options, connections: number, seconds: number): Promise<autocannon.Result> {
  return new Promise((resolvePromise, reject) => {
    autocannon({ ...target, connections, duration: seconds, pipelining: 1 }, (error, result) => (error ? reject(error) : resolvePromise(result)));
  });
}

/** A body per request, over KEYS keys in turn. */
function rotatingBody(make: (key: number) => string): autocannon.Request {
  let next = 0;
  return {
    setupRequest: (request) => {
      request.body = make(next++ % KEYS);
      return request;
    },
  };
}

// ---- Covenant

interface NetworkModule {
  startNetwork(count: number, configPatch: Record<string, unknown>): Promise<{
    nodes: { process: ChildProcess }[];
    primary(): Promise<{ address: string; serviceCertificatePem: string; user: { certificatePem: string; privateKeyPem: string } }>;
    stopAll(): Promise<void>;
  }>;
}

async function covenant(dist: string, committed: boolean): Promise<System> {
  const { startNetwork } = (await import(join(dist, 'src/testing/network.js'))) as NetworkModule;
  const network = await startNetwork(3, { logging: { level: 'fail' }, ...(curve ? { node_certificate: { curve_id: curve } } : {}) });
  const primary = await network.primary();
  return {
    pids: network.nodes.map((n) => n.process.pid!),
    target: {
      url: `https://${primary.address}/app/log/private`,
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(committed ? { 'x-covenant-consistency': 'committed' } : {}) },
      tlsOptions: { ca: primary.serviceCertificatePem, cert: primary.user.certificatePem, key: primary.user.privateKeyPem },
      requests: [rotatingBody((key) => JSON.stringify({ id: key, msg: VALUE }))],
    },
    stop: () => network.stopAll(),
  };
}

// ---- etcd

function ensureEtcd(): void {
  if (spawnSync('etcd', ['--version']).status === 0) return;
  if (process.getuid?.() !== 0) throw new Error('etcd is not installed: apt-get update && apt-get install -y etcd-server');
  console.log('etcd not found: installing Debian etcd-server (apt-get update, apt-get install -y etcd-server)');
  for (const args of [['update'], ['install', '-y', 'etcd-server']]) {
    const done = spawnSync('apt-get', args, { stdio: 'inherit', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    if (done.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed`);
  }
}

function freePort(): Promise<number> {
  return new Promise((resolvePromise, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolvePromise(port));
    });
  });
}

async function etcdPost(port: number, path: string, body: unknown): Promise<any> {
  const answer = await fetch(`http://127.0.0.1:${port}${path}`, { method: 'POST', body: JSON.stringify(body), signal: AbortSignal.timeout(2000) });
  return answer.json();
}

async function etcd(): Promise<System> {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-bench-etcd-'));
  const members = [];
  for (let i = 0; i < 3; i++) members.push({ name: `m${i}`, client: await freePort(), peer: await freePort() });
  const cluster = members.map((m) => `${m.name}=http://127.0.0.1:${m.peer}`).join(',');
  const processes = members.map((m) =>
    spawn(
      'etcd',
      [
        `--name=${m.name}`,
        `--data-dir=${join(dir, m.name)}`,
        `--listen-client-urls=http://127.0.0.1:${m.client}`,
        `--advertise-client-urls=http://127.0.0.1:${m.client}`,
        `--listen-peer-urls=http://127.0.0.1:${m.peer}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${m.peer}`,
        `--initial-cluster=${cluster}`,
        '--initial-cluster-state=new',
        '--initial-cluster-token=covenant-bench',
        '--logger=zap',
        '--log-level=error',
      ],
      { stdio: 'ignore' },
    ),
  );
  const stop = async () => {
    await Promise.all(processes.map((p) => new Promise<void>((done) => (p.exitCode !== null ? done() : (p.once('exit', () => done()), p.kill('SIGTERM'))))));
    rmSync(dir, { recursive: true, force: true });
  };
  // The leader takes the puts (a follower would forward them): as Covenant's primary does.
  let leaderPort: number | undefined;
  for (let attempt = 0; attempt < 200 && leaderPort === undefined; attempt++) {
    await new Promise((r) => setTimeout(r, 100));
    for (const m of members) {
      const status = await etcdPost(m.client, '/v3/maintenance/status', {}).catch(() => undefined);
      if (status?.leader !== undefined && status.leader !== '0' && status.leader === status.header?.member_id) leaderPort = m.client;
    }
  }
  if (leaderPort === undefined) {
    await stop();
    throw new Error('etcd: no leader within 20 s');
  }
  const b64 = (text: string) => Buffer.from(text).toString('base64');
  const value = b64(VALUE);
  return {
    pids: processes.map((p) => p.pid!),
    target: {
      url: `http://127.0.0.1:${leaderPort}/v3/kv/put`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      requests: [rotatingBody((key) => JSON.stringify({ key: b64(`key${key}`), value }))],
    },
    stop,
  };
}

// ---- the alternation

interface Mode {
  readonly name: string;
  start(): Promise<System>;
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const round = (value: number, digits = 0) => Math.round(value * 10 ** digits) / 10 ** digits;

async function main(): Promise<void> {
  ensureEtcd();
  const modes: Mode[] = [{ name: 'etcd put', start: etcd }];
  for (const dist of builds) {
    const label = builds.length > 1 || dist !== ownDist ? `${dist} ` : '';
    modes.push({ name: `${label}Covenant default`, start: () => covenant(dist, false) });
    modes.push({ name: `${label}Covenant committed`, start: () => covenant(dist, true) });
  }
  console.log(`Covenant (3 nodes) against etcd (3 members), autocannon, ${KEYS} keys, 200-byte values, ${CONNECTIONS.join(' and ')} connections, ${rounds} rounds of ${durationS} s, alternating`);
  const results = new Map<string, Measured[]>();
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? modes : [...modes].reverse();
    for (const mode of order) {
      const system = await mode.start();
      try {
        for (const connections of CONNECTIONS) {
          const measured = await measure(system, connections);
          const key = `${mode.name}|${connections}`;
          results.set(key, [...(results.get(key) ?? []), measured]);
          console.log(
            `  round ${r + 1}, ${mode.name}, ${connections} connections: ${round(measured.writesPerS)}/s, p50 ${measured.p50Ms} ms, ` +
              `CPU ${round(measured.cpuUsPerWrite)} µs per write${measured.failed > 0 ? `, ${measured.failed} failed` : ''}`,
          );
        }
      } finally {
        await system.stop();
      }
    }
  }
  const summary: Record<string, unknown>[] = [];
  for (const connections of CONNECTIONS) {
    const etcdRuns = results.get(`etcd put|${connections}`)!;
    for (const mode of modes) {
      const runs = results.get(`${mode.name}|${connections}`)!;
      const ratios = runs.map((m, i) => m.writesPerS / etcdRuns[i]!.writesPerS);
      const line = {
        mode: mode.name,
        connections,
        writes_per_s: round(median(runs.map((m) => m.writesPerS))),
        p50_ms: median(runs.map((m) => m.p50Ms)),
        cpu_us_per_write: round(median(runs.map((m) => m.cpuUsPerWrite))),
        vs_etcd_per_round: ratios.map((x) => round(x, 2)),
        vs_etcd: round(median(ratios), 2),
      };
      summary.push(line);
      console.log(
        `${connections} connections, ${mode.name}: median ${line.writes_per_s}/s, p50 ${line.p50_ms} ms, CPU ${line.cpu_us_per_write} µs per write; ` +
          `× etcd ${line.vs_etcd} (rounds ${line.vs_etcd_per_round.join(', ')})`,
      );
    }
  }
  console.log(JSON.stringify({ bench: 'vs etcd', duration_s: durationS, rounds, results: summary }));
}

await main();
process.exit(0);
