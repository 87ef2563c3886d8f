/**
 * What a synchronous call into another process costs: the floor of running application JavaScript
 * out of the node's process (a crash of the engine must not take the node down, and V8 aborts its
 * process on a one-step allocation past an isolate's heap: docs/performance.md). The node's thread
 * writes a request of the size of a logging write to a FIFO and blocks reading the answer from
 * another; a child process echoes it back. Prints, per pacing, the round trip's wall time and the
 * CPU it costs each side. Run after a build:
 *   node dist/bench/engine-ipc.js [--calls 20000 --gap-us 200]
 */
import { spawn, spawnSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { numberArg } from './args.js';

const calls = numberArg('--calls', 20_000);
const gapUs = numberArg('--gap-us', 200);

/** User + system CPU of a process so far, in µs (Linux /proc, clock ticks of 10 ms). */
function cpuUsOf(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10_000;
}

/** Busy for `us` microseconds: the request's other work between two calls. */
function spin(us: number): void {
  const end = process.hrtime.bigint() + BigInt(us * 1000);
  while (process.hrtime.bigint() < end);
}

const ECHO = `
const { openSync, readSync, writeSync } = require('node:fs');
const [requests, answers] = process.argv.slice(1);
const inFd = openSync(requests, 'r');
const outFd = openSync(answers, 'w');
const buf = Buffer.alloc(65536);
for (;;) {
  const n = readSync(inFd, buf, 0, buf.length, null);
  if (n === 0) break;
  writeSync(outFd, buf, 0, n);
}`;

const dir = mkdtempSync(join(tmpdir(), 'covenant-engine-ipc-'));
const requests = join(dir, 'requests');
const answers = join(dir, 'answers');
const made = spawnSync('mkfifo', [requests, answers]);
if (made.status !== 0) throw new Error(`mkfifo failed: ${made.stderr.toString()}`);
const child = spawn(process.execPath, ['-e', ECHO, requests, answers], { stdio: 'inherit' });
try {
  // Opening a FIFO blocks until the other side opens it: the same order on both sides.
  const outFd = openSync(requests, 'w');
  const inFd = openSync(answers, 'r');
  const message = Buffer.from(JSON.stringify({ id: 5, msg: 'x'.repeat(200) }));
  const answer = Buffer.alloc(65536);
  for (const gap of [0, gapUs]) {
    const childBefore = cpuUsOf(child.pid!);
    const before = process.cpuUsage();
    let wallNs = 0n;
    for (let i = 0; i < calls; i++) {
      if (gap > 0) spin(gap);
      const start = process.hrtime.bigint();
      writeSync(outFd, message);
      readSync(inFd, answer, 0, answer.length, null);
      wallNs += process.hrtime.bigint() - start;
    }
    const used = process.cpuUsage(before);
    const childUs = cpuUsOf(child.pid!) - childBefore;
    console.log(
      JSON.stringify({
        bench: 'engine-ipc',
        gap_us: gap,
        calls,
        round_trip_wall_us: Math.round(Number(wallNs) / calls / 100) / 10,
        node_cpu_us_per_call: Math.round(((used.user + used.system) / calls - gap) * 10) / 10,
        engine_process_cpu_us_per_call: Math.round((childUs / calls) * 10) / 10,
      }),
    );
  }
  closeSync(outFd);
  closeSync(inFd);
} finally {
  child.kill();
  rmSync(dir, { recursive: true, force: true });
}
