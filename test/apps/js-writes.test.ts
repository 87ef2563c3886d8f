/**
 * A handler's writes are kept in the sandbox and handed to the host once, when it returns (the
 * prelude's pending writes): what it reads, counts and visits must be the map as its writes left it,
 * exactly as if every write had gone to the store at once; what it wrote must reach the transaction
 * only from a handler that returned, never leak into the next request, and a buffer past its bound
 * is handed over early without changing anything the handler sees.
 */
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Store, stringKeyCodec, bytesCodec, type Tx } from '../../src/kv/index.js';
import { parseBundle, type AppBundle } from '../../src/apps/js/bundle.js';
import { AppEngine, DEFAULT_RUNTIME_OPTIONS } from '../../src/apps/js/engine.js';
import { ScriptFailure } from '../../src/apps/js/interpreter.js';
import type { RequestScope } from '../../src/apps/js/host.js';
import { WRITES_BUFFERED_BYTES_MAX } from '../../src/apps/js/limits.js';

/** A bundle of handlers (name → source of a function of the request), each a readwrite POST endpoint. */
function bundleOf(handlers: Record<string, string>, prologue = ''): AppBundle {
  const endpoints = Object.fromEntries(Object.keys(handlers).map((name) => [`/${name}`, { post: { js_module: 'app.js', js_function: name, authn_policies: [], mode: 'readwrite' } }]));
  const source = prologue + Object.entries(handlers).map(([name, body]) => `export function ${name}(request) {\n${body}\n}`).join('\n');
  return parseBundle({ metadata: { endpoints }, modules: [{ name: 'app.js', module: source }] });
}

const text = (value: Uint8Array | undefined) => (value === undefined ? undefined : Buffer.from(value).toString());

describe('pending writes in the sandbox', () => {
  let engine: AppEngine;
  before(async () => {
    engine = await AppEngine.load();
  });

  /** Runs handler `name` of `bundle` (one interpreter per `source`) in a new transaction of `store`. */
  const call = (store: Store, bundle: AppBundle, source: object, name: string, fields = '{"method":"POST"}', tx = store.beginTx()) => {
    const scope: RequestScope = { reader: tx, tx, commitTxId: () => '2.7', randomBytes: (n) => new Uint8Array(n), nowMs: () => 0, applyWrites: false, claimsDigest: undefined };
    const response = engine.withInterpreter(source, bundle, DEFAULT_RUNTIME_OPTIONS, scope, (interpreter) =>
      interpreter.call('app.js', name, { fields: () => fields, body: Buffer.from(''), seed: 1, writable: true }),
    );
    return { response, tx, body: response.text === undefined ? undefined : (JSON.parse(response.text) as Record<string, unknown>) };
  };
  const records = (tx: Tx) => tx.map('records', stringKeyCodec, bytesCodec);
  /** A store whose map "records" holds a=1 and b=2, committed. */
  const seeded = () => {
    const store = new Store();
    const tx = store.beginTx();
    records(tx).put('a', Buffer.from('1'));
    records(tx).put('b', Buffer.from('2'));
    tx.apply();
    return store;
  };
  const PROLOGUE = `const s = covenant.strToBuf; const str = (b) => (b === undefined ? null : covenant.bufToStr(b)); const m = () => covenant.kv['records'];
  const all = () => { const seen = []; m().forEach((v, k) => seen.push(str(k) + '=' + str(v))); return seen.sort(); };\n`;

  test('a handler reads its own writes, and gets copies: neither its value nor what it read changes what is written', () => {
    const bundle = bundleOf(
      {
        run: `const value = new Uint8Array(s('x'));
        m().set(s('k'), value.buffer);
        value[0] = 0x79; // 'y', after the set: not what was written
        const read = m().get(s('k'));
        new Uint8Array(read)[0] = 0x7a; // 'z', in the copy read
        return { body: { get: str(m().get(s('k'))), has: m().has(s('k')), stored: str(m().get(s('a'))) } };`,
      },
      PROLOGUE,
    );
    const { body, tx } = call(seeded(), bundle, {}, 'run');
    assert.deepEqual(body, { get: 'x', has: true, stored: '1' });
    assert.equal(text(records(tx).get('k')), 'x');
  });

  test('delete then get, has and delete again; delete answers whether the key was there, in the store or written before', () => {
    const bundle = bundleOf(
      {
        run: `const out = {};
        out.deleteStored = m().delete(s('a'));
        out.getDeleted = str(m().get(s('a')));
        out.hasDeleted = m().has(s('a'));
        out.deleteAgain = m().delete(s('a'));
        out.deleteMissing = m().delete(s('nope'));
        m().set(s('n'), s('new'));
        out.deleteWritten = m().delete(s('n'));
        out.setAfterDelete = (m().set(s('a'), s('back')), str(m().get(s('a'))));
        return { body: out };`,
      },
      PROLOGUE,
    );
    const { body, tx } = call(seeded(), bundle, {}, 'run');
    assert.deepEqual(body, { deleteStored: true, getDeleted: null, hasDeleted: false, deleteAgain: false, deleteMissing: false, deleteWritten: true, setAfterDelete: 'back' });
    assert.equal(text(records(tx).get('a')), 'back');
    assert.equal(records(tx).has('n'), false);
    assert.equal(text(records(tx).get('b')), '2');
  });

  test('size and forEach see the stored entries with the request\'s writes over them', () => {
    const bundle = bundleOf(
      {
        run: `m().set(s('c'), s('3'));
        m().delete(s('a'));
        m().set(s('b'), s('20'));
        const first = { size: m().size, all: all() };
        m().set(s('d'), s('4'));
        return { body: { first, then: { size: m().size, all: all(), d: str(m().get(s('d'))) } } };`,
      },
      PROLOGUE,
    );
    const { body, tx } = call(seeded(), bundle, {}, 'run');
    assert.deepEqual(body, { first: { size: 2, all: ['b=20', 'c=3'] }, then: { size: 3, all: ['b=20', 'c=3', 'd=4'], d: '4' } });
    assert.deepEqual([...['a', 'b', 'c', 'd']].map((k) => text(records(tx).get(k))), [undefined, '20', '3', '4']);
  });

  test('clear then set: the map holds only what was set after the clear', () => {
    const bundle = bundleOf(
      {
        run: `m().set(s('c'), s('3'));
        m().clear();
        const afterClear = { size: m().size, a: str(m().get(s('a'))), c: m().has(s('c')) };
        m().set(s('d'), s('4'));
        return { body: { afterClear, size: m().size, all: all() } };`,
      },
      PROLOGUE,
    );
    const { body, tx } = call(seeded(), bundle, {}, 'run');
    assert.deepEqual(body, { afterClear: { size: 0, a: null, c: false }, size: 1, all: ['d=4'] });
    const left: string[] = [];
    records(tx).forEach((_v, k) => {
      left.push(k);
    });
    assert.deepEqual(left, ['d']);
  });

  test('writes of several maps and a bytes answer arrive together, each value exactly', () => {
    const bundle = bundleOf(
      {
        run: `m().set(s('k'), new Uint8Array([0, 1, 255]).buffer);
        covenant.kv['public:other'].set(new Uint8Array([0, 7]).buffer, s('p'));
        covenant.kv['public:other'].delete(s('gone'));
        return { body: new Uint8Array([9, 8, 7]).buffer };`,
      },
      PROLOGUE,
    );
    const { response, tx } = call(seeded(), bundle, {}, 'run');
    assert.equal(response.kind, 'bytes');
    assert.deepEqual([...response.bytes!], [9, 8, 7]);
    assert.deepEqual([...(records(tx).get('k') as Uint8Array)], [0, 1, 255]);
    assert.equal(text(tx.map('public:other', stringKeyCodec, bytesCodec).get('\u0000\u0007')), 'p');
  });

  test('past its bound the buffer is handed over early: everything written is read back and applied', () => {
    const VALUE_BYTES = 64 * 1024;
    const count = Math.ceil((1.5 * WRITES_BUFFERED_BYTES_MAX) / VALUE_BYTES);
    const bundle = bundleOf(
      {
        run: `const value = new Uint8Array(${VALUE_BYTES});
        for (let i = 0; i < ${count}; i++) { value[0] = i & 255; m().set(s('k' + i), value.buffer); }
        let same = 0;
        for (let i = 0; i < ${count}; i++) { if (new Uint8Array(m().get(s("k" + i)))[0] === (i & 255)) same++; }
        return { body: { same, size: m().size } };`,
        overflow: `const value = new Uint8Array(${VALUE_BYTES});
        for (let i = 0; i < ${count}; i++) m().set(s('k' + i), value.buffer);
        throw new Error('after writing');`,
      },
      PROLOGUE,
    );
    const { body, tx } = call(new Store(), bundle, {}, 'run');
    assert.deepEqual(body, { same: count, size: count });
    assert.equal((records(tx).get(`k${count - 1}`) as Uint8Array)[0], (count - 1) & 255);
    assert.equal(records(tx).size, count);
    // The transaction received writes before the handler failed: the buffer did not wait for its end
    // (the frontend drops such a transaction whole).
    const store = new Store();
    const failed = store.beginTx();
    assert.throws(() => call(store, bundle, {}, 'overflow', undefined, failed), /after writing/);
    assert.ok(records(failed).size > 0 && records(failed).size < count, `${records(failed).size} of ${count} handed over early`);
  });

  test('a handler that throws after writing leaves nothing pending for the next request', () => {
    const bundle = bundleOf(
      {
        fail: `m().set(s('k'), s('v')); throw new Error('after writing');`,
        read: `return { body: { k: str(m().get(s('k'))), size: m().size } };`,
      },
      PROLOGUE,
    );
    const store = new Store();
    const source = {};
    assert.throws(
      () => call(store, bundle, source, 'fail'),
      (e: unknown) => e instanceof ScriptFailure && /after writing/.test(e.message),
    );
    const { body, tx } = call(store, bundle, source, 'read');
    assert.deepEqual(body, { k: null, size: 0 });
    assert.equal(records(tx).size, 0);
  });

  test('a refused write throws where it is made, and the handler can catch it', () => {
    const bundle = bundleOf(
      {
        run: `try { covenant.kv['public:svc.gov.users.certs'].set(s('a'), s('b')); } catch (e) { return { body: { refused: e.message } }; }
        return { body: { refused: false } };`,
      },
      PROLOGUE,
    );
    const { body, tx } = call(new Store(), bundle, {}, 'run');
    assert.deepEqual(body, { refused: 'map "public:svc.gov.users.certs" is a service table: applications cannot write it' });
    assert.equal(tx.map('public:svc.gov.users.certs', stringKeyCodec, bytesCodec).size, 0);
  });

  test('a module\'s top level cannot write: it runs once, with whichever request first loads it', () => {
    const bundle = bundleOf({ run: `return { body: true };` }, `covenant.kv['records'].set(covenant.strToBuf('k'), covenant.strToBuf('v'));\n`);
    const store = new Store();
    const tx = store.beginTx();
    assert.throws(() => call(store, bundle, {}, 'run', undefined, tx), /covenant\.kv is written only while a request is handled/);
    assert.equal(records(tx).size, 0);
  });

  test('a request kept past its handler cannot read what it had not read', () => {
    const bundle = bundleOf(
      {
        keep: `kept = request; return { body: { method: request.method } };`,
        keepUnread: `unread = request; return { body: true };`,
        later: `const out = { method: kept.method };
        try { unread.path; out.unread = 'read'; } catch (e) { out.unread = e.message; }
        try { unread.body.arrayBuffer(); out.bytes = 'read'; } catch (e) { out.bytes = e.message; }
        return { body: out };`,
      },
      `let kept; let unread;\n${PROLOGUE}`,
    );
    const store = new Store();
    const source = {};
    assert.deepEqual(call(store, bundle, source, 'keep').body, { method: 'POST' });
    call(store, bundle, source, 'keepUnread');
    const { body } = call(store, bundle, source, 'later', '{"method":"GET","path":"/other"}');
    assert.deepEqual(body, {
      method: 'POST',
      unread: "the request's fields can be read only while its handler runs",
      bytes: "the request's body can be read only while its handler runs",
    });
  });
});
