/**
 * Runs every scenario script in scenarios/*.scn and compares its trace with the checked-in
 * scenarios/*.trace. After a deliberate change, regenerate with UPDATE_TRACES=1 and review the diff.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { runScenario } from '../../src/testing/sim/scenario.js';

function repositoryRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    assert.notEqual(parent, dir, 'the repository root has a package.json');
    dir = parent;
  }
  return dir;
}

const scenarioDir = join(repositoryRoot(), 'test', 'consensus', 'scenarios');
const scripts = readdirSync(scenarioDir).filter((f) => f.endsWith('.scn')).sort();

test('the scenario suite is present', () => {
  assert.ok(scripts.length >= 9, `found ${scripts.length} scenarios`);
});

for (const script of scripts) {
  test(`scenario ${script}`, () => {
    const trace = runScenario(readFileSync(join(scenarioDir, script), 'utf8'));
    const tracePath = join(scenarioDir, script.replace(/\.scn$/, '.trace'));
    if (process.env.UPDATE_TRACES === '1') writeFileSync(tracePath, trace);
    assert.ok(existsSync(tracePath), `${tracePath} exists (run with UPDATE_TRACES=1 to create it)`);
    assert.equal(trace, readFileSync(tracePath, 'utf8'));
  });
}
