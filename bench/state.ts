/**
 * `npm run bench -- --state N`: a state that grows. Three nodes with the default snapshot settings;
 * `connections` clients write N fresh records (ids 0..N-1, 200-byte messages) to the primary, and
 * every `--report-every` seconds (and at the end) one JSON line reports, for the interval: committed
 * write throughput, latency p50/p99/max (sent → answered), refused writes (non-2xx) and connection
 * errors, the view of every node (a change is an election), each node's RSS, its latest snapshot
 * (size and generation time, from GET /node/metrics, else the newest committed file's size), and its
 * event loop's largest delay since the last report (GET /node/metrics `event_loop`), and the major
 * garbage collections since its start that paused it over 100 ms and over 1 s.
 *
 * COVENANT_NODE_CLI=<another build's dist/src/cli/main.js> runs the same load against that build's
 * nodes (figures its /node/metrics lacks are null).
 *
 * With --restart, after the fill a backup (which replays its whole ledger at restart) and then the
 * node that joined from the snapshot (which checks and loads that snapshot, then replays the ledger
 * after it) are stopped and run again, once with each build `--restart-builds` names (CLI entry
 * points, comma-separated; default this build's) in turn, `--restart-rounds` times: a `state-restart`
 * line per restart gives spawn → RPC answering, spawn → PartOfNetwork, the longest wait between two
 * answers of GET /node/state polled every 20 ms meanwhile, and the node's largest event-loop delay
 * since its start as it reports once PartOfNetwork (GET /node/metrics `event_loop.since_start`).
 *
 *   npm run bench -- --state 1000000 [--connections 64] [--report-every 10] [--restart [--restart-builds a,b] [--restart-rounds 2]]
 */
import { spawn } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startNetwork, until, type TestNetwork } from '../src/testing/network.js';
import { CLI_ENTRY, joinOptionsOf, removeDir, startedNode, startJoiningNode, type StartedNode } from '../src/testing/node-process.js';
import { HttpsClient } from '../src/platform/https-client.js';
import { buildRequest, percentile, runLoad, type LoadTarget } from './load.js';
import { rssMb } from './proc.js';

export interface StateArgs {
  readonly records: number;
  readonly connections: number;
  readonly reportEveryS: number;
  /** CLI entry points to restart nodes with after the fill, in turn (none: no restarts). */
  readonly restartBuilds: readonly string[];
  readonly restartRounds: number;
}

const MESSAGE = 'x'.repeat(200);

interface NodeFigures {
  view: number | null;
  rss_mb: number;
  snapshot_bytes: number | null;
  snapshot_seqno: number | null;
  snapshot_generation_ms: number | null;
  snapshot_slices: number | null;
  snapshots_written: number | null;
  event_loop_max_ms: number | null;
  /** Major collections since the node started that paused it over 100 ms / over 1 s (Prometheus `nodejs_gc_duration_seconds`). */
  major_gc_over_100ms: number | null;
  major_gc_over_1s: number | null;
}

/** Count of `kind` collections longer than `le` seconds, from the node's Prometheus text (null when absent). */
function gcPausesOver(text: string | undefined, kind: string, le: string): number | null {
  if (text === undefined) return null;
  const count = (bound: string) => {
    const m = new RegExp(`^nodejs_gc_duration_seconds_bucket\\{(?=[^}]*le="${bound.replace('+', '\\+')}")(?=[^}]*kind="${kind}")[^}]*\\} (\\d+)`, 'm').exec(text);
    return m === null ? undefined : Number(m[1]);
  };
  const all = count('+Inf');
  const within = count(le);
  return all === undefined || within === undefined ? null : all - within;
}

function newestCommittedSnapshot(node: StartedNode): { seqno: number; bytes: number; name: string } | undefined {
  const dir = join(node.dir, 'snapshots');
  if (!existsSync(dir)) return undefined;
  let best: { seqno: number; bytes: number; name: string } | undefined;
  for (const name of readdirSync(dir)) {
    const m = /^snapshot_(\d+)_\d+\.committed$/.exec(name);
    if (!m) continue;
    const seqno = Number(m[1]);
    if (best === undefined || seqno > best.seqno) best = { seqno, bytes: statSync(join(dir, name)).size, name };
  }
  return best;
}

async function figuresOf(node: StartedNode): Promise<NodeFigures> {
  const consensus = await node.client.request('GET', '/node/consensus', { timeoutMs: 5000 }).catch(() => undefined);
  const metrics = await node.client.request('GET', '/node/metrics', { timeoutMs: 5000 }).catch(() => undefined);
  const last = metrics?.body?.snapshots?.last as { seqno: number; size_bytes: number; generation_ms: number; slices: number } | undefined;
  const prometheus = await node.client.request('GET', '/node/metrics', { timeoutMs: 5000, headers: { accept: 'text/plain' } }).catch(() => undefined);
  const file = newestCommittedSnapshot(node);
  return {
    view: (consensus?.body?.current_view as number | undefined) ?? null,
    rss_mb: Math.round(rssMb(node.process.pid!)),
    snapshot_bytes: last?.size_bytes ?? file?.bytes ?? null,
    snapshot_seqno: last?.seqno ?? file?.seqno ?? null,
    snapshot_generation_ms: last?.generation_ms ?? null,
    snapshot_slices: last?.slices ?? null,
    snapshots_written: (metrics?.body?.snapshots?.written as number | undefined) ?? null,
    event_loop_max_ms: (metrics?.body?.event_loop?.recent?.max_ms as number | undefined) ?? null,
    major_gc_over_100ms: gcPausesOver(prometheus?.text, 'major', '0.1'),
    major_gc_over_1s: gcPausesOver(prometheus?.text, 'major', '1'),
  };
}

/** A network, started again when its opening failed (member JavaScript out of its time budget on a loaded machine). */
async function startBenchNetwork(): Promise<TestNetwork> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startNetwork(3, { logging: { level: 'fail' } });
    } catch (e) {
      if (attempt === 5) throw e;
      console.log(JSON.stringify({ bench: 'state', note: `starting the network failed (${(e as Error).message.split('\n')[0]}); again` }));
    }
  }
}

export async function stateBench(args: StateArgs): Promise<void> {
  const network = await startBenchNetwork();
  try {
    const primary = await network.primary();
    const [host, port] = primary.address.split(':') as [string, string];
    const target: LoadTarget = { host, port: Number(port), ca: primary.serviceCertificatePem, cert: primary.user.certificatePem, key: primary.user.privateKeyPem };
    const started = performance.now();
    let answered = 0;
    let refused = 0;
    let latencies: number[] = [];
    let intervalStart = started;
    let intervalAnswered = 0;
    const initialViews = await Promise.all(network.nodes.map(async (n) => (await figuresOf(n)).view));
    let reporting = Promise.resolve();
    const report = async (final: boolean) => {
      const now = performance.now();
      const sorted = latencies.sort((a, b) => a - b);
      latencies = [];
      const nodes = await Promise.all(network.nodes.map(figuresOf));
      const line = {
        bench: 'state',
        final,
        records: answered - refused,
        elapsed_s: Math.round((now - started) / 100) / 10,
        writes_per_s: Math.round(((answered - intervalAnswered) / (now - intervalStart)) * 1000),
        latency_p50_ms: Math.round(percentile(sorted, 50) * 10) / 10,
        latency_p99_ms: Math.round(percentile(sorted, 99) * 10) / 10,
        latency_max_ms: Math.round((sorted.at(-1) ?? NaN) * 10) / 10,
        refused_writes: refused,
        view_changes: nodes.map((n, i) => (n.view === null || initialViews[i] === null ? null : n.view - initialViews[i]!)),
        nodes,
      };
      intervalStart = now;
      intervalAnswered = answered;
      console.log(JSON.stringify(line));
    };
    const timer = setInterval(() => {
      reporting = reporting.then(() => report(false));
    }, args.reportEveryS * 1000);
    const result = await runLoad(target, {
      connections: args.connections,
      durationMs: 24 * 3600 * 1000,
      maxRequests: args.records,
      request: (i) => buildRequest('POST', '/app/log/private', host, JSON.stringify({ id: i, msg: MESSAGE })),
      onResponse: (status, _headers, sentAtMs) => {
        answered++;
        if (status < 200 || status >= 300) refused++;
        latencies.push(performance.now() - sentAtMs);
      },
    });
    clearInterval(timer);
    await reporting;
    await report(true);
    console.log(
      JSON.stringify({
        bench: 'state-summary',
        records: args.records,
        answered: result.requests,
        refused_writes: result.non2xx,
        connection_errors: result.errors,
        writes_per_s: Math.round(result.requestsPerSecond),
        latency_p50_ms: Math.round(result.latencyP50Ms * 10) / 10,
        latency_p99_ms: Math.round(result.latencyP99Ms * 10) / 10,
      }),
    );
    if (args.restartBuilds.length > 0) await restartBackup(network, args);
    await joinFromSnapshot(network, args);
  } finally {
    await network.stopAll();
  }
}

/**
 * After the fill: a fourth node joins from the primary's newest committed snapshot (copied into its
 * snapshots directory, as an operator would; verified and loaded at start) and catches up; one JSON line reports spawn → PartOfNetwork, spawn → its commit
 * reaching the primary's, the snapshot it started from, its RSS and event-loop delay, and the views
 * of the three nodes (a change is an election during the join).
 */
async function joinFromSnapshot(network: TestNetwork, args: StateArgs): Promise<void> {
  const primary = await network.primary();
  const viewsBefore = await Promise.all(network.nodes.map(async (n) => (await figuresOf(n)).view));
  const committedOf = async (node: StartedNode) => {
    const answer = await node.client.request('GET', '/node/commit', { timeoutMs: 5000 }).catch(() => undefined);
    return Number(String(answer?.body?.transaction_id ?? '0.0').split('.')[1]);
  };
  const target = await committedOf(primary);
  const snapshot = newestCommittedSnapshot(primary);
  const dir = mkdtempSync(join(tmpdir(), 'covenant-state-join-'));
  if (snapshot !== undefined) {
    mkdirSync(join(dir, 'snapshots'));
    copyFileSync(join(primary.dir, 'snapshots', snapshot.name), join(dir, 'snapshots', snapshot.name));
  }
  const started = performance.now();
  let joiner = await startJoiningNode({ ...joinOptionsOf(primary), dir, configPatch: { logging: { level: 'fail' } }, readyTimeoutMs: 30 * 60_000 });
  try {
    const joinedS = (performance.now() - started) / 1000;
    await until('the joiner to catch up', async () => ((await committedOf(joiner)) >= target ? true : undefined), 30 * 60_000, 100);
    const caughtUpS = (performance.now() - started) / 1000;
    const state = await joiner.client.request('GET', '/node/state', { timeoutMs: 5000 });
    const figures = await figuresOf(joiner);
    const metrics = await joiner.client.request('GET', '/node/metrics', { timeoutMs: 5000 }).catch(() => undefined);
    const viewsAfter = await Promise.all(network.nodes.map(async (n) => (await figuresOf(n)).view));
    console.log(
      JSON.stringify({
        bench: 'state-join',
        startup_seqno: (state.body?.startup_seqno as number | undefined) ?? null,
        snapshot_bytes: snapshot?.bytes ?? null,
        commit_seqno_to_reach: target,
        spawn_to_part_of_network_s: Math.round(joinedS * 10) / 10,
        spawn_to_caught_up_s: Math.round(caughtUpS * 10) / 10,
        joiner_rss_mb: figures.rss_mb,
        joiner_event_loop_max_since_start_ms: (metrics?.body?.event_loop?.since_start?.max_ms as number | undefined) ?? null,
        view_changes: viewsAfter.map((v, i) => (v === null || viewsBefore[i] === null ? null : v - viewsBefore[i]!)),
      }),
    );
    for (let round = 0; round < args.restartRounds && args.restartBuilds.length > 0; round++) {
      for (const build of args.restartBuilds) joiner = await restartMeasured(network, joiner, build, 'joined from the snapshot');
    }
  } finally {
    await joiner.stop();
    removeDir(joiner.dir);
  }
}

async function committedSeqnoOf(node: StartedNode): Promise<number> {
  const answer = await node.client.request('GET', '/node/commit', { timeoutMs: 5000 }).catch(() => undefined);
  return Number(String(answer?.body?.transaction_id ?? '0.0').split('.')[1]);
}

/** After the fill: a backup (its ledger from the first entry, no snapshot) restarted with each build in turn. */
async function restartBackup(network: TestNetwork, args: StateArgs): Promise<void> {
  const primary = await network.primary();
  const index = network.nodes.findIndex((n) => n !== primary);
  for (let round = 0; round < args.restartRounds; round++) {
    for (const build of args.restartBuilds) network.nodes[index] = await restartMeasured(network, network.nodes[index]!, build, 'backup');
  }
}

/**
 * Stops `node` and runs it again with the `covenant` command at `cli`, polling GET /node/state
 * every 20 ms from the moment its RPC address is published until it is PartOfNetwork; then waits
 * for it to catch up with the primary's commit. One `state-restart` line.
 */
async function restartMeasured(network: TestNetwork, node: StartedNode, cli: string, kind: string): Promise<StartedNode> {
  await node.stop();
  const addressesFile = join(node.dir, 'rpc_addresses.json');
  rmSync(addressesFile, { force: true });
  let output = '';
  const child = spawn(process.execPath, [cli, 'node', '--config', node.configPath], { cwd: node.dir, stdio: ['ignore', 'pipe', 'pipe'] });
  const keep = (c: Buffer) => {
    output += c.toString();
    if (output.length > 1 << 20) output = output.slice(-(1 << 19));
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', keep);
  const spawned = { process: child, output: () => output };
  const started = performance.now();
  const deadline = started + 60 * 60_000;
  let client: HttpsClient | undefined;
  let address = '';
  let answeringS: number | undefined;
  let lastAnswer = 0;
  let longestGapMs = 0;
  let answers = 0;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the restarted node exited with ${child.exitCode}:\n${output}`);
    if (performance.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`the restarted node did not become ready:\n${output}`);
    }
    if (client === undefined && existsSync(addressesFile)) {
      address = Object.values(JSON.parse(readFileSync(addressesFile, 'utf8')) as Record<string, string>)[0]!;
      client = new HttpsClient(address, node.serviceCertificatePem);
    }
    if (client !== undefined) {
      const state = await client.request('GET', '/node/state', { timeoutMs: 120_000 }).catch(() => undefined);
      const now = performance.now();
      if (state?.status === 200) {
        answeringS ??= (now - started) / 1000;
        if (answers > 0) longestGapMs = Math.max(longestGapMs, now - lastAnswer);
        lastAnswer = now;
        answers++;
        if (state.body.state === 'PartOfNetwork') break;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const readyS = (performance.now() - started) / 1000;
  const restarted = startedNode({ ...node, address, spawned, client: client! });
  const metrics = await restarted.client.request('GET', '/node/metrics', { timeoutMs: 5000 }).catch(() => undefined);
  const loopMaxMs = (metrics?.body?.event_loop?.since_start?.max_ms as number | undefined) ?? null;
  const target = await committedSeqnoOf(await network.primary());
  await until('the restarted node to catch up', async () => ((await committedSeqnoOf(restarted)) >= target ? true : undefined), 30 * 60_000, 100);
  console.log(
    JSON.stringify({
      bench: 'state-restart',
      node: kind,
      build: cli === CLI_ENTRY ? 'this' : cli,
      commit_seqno: target,
      spawn_to_rpc_answering_s: Math.round((answeringS ?? NaN) * 10) / 10,
      spawn_to_part_of_network_s: Math.round(readyS * 10) / 10,
      node_state_answers: answers,
      node_state_longest_gap_ms: Math.round(longestGapMs),
      event_loop_max_since_start_ms: loopMaxMs,
      spawn_to_caught_up_s: Math.round(((performance.now() - started) / 1000) * 10) / 10,
      rss_mb: Math.round(rssMb(child.pid!)),
    }),
  );
  return restarted;
}
