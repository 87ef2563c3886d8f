/**
 * The nemesis from the command line (docs/nemesis.md):
 *
 *   npm run nemesis -- [--seconds N] [--seed S] [--keys K] [--clients C] [--reads default]
 *
 * Starts a real three-node network, runs clients on K keys while faults drawn from the seed hit
 * the nodes for N seconds, then checks the history. Prints the faults as they happen and one JSON
 * line of figures; a failing run prints its seed, each violation and, for a key whose history is
 * not linearizable, the minimal failing part of it, and exits 1. `--reads default` sends the
 * clients' reads without x-covenant-consistency: linearizable, to see the checker catch stale reads.
 */
import { randomInt } from 'node:crypto';
import { runNemesis } from './run.js';

const USAGE = 'usage: nemesis [--seconds N] [--seed S] [--keys K] [--clients C] [--reads linearizable|default]';

function option(name: string, fallback: number, min: number): number {
  const index = process.argv.indexOf(name);
  if (index === -1) return fallback;
  const text = process.argv[index + 1];
  if (text === undefined || !/^\d+$/.test(text) || Number(text) < min) {
    process.stderr.write(`${name} needs an integer of at least ${min}\n${USAGE}\n`);
    process.exit(2);
  }
  return Number(text);
}

const seed = option('--seed', randomInt(1, 2 ** 31), 0);
const seconds = option('--seconds', 30, 1);
const keys = option('--keys', 4, 1);
const clients = option('--clients', 6, 1);
const readsAt = process.argv.indexOf('--reads');
const reads = readsAt === -1 ? 'linearizable' : process.argv[readsAt + 1];
if (reads !== 'linearizable' && reads !== 'default') {
  process.stderr.write(`--reads is linearizable or default\n${USAGE}\n`);
  process.exit(2);
}
console.log(`nemesis: seed ${seed}, ${seconds} s, ${keys} keys, ${clients} clients, ${reads} reads`);
const report = await runNemesis({ seed, seconds, keys, clients, reads, log: (line) => console.log(`  ${line}`) });
const { violations, ...figures } = report;
console.log(JSON.stringify({ nemesis: 'report', ...figures, violations: violations.length }));
if (violations.length > 0) {
  console.log(`nemesis: ${violations.length} violation(s) with seed ${seed}`);
  for (const v of violations) {
    console.log(`${v.kind}: ${v.message}`);
    for (const line of v.history ?? []) console.log(line);
  }
  console.log(`replay: npm run nemesis -- --seconds ${seconds} --seed ${seed} --keys ${keys} --clients ${clients}${reads === 'default' ? ' --reads default' : ''}`);
  process.exit(1);
}
console.log(`nemesis: seed ${seed}: no violation`);
