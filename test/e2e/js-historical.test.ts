/**
 * End to end: historical endpoints and indexing strategies of an application (docs/apps.md), on
 * real node processes. A test model records every write the test makes (its seqno and the value it
 * left); historical reads must answer exactly the state the model says a past transaction left
 * (202 until the node has read the entries), and the app's seqnos_by_key index every seqno that
 * wrote a key — before and after a snapshot and a restart, and on a node that joined from the
 * snapshot. A flood of historical requests for distinct old transactions leaves normal writes
 * answered and the node's memory bounded.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { readBundleDirectory } from '../../src/apps/js/bundle-files.js';
import { deployApp } from '../../src/cli/app.js';
import { isChunkFileName, parseChunkName, parseSnapshotFileName } from '../../src/ledger/index.js';
import { verifyReceipt, type Receipt } from '../../src/merkle/index.js';
import { joinOptionsOf, memberConnectionOf, removeDir, restartNode, startJoiningNode, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { startNetwork, until, waitCommitted, type TestNetwork } from '../../src/testing/network.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const FIXTURE = join(ROOT, 'test', 'e2e', 'fixtures', 'js-history');
const CONFIG = { ledger_signatures: { tx_count: 10, delay: '20ms' }, historical_cache: { max_entries: 64 } };
const KEYS = ['a', 'b', 'c', 'd'];

interface Write {
  readonly key: string;
  readonly txId: string;
  readonly seqno: number;
  readonly value: unknown;
}

const seqnoOf = (txId: string) => Number(txId.split('.')[1]);

/** What the test wrote, in order. */
class Model {
  readonly writes: Write[] = [];
  /** The value of `key` right after `seqno` (null: absent). */
  stateAt(key: string, seqno: number): unknown {
    let value: unknown = null;
    for (const w of this.writes) if (w.key === key && w.seqno <= seqno) value = w.value;
    return value;
  }
  trail(key: string, from: number, to: number) {
    return this.writes.filter((w) => w.key === key && w.seqno >= from && w.seqno <= to).map((w) => ({ seqno: w.seqno, transactionId: w.txId, value: w.value }));
  }
}

async function writeSome(node: StartedNode, model: Model, count: number, tag: string): Promise<void> {
  for (let i = 0; i < count; i++) {
    const key = KEYS[(i * 3 + tag.length) % KEYS.length]!;
    const remove = i % 7 === 6;
    const answer = remove
      ? await node.client.request('DELETE', `/app/records/${key}`, { identity: node.user })
      : await node.client.request('PUT', `/app/records/${key}`, { identity: node.user, body: { tag, i } });
    assert.equal(answer.status, 200, answer.text);
    const txId = answer.headers['x-covenant-transaction-id'] as string;
    model.writes.push({ key, txId, seqno: seqnoOf(txId), value: remove ? null : { tag, i } });
  }
  await waitCommitted(node, model.writes.at(-1)!.txId);
}

/** GET a historical endpoint until it stops answering 202; returns the answer and whether it was 202 first. */
async function historical(node: StartedNode, path: string, txId: string) {
  let pendingFirst: boolean | undefined;
  const answer = await until(`${path} at ${txId}`, async () => {
    const a = await node.client.request('GET', path, { identity: node.user, headers: { 'x-covenant-transaction-id': txId } });
    pendingFirst ??= a.status === 202;
    if (a.status === 202) {
      assert.equal(a.headers['retry-after'], '1');
      return undefined;
    }
    return a;
  }, 30_000);
  return { answer, pendingFirst: pendingFirst === true };
}

async function checkReads(node: StartedNode, model: Model, writes: readonly Write[]): Promise<number> {
  let pendingFirst = 0;
  for (const w of writes) {
    // Another key than the one the transaction wrote: answered through the index.
    const other = KEYS[(KEYS.indexOf(w.key) + 1) % KEYS.length]!;
    for (const key of [w.key, other]) {
      const { answer, pendingFirst: pending } = await historical(node, `/app/records/${key}/at`, w.txId);
      if (pending) pendingFirst++;
      assert.equal(answer.status, 200, answer.text);
      assert.equal(answer.body.transactionId, w.txId);
      assert.deepEqual(answer.body.value, model.stateAt(key, w.seqno), `${key} right after ${w.txId}`);
      assert.equal(answer.body.has, model.stateAt(key, w.seqno) !== null);
      const verified = verifyReceipt(answer.body.receipt as Receipt, node.serviceCertificatePem);
      assert.equal(verified.seqno, w.seqno);
    }
  }
  return pendingFirst;
}

async function checkTrails(node: StartedNode, model: Model): Promise<void> {
  const last = model.writes.at(-1)!;
  for (const key of KEYS) {
    const { answer } = await historical(node, `/app/records/${key}/trail?from=1&to=${last.seqno}`, last.txId);
    assert.equal(answer.status, 200, answer.text);
    assert.deepEqual(answer.body, model.trail(key, 1, last.seqno), `the trail of ${key}`);
  }
  const middle = model.writes[Math.floor(model.writes.length / 2)]!;
  const { answer } = await historical(node, `/app/records/${middle.key}/trail?from=${middle.seqno}&to=${last.seqno}`, last.txId);
  assert.deepEqual(answer.body, model.trail(middle.key, middle.seqno, last.seqno));
}

const snapshotsOf = (node: StartedNode) =>
  existsSync(join(node.dir, 'snapshots')) ? readdirSync(join(node.dir, 'snapshots')).filter((f) => parseSnapshotFileName(f)?.committed === true) : [];

describe('historical endpoints and indexes of an application', () => {
  let node: StartedNode;
  const model = new Model();
  const extraDirs: string[] = [];

  before(async () => {
    node = await startNode({ configPatch: CONFIG });
    await deployApp(readBundleDirectory(FIXTURE), [memberConnectionOf(node)], () => undefined);
    await writeSome(node, model, 30, 'first');
  });

  after(async () => {
    await node?.stop();
    removeDir(node.dir);
    for (const dir of extraDirs) removeDir(dir);
  });

  test('a historical endpoint reads the state a past transaction left, with its receipt; 202 until the node read it', async () => {
    const pendingFirst = await checkReads(node, model, model.writes);
    assert.ok(pendingFirst >= 1, 'an entry not read yet is answered 202 first');

    const last = model.writes.at(-1)!;
    const view = Number(last.txId.split('.')[0]);
    const unknown = await node.client.request('GET', '/app/records/a/at', { identity: node.user, headers: { 'x-covenant-transaction-id': `${view}.${last.seqno + 1000}` } });
    assert.equal(unknown.status, 202, 'a transaction not committed yet');
    if (view > 1) {
      const invalid = await node.client.request('GET', '/app/records/a/at', { identity: node.user, headers: { 'x-covenant-transaction-id': `${view - 1}.${last.seqno}` } });
      assert.equal(invalid.status, 404, invalid.text);
      assert.equal(invalid.body.error.code, 'TransactionInvalid');
    }
    const missing = await node.client.request('GET', '/app/records/a/at', { identity: node.user });
    assert.equal(missing.body.error.code, 'MissingRequiredHeader');

    // An unindexed map: the keys the transaction wrote, and a clear refusal for the others.
    const w = model.writes.find((x) => x.value !== null)!;
    assert.deepEqual((await historical(node, `/app/notes/${w.key}/at`, w.txId)).answer.body, { note: 'written' });
    const other = KEYS.find((k) => k !== w.key)!;
    const refused = (await historical(node, `/app/notes/${other}/at`, w.txId)).answer;
    assert.equal(refused.status, 400, refused.text);
    assert.equal(refused.body.error.code, 'HistoricalMapNotIndexed');

    const cache = (await node.client.request('GET', '/node/historical_cache')).body;
    assert.ok(cache.entry_count >= 1 && cache.entry_count <= 64, JSON.stringify(cache));
    assert.ok(cache.estimated_size_bytes > 0);
    assert.ok(cache.fetched_total >= cache.entry_count);
  });

  test('the index holds every seqno that wrote each key, and reports its progress', async () => {
    await checkTrails(node, model);
    const strategies = (await node.client.request('GET', '/node/index/strategies')).body.strategies;
    assert.equal(strategies.length, 1);
    assert.equal(strategies[0].name, 'recordsByKey');
    assert.equal(strategies[0].map, 'records');
    assert.equal(strategies[0].first_seqno, 1);
    assert.ok(strategies[0].indexed_up_to >= model.writes.at(-1)!.seqno);
    assert.equal(strategies[0].keys, KEYS.length);
    assert.equal(strategies[0].seqnos, model.writes.length);
  });

  test('a flood of historical requests for distinct old transactions: writes keep being answered, the cache and memory stay bounded', async () => {
    const rssKb = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${node.process.pid}/status`, 'utf8'))![1]);
    const rssBefore = rssKb();
    const old = model.writes.map((w) => w.txId);
    const written = model.writes.length;
    let stop = false;
    let answered = 0;
    let pending = 0;
    const flooders = Array.from({ length: 8 }, async (_x, f) => {
      for (let i = f; !stop; i += 8) {
        const txId = old[i % old.length]!;
        const a = await node.client.request('GET', `/app/records/${KEYS[i % KEYS.length]}/at`, { identity: node.user, headers: { 'x-covenant-transaction-id': txId } });
        assert.ok(a.status === 200 || a.status === 202 || (a.status === 503 && a.body.error.code === 'HistoricalFetchesBusy'), a.text);
        if (a.status === 200) answered++;
        else pending++;
      }
    });
    await writeSome(node, model, 40, 'during the flood');
    stop = true;
    await Promise.all(flooders);
    assert.equal(model.writes.length, written + 40, 'every write during the flood was answered');
    assert.ok(answered > 0, `historical reads answered (${answered} answered, ${pending} pending)`);
    const cache = (await node.client.request('GET', '/node/historical_cache')).body;
    assert.ok(cache.entry_count <= 64, JSON.stringify(cache));
    assert.ok(cache.queued_fetches <= 1024);
    assert.ok(rssKb() - rssBefore < 256 * 1024, `RSS grew by ${rssKb() - rssBefore} KiB`);
  });
  test('after a snapshot and a restart: the same past states and trails, rebuilt from the ledger', async () => {
    const before = new Set(snapshotsOf(node));
    assert.equal((await node.client.request('POST', '/node/snapshot:create')).status, 204);
    const snapshot = await until('a committed snapshot', async () => snapshotsOf(node).find((f) => !before.has(f)), 30_000);
    await writeSome(node, model, 12, 'second');
    assert.ok(model.writes[0]!.seqno < parseSnapshotFileName(snapshot)!.seqno && parseSnapshotFileName(snapshot)!.seqno < model.writes.at(-1)!.seqno);
    await node.stop();
    node = await restartNode(node);
    await checkTrails(node, model);
    const sample = model.writes.filter((_w, i) => i % 5 === 0);
    await checkReads(node, model, sample);
  });

  test('a node joined from the snapshot indexes from it on; with the older chunks in a read-only ledger directory, after a restart, every write', async () => {
    const snapshot = snapshotsOf(node).sort((x, y) => parseSnapshotFileName(y)!.seqno - parseSnapshotFileName(x)!.seqno)[0]!;
    const snapshotSeqno = parseSnapshotFileName(snapshot)!.seqno;
    const joinerDir = `${node.dir}-joiner`;
    extraDirs.push(joinerDir);
    mkdirSync(join(joinerDir, 'snapshots'), { recursive: true });
    mkdirSync(join(joinerDir, 'old-ledger'), { recursive: true });
    copyFileSync(join(node.dir, 'snapshots', snapshot), join(joinerDir, 'snapshots', snapshot));
    let joiner = await startJoiningNode({ ...joinOptionsOf(node), dir: joinerDir, configPatch: { ...CONFIG, ledger: { read_only_directories: ['old-ledger'] } } });
    try {
      assert.equal((await joiner.client.request('GET', '/node/state')).body.startup_seqno, snapshotSeqno);
      await writeSome(node, model, 5, 'third');
      await waitCommitted(joiner, model.writes.at(-1)!.txId);
      const last = model.writes.at(-1)!;
      // Its files start after the snapshot: the index covers from there, and says so.
      const strategy = await until('the joiner\'s index', async () => {
        const s = (await joiner.client.request('GET', '/node/index/strategies')).body.strategies[0];
        return s?.indexed_up_to >= last.seqno ? s : undefined;
      });
      assert.ok(strategy.first_seqno > snapshotSeqno, JSON.stringify(strategy));
      const early = (await historical(joiner, '/app/records/a/trail?from=1', last.txId)).answer;
      assert.equal(early.status, 404, early.text);
      assert.equal(early.body.error.code, 'HistoricalDataUnavailable');
      const { answer } = await historical(joiner, `/app/records/a/trail?from=${strategy.first_seqno}&to=${last.seqno}`, last.txId);
      assert.deepEqual(answer.body, model.trail('a', strategy.first_seqno, last.seqno));

      // The older committed chunks, in its read-only ledger directory: rebuilt at restart, the index covers everything.
      await joiner.stop();
      const ledgerDir = join(node.dir, 'ledger');
      for (const f of readdirSync(ledgerDir)) {
        if (!isChunkFileName(f)) continue;
        const name = parseChunkName(f);
        if (name.committed && name.last !== undefined && name.last <= snapshotSeqno) copyFileSync(join(ledgerDir, f), join(joinerDir, 'old-ledger', f));
      }
      joiner = await restartNode(joiner);
      await until('the joiner\'s index to cover every write', async () => {
        const s = (await joiner.client.request('GET', '/node/index/strategies')).body.strategies[0];
        return s?.indexed_up_to >= last.seqno ? s : undefined;
      });
      await checkTrails(joiner, model);
      await checkReads(joiner, model, model.writes.filter((_w, i) => i % 6 === 0));
    } finally {
      await joiner.stop();
    }
  });

});

describe('a historical endpoint on a backup', () => {
  let network: TestNetwork;

  before(async () => {
    network = await startNetwork(3, CONFIG);
  });

  after(async () => {
    await network?.stopAll();
  });

  test('a backup answers from its own ledger files and index, as the primary would', async () => {
    const primary = await network.primary();
    await deployApp(readBundleDirectory(FIXTURE), [memberConnectionOf(primary)], () => undefined);
    const model = new Model();
    await writeSome(primary, model, 12, 'replicated');
    const backup = network.nodes.find((n) => n !== primary)!;
    await waitCommitted(backup, model.writes.at(-1)!.txId);
    const executions = async () => (await backup.client.request('GET', '/node/js_metrics')).body.executions as number;
    const before = await executions();
    await checkReads(backup, model, model.writes.filter((_w, i) => i % 3 === 0));
    await checkTrails(backup, model);
    assert.ok((await executions()) > before, 'the backup ran the historical handlers itself');
  });
});
