/**
 * The recovery decision protocol's simulator as a test: fixed seeds with failover off and on, a
 * scripted partition that shows failover forking the service (and the election path not), and
 * proof that a deliberately broken protocol is caught. Longer sweeps are for `npm run sim:decision`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decisionReplayCommand, runDecisionSim, shrinkDecisionRun, type DecisionSimOptions, type DecisionSimResult } from '../../src/testing/sim/decision-sim.js';

const here = dirname(fileURLToPath(import.meta.url));
const SEEDS = Array.from({ length: 200 }, (_, i) => 5000 + i * 7919);

function assertClean(options: DecisionSimOptions): DecisionSimResult {
  const result = runDecisionSim(options);
  assert.equal(result.violation, undefined, `${result.violation?.message} — replay: ${decisionReplayCommand(options, result)} --trace\n${result.trace.slice(-30).join('\n')}`);
  return result;
}

test('failover off: fixed seeds over 1 to 7 locations find no violation; exactly one location opens, by election', () => {
  const sizes = new Set<number>();
  for (const seed of SEEDS) {
    const result = assertClean({ seed, failover: false, steps: 500 });
    sizes.add(result.parameters.locationCount);
    assert.deepEqual(
      result.opens.map((o) => [o.location, o.openKind]),
      [[result.best, 'Election']],
      `seed ${seed}`,
    );
    assert.equal(result.joins, result.parameters.locationCount - 1);
  }
  assert.deepEqual([...sizes].sort(), [1, 2, 3, 4, 5, 6, 7], 'every size was drawn');
});

test('failover on: fixed seeds find no violation; forks happen, and only through failover', () => {
  let forks = 0;
  let failoverOpens = 0;
  for (const seed of SEEDS) {
    const result = assertClean({ seed, failover: true, steps: 500 });
    assert.ok(result.opens.length >= 1);
    assert.ok(result.opens.filter((o) => o.openKind === 'Election').length <= 1, `seed ${seed}: at most one election`);
    failoverOpens += result.opens.filter((o) => o.openKind === 'Failover').length;
    if (result.forked) forks++;
  }
  assert.ok(failoverOpens > 0, 'the failover path was taken');
  assert.ok(forks > 0, 'some runs fork (late starts, partitions and short timeouts)');
});

const SCRIPTED: Omit<DecisionSimOptions, 'failover'> = {
  seed: 1,
  locations: 3,
  steps: 500,
  initialPartition: [['a'], ['b', 'c']],
  disabled: new Set(['loss', 'duplicate', 'crash', 'late-start', 'intruder', 'garbage']),
};

test('a partition with failover on: both sides open, each only after its failover timeout (the fork case)', () => {
  const result = assertClean({ ...SCRIPTED, failover: true });
  const T = result.parameters.failoverTimeoutMs;
  assert.equal(result.best, 'c');
  assert.ok(result.forked);
  assert.deepEqual(
    result.opens.map((o) => [o.location, o.openKind]),
    [
      ['c', 'Failover'],
      ['a', 'Failover'],
    ],
  );
  for (const open of result.opens) assert.ok(open.atMs >= T, `${open.location} opened at ${open.atMs} ms, timeout ${T} ms`);
  assert.ok(result.trace.some((line) => /a OPENS \(Failover\) after 4000 ms/.test(line)), result.trace.join('\n'));
});

test('the same partition with failover off: nothing opens until it heals, then the best ledger opens alone', () => {
  const result = assertClean({ ...SCRIPTED, failover: false });
  assert.equal(result.opens.length, 1);
  assert.equal(result.opens[0]!.location, 'c');
  assert.equal(result.opens[0]!.openKind, 'Election');
  assert.ok(result.opens[0]!.atMs > SCRIPTED.steps * 10, 'after the partition healed');
  assert.equal(result.joins, 2);
});

test('a run is a function of its seed', () => {
  const a = runDecisionSim({ seed: 4242, failover: true, steps: 300 });
  const b = runDecisionSim({ seed: 4242, failover: true, steps: 300 });
  assert.deepEqual(a.trace, b.trace);
  assert.equal(a.messagesSent, b.messagesSent);
  assert.notDeepEqual(runDecisionSim({ seed: 4243, failover: true, steps: 300 }).trace, a.trace);
});

test('the checkers catch the injected bug vote-before-all-heard, and the shrunk run still fails', () => {
  let caught: { options: DecisionSimOptions; message: string } | undefined;
  for (let seed = 1; seed <= 60 && caught === undefined; seed++) {
    const options: DecisionSimOptions = { seed, failover: false, steps: 500, bug: 'vote-before-all-heard' };
    const result = runDecisionSim(options);
    if (result.violation === undefined) continue;
    assert.equal(result.violation.checker, 'heard-all-votes-agree');
    const shrunk = shrinkDecisionRun(options, result);
    assert.notEqual(shrunk.result.violation, undefined, 'the shrunk run fails too');
    assert.ok(shrunk.result.trace.length <= result.trace.length);
    caught = { options: shrunk.options, message: shrunk.result.violation!.message };
  }
  assert.ok(caught !== undefined, 'vote-before-all-heard was not caught in 60 seeds');
  assert.equal(runDecisionSim(caught.options).violation?.message, caught.message, 'the printed replay reproduces it');
});

test('left to run past the first broken property, vote-before-all-heard forks the service on some seed', () => {
  let fork: DecisionSimResult | undefined;
  for (let seed = 1; seed <= 400 && fork === undefined; seed++) {
    const result = runDecisionSim({
      seed,
      failover: false,
      steps: 500,
      bug: 'vote-before-all-heard',
      disabledCheckers: new Set(['heard-all-votes-agree', 'liveness']),
    });
    if (result.violation?.checker === 'election-unique' || result.violation?.checker === 'no-fork') fork = result;
  }
  assert.ok(fork !== undefined, 'no fork in 400 seeds');
  assert.match(fork.violation!.message, /both opened by election|both opened the service/);
});

test('the command line exits non-zero and prints a replay when a bug is injected, and sums up clean runs', () => {
  const compiled = import.meta.url.endsWith('.js');
  const main = join(here, '..', '..', 'src', 'testing', 'sim', compiled ? 'decision-sim-main.js' : 'decision-sim-main.ts');
  const node = (args: string[]) =>
    spawnSync(process.execPath, [...(compiled ? [] : ['--import', 'tsx']), main, ...args], { encoding: 'utf8', timeout: 120_000 });
  const failing = node(['--bug', 'vote-before-all-heard', '--runs', '50', '--seed', '1']);
  assert.equal(failing.status, 1, failing.stderr);
  assert.match(failing.stdout, /VIOLATION in seed \d+ at \d+ ms: heard-all-votes-agree/);
  assert.match(failing.stdout, /replay: npm run sim:decision -- --seed \d+ --locations \d --steps \d+ --bug vote-before-all-heard/);
  const clean = node(['--runs', '20', '--seed', '77', '--failover']);
  assert.equal(clean.status, 0, clean.stdout + clean.stderr);
  assert.match(clean.stdout, /20 runs, 0 with a violation; \d+ simulated seconds in [\d.]+s; \d+ messages, \d+ crashes; opens: \d+ Election, \d+ Failover; runs with a fork: \d+/);
  const usage = node(['--locations', '9']);
  assert.equal(usage.status, 2);
  assert.match(usage.stderr, /usage: sim:decision/);
});
