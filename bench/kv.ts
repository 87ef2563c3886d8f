// KV throughput: the primary's per-transaction work (execute, commit, encode the write set,
// encrypt the private part) and a backup's (decrypt, decode, apply). Prints one JSON line per
// measurement. Run: node --import tsx bench/kv.ts
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { bytesCodec, encodeWriteSet, LedgerEncryptor, Store, uintKeyCodec } from '../src/kv/index.js';

const KEYS = 1_000;
const VALUE_BYTES = 200;
const TXS = Number(process.env.KV_BENCH_TXS ?? 100_000);
const VIEW = 2;

const encryptor = new LedgerEncryptor(randomBytes(32));
const value = randomBytes(VALUE_BYTES);

function report(name: string, count: number, elapsedMs: number): void {
  console.log(JSON.stringify({ bench: `kv.${name}`, txs: count, txPerSecond: Math.round((count / elapsedMs) * 1000), usPerTx: +((elapsedMs * 1000) / count).toFixed(2) }));
}

function seeded(): Store {
  const store = new Store({ uncommittedVersionsMax: TXS * 2 });
  const tx = store.beginTx();
  const records = tx.map('records', uintKeyCodec, bytesCodec);
  for (let k = 0; k < KEYS; k++) records.put(k, value);
  tx.apply();
  store.compact(store.version);
  return store;
}

type Entry = { version: number; publicBytes: Uint8Array; sealed: Uint8Array };

type Stage = 'commit' | 'commit+encode' | 'commit+encode+encrypt';

function primary(count: number, stage: Stage, keep?: Entry[]): void {
  const store = seeded();
  const start = performance.now();
  for (let i = 0; i < count; i++) {
    const tx = store.beginTx();
    tx.map('records', uintKeyCodec, bytesCodec).put(i % KEYS, value);
    const { version, writeSet } = tx.apply()!;
    if (stage !== 'commit') {
      const { publicBytes, privateBytes } = encodeWriteSet(writeSet);
      if (stage === 'commit+encode+encrypt') {
        const sealed = encryptor.encryptPrivate(VIEW, version, privateBytes);
        keep?.push({ version, publicBytes, sealed });
      }
    }
    // Consensus commit runs behind the primary; compacting keeps memory flat as on a node.
    if (version % 5000 === 0) store.compact(version - 1000);
  }
  if (keep === undefined) report(stage, count, performance.now() - start);
}

function backup(entries: Entry[]): void {
  const store = seeded();
  const start = performance.now();
  for (const { version, publicBytes, sealed } of entries) {
    store.applyWriteSet(version, publicBytes, encryptor.decryptPrivate(VIEW, version, sealed));
    if (version % 5000 === 0) store.compact(version - 1000);
  }
  report('decrypt+applyWriteSet', entries.length, performance.now() - start);
}

function applyOnly(entries: { version: number; publicBytes: Uint8Array; privateBytes: Uint8Array }[]): void {
  const store = seeded();
  const start = performance.now();
  for (const { version, publicBytes, privateBytes } of entries) {
    store.applyWriteSet(version, publicBytes, privateBytes);
    if (version % 5000 === 0) store.compact(version - 1000);
  }
  report('applyWriteSet', entries.length, performance.now() - start);
}

// Warm up the JIT, then measure. The first line of each kind includes warm-up and is not a result.
primary(20_000, 'commit+encode+encrypt');
primary(TXS, 'commit');
primary(TXS, 'commit+encode');
primary(TXS, 'commit+encode+encrypt');
const entries: Entry[] = [];
primary(TXS, 'commit+encode+encrypt', entries);
backup(entries.slice(0, 20_000));
backup(entries);
const plain = entries.map((e) => ({ version: e.version, publicBytes: e.publicBytes, privateBytes: encryptor.decryptPrivate(VIEW, e.version, e.sealed) }));
applyOnly(plain);
