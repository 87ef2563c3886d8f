/**
 * The primary's token key refresh with a manual clock and a fake fetcher: the first round at
 * start, keys written once (an unchanged set writes nothing), rotation removes vanished keys and
 * keeps other issuers' entries, the retry schedule after failures, oversized or bad answers write
 * nothing, a round of an earlier primacy writes nothing, and a change of issuers refreshes at once;
 * each issuer on its own schedule with its own deadline, and the bound on an issuer's keys.
 */
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import { MemoryLogger } from '../../src/base/log.js';
import { jsonCodec, Store, type Tx } from '../../src/kv/index.js';
import { JWT_ISSUER_KEYS_MAX, refreshDelayMs, type KeyFetchRequest, type KeyMetadata } from '../../src/jwt/index.js';
import { Tables } from '../../src/node/tables.js';
import { JwtKeyRefresh } from '../../src/node/tasks/jwt-key-refresh.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

const json = jsonCodec<any>();
const ISSUER = 'https://idp.example';
const INTERVAL_MS = 30_000;
const TIMEOUT_MS = 3000;
const flush = () => new Promise((r) => setImmediate(r));

function jwk(kid: string) {
  const { publicKey } = nodeCrypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  return { ...publicKey.export({ format: 'jwk' }), kid };
}

function setup() {
  const clock = new ManualClock();
  const store = new Store();
  let writes = 0;
  const run = <T>(fn: (tx: Tx) => T, write: boolean): T => {
    const tx = store.beginTx();
    const out = fn(tx);
    if (write) {
      writes++;
      tx.apply();
    }
    return out;
  };
  run((tx) => {
    tx.map(Tables.caCertBundles, json).put('ca', 'PEM');
    tx.map(Tables.jwtIssuers, json).put(ISSUER, { auto_refresh: true, ca_cert_bundle_name: 'ca' });
    tx.map(Tables.jwtIssuers, json).put('https://manual.example', { auto_refresh: false });
  }, true);
  writes = 0;
  const fetcher = {
    keys: [jwk('k1')] as unknown[],
    fail: undefined as string | undefined,
    requests: [] as KeyFetchRequest[],
    hold: undefined as Promise<void> | undefined,
    /** Requests to URLs starting with this never answer (and ignore their signal). */
    hangs: undefined as string | undefined,
    async getJson(req: KeyFetchRequest): Promise<unknown> {
      this.requests.push(req);
      if (this.hangs !== undefined && req.url.startsWith(this.hangs)) await new Promise(() => undefined);
      if (this.hold) await this.hold;
      if (this.fail) throw new Error(this.fail);
      if (req.url.endsWith('/.well-known/openid-configuration')) return { issuer: req.issuer, jwks_uri: `${req.issuer}/jwks` };
      return { keys: this.keys };
    },
  };
  const task = new JwtKeyRefresh({
    clock,
    logger: new MemoryLogger(),
    intervalMs: INTERVAL_MS,
    timeoutMs: TIMEOUT_MS,
    maxResponseBytes: 1024,
    fetcher,
    executeRead: (fn) => run(fn, false),
    executeWrite: (fn) => run(fn, true),
  });
  const stored = () => {
    const out: Record<string, KeyMetadata[]> = {};
    run((tx) => tx.map(Tables.jwtPublicSigningKeys, json).forEach((v: KeyMetadata[], k: string) => void (out[k] = v)), false);
    return out;
  };
  const tick = async (ms: number) => {
    clock.advance(ms);
    await flush();
  };
  return { clock, store, task, fetcher, stored, tick, writes: () => writes, run };
}

describe('token key refresh', () => {
  test('the schedule: the interval after a success, min(5 s, interval) doubling after failures, capped', () => {
    assert.deepEqual([0, 1, 2, 3, 4, 5].map((n) => refreshDelayMs(n, 30_000)), [30_000, 5000, 10_000, 20_000, 30_000, 30_000]);
    assert.deepEqual([0, 1, 2].map((n) => refreshDelayMs(n, 2000)), [2000, 2000, 2000]);
  });

  test('first round at start; keys written once; an unchanged set writes nothing; a rotation removes the old kid', async () => {
    const { task, fetcher, stored, tick, writes, run } = setup();
    // Another issuer's key under the same kid survives the rotation.
    run((tx) => tx.map(Tables.jwtPublicSigningKeys, json).put('k1', [{ public_key: 'X', issuer: 'https://manual.example', kty: 'EC' }]), true);
    const before = writes();
    task.start();
    await tick(0);
    assert.deepEqual(fetcher.requests.map((r) => r.url), [`${ISSUER}/.well-known/openid-configuration`, `${ISSUER}/jwks`]);
    assert.deepEqual(fetcher.requests.map((r) => [r.issuer, r.caBundlePem, r.maxBytes]), [[ISSUER, 'PEM', 1024], [ISSUER, 'PEM', 1024]]);
    assert.equal(writes(), before + 1);
    assert.deepEqual(stored().k1!.map((m) => m.issuer), ['https://manual.example', ISSUER]);
    assert.equal(task.metrics().next_refresh_delay_ms, INTERVAL_MS);
    await tick(INTERVAL_MS);
    assert.equal(writes(), before + 1, 'unchanged: nothing written');
    assert.equal(task.metrics().attempts, 2);
    assert.equal(task.metrics().successes, 2);
    fetcher.keys = [jwk('k2')];
    await tick(INTERVAL_MS);
    assert.equal(writes(), before + 2);
    assert.deepEqual(Object.keys(stored()).sort(), ['k1', 'k2']);
    assert.deepEqual(stored().k1!.map((m) => m.issuer), ['https://manual.example']);
    assert.equal(stored().k2![0]!.issuer, ISSUER);
    assert.ok(task.metrics().issuers[ISSUER]!.last_success_at);
    task.stop();
  });

  test('failures: counted, retried after 5 s, 10 s, 20 s, then the interval; a success resets; nothing written', async () => {
    const { task, fetcher, tick, writes, clock } = setup();
    fetcher.fail = 'connect ECONNREFUSED';
    task.start();
    await tick(0);
    const delays: (number | null)[] = [task.metrics().next_refresh_delay_ms];
    for (const d of [5000, 10_000, 20_000, 30_000]) {
      await tick(d);
      delays.push(task.metrics().next_refresh_delay_ms);
    }
    assert.deepEqual(delays, [5000, 10_000, 20_000, 30_000, 30_000]);
    const m = task.metrics();
    assert.deepEqual([m.attempts, m.failures, m.successes, m.consecutive_failures], [5, 5, 0, 5]);
    assert.equal(m.issuers[ISSUER]!.last_failure_reason, 'connect ECONNREFUSED');
    assert.equal(writes(), 0);
    assert.deepEqual(clock.pendingDelaysMs(), [30_000]);
    fetcher.fail = undefined;
    await tick(30_000);
    assert.equal(task.metrics().consecutive_failures, 0);
    assert.equal(task.metrics().next_refresh_delay_ms, INTERVAL_MS);
    assert.equal(writes(), 1);
    task.stop();
  });

  test('a key set that does not parse, or a discovery document without jwks_uri, writes nothing', async () => {
    const { task, fetcher, tick, writes } = setup();
    fetcher.keys = [{ kty: 'EC', kid: 'bad', x5c: ['!!'] }];
    task.start();
    await tick(0);
    assert.equal(writes(), 0);
    assert.match(task.metrics().issuers[ISSUER]!.last_failure_reason!, /base64/);
    task.stop();
  });

  test('each issuer on its own: one that never answers fails at its deadline, aborted, while another is refreshed at once and on its interval', async () => {
    const { task, fetcher, stored, tick, run } = setup();
    const SLOW = 'https://slow.example';
    run((tx) => tx.map(Tables.jwtIssuers, json).put(SLOW, { auto_refresh: true, ca_cert_bundle_name: 'ca' }), true);
    fetcher.hangs = SLOW;
    task.start();
    await tick(0);
    assert.equal(stored().k1![0]!.issuer, ISSUER, 'the healthy issuer is written without waiting for the slow one');
    assert.equal(task.metrics().issuers[ISSUER]!.next_refresh_delay_ms, INTERVAL_MS);
    assert.equal(task.metrics().issuers[SLOW]!.next_refresh_delay_ms, null, 'in flight');
    const slowRequest = fetcher.requests.find((r) => r.issuer === SLOW)!;
    assert.equal(slowRequest.signal?.aborted, false);
    await tick(TIMEOUT_MS);
    const slow = task.metrics().issuers[SLOW]!;
    assert.deepEqual([slow.attempts, slow.failures, slow.timeouts, slow.consecutive_failures, slow.next_refresh_delay_ms], [1, 1, 1, 1, 5000]);
    assert.match(slow.last_failure_reason!, /no keys within 3000 ms \(jwt\.key_refresh_timeout\)/);
    assert.equal(slowRequest.signal?.aborted, true, 'the fetch itself is aborted');
    const healthy = task.metrics().issuers[ISSUER]!;
    assert.deepEqual([healthy.successes, healthy.failures, healthy.keys], [1, 0, 1]);
    assert.equal(task.metrics().consecutive_failures, 1);
    // The healthy issuer keeps its interval whatever the slow one does.
    await tick(INTERVAL_MS - TIMEOUT_MS);
    assert.equal(task.metrics().issuers[ISSUER]!.successes, 2);
    task.stop();
  });

  test('a key set of more than JWT_ISSUER_KEYS_MAX keys fails and writes nothing; one of exactly that many is written', async () => {
    const { task, fetcher, stored, tick, writes } = setup();
    const keys = Array.from({ length: JWT_ISSUER_KEYS_MAX + 1 }, (_, i) => jwk(`k${i}`));
    fetcher.keys = keys;
    task.start();
    await tick(0);
    assert.equal(writes(), 0);
    assert.match(task.metrics().issuers[ISSUER]!.last_failure_reason!, new RegExp(`more than the ${JWT_ISSUER_KEYS_MAX} keys an issuer may have`));
    fetcher.keys = keys.slice(0, JWT_ISSUER_KEYS_MAX);
    task.trigger();
    await tick(0);
    assert.equal(Object.keys(stored()).length, JWT_ISSUER_KEYS_MAX);
    assert.equal(task.metrics().issuers[ISSUER]!.keys, JWT_ISSUER_KEYS_MAX);
    task.stop();
  });

  test('an issuer removed during its fetch: the fetch is aborted, nothing written, its report gone', async () => {
    const { task, fetcher, tick, writes, run } = setup();
    fetcher.hangs = ISSUER;
    task.start();
    await tick(0);
    run((tx) => tx.map(Tables.jwtIssuers, json).remove(ISSUER), true);
    task.trigger();
    await tick(0);
    assert.equal(fetcher.requests[0]!.signal?.aborted, true);
    assert.deepEqual(task.metrics().issuers, {});
    await tick(TIMEOUT_MS);
    assert.equal(writes(), 1, 'only the removal');
    task.stop();
  });

  test('a round of an earlier primacy writes nothing; a change of issuers refreshes at once', async () => {
    const { task, fetcher, tick, writes } = setup();
    let release!: () => void;
    fetcher.hold = new Promise<void>((r) => (release = r));
    task.start();
    await tick(0);
    task.stop();
    release();
    fetcher.hold = undefined;
    await flush();
    await flush();
    assert.equal(writes(), 0, 'deposed during the fetch: nothing written');
    task.start();
    await tick(0);
    assert.equal(writes(), 1);
    const requests = fetcher.requests.length;
    task.trigger();
    await tick(0);
    assert.equal(fetcher.requests.length, requests + 2, 'refreshed at once');
    task.stop();
    task.trigger();
    await tick(INTERVAL_MS * 2);
    assert.equal(fetcher.requests.length, requests + 2, 'a stopped task does nothing');
  });
});
