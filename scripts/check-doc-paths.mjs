#!/usr/bin/env node
// Checks that every repository file the documentation or a source comment names exists, so that a
// doc never sends its reader to a file that was renamed or never written. Run by `npm run lint`.
//
// What counts as naming a file:
// - in README.md and docs/*.md: a relative markdown link `[text](path)` (resolved from the doc's
//   folder), and any path-like word ending in a file extension of the repository;
// - in comments of the TypeScript sources (src/, test/, bench/): the same path-like words.
// A path-like word is checked by how much it says: from a top folder (`src/node/compose.ts`) it
// must exist exactly; a partial path (`node/compose.ts`, `flows/join.ts`) must end some file's
// path; a bare name (`ledger.ts`) must be some file's name. Words with wildcards or placeholders
// (`*`, `<`, `{`) name patterns, not files, and are skipped.
// Usage: node scripts/check-doc-paths.mjs   (exit status 1 and one line per missing file)
import { readdirSync, readFileSync, statSync, existsSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const SKIPPED_DIRECTORIES = new Set(['node_modules', 'dist', '.git']);
const TOP_FOLDERS = ['src', 'docs', 'test', 'bench', 'scripts', 'ops', 'bin', 'examples'];
const EXTENSIONS = ['ts', 'md', 'mjs', 'cjs'];
/** Files above this size are not read (none of ours is near it; a stray artefact could be). */
const FILE_BYTES_MAX = 4 * 1024 * 1024;

function walk(directory, out) {
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    if (SKIPPED_DIRECTORIES.has(entry.name)) continue;
    const path = join(directory, entry.name);
    if (entry.isDirectory()) walk(path, out);
    else if (entry.isFile()) out.push(relative(root, path).split(sep).join('/'));
  }
  return out;
}

const files = walk(root, []);
const fileSet = new Set(files);
const names = new Set(files.map((f) => f.slice(f.lastIndexOf('/') + 1)));

const PATH_WORD = new RegExp(String.raw`(?<![\w./@*-])((?:[\w.-]+/)*[\w.-]+\.(?:${EXTENSIONS.join('|')}))(?![\w/*-])`, 'g');

/** Why `word` names no file of the repository, or undefined when it names one. */
function missing(word) {
  if (/[*<{]/.test(word) || word.startsWith('dist/') || word.startsWith('node_modules/')) return undefined;
  if (/^\.\.?\//.test(word)) return undefined; // relative imports in examples; links are checked apart
  const top = word.split('/')[0];
  if (TOP_FOLDERS.includes(top) && word.includes('/')) return fileSet.has(word) ? undefined : 'no such file';
  if (word.includes('/')) return files.some((f) => f.endsWith(`/${word}`)) ? undefined : 'no file ends with this path';
  return names.has(word) ? undefined : 'no file has this name';
}

/** The comment text of a TypeScript source, line by line (code replaced by nothing). */
function commentLines(text) {
  const out = [];
  let inBlock = false;
  for (const line of text.split('\n')) {
    let comment = '';
    let rest = line;
    while (rest.length > 0) {
      if (inBlock) {
        const end = rest.indexOf('*/');
        comment += end < 0 ? rest : rest.slice(0, end);
        if (end < 0) break;
        inBlock = false;
        rest = rest.slice(end + 2);
        continue;
      }
      const lineComment = rest.search(/(^|\s)\/\//);
      const blockStart = rest.indexOf('/*');
      if (blockStart >= 0 && (lineComment < 0 || blockStart < lineComment)) {
        inBlock = true;
        rest = rest.slice(blockStart + 2);
        continue;
      }
      if (lineComment >= 0) comment += rest.slice(lineComment);
      break;
    }
    out.push(comment);
  }
  return out;
}

const problems = [];

function checkWords(file, lines) {
  lines.forEach((line, i) => {
    for (const match of line.matchAll(PATH_WORD)) {
      const why = missing(match[1]);
      if (why !== undefined) problems.push(`${file}:${i + 1}: ${match[1]}: ${why}`);
    }
  });
}

function checkLinks(file, lines) {
  lines.forEach((line, i) => {
    for (const match of line.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = match[1].split('#')[0];
      if (target === '' || /^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const resolved = normalize(join(dirname(file), target)).split(sep).join('/');
      if (!existsSync(join(root, resolved))) problems.push(`${file}:${i + 1}: link ${match[1]}: no such file`);
    }
  });
}

for (const file of files) {
  if (statSync(join(root, file)).size > FILE_BYTES_MAX) continue;
  const isDoc = file === 'README.md' || /^docs\/[^/]+\.md$/.test(file);
  const isSource = /^(src|test|bench)\/.*\.ts$/.test(file);
  if (!isDoc && !isSource) continue;
  const text = readFileSync(join(root, file), 'utf8');
  const lines = isDoc ? text.split('\n') : commentLines(text);
  checkWords(file, lines);
  if (isDoc) checkLinks(file, lines);
}

if (problems.length > 0) {
  console.error(`${problems.length} named file(s) do not exist:`);
  for (const p of problems) console.error(`  ${p}`);
  process.exit(1);
}
