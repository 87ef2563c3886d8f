/**
 * Every error code the service answers, with its HTTP status, in one list (docs/errors.md): each
 * folder's registered codes and every code built in place, collected here. A code answers with one
 * status wherever it is raised, and the documented list is exactly what the code raises. After a
 * deliberate change, regenerate the list with UPDATE_ERROR_CATALOG=1 and review the diff.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CovenantError } from '../../src/base/errors.js';
import { ConsensusMessageError, notPrimary as consensusNotPrimary, tooManyPendingTransactions } from '../../src/consensus/index.js';
import { CryptoErrorCode, cryptoError } from '../../src/crypto/errors.js';
import * as kvErrors from '../../src/kv/errors.js';
import { LEDGER_ERROR_CODES, LedgerError } from '../../src/ledger/errors.js';
import { MERKLE_ERROR_STATUS } from '../../src/merkle/errors.js';
import { NODE_ERROR_STATUS } from '../../src/node/errors.js';
import { RECOVERY_ERROR_STATUS } from '../../src/recovery/errors.js';
import { TOKEN_ERROR_CODES, tokenError } from '../../src/jwt/errors.js';
import { ConfigError } from '../../src/config/errors.js';
import { DiskError } from '../../src/ledger/disk.js';
import { SandboxError } from '../../src/gov/sandbox.js';

const FACTORY_STATUS: Record<string, number> = { badRequest: 400, notFound: 404, unauthorized: 401, forbidden: 403, conflict: 409, unavailable: 503, internal: 500 };

/** The arguments of a call whose '(' ends at `open`, as source text (strings and nesting respected). */
function callArguments(text: string, open: number): string[] {
  const out: string[] = [];
  let depth = 0;
  let current = '';
  let quote: string | undefined;
  for (let i = open; i < text.length; i++) {
    const c = text[i]!;
    if (quote !== undefined) {
      current += c;
      if (c === '\\') current += text[++i] ?? '';
      else if (c === quote) quote = undefined;
      continue;
    }
    if (c === "'" || c === '"' || c === '`') quote = c;
    else if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) {
      if (depth === 0) {
        out.push(current.trim());
        return out;
      }
      depth--;
    } else if (c === ',' && depth === 0) {
      out.push(current.trim());
      current = '';
      continue;
    }
    current += c;
  }
  return out;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? sourceFiles(join(dir, e.name)) : e.name.endsWith('.ts') ? [join(dir, e.name)] : []));
}

type Catalog = Map<string, { statuses: Set<number>; where: Set<string> }>;

function collect(): Catalog {
  const catalog: Catalog = new Map();
  const add = (code: string, status: number, where: string) => {
    const entry = catalog.get(code) ?? { statuses: new Set<number>(), where: new Set<string>() };
    entry.statuses.add(status);
    entry.where.add(where);
    catalog.set(code, entry);
  };
  for (const [code, status] of Object.entries(NODE_ERROR_STATUS)) add(code, status, 'src/node/errors.ts');
  for (const [code, status] of Object.entries(MERKLE_ERROR_STATUS)) add(code, status, 'src/merkle/errors.ts');
  for (const [code, status] of Object.entries(RECOVERY_ERROR_STATUS)) add(code, status, 'src/recovery/errors.ts');
  for (const code of LEDGER_ERROR_CODES) add(code, new LedgerError(code, '').status, 'src/ledger/errors.ts');
  for (const code of TOKEN_ERROR_CODES) add(code, tokenError(code, '').status, 'src/jwt/errors.ts');
  for (const code of Object.values(CryptoErrorCode)) add(code, cryptoError(code, '').status, 'src/crypto/errors.ts');
  for (const factory of Object.values(kvErrors)) {
    if (typeof factory !== 'function' || factory.length !== 1) continue;
    const e = (factory as (m: string) => unknown)('');
    if (e instanceof CovenantError) add(e.code, e.status, 'src/kv/errors.ts');
  }
  for (const e of [consensusNotPrimary(undefined), tooManyPendingTransactions(1, 1), new ConsensusMessageError('')]) add(e.code, e.status, 'src/consensus/errors.ts');
  const config = new ConfigError([]);
  add(config.code, config.status, 'src/config/errors.ts');
  for (const e of [new DiskError('DiskIoFailed', 'write', 'f', ''), new DiskError('DiskFull', 'write', 'f', '')]) add(e.code, e.status, 'src/ledger/disk.ts');
  for (const e of [new SandboxError('Unavailable', ''), new SandboxError('Timeout', '')]) add(e.code, e.status, 'src/gov/sandbox.ts');
  // Codes built in place: new CovenantError('Code', message, status) and the base factories.
  for (const file of sourceFiles('src')) {
    const text = readFileSync(file, 'utf8');
    for (const m of text.matchAll(/new CovenantError\(|\bsuper\(|\b(badRequest|notFound|unauthorized|forbidden|conflict|unavailable|internal)\(/g)) {
      const args = callArguments(text, m.index! + m[0].length);
      const code = /^'([A-Za-z]+)'$/.exec(args[0] ?? '')?.[1];
      if (code === undefined) continue;
      const status = m[1] !== undefined ? FACTORY_STATUS[m[1]]! : args[2] === undefined ? 500 : Number(args[2]);
      assert.ok(Number.isInteger(status), `${file}: the status of ${code} is written as a number (${args[2]})`);
      add(code, status, file);
    }
  }
  return catalog;
}

const DOC = 'docs/errors.md';

function render(catalog: Catalog): string {
  const rows = [...catalog.entries()]
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([code, { statuses, where }]) => `| \`${code}\` | ${[...statuses].join(', ')} | ${[...where].sort().map((w) => `\`${w}\``).join(', ')} |`);
  return [
    '# Error codes',
    '',
    'Every error the service answers is `{"error": {"code": "...", "message": "..."}}` with the HTTP',
    'status below; the code is stable, the message is for people. This list is checked against the',
    'code by test/base/error-catalog.test.ts (regenerate it with `UPDATE_ERROR_CATALOG=1 npm test --',
    'error-catalog` after a deliberate change).',
    '',
    '| code | status | raised in |',
    '|---|---|---|',
    ...rows,
    '',
  ].join('\n');
}

test('every error code answers with one HTTP status wherever it is raised, and docs/errors.md lists them all', () => {
  const catalog = collect();
  assert.ok(catalog.size > 100, `the catalog found the codes (${catalog.size})`);
  for (const [code, { statuses, where }] of catalog) {
    assert.equal(statuses.size, 1, `${code} answers with ${[...statuses].join(' and ')} (raised in ${[...where].join(', ')})`);
  }
  const expected = render(catalog);
  if (process.env['UPDATE_ERROR_CATALOG'] === '1') writeFileSync(DOC, expected);
  assert.equal(readFileSync(DOC, 'utf8'), expected, `${DOC} is out of date: regenerate it with UPDATE_ERROR_CATALOG=1`);
});
