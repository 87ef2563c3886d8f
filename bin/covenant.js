#!/usr/bin/env node
// Entry point of the `covenant` command: runs the compiled CLI (built by `npm ci` / `npm run build`).
import { existsSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { dirname, join } from 'node:path';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const entry = join(root, 'dist', 'src', 'cli', 'main.js');
if (!existsSync(entry)) {
  process.stderr.write('covenant: not built yet; run `npm ci` (or `npm run build`) in ' + root + '\n');
  process.exit(1);
}
// Log lines and stack traces name the TypeScript source (file and line), as under the sandbox.
process.setSourceMapsEnabled(true);
await import(pathToFileURL(entry).href);
