/**
 * CPU time per call of the logging example's write handler (examples/logging, postPrivate) in one
 * process, without the network: each call runs in its own store transaction with a request like
 * the load generator's (a 200-character message, a caller with its certificate, whose fields the
 * handler does not read: in the node they are then never built). Prints one JSON line per round.
 * Run after a build:
 *   node dist/bench/js-handler.js [--calls 20000 --rounds 3]
 */
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readBundleDirectory } from '../src/apps/js/bundle-files.js';
import { parseBundle } from '../src/apps/js/bundle.js';
import { AppEngine, DEFAULT_RUNTIME_OPTIONS } from '../src/apps/js/engine.js';
import type { RequestScope } from '../src/apps/js/host.js';
import { Store } from '../src/kv/index.js';
import { numberArg } from './args.js';

const calls = numberArg('--calls', 20_000);
const rounds = numberArg('--rounds', 3);
const bundle = parseBundle(readBundleDirectory(join(fileURLToPath(new URL('../..', import.meta.url)), 'examples', 'logging')));
const engine = await AppEngine.load();
const store = new Store();
const source = {};
const requestJson = JSON.stringify({
  method: 'POST',
  path: '/app/log/private',
  route: '/log/private',
  params: {},
  query: '',
  headers: { 'content-type': 'application/json', 'content-length': '230', host: 'localhost' },
  caller: { policy: 'user_cert', id: 'a'.repeat(64), cert: `-----BEGIN CERTIFICATE-----\n${'A'.repeat(600)}\n-----END CERTIFICATE-----\n` },
});
const msg = 'x'.repeat(200);

function callOnce(i: number): void {
  const tx = store.beginTx();
  const scope: RequestScope = { reader: tx, tx, commitTxId: () => '2.7', randomBytes: (n) => new Uint8Array(n), nowMs: () => 0, applyWrites: false, claimsDigest: undefined };
  const body = Buffer.from(JSON.stringify({ id: i % 1000, msg }));
  const response = engine.withInterpreter(source, bundle, DEFAULT_RUNTIME_OPTIONS, scope, (interpreter) =>
    interpreter.call('logging.js', 'postPrivate', { fields: () => requestJson, body, seed: i, writable: true }),
  );
  if (response.status !== 200) throw new Error(`the handler answered ${response.status}: ${response.text ?? ''}`);
}

for (let i = 0; i < Math.min(calls, 3000); i++) callOnce(i);
for (let round = 1; round <= rounds; round++) {
  const start = process.cpuUsage();
  for (let i = 0; i < calls; i++) callOnce(i);
  const used = process.cpuUsage(start);
  console.log(JSON.stringify({ bench: 'js-handler', round, calls, cpu_us_per_call: Math.round(((used.user + used.system) / calls) * 10) / 10 }));
}
