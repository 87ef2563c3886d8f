/**
 * The simulator as a test: fixed seeds, every seed that ever failed, a few fresh random seeds
 * (printed, so that a failure can be replayed), and proof that each deliberately injected bug is
 * caught. Longer sweeps are for `npm run sim`.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomInt } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KNOWN_BUGS } from '../../src/consensus/index.js';
import { runSwarm, shrink, type SwarmOptions } from '../../src/testing/sim/swarm.js';

const here = dirname(fileURLToPath(import.meta.url));

function repositoryRoot(): string {
  let dir = here;
  while (!existsSync(join(dir, 'package.json'))) dir = dirname(dir);
  return dir;
}

function assertClean(options: SwarmOptions): void {
  const result = runSwarm(options);
  const replay = `npm run sim -- --seed ${options.seed} --nodes ${result.parameters.nodeCount} --steps ${options.steps}`;
  assert.equal(result.violation, undefined, `${result.violation?.message} — replay: ${replay}\n${result.trace.slice(-40).join('\n')}`);
  assert.ok(result.committedSeqno > 0, `seed ${options.seed} commits something`);
}

const FIXED_SEEDS = Array.from({ length: 120 }, (_, i) => 1000 + i * 7919);

test('fixed seeds across 3, 5 and 7 nodes find no violation', () => {
  for (const [i, seed] of FIXED_SEEDS.entries()) assertClean({ seed, nodes: [3, 5, 7][i % 3]!, steps: 1000 });
});

test('every seed that once failed stays fixed', () => {
  const { seeds } = JSON.parse(readFileSync(join(repositoryRoot(), 'test', 'sim', 'regression-seeds.json'), 'utf8')) as {
    seeds: { seed: number; nodes: number; steps: number }[];
  };
  assert.ok(seeds.length > 0);
  for (const s of seeds) assertClean({ seed: s.seed, nodes: s.nodes, steps: s.steps });
});

test('fresh random seeds find no violation', () => {
  for (let i = 0; i < 8; i++) {
    const seed = randomInt(0, 2 ** 47);
    process.stdout.write(`# random seed ${seed}\n`);
    assertClean({ seed, steps: 800 });
  }
});

test('a run is a function of its seed', () => {
  const a = runSwarm({ seed: 4242, steps: 400 });
  const b = runSwarm({ seed: 4242, steps: 400 });
  assert.deepEqual(a.trace, b.trace);
  assert.equal(a.ticks, b.ticks);
  assert.notDeepEqual(runSwarm({ seed: 4243, steps: 400 }).trace, a.trace);
});

for (const bug of KNOWN_BUGS) {
  test(`the checkers catch the injected bug ${bug}, and the shrunk run still fails`, () => {
    let caught: { options: SwarmOptions; ticks: number; message: string } | undefined;
    for (let seed = 1; seed <= 60 && caught === undefined; seed++) {
      const options: SwarmOptions = { seed, steps: 600, bug };
      const result = runSwarm(options);
      if (result.violation !== undefined) {
        const shrunk = shrink(options, result);
        assert.notEqual(shrunk.result.violation, undefined, 'the shrunk run fails too');
        assert.ok(shrunk.result.trace.length <= result.trace.length);
        caught = { options: shrunk.options, ticks: shrunk.result.ticks, message: shrunk.result.violation!.message };
      }
    }
    assert.ok(caught !== undefined, `${bug} was not caught in 60 seeds`);
    // The printed replay reproduces it.
    assert.equal(runSwarm(caught.options).violation?.message, caught.message);
  });
}

test('the command line exits non-zero and prints the seed when a bug is injected', () => {
  const compiled = import.meta.url.endsWith('.js');
  const main = join(here, '..', '..', 'src', 'testing', 'sim', compiled ? 'main.js' : 'main.ts');
  const run = spawnSync(process.execPath, [...(compiled ? [] : ['--import', 'tsx']), main, '--bug', 'commit-without-quorum', '--runs', '200', '--seed', '1'], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(run.status, 1, run.stderr);
  assert.match(run.stdout, /VIOLATION in seed \d+/);
  assert.match(run.stdout, /replay: npm run sim -- --seed \d+/);
  const clean = spawnSync(process.execPath, [...(compiled ? [] : ['--import', 'tsx']), main, '--runs', '3', '--seed', '77', '--steps', '300'], {
    encoding: 'utf8',
    timeout: 120_000,
  });
  assert.equal(clean.status, 0, clean.stdout + clean.stderr);
  assert.match(clean.stdout, /3 runs, 0 with a violation; \d+ simulated steps in [\d.]+s \(\d+ steps\/s\)/);
});
