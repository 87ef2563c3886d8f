#!/usr/bin/env node
// Runs the compiled test files with node:test. Node 20 neither strips types nor expands globs,
// so this globs dist/ for *.test.js and hands the list to `node --test`.
// Usage: npm test [-- substring ...]   (only files whose path contains one of the substrings)
import { spawn } from 'node:child_process';
import { glob } from 'glob';

const filters = process.argv.slice(2);
const all = (await glob(['dist/test/**/*.test.js', 'dist/src/**/*.test.js'])).sort();
const files = filters.length ? all.filter((f) => filters.some((s) => f.includes(s))) : all;
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const concurrency = process.env.TEST_CONCURRENCY ?? '2';
const child = spawn(
  process.execPath,
  // --test-force-exit: a file whose tests are done ends even if a library left a handle open (a
  // finished file must never hold CI); --test-timeout bounds any single test.
  ['--enable-source-maps', '--test', '--test-force-exit', '--test-timeout=600000', `--test-concurrency=${concurrency}`, '--test-reporter=spec', ...files],
  { stdio: 'inherit' },
);
child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
