/** The join policy in the sandbox: true admits, a string refuses with it, anything else is an error; hostile policies fail. */
import { describe, test, before } from 'node:test';
import assert from 'node:assert/strict';
import { runJoinPolicy } from '../../src/gov/join-policy.js';
import { type JsEngine, loadJsEngine, type SandboxLimits } from '../../src/gov/sandbox.js';
import type { TransparentStatementInput } from '../../src/gov/transparent-statement.js';

const FAST: SandboxLimits = { memoryBytesMax: 8 * 1024 * 1024, executionTimeMsMax: 200, stackBytesMax: 64 * 1024 };

const STATEMENT: TransparentStatementInput = {
  phdr: { alg: -35, x5chain: ['-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n'], cwt: { iss: 'did:x509:issuer', sub: 'covenant-node', svn: 4 } },
  receipts: [
    {
      alg: -35,
      vds: 1,
      kid: 'k',
      cwt: { iss: 'service', sub: 'ledger.signature' },
      ccf: { txid: '2.9' },
      leaves: [{ claims_digest: 'a'.repeat(64), commit_evidence: `ce:2.8:${'b'.repeat(64)}`, write_set_digest: 'c'.repeat(64) }],
    },
  ],
  resolved_issuer: {
    did: 'did:x509:issuer',
    ca_certificate: '-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n',
    ca_index: 1,
    ca_fingerprint: { alg: 'sha256', value: 'f'.repeat(43) },
    policies: [{ name: 'subject', value: 'CN:issuer' }],
  },
};

/** Admits statements from did:x509:issuer with svn at least 3. */
const SVN_POLICY = `export function policy(statements) {
  for (const s of statements) {
    if (s.phdr.cwt.iss !== 'did:x509:issuer') return 'unknown issuer ' + s.phdr.cwt.iss;
    if (!(s.phdr.cwt.svn >= 3)) return 'svn ' + s.phdr.cwt.svn + ' is below 3';
    if (s.receipts[0].leaves[0].commit_evidence.length === 0) return 'no evidence';
  }
  return true;
}`;

describe('join policy', () => {
  let engine: JsEngine;
  before(async () => {
    engine = await loadJsEngine();
  });
  const run = (source: string, statements = [STATEMENT]) => runJoinPolicy(engine, source, statements, FAST);

  test('true admits; a string refuses with that reason; the policy sees the input table', () => {
    assert.deepEqual(run(SVN_POLICY), { kind: 'admitted' });
    const low = { ...STATEMENT, phdr: { ...STATEMENT.phdr, cwt: { ...STATEMENT.phdr.cwt, svn: 2 } } };
    assert.deepEqual(run(SVN_POLICY, [low]), { kind: 'refused', reason: 'svn 2 is below 3' });
    const other = { ...STATEMENT, phdr: { ...STATEMENT.phdr, cwt: { ...STATEMENT.phdr.cwt, iss: 'did:web:elsewhere' } } };
    assert.deepEqual(run(SVN_POLICY, [other]), { kind: 'refused', reason: 'unknown issuer did:web:elsewhere' });
  });

  test('anything but true or a string is an error, said as such', () => {
    const cases: [string, RegExp][] = [
      ['export function policy() { return 1 }', /returned 1, neither true nor a string/],
      ['export function policy() { return false }', /returned false, neither true nor a string/],
      ['export function policy() { return { ok: true } }', /returned \{"ok":true\}, neither true nor a string/],
      ['export function policy() { }', /returned undefined, neither true nor a string/],
      ['export function policy() { throw new Error("no way") }', /failed \(Exception\): .*no way/],
      ['export const policy = 1', /failed \(MissingExport\)/],
      ['export function policy( {', /failed \(Syntax\)/],
    ];
    for (const [source, reason] of cases) {
      const verdict = run(source);
      assert.equal(verdict.kind, 'error', source);
      assert.match((verdict as { reason: string }).reason, reason, source);
    }
  });

  test('a hostile policy (endless loop, huge allocation, host objects) is an error, and the sandbox serves the next one', () => {
    const hostile: [string, RegExp][] = [
      ['export function policy() { for (;;) {} }', /Timeout/],
      ['export function policy() { const a = []; for (;;) a.push("x".repeat(1 << 20)) }', /OutOfMemory|Timeout/],
      ['export function policy() { return process.exit(1) }', /'process' is not defined/],
      ['export function policy() { return require("fs") }', /'require' is not defined/],
      ['export function policy() { return globalThis.svc.kv.get("x") }', /Exception/],
    ];
    for (const [source, reason] of hostile) {
      const verdict = run(source);
      assert.equal(verdict.kind, 'error', source);
      assert.match((verdict as { reason: string }).reason, reason, source);
    }
    assert.deepEqual(run(SVN_POLICY), { kind: 'admitted' });
  });

  test('a long reason is bounded', () => {
    const verdict = run('export function policy() { return "x".repeat(100000) }');
    assert.equal(verdict.kind, 'refused');
    assert.ok(Buffer.byteLength((verdict as { reason: string }).reason) <= 1024);
  });
});
