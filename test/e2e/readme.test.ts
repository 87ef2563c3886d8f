/**
 * End to end: the README's curl walk-through, run as written against a sandbox. The block is read
 * from README.md itself, so the README cannot drift from what the service answers: each command
 * runs in one bash (its variables carry on, `covenant` is the CLI), and each answer is checked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CLI_ENTRY, waitForExit } from '../../src/testing/node-process.js';
import { until } from '../../src/testing/network.js';
import type { NetworkJson } from '../../src/cli/sandbox.js';

const README = fileURLToPath(new URL('../../../README.md', import.meta.url));

/** The commands of README.md's walk-through block (the sh block that sets S=sandbox/common), continuation lines joined. */
function walkThrough(): string[] {
  const blocks = readFileSync(README, 'utf8').split('```sh\n').slice(1).map((b) => b.slice(0, b.indexOf('```')));
  const block = blocks.find((b) => b.startsWith('S=sandbox/common'));
  assert.ok(block !== undefined, 'README.md has the walk-through block');
  const commands: string[] = [];
  let pending = '';
  for (const line of block.split('\n')) {
    if (pending === '' && (line.trim() === '' || line.trim().startsWith('#'))) continue;
    // A continued line keeps its backslash: bash joins it, as a terminal would.
    pending += line.endsWith('\\') ? `${line}\n` : line;
    if (!line.endsWith('\\')) {
      commands.push(pending);
      pending = '';
    }
  }
  return commands;
}

/** How long the whole block may take (it waits for one commit, which takes well under a second). */
const WALK_THROUGH_MS_MAX = 120_000;

interface Ran {
  readonly command: string;
  readonly output: string;
  readonly status: number;
}

/** Runs the commands in one bash in `cwd`, each answer and exit status kept apart by markers. */
async function runInBash(commands: readonly string[], cwd: string): Promise<Ran[]> {
  const script = [
    `covenant() { ${JSON.stringify(process.execPath)} ${JSON.stringify(CLI_ENTRY)} "$@"; }`,
    ...commands.flatMap((c, i) => [`echo "@@begin ${i}"`, c, `echo "@@end ${i} $?"`]),
  ].join('\n');
  const file = join(cwd, 'walk-through.sh');
  writeFileSync(file, script);
  const child = spawn('/bin/bash', [file], { cwd, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  // The block waits for a commit in a loop: should the service never commit, the test ends, not hangs.
  const deadline = setTimeout(() => child.kill('SIGKILL'), WALK_THROUGH_MS_MAX);
  try {
    assert.equal(await waitForExit(child), 0, `the walk-through did not finish within ${WALK_THROUGH_MS_MAX} ms:\n${out}\n${err}`);
  } finally {
    clearTimeout(deadline);
  }
  return commands.map((command, i) => {
    const begin = out.indexOf(`@@begin ${i}\n`);
    const end = /@@end (\d+) (\d+)\n/g;
    end.lastIndex = begin;
    const m = end.exec(out)!;
    return { command, output: out.slice(begin + `@@begin ${i}\n`.length, m.index), status: Number(m[2]) };
  });
}

test("the README's curl walk-through runs as written against a sandbox", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-readme-'));
  const fragment = join(dir, 'fragment.json');
  writeFileSync(fragment, JSON.stringify({ ledger_signatures: { delay: '20ms' } }));
  const sandbox = spawn(process.execPath, [CLI_ENTRY, 'sandbox', '--nodes', '2', '--dir', 'sandbox', '--node-config', fragment], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
  let printed = '';
  sandbox.stdout!.on('data', (c: Buffer) => (printed += c.toString()));
  sandbox.stderr!.on('data', (c: Buffer) => (printed += c.toString()));
  try {
    await until('the sandbox', async () => {
      if (sandbox.exitCode !== null) throw new Error(`the sandbox exited:\n${printed}`);
      return printed.includes('Press Ctrl-C') ? true : undefined;
    }, 120_000, 100);
    const ran = await runInBash(walkThrough(), dir);
    const json = (r: Ran) => {
      try {
        return JSON.parse(r.output) as any;
      } catch {
        assert.fail(`${r.command}\nanswered what is not JSON: ${r.output}`);
      }
    };
    const checks: [RegExp, (r: Ran) => void][] = [
      [/^S=sandbox/, () => undefined],
      [/\/node\/network\/nodes/, (r) => assert.equal(json(r).nodes.length, 2)],
      [/\/node\/network /, (r) => assert.equal(json(r).service_status, 'Open')],
      [/\/node\/commit/, (r) => assert.match(json(r).transaction_id, /^\d+\.\d+$/)],
      [/\/node\/api/, (r) => assert.ok(json(r).openapi)],
      [/^U=/, () => undefined],
      [/^TX=/, () => undefined],
      [/^echo/, (r) => assert.match(r.output, /^written by transaction \d+\.\d+\n$/)],
      [/log\/private\?id=1/, (r) => assert.equal(json(r).msg, 'hello')],
      [/^curl .*\/app\/tx/, (r) => assert.match(json(r).status, /^(Pending|Committed)$/)],
      [/^until/, () => undefined],
      [/historical/, (r) => {
        const body = json(r);
        // 202 while the node reads the entry from its ledger files: the body says to retry.
        if (body.msg === undefined) assert.match(JSON.stringify(body), /Retry|Pending|NotReady|Loading/i);
        else assert.equal(body.msg, 'hello');
      }],
      [/\/node\/receipt\?/, (r) => assert.ok(json(r).receipt.signature, r.output)],
      [/receipt\/cose/, () => assert.ok(statSync(join(dir, 'r.cose')).size > 0)],
      [/receipt verify/, (r) => assert.match(r.output, /verif/i)],
    ];
    for (const r of ran) {
      assert.equal(r.status, 0, `${r.command}\nexited ${r.status}: ${r.output}`);
      const check = checks.find(([pattern]) => pattern.test(r.command));
      assert.ok(check !== undefined, `the test knows what to expect of: ${r.command}`);
      check[1](r);
    }
    assert.ok(ran.length >= 12, 'the block was read whole');
  } finally {
    if (sandbox.exitCode === null) sandbox.kill('SIGINT');
    await Promise.race([waitForExit(sandbox), new Promise((r) => setTimeout(r, 15_000))]);
    if (sandbox.exitCode === null) sandbox.kill('SIGKILL');
    const networkFile = join(dir, 'sandbox', 'network.json');
    const nodes = existsSync(networkFile) ? (JSON.parse(readFileSync(networkFile, 'utf8')) as NetworkJson).nodes : [];
    for (const node of nodes) {
      try {
        process.kill(node.pid, 'SIGKILL');
      } catch {
        // already stopped by the sandbox
      }
    }
    rmSync(dir, { recursive: true, force: true });
  }
});
