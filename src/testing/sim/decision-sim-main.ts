/**
 * The recovery decision protocol's simulator from the command line:
 *
 *   npm run sim:decision -- [--seed N] [--runs K] [--failover] [--locations 1..7|N] [--steps M]
 *                           [--bug NAME] [--disable kind,...] [--disable-checker name,...]
 *                           [--partition 'a|b,c'] [--keep-going] [--trace] [--trace-messages]
 *
 * Runs K seeded simulations (seeds N, N+1, ...; see decision-sim.ts). A failing run is shrunk, its
 * seed, a command that replays it and its trace are printed, and the exit code is 1. The summary
 * counts opens by kind and the runs in which the service forked (possible only with --failover).
 * --partition cuts the named groups of locations from each other for the whole fault phase (in
 * place of drawn partitions), the scripted way to watch failover fork the service.
 */
import { performance } from 'node:perf_hooks';
import { randomInt } from 'node:crypto';
import { DECISION_KNOWN_BUGS, type DecisionBug } from '../../recovery/index.js';
import { SimArgs } from './cli-args.js';
import { DECISION_CHECKERS, type DecisionCheckerName } from './decision-checker.js';
import {
  DECISION_FAULT_KINDS,
  decisionReplayCommand,
  runDecisionSim,
  shrinkDecisionRun,
  type DecisionFaultKind,
  type DecisionSimOptions,
} from './decision-sim.js';

interface CliOptions {
  seed: number;
  runs: number;
  failover: boolean;
  locationsMin: number;
  locationsMax: number;
  steps: number;
  bug: DecisionBug | undefined;
  disabled: Set<DecisionFaultKind>;
  disabledCheckers: Set<DecisionCheckerName>;
  partition: string[][] | undefined;
  keepGoing: boolean;
  trace: boolean;
  traceMessages: boolean;
}

const args = new SimArgs(
  `usage: sim:decision [--seed N] [--runs K] [--failover] [--locations 1..7|N] [--steps M] [--bug ${DECISION_KNOWN_BUGS.join('|')}]\n` +
  `                    [--disable ${DECISION_FAULT_KINDS.join(',')}] [--disable-checker ${DECISION_CHECKERS.join(',')}]\n` +
  `                    [--partition 'a|b,c'] [--keep-going] [--trace] [--trace-messages]\n`,
);

export function parseArguments(argv: readonly string[]): CliOptions {
  const options: CliOptions = {
    seed: randomInt(0, 2 ** 47),
    runs: 1,
    failover: false,
    locationsMin: 1,
    locationsMax: 7,
    steps: 500,
    bug: undefined,
    disabled: new Set(),
    disabledCheckers: new Set(),
    partition: undefined,
    keepGoing: false,
    trace: false,
    traceMessages: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const value = (): string | undefined => argv[++i];
    switch (arg) {
      case '--seed':
        options.seed = args.integer(value(), '--seed', 0);
        break;
      case '--runs':
        options.runs = args.integer(value(), '--runs', 1);
        break;
      case '--steps':
        options.steps = args.integer(value(), '--steps', 1);
        break;
      case '--failover':
        options.failover = true;
        break;
      case '--locations':
        ({ min: options.locationsMin, max: options.locationsMax } = args.range(value(), '--locations', 1, 7));
        break;
      case '--bug': {
        const name = value();
        if (!DECISION_KNOWN_BUGS.includes(name as DecisionBug)) args.usage(`--bug is one of ${DECISION_KNOWN_BUGS.join(', ')}`);
        options.bug = name as DecisionBug;
        break;
      }
      case '--disable':
        for (const kind of args.list(value(), DECISION_FAULT_KINDS, '--disable')) options.disabled.add(kind);
        break;
      case '--disable-checker':
        for (const name of args.list(value(), DECISION_CHECKERS, '--disable-checker')) options.disabledCheckers.add(name);
        break;
      case '--partition': {
        const text = value() ?? '';
        if (!/^[a-g](,[a-g])*(\|[a-g](,[a-g])*)+$/.test(text)) args.usage("--partition takes groups of location names a..g, such as 'a|b,c'");
        options.partition = text.split('|').map((group) => group.split(','));
        break;
      }
      case '--keep-going':
        options.keepGoing = true;
        break;
      case '--trace':
        options.trace = true;
        break;
      case '--trace-messages':
        options.trace = true;
        options.traceMessages = true;
        break;
      default:
        args.usage(`unknown argument ${arg}`);
    }
  }
  if (options.partition !== undefined) {
    // Every location the partition names must exist: the run has at least up to its last letter.
    const needed = Math.max(...options.partition.flat().map((name) => name.charCodeAt(0) - 'a'.charCodeAt(0) + 1));
    if (options.locationsMax < needed) args.usage(`--partition names ${needed} locations, more than --locations allows`);
    options.locationsMin = Math.max(options.locationsMin, needed);
  }
  return options;
}

function printTrace(lines: readonly string[]): void {
  for (const line of lines) process.stdout.write(`  ${line}\n`);
}

function main(): void {
  const cli = parseArguments(process.argv.slice(2));
  const started = performance.now();
  let runs = 0;
  let failures = 0;
  let simulatedMs = 0;
  let messages = 0;
  let crashes = 0;
  let electionOpens = 0;
  let failoverOpens = 0;
  let forks = 0;
  let firstFork: number | undefined;
  process.stdout.write(
    `sim:decision: seeds ${cli.seed}..${cli.seed + cli.runs - 1}, locations ${cli.locationsMin}..${cli.locationsMax}, ${cli.steps} steps, ` +
      `failover ${cli.failover ? 'on' : 'off'}${cli.bug ? `, bug ${cli.bug}` : ''}${cli.disabled.size ? `, disabled ${[...cli.disabled].join(',')}` : ''}` +
      `${cli.disabledCheckers.size ? `, checkers off ${[...cli.disabledCheckers].join(',')}` : ''}` +
      `${cli.partition ? `, partition ${cli.partition.map((g) => g.join(',')).join(' | ')}` : ''}\n`,
  );
  for (let i = 0; i < cli.runs; i++) {
    const seed = cli.seed + i;
    const span = cli.locationsMax - cli.locationsMin + 1;
    const options: DecisionSimOptions = {
      seed,
      // The full range is drawn from the seed itself; a narrower one is a function of the seed.
      ...(cli.locationsMin === 1 && cli.locationsMax === 7 ? {} : { locations: cli.locationsMin + (seed % span) }),
      failover: cli.failover,
      steps: cli.steps,
      ...(cli.bug ? { bug: cli.bug } : {}),
      ...(cli.disabled.size ? { disabled: cli.disabled } : {}),
      ...(cli.disabledCheckers.size ? { disabledCheckers: cli.disabledCheckers } : {}),
      ...(cli.partition ? { initialPartition: cli.partition } : {}),
      traceMessages: cli.traceMessages,
    };
    const result = runDecisionSim(options);
    runs++;
    simulatedMs += result.elapsedMs;
    messages += result.messagesSent;
    crashes += result.crashes;
    electionOpens += result.opens.filter((o) => o.openKind === 'Election').length;
    failoverOpens += result.opens.filter((o) => o.openKind === 'Failover').length;
    if (result.forked) {
      forks++;
      firstFork ??= seed;
    }
    if (cli.trace) {
      process.stdout.write(`seed ${seed}: ${result.violation ? 'VIOLATION' : 'ok'}; opened by ${result.opens.map((o) => `${o.location} (${o.openKind})`).join(', ') || 'none'}\n`);
      printTrace(result.trace);
    }
    if (result.violation === undefined) {
      if (runs % 1000 === 0) process.stdout.write(`  ${runs} runs, ${failures} with a violation so far\n`);
      continue;
    }
    failures++;
    process.stdout.write(`VIOLATION in seed ${seed} at ${result.violation.atMs} ms: ${result.violation.message}\n`);
    const shrunk = shrinkDecisionRun(options, result);
    process.stdout.write(`  shrunk: ${shrunk.result.violation?.message ?? '(no longer fails)'} (${shrunk.result.trace.length} trace lines)\n`);
    process.stdout.write(`  replay: ${decisionReplayCommand(shrunk.options, shrunk.result)} --trace\n`);
    process.stdout.write(`  parameters: ${JSON.stringify(shrunk.result.parameters)}\n`);
    printTrace(shrunk.result.trace.slice(-60));
    if (!cli.keepGoing) break;
  }
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(
    `sim:decision: ${runs} runs, ${failures} with a violation; ${(simulatedMs / 1000).toFixed(0)} simulated seconds in ${seconds.toFixed(1)}s; ` +
      `${messages} messages, ${crashes} crashes; opens: ${electionOpens} Election, ${failoverOpens} Failover; ` +
      `runs with a fork: ${forks}${firstFork !== undefined ? ` (first: seed ${firstFork})` : ''}\n`,
  );
  process.exit(failures > 0 ? 1 : 0);
}

main();
