/**
 * End to end: a real OpenID Connect provider (oidc-provider on loopback HTTPS with its own CA) and
 * three node processes. Members register the CA bundle and the issuer with auto refresh; the
 * primary fetches the keys and they replicate to every node; a provider token writes and reads;
 * a key rotation is picked up by the next refresh (old tokens stop, new ones work); the provider
 * down is counted with the retry schedule; oversized documents fail and write nothing; refresh
 * carries on on the new primary after the primary stops.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { startNetwork, until, type TestNetwork } from '../../src/testing/network.js';
import type { StartedNode } from '../../src/testing/node-process.js';
import { bearer, mustApply } from '../../src/testing/jwt.js';
import { startProvider, type TestProvider } from './oidc-helpers.js';

const INTERVAL = '8s';
const MAX_BYTES = 64 * 1024;

describe('token keys refreshed from a real OpenID Connect provider', () => {
  let net: TestNetwork;
  let provider: TestProvider;
  const live = () => net.nodes.filter((n) => n.process.exitCode === null && n.process.signalCode === null);
  const kidsOn = async (node: StartedNode) => Object.keys((await node.client.request('GET', '/gov/service/jwk')).body.keys as object).sort();
  const metricsOf = async (node: StartedNode) => (await node.client.request('GET', '/node/jwt_keys/refresh/metrics')).body;
  const everyNodeHas = (kids: string[]) =>
    until(`keys ${kids.join(',')} on every node`, async () => {
      for (const node of live()) if (JSON.stringify(await kidsOn(node)) !== JSON.stringify(kids)) return undefined;
      return true;
    }, 30_000);
  const setIssuer = (p: StartedNode) =>
    mustApply(p, [{ name: 'set_jwt_issuer', args: { issuer: provider.issuer, auto_refresh: true, ca_cert_bundle_name: 'idp' } }]);

  before(async () => {
    provider = await startProvider(MAX_BYTES);
    net = await startNetwork(3, { jwt: { key_refresh_interval: INTERVAL, key_refresh_max_response_size: MAX_BYTES } });
  });
  after(async () => {
    await net?.stopAll();
    await provider?.close();
  });

  test('auto refresh: keys on every node, a provider token writes and reads, the caller is its subject', async () => {
    const primary = await net.primary();
    const refused = await mustApply(primary, [{ name: 'set_jwt_issuer', args: { issuer: provider.issuer, auto_refresh: true } }]).catch((e: Error) => e);
    assert.ok(refused instanceof Error && /ca_cert_bundle_name/.test(refused.message), 'auto refresh needs a CA bundle');
    await mustApply(primary, [
      { name: 'set_ca_cert_bundle', args: { name: 'idp', cert_bundle: provider.caPem } },
      { name: 'set_jwt_issuer', args: { issuer: provider.issuer, auto_refresh: true, ca_cert_bundle_name: 'idp' } },
    ]);
    await everyNodeHas([provider.kid]);
    const token = await provider.token();
    const backup = live().find((n) => n !== primary)!;
    const written = await backup.client.request('POST', '/app/log/private', { body: { id: 10, msg: 'from the provider' }, headers: bearer(token) });
    assert.equal(written.status, 200, written.text);
    const read = await primary.client.request('GET', '/app/log/private?id=10', { headers: bearer(token) });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.msg, 'from the provider');
    const caller = await backup.client.request('GET', '/app/caller', { headers: bearer(token) });
    assert.deepEqual([caller.body.issuer, caller.body.subject], [provider.issuer, 'covenant-client']);
    const m = await metricsOf(primary);
    assert.ok(m.active && m.successes >= 1, JSON.stringify(m));
    assert.ok(m.issuers[provider.issuer].last_success_at);
  });

  test('rotation: the next refresh replaces the key; old tokens stop working, new ones work', async () => {
    const primary = await net.primary();
    const oldToken = await provider.token();
    const oldKid = provider.kid;
    provider.rotate();
    await everyNodeHas([provider.kid]);
    assert.notEqual(provider.kid, oldKid);
    const old = await primary.client.request('POST', '/app/log/private', { body: { id: 11, msg: 'x' }, headers: bearer(oldToken) });
    assert.equal(old.status, 401);
    assert.equal(old.body.error.code, 'TokenKeyUnknown');
    const fresh = await primary.client.request('POST', '/app/log/private', { body: { id: 11, msg: 'new key' }, headers: bearer(await provider.token()) });
    assert.equal(fresh.status, 200, fresh.text);
  });

  test('the provider down: failures counted, retried after 5 s then the 8 s interval; oversized answers fail and write nothing', async () => {
    const primary = await net.primary();
    const kids = await kidsOn(primary);
    const before = await metricsOf(primary);
    provider.mode = 'down';
    await setIssuer(primary); // the issuers table changed: refresh at once
    const first = await until('a failure', async () => {
      const m = await metricsOf(primary);
      return m.consecutive_failures === 1 ? m : undefined;
    });
    assert.equal(first.next_refresh_delay_ms, 5000);
    assert.ok(first.failures > before.failures);
    const second = await until('a second failure', async () => {
      const m = await metricsOf(primary);
      return m.consecutive_failures === 2 ? m : undefined;
    }, 20_000);
    assert.equal(second.next_refresh_delay_ms, 8000, 'doubled, capped at the interval');
    assert.ok(second.issuers[provider.issuer].last_failure_reason);

    for (const [mode, where] of [['oversized-jwks', '/jwks'], ['oversized-discovery', 'openid-configuration']] as const) {
      provider.mode = mode;
      await setIssuer(primary);
      const m = await until(`a failure of ${mode}`, async () => {
        const r = (await metricsOf(primary)).issuers[provider.issuer].last_failure_reason as string;
        return r.includes(where) && r.includes('larger than') ? r : undefined;
      }, 20_000);
      assert.match(m, new RegExp(`larger than ${MAX_BYTES} bytes`));
      assert.deepEqual(await kidsOn(primary), kids, 'nothing written');
    }
    provider.mode = 'up';
    await setIssuer(primary);
    await until('a success', async () => ((await metricsOf(primary)).consecutive_failures === 0 ? true : undefined), 20_000);
  });

  test('after the primary stops, the new primary refreshes', async () => {
    const old = await net.primary();
    await old.stop();
    const primary = await until('a new primary', async () => {
      const p = await net.primary();
      return p !== old ? p : undefined;
    }, 30_000);
    await until('the new primary refreshed', async () => {
      const m = await metricsOf(primary);
      return m.active && m.successes >= 1 ? true : undefined;
    }, 30_000);
    provider.rotate();
    await everyNodeHas([provider.kid]);
    const written = await primary.client.request('POST', '/app/log/private', { body: { id: 12, msg: 'after failover' }, headers: bearer(await provider.token()) });
    assert.equal(written.status, 200, written.text);
  });
});
