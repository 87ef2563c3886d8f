/**
 * `npm run bench -- --pin`: places the processes of each `ab` measurement on the two cores
 * instead of leaving them to the scheduler, with `taskset` (util-linux). Core 0 runs the loaded
 * server's request (main) thread and its small helpers (V8's, libuv's); core 1 runs that
 * server's busiest helper when it has one that works alongside the request thread (a node's or
 * the floor's framing worker), every other server process (backups), and `ab`. The bare server
 * is placed the same way (it has no such helper: all of it on core 0, `ab` on core 1).
 *
 * Why: on two cores shared by a primary, its backups, its framing worker and `ab`, a thread the
 * request thread wakes is queued on the request thread's core, and the scheduler leaves it there
 * while the other core idles (docs/performance.md). Placement measures the same code without
 * that effect of putting three nodes on two cores; it is a diagnostic reading beside the
 * default one, not a setting of the nodes.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { cpuUs } from './proc.js';

/** The cores placement uses. */
export const REQUEST_CORE = '0';
export const OTHER_CORE = '1';

/** A helper counts as working alongside the request thread from this share of its CPU time on. */
const WORKER_SHARE = 0.1;

/** Whether placement can run here: Linux with `taskset` and at least two cores. */
export function placementAvailable(): boolean {
  if (availableParallelism() < 2) return false;
  const probe = spawnSync('taskset', ['-V'], { stdio: 'ignore' });
  return probe.error === undefined && probe.status === 0;
}

function threadIds(pid: number): string[] {
  try {
    return readdirSync(`/proc/${pid}/task`);
  } catch {
    return [];
  }
}

function pin(tid: string, cores: string): void {
  // A thread that has just ended cannot be placed, and need not be.
  spawnSync('taskset', ['-p', '-c', cores, tid], { stdio: 'ignore' });
}

/**
 * Places a server process (`pid`, loaded by `ab`) and the processes beside it (`others`: its
 * backups) as the header describes. The helper that goes to the other core is the busiest one
 * so far, if it used at least WORKER_SHARE of the request thread's CPU time.
 */
export function placeServer(pid: number, others: readonly number[]): void {
  const tids = threadIds(pid);
  // Each thread's CPU time, read once (0 for one that has just ended).
  const used = new Map(tids.map((tid) => [tid, cpuUs(pid, Number(tid)) || 0]));
  let worker: string | undefined;
  for (const tid of tids) if (tid !== String(pid) && (worker === undefined || used.get(tid)! > used.get(worker)!)) worker = tid;
  if (worker !== undefined && used.get(worker)! < WORKER_SHARE * used.get(String(pid))!) worker = undefined;
  for (const tid of tids) pin(tid, tid === worker ? OTHER_CORE : REQUEST_CORE);
  for (const other of others) for (const tid of threadIds(other)) pin(tid, OTHER_CORE);
}

/** Lets the processes' threads run on every core again (after a placed measurement). */
export function unplace(pids: readonly number[]): void {
  const all = `0-${availableParallelism() - 1}`;
  for (const pid of pids) for (const tid of threadIds(pid)) pin(tid, all);
}
