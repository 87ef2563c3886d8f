// Transactions against a sequential model: random sequences of transactions (committed, dropped,
// interleaved), rollbacks and compactions on a primary, replicated as encoded write sets to a
// backup, must leave both stores equal to a plain Map model at every retained version, whatever
// the interval at which the stores keep whole states (versions between are rebuilt from writes).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { InvariantError, toHex } from '../../src/base/index.js';
import { encodeWriteSet, KvErrorCode, LedgerEncryptor, stringCodec, Store, type StoreView } from '../../src/kv/index.js';
import { secret } from './helpers.js';

type ModelState = Map<string, Map<string, string>>;

const MAPS = ['public:a', 'public:b', 'priv', 'x'];
const KEYS = ['k', 'k2', '', 'é', '\u{1f600}', '\uffff'];

type Op =
  | { op: 'put'; map: string; key: string; value: string }
  | { op: 'remove'; map: string; key: string }
  | { op: 'get'; map: string; key: string }
  | { op: 'size'; map: string }
  | { op: 'list'; map: string };

type Command =
  | { kind: 'tx'; ops: Op[]; end: 'commit' | 'drop' | 'throw' }
  | { kind: 'interleaved'; first: Op[]; second: Op[] }
  | { kind: 'rollback'; back: number }
  | { kind: 'compact'; forward: number }
  | { kind: 'readAt'; back: number };

const mapArb = fc.constantFrom(...MAPS);
const keyArb = fc.constantFrom(...KEYS);
const opArb: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ op: fc.constant('put' as const), map: mapArb, key: keyArb, value: fc.string({ maxLength: 4 }) }) },
  { weight: 2, arbitrary: fc.record({ op: fc.constant('remove' as const), map: mapArb, key: keyArb }) },
  { weight: 3, arbitrary: fc.record({ op: fc.constant('get' as const), map: mapArb, key: keyArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('size' as const), map: mapArb }) },
  { weight: 1, arbitrary: fc.record({ op: fc.constant('list' as const), map: mapArb }) },
);
const commandArb: fc.Arbitrary<Command> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record({ kind: fc.constant('tx' as const), ops: fc.array(opArb, { maxLength: 6 }), end: fc.constantFrom('commit' as const, 'commit' as const, 'drop' as const, 'throw' as const) }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('interleaved' as const), first: fc.array(opArb, { maxLength: 3 }), second: fc.array(opArb, { maxLength: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('rollback' as const), back: fc.nat(8) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('compact' as const), forward: fc.nat(8) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('readAt' as const), back: fc.nat(12) }) },
);

function cloneState(state: ModelState): ModelState {
  return new Map([...state].map(([name, m]) => [name, new Map(m)]));
}

function modelDump(state: ModelState): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const name of [...state.keys()].sort()) {
    const m = state.get(name)!;
    if (m.size === 0) continue;
    const entries: Record<string, string> = {};
    for (const key of [...m.keys()].sort()) entries[key] = toHex(Buffer.from(m.get(key)!));
    out[name] = entries;
  }
  return out;
}

function storeDump(view: StoreView): Record<string, Record<string, string>> {
  const out: Record<string, Record<string, string>> = {};
  for (const name of view.mapNames()) {
    const entries: Record<string, string> = {};
    view.map(name, stringCodec).forEach((value, key) => {
      entries[key] = toHex(Buffer.from(value));
    });
    out[name] = entries;
  }
  return out;
}

/** Runs ops on a Tx and on a model copy side by side, checking every read. Returns whether it wrote. */
function runOps(tx: ReturnType<Store['beginTx']>, model: ModelState, ops: Op[]): boolean {
  let wrote = false;
  for (const o of ops) {
    const handle = tx.map(o.map, stringCodec);
    const m = model.get(o.map) ?? new Map<string, string>();
    model.set(o.map, m);
    switch (o.op) {
      case 'put':
        handle.put(o.key, o.value);
        m.set(o.key, o.value);
        wrote = true;
        break;
      case 'remove':
        assert.equal(handle.remove(o.key), m.has(o.key));
        m.delete(o.key);
        wrote = true;
        break;
      case 'get':
        assert.equal(handle.get(o.key), m.get(o.key));
        assert.equal(handle.has(o.key), m.has(o.key));
        break;
      case 'size':
        assert.equal(handle.size, m.size);
        break;
      case 'list': {
        const keys: string[] = [];
        handle.forEach((value, key) => {
          assert.equal(value, m.get(key));
          keys.push(key);
        });
        assert.deepEqual(keys, [...m.keys()].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))));
        break;
      }
    }
  }
  return wrote;
}

test('transactions are serialisable: primary and backup match a sequential model', () => {
  const encryptor = new LedgerEncryptor(secret(3));
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 9 }), fc.array(commandArb, { maxLength: 60 }), (checkpointInterval, commands) => {
      const primary = new Store({ checkpointInterval });
      const backup = new Store({ checkpointInterval: checkpointInterval + 1 });
      // Like a backup under load, read only at the end: its state folds many versions at once.
      const quiet = new Store({ checkpointInterval: checkpointInterval + 4 });
      // history[v] is the model state at version v; committed is the model's committed version.
      const history: ModelState[] = [new Map()];
      let committed = 0;
      const version = () => history.length - 1;
      const replicate = (v: number, writeSet: Parameters<typeof encodeWriteSet>[0]) => {
        const { publicBytes, privateBytes } = encodeWriteSet(writeSet);
        // The private part travels encrypted, as in the ledger.
        const sealed = encryptor.encryptPrivate(1, v, privateBytes);
        backup.applyWriteSet(v, publicBytes, encryptor.decryptPrivate(1, v, sealed));
        quiet.applyWriteSet(v, publicBytes, encryptor.decryptPrivate(1, v, sealed));
      };
      for (const command of commands) {
        switch (command.kind) {
          case 'tx': {
            const tx = primary.beginTx();
            const model = cloneState(history[version()]!);
            const wrote = runOps(tx, model, command.ops);
            if (command.end === 'throw') {
              // A handler that throws after writing: its Tx is dropped with it.
              assert.throws(() => {
                throw new Error('handler failed');
              });
            } else if (command.end === 'commit') {
              const result = tx.apply();
              if (!wrote) {
                assert.equal(result, undefined);
              } else {
                assert.ok(result);
                assert.equal(result.version, version() + 1);
                history.push(model);
                replicate(result.version, result.writeSet);
              }
            }
            break;
          }
          case 'interleaved': {
            const first = primary.beginTx();
            const firstWrote = runOps(first, cloneState(history[version()]!), command.first);
            const second = primary.beginTx();
            const model = cloneState(history[version()]!);
            const secondWrote = runOps(second, model, command.second);
            const result = second.apply();
            if (secondWrote) {
              history.push(model);
              replicate(result!.version, result!.writeSet);
            }
            if (firstWrote && secondWrote) assert.throws(() => first.apply(), { code: KvErrorCode.TransactionConflict });
            else if (!firstWrote) assert.equal(first.apply(), undefined);
            break;
          }
          case 'rollback': {
            const target = Math.max(committed, version() - command.back);
            primary.rollback(target);
            backup.rollback(target);
            quiet.rollback(target);
            history.length = target + 1;
            break;
          }
          case 'compact': {
            committed = Math.min(version(), committed + command.forward);
            primary.compact(committed);
            backup.compact(committed);
            quiet.compact(committed);
            if (committed > 0) assert.throws(() => primary.rollback(committed - 1), InvariantError);
            break;
          }
          case 'readAt': {
            const at = Math.max(committed, version() - command.back);
            assert.deepEqual(storeDump(primary.readAt(at)), modelDump(history[at]!));
            break;
          }
        }
        assert.equal(primary.version, version());
        assert.equal(backup.version, version());
        const expected = modelDump(history[version()]!);
        assert.deepEqual(storeDump(primary.current()), expected);
        assert.deepEqual(storeDump(backup.current()), expected);
      }
      assert.equal(quiet.version, version());
      assert.deepEqual(storeDump(quiet.current()), modelDump(history[version()]!));
      // A snapshot of the final state restores the same state.
      const restored = Store.fromSnapshot(primary.serializeSnapshot(encryptor, 1), encryptor);
      assert.equal(restored.version, version());
      assert.deepEqual(storeDump(restored.current()), modelDump(history[version()]!));
    }),
    { numRuns: 300 },
  );
});

test('every retained version reads as the model, across checkpoints, rollbacks and compactions', () => {
  type Step = { kind: 'write'; writes: { map: string; key: string; value: string | null }[] } | { kind: 'rollback'; back: number } | { kind: 'compact'; forward: number };
  const writeArb = fc.record({ map: mapArb, key: keyArb, value: fc.option(fc.constantFrom('v', 'w', ''), { freq: 3 }) });
  const stepArb: fc.Arbitrary<Step> = fc.oneof(
    { weight: 12, arbitrary: fc.record({ kind: fc.constant('write' as const), writes: fc.array(writeArb, { minLength: 1, maxLength: 4 }) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('rollback' as const), back: fc.nat(20) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant('compact' as const), forward: fc.nat(20) }) },
  );
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 12 }), fc.array(stepArb, { maxLength: 150 }), (checkpointInterval, steps) => {
      const store = new Store({ checkpointInterval });
      const history: ModelState[] = [new Map()];
      let committed = 0;
      for (const step of steps) {
        const version = history.length - 1;
        if (step.kind === 'write') {
          const tx = store.beginTx();
          const model = cloneState(history[version]!);
          for (const { map, key, value } of step.writes) {
            const m = model.get(map) ?? new Map<string, string>();
            model.set(map, m);
            if (value === null) {
              tx.map(map, stringCodec).remove(key);
              m.delete(key);
            } else {
              tx.map(map, stringCodec).put(key, value);
              m.set(key, value);
            }
          }
          assert.equal(tx.apply()!.version, version + 1);
          history.push(model);
        } else if (step.kind === 'rollback') {
          const target = Math.max(committed, version - step.back);
          store.rollback(target);
          history.length = target + 1;
          assert.deepEqual(storeDump(store.current()), modelDump(history[target]!));
        } else {
          committed = Math.min(version, committed + step.forward);
          store.compact(committed);
        }
      }
      for (let v = committed; v < history.length; v++) assert.deepEqual(storeDump(store.readAt(v)), modelDump(history[v]!), `version ${v}`);
    }),
    { numRuns: 200 },
  );
});
