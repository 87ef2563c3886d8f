/**
 * `npm run bench -- --pin` (bench/placement.ts) on real processes: a server whose worker thread
 * is busy gets its main thread on the request core and that worker on the other core, a process
 * beside it goes whole to the other core, and unplace lets every thread run anywhere again.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { OTHER_CORE, placeServer, placementAvailable, REQUEST_CORE, unplace } from '../../bench/placement.js';
import { cpuUs } from '../../bench/proc.js';

/** A process whose worker thread spins, and which prints when the worker runs. */
const SERVER = `
const { Worker } = require('node:worker_threads');
const w = new Worker('const end = Date.now() + 1500; while (Date.now() < end); require("node:worker_threads").parentPort.postMessage(1); setInterval(() => {}, 1000);', { eval: true });
w.once('message', () => console.log('busy'));
setInterval(() => {}, 1000);
`;

function start(source: string): ChildProcess {
  return spawn(process.execPath, ['-e', source], { stdio: ['ignore', 'pipe', 'inherit'] });
}

function coresOf(pid: number, tid: string): string {
  const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
  return /^Cpus_allowed_list:\s*(\S+)/m.exec(status)![1]!;
}

test('placement puts the request thread, the busy worker and the processes beside them on their cores, and unplace undoes it', async () => {
  assert.ok(placementAvailable(), 'this machine has taskset and two cores (as the bench machines do)');
  const server = start(SERVER);
  const beside = start('setInterval(() => {}, 1000)');
  try {
    await new Promise<void>((resolve) => server.stdout!.once('data', () => resolve()));
    const pid = server.pid!;
    placeServer(pid, [beside.pid!]);
    const tids = readdirSync(`/proc/${pid}/task`);
    const helpers = tids.filter((t) => t !== String(pid));
    assert.equal(coresOf(pid, String(pid)), REQUEST_CORE, 'the main thread is on the request core');
    const onOther = helpers.filter((t) => coresOf(pid, t) === OTHER_CORE);
    assert.equal(onOther.length, 1, 'exactly one helper, the busy worker, is on the other core');
    const used = (t: string) => cpuUs(pid, Number(t));
    assert.equal(onOther[0], helpers.reduce((a, b) => (used(b) > used(a) ? b : a)), 'and it is the busiest one');
    for (const t of helpers) if (t !== onOther[0]) assert.equal(coresOf(pid, t), REQUEST_CORE);
    for (const t of readdirSync(`/proc/${beside.pid}/task`)) assert.equal(coresOf(beside.pid!, t), OTHER_CORE, 'the process beside is on the other core');

    unplace([pid, beside.pid!]);
    const all = `0-${availableParallelism() - 1}`;
    for (const t of tids) assert.equal(coresOf(pid, t), all);
    for (const t of readdirSync(`/proc/${beside.pid}/task`)) assert.equal(coresOf(beside.pid!, t), all);
  } finally {
    server.kill('SIGKILL');
    beside.kill('SIGKILL');
  }
});
