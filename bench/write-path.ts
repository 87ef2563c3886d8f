/**
 * The primary's whole write path in one process, without HTTP: a one-node service (real ledger
 * files, real keys) executes logging-app writes — KV transaction, write-set encoding, encryption,
 * commit evidence, Merkle leaf, entry framing, consensus, ledger append and signatures — in bursts
 * of `--burst` writes per event-loop turn, the way concurrent requests arrive. Prints µs of CPU per
 * write for the main thread and for the whole process. Entries are framed on a worker thread as in
 * a node process (`--framing inline` frames on the main thread instead).
 *
 *   node dist/bench/write-path.js [--writes 200000] [--burst 64] [--framing worker|inline]
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { nullLogger } from '../src/base/log.js';
import { loadNodeConfig } from '../src/config/index.js';
import { jsonCodec } from '../src/kv/index.js';
import { CovenantNode } from '../src/node/node.js';
import { FsDisk } from '../src/platform/fs-disk.js';
import { workerEntryFramer } from '../src/platform/worker-framer.js';
import { systemClock } from '../src/platform/clock.js';
import { prepareStartNode, removeDir } from '../src/testing/node-process.js';
import { cpuUs } from './proc.js';
import { Tables } from '../src/node/tables.js';

function arg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i === -1 ? fallback : Number(process.argv[i + 1]);
}

const framingAt = process.argv.indexOf('--framing');
const FRAMING = framingAt === -1 ? 'worker' : process.argv[framingAt + 1];
if (FRAMING !== 'worker' && FRAMING !== 'inline') throw new Error('--framing takes worker or inline');

const WRITES = arg('writes', 200_000);
const BURST = arg('burst', 64);
const IDS = 1000;
const MESSAGE = 'x'.repeat(200);
const msgCodec = jsonCodec<{ msg: string }>();

const prepared = await prepareStartNode();
const previousCwd = process.cwd();
process.chdir(prepared.dir);
const disk = new FsDisk();
const node = new CovenantNode({
  config: loadNodeConfig(prepared.configPath),
  disk,
  logger: nullLogger,
  clock: systemClock,
  randomBytes: (n) => new Uint8Array(randomBytes(n)),
  version: 'bench',
  readTextFile: (path) => readFileSync(path, 'utf8'),
  writeTextFile: () => undefined,
  writeSecretFile: () => undefined,
  ...(FRAMING === 'worker'
    ? {
        createEntryFramer: workerEntryFramer({
          onFailure: (e) => {
            throw e;
          },
        }),
      }
    : {}),
});
await node.prepareIdentity();
const address = '127.0.0.1:1';
await node.start(
  {
  rpc: [{ name: 'primary', bindAddress: address, publishedAddress: address, enabledOperatorFeatures: [] }],
  nodeToNode: { bindAddress: address, publishedAddress: address },
  },
  undefined,
  () => undefined,
);

const turn = () => new Promise<void>((resolve) => setImmediate(resolve));
async function run(count: number): Promise<void> {
  for (let done = 0; done < count; ) {
    for (let i = 0; i < BURST && done < count; i++, done++) {
      node.executeWrite((tx) => tx.map(Tables.appPrivateLog, msgCodec).put(String(done % IDS), { msg: MESSAGE }));
    }
    await turn();
  }
}

await run(Math.min(20_000, WRITES)); // warm-up (JIT)
const cpu0 = process.cpuUsage();
const main0 = cpuUs(process.pid, process.pid);
const t0 = performance.now();
await run(WRITES);
const elapsedMs = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
const mainUs = cpuUs(process.pid, process.pid) - main0;
console.log(
  JSON.stringify({
    bench: 'write-path',
    node_flags: process.execArgv.join(' '),
    framing: FRAMING,
    writes: WRITES,
    burst: BURST,
    writesPerSecond: Math.round((WRITES / elapsedMs) * 1000),
    processCpuUsPerWrite: +((cpu.user + cpu.system) / WRITES).toFixed(2),
    mainThreadCpuUsPerWrite: Number.isNaN(mainUs) ? null : +(mainUs / WRITES).toFixed(2),
  }),
);
node.stop();
disk.close();
process.chdir(previousCwd);
removeDir(prepared.dir);
