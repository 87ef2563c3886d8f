/**
 * The production node under the simulator, from the command line:
 *
 *   npm run sim:node -- [--seed N] [--runs K] [--nodes N] [--steps M] [--power-cuts PER_THOUSAND_STEPS]
 *   npm run sim:node -- --recovery [--seed N] [--runs K] [--nodes N] [--steps M] [--bug drop-old-entry|corrupt-receipt]
 *   npm run sim:node -- --requests [--seed N] [--runs K] [--nodes N] [--steps M]
 *
 * Runs K seeded simulations of N production nodes (seeds N, N+1, ...; see node-sim.ts). With
 * --recovery each run is a disaster recovery (node-sim-recovery.ts): M steps of the old service,
 * the loss of every node, the recovery, M steps of the new service; --bug plants a defect its
 * checkers must catch. With --requests, clients reach the nodes through their request pipelines
 * (node-sim-requests.ts): governance opens the service and deploys a JavaScript application, then
 * committed writes and linearizable reads go to any node. A failing run prints its seed, the broken
 * property and the end of its trace, and the exit code is 1. --power-cuts makes every node lose
 * power at once that many times per thousand steps on average (ledger.durability Synced: nothing
 * committed may be lost).
 */
import { randomInt } from 'node:crypto';
import { Violation } from './checker.js';
import { SimArgs } from './cli-args.js';
import { runNodeSim } from './node-sim.js';
import { RECOVERY_BUGS, recoveryEdgeCoverage, runRecoverySim, type RecoveryBug, type RecoverySimReport } from './node-sim-recovery.js';
import { runRequestSim } from './node-sim-requests.js';

const args = new SimArgs(
  'usage: sim:node [--seed N] [--runs K] [--nodes N] [--steps M] [--power-cuts PER_THOUSAND_STEPS]\n       sim:node --requests [--seed N] [--runs K] [--nodes N] [--steps M]\n       sim:node --recovery [--seed N] [--runs K] [--nodes N] [--steps M] [--bug drop-old-entry|corrupt-receipt]\n',
);
const KNOWN = new Set(['--seed', '--runs', '--nodes', '--steps', '--bug', '--recovery', '--requests', '--power-cuts']);
for (const arg of process.argv.slice(2)) if (arg.startsWith('--') && !KNOWN.has(arg)) args.usage(`unknown option ${arg}`);

function option(name: string, fallback: number, min: number): number {
  const index = process.argv.indexOf(name);
  return index === -1 ? fallback : args.integer(process.argv[index + 1], name, min);
}

const recovery = process.argv.includes('--recovery');
const requests = process.argv.includes('--requests');
if (recovery && requests) args.usage('--requests and --recovery are two different runs');
const bugIndex = process.argv.indexOf('--bug');
const bug: RecoveryBug | undefined = bugIndex === -1 ? undefined : args.list(process.argv[bugIndex + 1], RECOVERY_BUGS, '--bug')[0];
if (bug !== undefined && !recovery) args.usage('--bug goes with --recovery');
const seed = option('--seed', randomInt(1, 2 ** 31), 0);
const runs = option('--runs', 1, 1);
const nodes = option('--nodes', 3, 1);
const steps = option('--steps', recovery ? 400 : 2000, 1);
const powerCuts = option('--power-cuts', 0, 0);
if (powerCuts > 0 && (recovery || requests)) args.usage('--power-cuts goes without --recovery and --requests');

async function run(runSeed: number): Promise<unknown> {
  if (requests) return runRequestSim({ seed: runSeed, nodes, steps, livenessStepsMax: 2000 });
  if (!recovery) return runNodeSim({ seed: runSeed, nodes, steps, livenessStepsMax: 2000, ...(powerCuts > 0 ? { powerCutProbability: powerCuts / 1000 } : {}) });
  return runRecoverySim({ seed: runSeed, nodes, steps, stepsAfterRecovery: steps, livenessStepsMax: 2000, ...(bug ? { bug } : {}) });
}

const recoveryReports: RecoverySimReport[] = [];
for (let i = 0; i < runs; i++) {
  const started = Date.now();
  try {
    const report = await run(seed + i);
    if (recovery) recoveryReports.push(report as RecoverySimReport);
    const { trace: _trace, governance: _governance, recoveryEdges: _edges, ...figures } = report as { trace: unknown; governance?: unknown; recoveryEdges?: unknown };
    console.log(`seed ${seed + i}: ok in ${Date.now() - started} ms ${JSON.stringify(figures)}`);
  } catch (e) {
    if (!(e instanceof Violation)) throw e;
    const replay = `npm run sim:node -- ${recovery ? '--recovery ' : ''}${requests ? '--requests ' : ''}--seed ${seed + i} --nodes ${nodes} --steps ${steps}${bug ? ` --bug ${bug}` : ''}${powerCuts > 0 ? ` --power-cuts ${powerCuts}` : ''}`;
    console.log(`seed ${seed + i}: VIOLATION ${e.message}\nreplay: ${replay}`);
    process.exit(1);
  }
}
if (recovery) {
  // The recovery machine's edges the runs took (src/node/recovery/recovery-machine.ts).
  const coverage = recoveryEdgeCoverage(recoveryReports);
  console.log(`recovery machine: ${coverage.taken.length} of ${coverage.taken.length + coverage.missing.length + coverage.outside.length} edges taken over ${runs} run(s)`);
  for (const edge of coverage.missing) console.log(`  not taken: ${edge}`);
  for (const edge of coverage.outside) console.log(`  outside this procedure: ${edge}`);
}
// The governance sandbox's worker thread would keep the process alive.
process.exit(0);
