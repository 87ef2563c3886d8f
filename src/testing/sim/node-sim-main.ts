/**
 * The production node under the simulator, from the command line:
 *
 *   npm run sim:node -- [--seed N] [--runs K] [--nodes N] [--steps M]
 *
 * Runs K seeded simulations of N production nodes (seeds N, N+1, ...; see node-sim.ts). A failing
 * run prints its seed, the broken property and the end of its trace, and the exit code is 1.
 */
import { randomInt } from 'node:crypto';
import { Violation } from './checker.js';
import { runNodeSim } from './node-sim.js';

function option(name: string, fallback: number, min: number): number {
  const index = process.argv.indexOf(name);
  if (index === -1) return fallback;
  const text = process.argv[index + 1];
  if (text === undefined || !/^\d+$/.test(text) || Number(text) < min) {
    process.stderr.write(`${name} needs an integer of at least ${min}\nusage: sim:node [--seed N] [--runs K] [--nodes N] [--steps M]\n`);
    process.exit(2);
  }
  return Number(text);
}

const seed = option('--seed', randomInt(1, 2 ** 31), 0);
const runs = option('--runs', 1, 1);
const nodes = option('--nodes', 3, 1);
const steps = option('--steps', 2000, 1);
for (let i = 0; i < runs; i++) {
  const started = Date.now();
  try {
    const report = await runNodeSim({ seed: seed + i, nodes, steps, livenessStepsMax: 2000 });
    const { trace: _trace, ...figures } = report;
    console.log(`seed ${seed + i}: ok in ${Date.now() - started} ms ${JSON.stringify(figures)}`);
  } catch (e) {
    if (!(e instanceof Violation)) throw e;
    console.log(`seed ${seed + i}: VIOLATION ${e.message}\nreplay: npm run sim:node -- --seed ${seed + i} --nodes ${nodes} --steps ${steps}`);
    process.exit(1);
  }
}
