/**
 * The built-in message log against the same log written as a JavaScript bundle (examples/logging)
 * on a three-node network, with the same load generator (load.ts: 200-byte private records over
 * 1,000 ids) sent to the primary. The two alternate on one network (B J J B ...): before a
 * built-in round the bundle is removed (remove_js_app), before a JavaScript round it is deployed
 * again (set_js_app), so that drift of the machine falls on both. A round counts the writes
 * answered 2xx, then waits until the network committed the last one: committed writes per second.
 * Prints one JSON line per round (with the CPU time per committed write of the primary and of the
 * backups, from /proc, over the load) and a summary with the ratio JavaScript / built-in.
 *
 *   npm run bench:js [-- --duration 4 --rounds 2 --connections 32 --floor]
 *
 * --floor deploys, instead of examples/logging, a bundle whose write handler does the least a
 * JavaScript write can do: one covenant.kv set of a record built when the module loaded (no body
 * parsed, nothing converted). What it costs beyond the built-in write no change to a handler, to the
 * prelude or to the conversions can remove: the call into the engine, the frontend around it.
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readBundleDirectory } from '../src/apps/js/bundle-files.js';
import { deployApp } from '../src/cli/app.js';
import { ACCEPT_BALLOT, propose, vote } from '../src/cli/member.js';
import { memberConnectionOf, type StartedNode } from '../src/testing/node-process.js';
import { startNetwork, until } from '../src/testing/network.js';
import { buildRequest, runLoad, type LoadTarget } from './load.js';
import { numberArg } from './args.js';
import { cpuUs } from './proc.js';

const durationMs = numberArg('--duration', 4) * 1000;
const rounds = numberArg('--rounds', 2);
const connections = numberArg('--connections', 32);
const MESSAGE = 'x'.repeat(200);
const floor = process.argv.includes('--floor');
const FLOOR_MODULE = `const MESSAGE = covenant.jsonCompatibleToBuf({ msg: ${JSON.stringify(MESSAGE)} });
const KEYS = Array.from({ length: 1000 }, (_, i) => covenant.strToBuf(String(i)));
let next = 0;
export function postPrivate() {
  covenant.kv['records'].set(KEYS[next], MESSAGE);
  next = (next + 1) % KEYS.length;
  return { body: true };
}`;
const FLOOR_BUNDLE = {
  metadata: { endpoints: { '/log/private': { post: { js_module: 'floor.js', js_function: 'postPrivate', authn_policies: ['user_cert', 'jwt'], mode: 'readwrite' } } } },
  modules: [{ name: 'floor.js', module: FLOOR_MODULE }],
};
const BUNDLE = floor ? FLOOR_BUNDLE : readBundleDirectory(join(fileURLToPath(new URL('../..', import.meta.url)), 'examples', 'logging'));

type App = 'built-in' | 'javascript';

function targetOf(node: StartedNode): LoadTarget {
  const i = node.address.lastIndexOf(':');
  return { host: node.address.slice(0, i), port: Number(node.address.slice(i + 1)), ca: node.serviceCertificatePem, cert: node.user.certificatePem, key: node.user.privateKeyPem };
}

async function install(primary: StartedNode, app: App, installed: App): Promise<void> {
  if (app === installed) return;
  if (app === 'javascript') {
    await deployApp(BUNDLE, [memberConnectionOf(primary)], () => undefined);
    return;
  }
  const connection = memberConnectionOf(primary);
  const created = await propose(connection, [{ name: 'remove_js_app' }]);
  await vote(connection, (created.body as { proposal_id: string }).proposal_id, ACCEPT_BALLOT);
}

const network = await startNetwork(3, { logging: { level: 'fail' } });
try {
  const primary = await network.primary();
  const host = primary.address;
  let last = '';
  const backups = network.nodes.filter((n) => n !== primary);
  const measure = async (ms: number) => {
    const cpuBefore = [primary, ...backups].map((n) => cpuUs(n.process.pid!));
    const refused: Record<number, number> = {};
    const result = await runLoad(targetOf(primary), {
      connections,
      durationMs: ms,
      request: (i) => buildRequest('POST', '/app/log/private', host, JSON.stringify({ id: i % 1000, msg: MESSAGE })),
      onResponse: (status, headers) => {
        const m = /x-covenant-transaction-id: *(\d+\.\d+)/i.exec(headers);
        if (status === 200 && m) last = m[1]!;
        if (status >= 300) refused[status] = (refused[status] ?? 0) + 1;
      },
    });
    const seqno = Number(last.split('.')[1] ?? 0);
    await until('the commit of the last write', async () => {
      const commit = await primary.client.request('GET', '/node/commit');
      return Number(String(commit.body.transaction_id).split('.')[1]) >= seqno ? true : undefined;
    });
    const cpuUsed = [primary, ...backups].map((n, i) => cpuUs(n.process.pid!) - cpuBefore[i]!);
    const ok = result.requests - result.non2xx - result.errors;
    const perWrite = (us: number) => Math.round(us / Math.max(ok, 1));
    return { writesPerS: Math.round((ok * 1000) / result.elapsedMs), result, refused, primaryCpuUsPerWrite: perWrite(cpuUsed[0]!), backupCpuUsPerWrite: perWrite(cpuUsed.slice(1).reduce((a, b) => a + b, 0) / backups.length) };
  };
  let installed: App = 'built-in';
  for (const app of ['built-in', 'javascript'] as const) {
    await install(primary, app, installed);
    installed = app;
    await measure(1500);
  }
  const totals: Record<App, number[]> = { 'built-in': [], javascript: [] };
  for (let r = 0; r < rounds; r++) {
    const order: App[] = r % 2 === 0 ? ['built-in', 'javascript'] : ['javascript', 'built-in'];
    for (const app of order) {
      await install(primary, app, installed);
      installed = app;
      const { writesPerS, result, refused, primaryCpuUsPerWrite, backupCpuUsPerWrite } = await measure(durationMs);
      totals[app].push(writesPerS);
      console.log(JSON.stringify({ bench: 'js-app', app, committed_writes_per_s: writesPerS, p50_ms: result.latencyP50Ms, p99_ms: result.latencyP99Ms, non2xx: result.non2xx, non2xx_by_status: refused, errors: result.errors, primary_cpu_us_per_write: primaryCpuUsPerWrite, backup_cpu_us_per_write: backupCpuUsPerWrite }));
    }
  }
  const mean = (xs: number[]) => Math.round(xs.reduce((a, b) => a + b, 0) / xs.length);
  const builtIn = mean(totals['built-in']);
  const js = mean(totals.javascript);
  console.log(JSON.stringify({ bench: 'js-app-summary', handler: floor ? 'floor' : 'examples/logging', built_in_writes_per_s: builtIn, javascript_writes_per_s: js, javascript_vs_built_in: Math.round((js / builtIn) * 100) / 100, per_round: totals.javascript.map((j, r) => Math.round((j / totals['built-in'][r]!) * 100) / 100) }));
} finally {
  await network.stopAll();
}
