/**
 * The key fetcher against a misbehaving issuer's server on loopback HTTPS: a redirect, an empty
 * 503, a reset, a body cut by a reset and a trickling body each end as a rejection with the reason
 * (an abort error emitted on a dropped body used to end the process), the caller's signal aborts a
 * trickle, and the next fetch from the same server works.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { CaPinnedJsonFetcher } from '../../src/platform/key-fetcher.js';
import { startHostileIssuer, type HostileIssuer, type IssuerMode } from '../e2e/hostile-issuer.js';

describe('fetching an issuer\u2019s documents from a hostile server', () => {
  let server: HostileIssuer;
  const fetcher = new CaPinnedJsonFetcher();
  const get = (signal?: AbortSignal) =>
    fetcher.getJson({ issuer: server.issuer, url: `${server.issuer}/.well-known/openid-configuration`, caBundlePem: server.caPem, maxBytes: 4096, ...(signal ? { signal } : {}) });

  before(async () => {
    server = await startHostileIssuer(1);
  });
  after(async () => {
    await fetcher.close();
    await server.close();
  });

  const cases: [IssuerMode, RegExp][] = [
    ['redirect', /answered 302 \(to https:\/\/127\.0\.0\.1:\d+\/elsewhere; redirects are not followed\)/],
    ['empty-503', /answered 503$/],
    ['reset', /ECONNRESET|other side closed|socket/i],
    ['cut', /ECONNRESET|other side closed|terminated|socket/i],
  ];
  for (const [mode, reason] of cases) {
    test(`${mode}: rejected with the reason, three times in a row, and the next fetch works`, async () => {
      server.mode = mode;
      for (let i = 0; i < 3; i++) await assert.rejects(get(), reason);
      // An error emitted after a rejection (the old fault) surfaces during this round trip and fails the run.
      server.mode = 'keys';
      assert.deepEqual(await get(), { issuer: server.issuer, jwks_uri: `${server.issuer}/jwks` });
    });
  }

  test('a trickling body is aborted by the caller\u2019s signal, with its reason', async () => {
    server.mode = 'trickle';
    const controller = new AbortController();
    const deadline = new Error('the issuer\u2019s deadline');
    setTimeout(() => controller.abort(deadline), 1500);
    await assert.rejects(get(controller.signal), (e) => e === deadline);
    await assert.rejects(get(controller.signal), (e) => e === deadline, 'an aborted signal fails at once');
    server.mode = 'keys';
    assert.equal(((await get()) as { issuer: string }).issuer, server.issuer);
  });
});
