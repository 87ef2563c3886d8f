/**
 * The application bundle's checks and the engine: what set_js_app refuses (naming the key, module
 * or function), and what a handler can and cannot do inside a real store transaction.
 */
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Store, stringKeyCodec, bytesCodec } from '../../src/kv/index.js';
import { parseBundle } from '../../src/apps/js/bundle.js';
import { AppEngine, DEFAULT_RUNTIME_OPTIONS, runtimeOptionsOf } from '../../src/apps/js/engine.js';
import { ScriptFailure, type RuntimeOptions } from '../../src/apps/js/interpreter.js';
import type { RequestScope } from '../../src/apps/js/host.js';

const endpoint = (js_function: string, extra: Record<string, unknown> = {}) => ({ js_module: 'app.js', js_function, authn_policies: [], mode: 'readwrite', ...extra });
const bundleOf = (source: string, endpoints: Record<string, unknown> = { '/x': { post: endpoint('run') } }, more: { name: string; module: string }[] = []) => ({
  metadata: { endpoints },
  modules: [{ name: 'app.js', module: source }, ...more],
});

describe('bundle checks', () => {
  let engine: AppEngine;
  before(async () => {
    engine = await AppEngine.load();
  });

  test('a malformed app.json is refused naming the key', () => {
    assert.throws(() => parseBundle({ metadata: { endpoints: { '/x': { get: { js_module: 'app.js' } } } }, modules: [] }), /js_function/);
    assert.throws(() => parseBundle(bundleOf('', { '/x': { get: endpoint('f', { mode: 'sometimes' }) } })), /mode/);
    assert.throws(() => parseBundle(bundleOf('', { '/x': { get: endpoint('f', { authn_policies: ['cookie'] }) } })), /authn_policies/);
    assert.throws(() => parseBundle(bundleOf('', { '/x': { patch: endpoint('f') } })), /method "patch"/);
    assert.throws(() => parseBundle(bundleOf('', { x: { get: endpoint('f') } })), /starts with "\/"/);
    assert.throws(() => parseBundle(bundleOf('', { '/tx': { get: endpoint('f') } })), /built into the service/);
    assert.throws(() => parseBundle(bundleOf('', { '/x': { get: endpoint('f', { js_module: 'nope.js' }) } })), /module "nope.js" is not in the bundle/);
    assert.throws(() => parseBundle({ ...bundleOf(''), extra: 1 }), /extra/);
  });

  test('a module that does not compile is refused naming it', () => {
    assert.throws(
      () => engine.checkBundle(bundleOf('export function run() { return {} }', undefined, [{ name: 'lib/util.js', module: 'export const x = ;' }])),
      /module "lib\/util.js": .*SyntaxError/,
    );
  });

  test('a missing function is refused naming it; imports between modules resolve', () => {
    assert.throws(() => engine.checkBundle(bundleOf('export function other() {}')), /does not export a function "run"/);
    const ok = engine.checkBundle(
      bundleOf('import { twice } from "./lib/math.js"; export function run() { return { body: twice(2) } }', undefined, [
        { name: 'lib/math.js', module: 'export const twice = (x) => 2 * x;' },
      ]),
    );
    assert.equal(ok.endpoints.length, 1);
    assert.throws(() => engine.checkBundle(bundleOf('import { y } from "./missing.js"; export function run() {}')), /missing\.js/);
  });

  test('a module whose top level spins is refused within the time limit', async () => {
    assert.throws(() => engine.checkBundle(bundleOf('for (;;) {} export function run() {}')), /time limit/);
    // Its instance was dropped for the spare: the engine checks the next bundle at once.
    assert.equal(engine.checkBundle(bundleOf('export function run() {}')).endpoints.length, 1);
    await engine.ready();
  });

  test('runtime options are bounded', () => {
    assert.deepEqual(runtimeOptionsOf(undefined), DEFAULT_RUNTIME_OPTIONS);
    assert.equal(runtimeOptionsOf({ max_heap_bytes: 10 }).heapBytesMax, 1024 * 1024);
    assert.equal(runtimeOptionsOf({ max_execution_time_ms: 50 }).executionTimeMsMax, 50);
  });
});

describe('the engine in a transaction', () => {
  let engine: AppEngine;
  before(async () => {
    engine = await AppEngine.load();
  });

  const run = (source: string, opts: { store?: Store; readonly?: boolean; options?: RuntimeOptions; body?: string; requestJson?: string } = {}) => {
    const store = opts.store ?? new Store();
    const bundle = parseBundle(bundleOf(source));
    const tx = store.beginTx();
    const scope: RequestScope = {
      reader: tx,
      tx: opts.readonly ? undefined : tx,
      commitTxId: () => '2.7',
      randomBytes: (n) => new Uint8Array(n).fill(7),
      nowMs: () => 1234,
      applyWrites: false,
      claimsDigest: undefined,
    };
    const source_ = {};
    const response = engine.withInterpreter(source_, bundle, opts.options ?? DEFAULT_RUNTIME_OPTIONS, scope, (i) =>
      i.call('app.js', 'run', { fields: () => opts.requestJson ?? JSON.stringify({ method: 'POST', path: '/app/x', params: {} }), body: Buffer.from(opts.body ?? ''), seed: 42, writable: !opts.readonly }),
    );
    return { response, tx, scope, store };
  };

  test('maps, converters and the request body', () => {
    const { response, tx } = run(`export function run(request) {
      const m = covenant.kv['records'];
      m.set(covenant.strToBuf('k'), covenant.jsonCompatibleToBuf(request.body.json()));
      covenant.kv['public:things'].set(covenant.strToBuf('a'), covenant.strToBuf('1'));
      const seen = [];
      covenant.kv['public:things'].forEach((v, k) => seen.push(covenant.bufToStr(k) + '=' + covenant.bufToStr(v)));
      return { statusCode: 201, headers: { 'X-Thing': 'yes' }, body: { back: covenant.bufToJsonCompatible(m.get(covenant.strToBuf('k'))), size: m.size, seen, has: m.has(covenant.strToBuf('nope')) } };
    }`, { body: '{"n": 5}' });
    assert.equal(response.status, 201);
    assert.equal(response.headers['x-thing'], 'yes');
    assert.deepEqual(JSON.parse(response.text!), { back: { n: 5 }, size: 1, seen: ['a=1'], has: false });
    const stored = tx.map('records', stringKeyCodec, bytesCodec).get('k') as Uint8Array;
    assert.equal(Buffer.from(stored).toString(), '{"n":5}');
  });

  test('keys of any bytes (zero bytes, bytes above 0x7f) are kept exactly; request fields read on first use', () => {
    const { response, tx } = run(`export function run(request) {
      const m = covenant.kv['records'];
      const keys = [new Uint8Array([0]), new Uint8Array([1, 0, 2]), new Uint8Array([0xff, 0x80]), new Uint8Array([0x61])];
      keys.forEach((k, i) => m.set(k.buffer, covenant.strToBuf(String(i))));
      const back = keys.map((k) => covenant.bufToStr(m.get(k.buffer)));
      const seen = [];
      m.forEach((v, k) => seen.push(Array.from(new Uint8Array(k)).join('.') + '=' + covenant.bufToStr(v)));
      const removed = m.delete(new Uint8Array([1, 0, 2]).buffer) && !m.has(new Uint8Array([1, 0, 2]).buffer);
      request.path = 'mine';
      return { body: { back, seen: seen.sort(), removed, same: covenant.kv.records === m, method: request.method, path: request.path, keys: Object.keys(request) } };
    }`, { requestJson: JSON.stringify({ method: 'POST', path: '/app/x', params: {} }) });
    const body = JSON.parse(response.text!);
    assert.deepEqual(body.back, ['0', '1', '2', '3']);
    assert.deepEqual(body.seen, ['0=0', '1.0.2=1', '255.128=2', '97=3']);
    assert.equal(body.removed, true);
    assert.equal(body.same, true);
    assert.equal(body.method, 'POST');
    assert.equal(body.path, 'mine');
    assert.deepEqual(body.keys, ['body', 'path']);
    const stored = tx.map('records', stringKeyCodec, bytesCodec);
    assert.equal(Buffer.from(stored.get('\u0000') as Uint8Array).toString(), '0');
    assert.equal(Buffer.from(stored.get('\u00ff\u0080') as Uint8Array).toString(), '2');
  });

  test('no ambient time or randomness; crypto helpers', () => {
    const { response } = run(`export function run() {
      const before = [Date.now(), new Date().getTime()];
      covenant.enableUntrustedDateTime(true);
      const after = Date.now();
      const digest = new Uint8Array(covenant.crypto.sha256(covenant.strToBuf('abc')));
      return { body: { before, after, r: [Math.random(), Math.random()], digest0: digest[0], rnd: new Uint8Array(covenant.crypto.randomBytes(3))[0], commit: covenant.consensus.getLastCommittedTxId() } };
    }`);
    const body = JSON.parse(response.text!);
    assert.deepEqual(body.before, [0, 0]);
    assert.equal(body.after, 1234);
    assert.equal(body.digest0, 0xba);
    assert.equal(body.rnd, 7);
    assert.deepEqual(body.commit, { view: 2, seqno: 7 });
    assert.equal(typeof body.r[0], 'number');
    // The generator is seeded per request: the same seed gives the same numbers.
    assert.deepEqual(JSON.parse(run(`export function run() { return { body: { r: [Math.random(), Math.random()] } } }`).response.text!).r, body.r);
  });

  test('verifySignature checks ECDSA and RSA signatures', async () => {
    const { generateKeyPairSync, sign } = await import('node:crypto');
    const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const data = Buffer.from('hello');
    const ecSig = sign('sha256', data, { key: ec.privateKey, dsaEncoding: 'ieee-p1363' });
    const rsaSig = sign('sha256', data, rsa.privateKey);
    const pem = (k: typeof ec.publicKey) => k.export({ type: 'spki', format: 'pem' }).toString();
    const request = JSON.stringify({ ec: pem(ec.publicKey), rsa: pem(rsa.publicKey), ecSig: ecSig.toString('hex'), rsaSig: rsaSig.toString('hex') });
    const { response } = run(
      `const hex = (s) => new Uint8Array(s.match(/../g).map((b) => parseInt(b, 16))).buffer;
      export function run(request) {
        const r = request.body.json();
        const data = covenant.strToBuf('hello');
        const bad = covenant.strToBuf('hellO');
        return { body: [
          covenant.crypto.verifySignature({ name: 'ECDSA', hash: 'SHA-256' }, r.ec, hex(r.ecSig), data),
          covenant.crypto.verifySignature({ name: 'ECDSA', hash: 'SHA-256' }, r.ec, hex(r.ecSig), bad),
          covenant.crypto.verifySignature({ name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, r.rsa, hex(r.rsaSig), data),
          covenant.crypto.verifySignature({ name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' }, r.rsa, hex(r.rsaSig), bad),
        ] };
      }`,
      { body: request },
    );
    assert.deepEqual(JSON.parse(response.text!), [true, false, true, false]);
  });

  test('service tables and readonly endpoints refuse writes', () => {
    assert.throws(() => run(`export function run() { covenant.kv['public:svc.gov.users.certs'].set(covenant.strToBuf('a'), covenant.strToBuf('b')); }`), /service table/);
    assert.throws(() => run(`export function run() { covenant.kv['svc.internal.ledger_secrets'].get(covenant.strToBuf('a')); }`), /private to the service/);
    assert.throws(() => run(`export function run() { covenant.kv['mine'].set(covenant.strToBuf('a'), covenant.strToBuf('b')); }`, { readonly: true }), /readonly endpoint/);
    assert.throws(() => run(`export function run() { covenant.kv['mine'].set('a', 'b'); }`), /must be an ArrayBuffer/);
  });

  test('a promise of an earlier request settling during a later one neither answers nor takes its writes', () => {
    const bundle = parseBundle(
      bundleOf(
        `let resolveA;
        export function a() { return new Promise((resolve) => { resolveA = resolve; }); }
        export async function b() {
          covenant.kv['m'].set(covenant.strToBuf('k'), covenant.strToBuf('b'));
          resolveA({ body: 'from a' });
          return { body: 'from b' };
        }`,
        { '/a': { post: endpoint('a') }, '/b': { post: endpoint('b') } },
      ),
    );
    const installed = {};
    const store = new Store();
    const call = (fn: string) => {
      const tx = store.beginTx();
      const scope: RequestScope = { reader: tx, tx, commitTxId: () => '2.7', randomBytes: (n) => new Uint8Array(n), nowMs: () => 0, applyWrites: false, claimsDigest: undefined };
      const response = engine.withInterpreter(installed, bundle, DEFAULT_RUNTIME_OPTIONS, scope, (i) => i.call('app.js', fn, { fields: () => '{}', body: new Uint8Array(), seed: 1, writable: true }));
      return { response, tx };
    };
    assert.throws(() => call('a'), (e) => e instanceof ScriptFailure && e.kind === 'InvalidResponse');
    const { response, tx } = call('b');
    assert.equal(response.text, 'from b');
    assert.equal(Buffer.from(tx.map('m', stringKeyCodec, bytesCodec).get('k') as Uint8Array).toString(), 'b');
  });

  test('hostile handlers are stopped at their limits', async () => {
    const limits: RuntimeOptions = { heapBytesMax: 16 * 1024 * 1024, stackBytesMax: 256 * 1024, executionTimeMsMax: 50 };
    const kind = async (source: string) => {
      // After a limit the engine runs on its spare instance while it loads the next one.
      await engine.ready();
      try {
        run(source, { options: limits });
      } catch (e) {
        assert.ok(e instanceof ScriptFailure, String(e));
        return e.kind;
      }
      return 'none';
    };
    assert.equal(await kind('export function run() { for (;;) {} }'), 'Timeout');
    assert.equal(await kind('export function run() { return { body: new ArrayBuffer(1024 * 1024 * 1024).byteLength } }'), 'OutOfMemory');
    assert.equal(await kind('export function run() { const a = []; for (;;) a.push(new ArrayBuffer(1024 * 1024)); }'), 'OutOfMemory');
    assert.equal(await kind('function f(n) { return f(n + 1) + 1 } export function run() { return f(0) }'), 'StackOverflow');
    assert.equal(await kind('export function run() { throw new Error("boom") }'), 'Exception');
    assert.equal(await kind('export function run() { return { statusCode: "two hundred" } }'), 'InvalidResponse');
    // One-step allocations far past the heap (V8 aborts the whole process on these: the reason
    // applications stay in this engine, docs/performance.md) fail the request, not the node.
    for (const source of [
      'export function run() { return { body: new Array(5e7).fill(0).length } }',
      'export function run() { return { body: Array.from({ length: 1e8 }, () => 0).length } }',
      'export function run() { return { body: "x".repeat(5e8).split("").length } }',
    ]) {
      assert.ok(['OutOfMemory', 'Timeout'].includes(await kind(source)), source);
    }
    // The engine still works after all of that.
    await engine.ready();
    assert.equal(run('export function run() { return { body: "fine" } }').response.text, 'fine');
  });
});
