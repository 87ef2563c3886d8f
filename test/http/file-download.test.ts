/**
 * The header rules of file downloads as pure functions, and the download routes called directly
 * with temp directories (redirects to the primary, the digest cache).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import {
  chooseReprDigestAlgorithm,
  decideRange,
  etagAlgorithmFor,
  FileDigestCache,
  parseIfNoneMatch,
} from '../../src/http/file-download.js';
import { downloadRoutes, parseCommittedChunkName, parseCommittedSnapshotName, type DownloadDeps } from '../../src/http/frontends/downloads.js';
import type { RequestContext, RouteResponse } from '../../src/http/route.js';
import { isCovenantError } from '../../src/base/errors.js';

test('decideRange follows RFC 9110 for one range and falls back to the whole file otherwise', () => {
  const size = 100;
  assert.deepEqual(decideRange(undefined, size), { kind: 'full' });
  assert.deepEqual(decideRange('bytes=0-0', size), { kind: 'partial', range: { start: 0, end: 0 } });
  assert.deepEqual(decideRange('bytes=10-19', size), { kind: 'partial', range: { start: 10, end: 19 } });
  assert.deepEqual(decideRange('bytes=90-200', size), { kind: 'partial', range: { start: 90, end: 99 } });
  assert.deepEqual(decideRange('bytes=50-', size), { kind: 'partial', range: { start: 50, end: 99 } });
  assert.deepEqual(decideRange('bytes=-10', size), { kind: 'partial', range: { start: 90, end: 99 } });
  assert.deepEqual(decideRange('bytes=-1000', size), { kind: 'partial', range: { start: 0, end: 99 } });
  assert.deepEqual(decideRange('Bytes = 1-2', size), { kind: 'partial', range: { start: 1, end: 2 } });
  // Positions beyond 2^53 - 1: the last byte is clamped to the end, a first byte there is past it.
  assert.deepEqual(decideRange('bytes=0-18446744073709551616', size), { kind: 'partial', range: { start: 0, end: 99 } });
  assert.deepEqual(decideRange('bytes=5-99999999999999999999', size), { kind: 'partial', range: { start: 5, end: 99 } });
  assert.deepEqual(decideRange('bytes=-18446744073709551616', size), { kind: 'partial', range: { start: 0, end: 99 } });
  for (const unsatisfiable of ['bytes=100-', 'bytes=100-200', 'bytes=-0', 'bytes=18446744073709551616-', 'bytes=99999999999999999999-']) {
    assert.deepEqual(decideRange(unsatisfiable, size), { kind: 'unsatisfiable' }, unsatisfiable);
  }
  assert.deepEqual(decideRange('bytes=-5', 0), { kind: 'unsatisfiable' });
  for (const ignored of ['bytes=0-1,3-4', 'lines=1-2', 'bytes=5-1', 'bytes=-', 'bytes=a-b', 'bytes']) {
    assert.deepEqual(decideRange(ignored, size), { kind: 'full' }, ignored);
  }
});

test('chooseReprDigestAlgorithm: highest preference, ties by order, 0 excluded, sha-256 otherwise', () => {
  assert.equal(chooseReprDigestAlgorithm('sha-256=1, sha-512=3'), 'sha-512');
  assert.equal(chooseReprDigestAlgorithm('sha-384=3, sha-512=3'), 'sha-384');
  assert.equal(chooseReprDigestAlgorithm('sha-512=3, sha-384=3'), 'sha-512');
  assert.equal(chooseReprDigestAlgorithm('sha-512=0, sha-384=1'), 'sha-384');
  assert.equal(chooseReprDigestAlgorithm('md5=10'), 'sha-256');
  assert.equal(chooseReprDigestAlgorithm('sha-512=11'), 'sha-256', 'preferences are 0-10');
  assert.equal(chooseReprDigestAlgorithm('sha-512="high"'), 'sha-256');
  assert.equal(chooseReprDigestAlgorithm('SHA-512=1'), 'sha-256', 'keys are lower-case tokens; an invalid dictionary falls back');
  assert.equal(chooseReprDigestAlgorithm(''), 'sha-256');
  assert.equal(chooseReprDigestAlgorithm(',,,'), 'sha-256');
});

test('If-None-Match lists: quoted, weak, commas inside digests; the first supported algorithm', () => {
  assert.deepEqual(parseIfNoneMatch('*'), { kind: 'any' });
  assert.deepEqual(parseIfNoneMatch('*, "sha-256=:x:"'), { kind: 'any' }, '"*" in a list still matches any representation');
  assert.deepEqual(parseIfNoneMatch('"a", *'), { kind: 'any' });
  assert.deepEqual(parseIfNoneMatch('"a", W/"b" ,"sha-256=:x+/=:"'), { kind: 'tags', opaqueTags: ['a', 'b', 'sha-256=:x+/=:'] });
  assert.deepEqual(parseIfNoneMatch('"a,b"'), { kind: 'tags', opaqueTags: ['a,b'] });
  assert.deepEqual(parseIfNoneMatch('garbage'), { kind: 'tags', opaqueTags: [] });
  assert.equal(etagAlgorithmFor(['md5=:x:', 'sha-384=:y:', 'sha-512=:z:']), 'sha-384');
  assert.equal(etagAlgorithmFor(['nothing']), 'sha-256');
});

test('chunk and snapshot names: the exact committed shapes only', () => {
  assert.deepEqual(parseCommittedChunkName('ledger_1-20.committed'), { name: 'ledger_1-20.committed', first: 1, last: 20 });
  for (const bad of ['ledger_1-20', 'ledger_20-1.committed', 'ledger_01-20.committed', 'ledger_1-20.committed.recovery', '../ledger_1-2.committed', 'ledger_1-2.committed/']) {
    assert.equal(parseCommittedChunkName(bad), undefined, bad);
  }
  assert.deepEqual(parseCommittedSnapshotName('snapshot_10_12.committed'), { name: 'snapshot_10_12.committed', seqno: 10, evidenceSeqno: 12 });
  for (const bad of ['snapshot_10_12', 'snapshot_10_12.committed.x', 'snapshot_010_12.committed', 'snapshot_12_10.committed', 'snapshot_a_1.committed']) {
    assert.equal(parseCommittedSnapshotName(bad), undefined, bad);
  }
});

function context(path: string, params: Record<string, string>, query: Record<string, unknown>, headers: Record<string, string> = {}, method: 'GET' | 'HEAD' = 'GET'): RequestContext {
  return {
    method,
    path,
    params,
    query: query as Record<string, string>,
    body: undefined,
    rawBody: Buffer.alloc(0),
    headers,
    caller: { kind: 'anonymous' },
    clientCertificateDer: undefined,
    remoteAddress: undefined,
    interfaceName: 'test',
    state: { read: () => assert.fail('a download reads no store'), write: () => assert.fail('a download writes nothing') },
  };
}

async function call(deps: DownloadDeps, template: string, ctx: RequestContext): Promise<RouteResponse> {
  const route = downloadRoutes(deps).find((r) => r.path === template)!;
  try {
    return await route.handler(ctx);
  } catch (e) {
    if (isCovenantError(e)) return { status: e.status, body: e.toBody() };
    throw e;
  }
}

async function drain(body: unknown): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const c of body as Readable) chunks.push(c as Buffer);
  return Buffer.concat(chunks);
}

test('a node lacking the chunk or snapshot redirects to the primary with the same since', async () => {
  const root = mkdtempSync(join(tmpdir(), 'covenant-downloads-'));
  try {
    writeFileSync(join(root, 'ledger_1-5.committed'), 'abc');
    writeFileSync(join(root, 'ledger_6-9'), 'not committed here yet');
    let base: string | undefined = 'https://10.0.0.1:8000';
    const deps: DownloadDeps = { ledgerDirectories: [join(root, 'missing'), root], snapshotDirectories: [join(root, 'none')], redirectBase: () => base };
    const ledger = (since: number) => call(deps, '/node/ledger_chunk', context('/node/ledger_chunk', {}, { since }));
    assert.deepEqual((await ledger(3)).headers, { location: '/node/ledger_chunk/ledger_1-5.committed', 'content-length': 0 });
    const away = await ledger(7);
    assert.equal(away.status, 308);
    assert.equal(away.headers!['location'], 'https://10.0.0.1:8000/node/ledger_chunk?since=7');
    const snapshot = await call(deps, '/node/snapshot', context('/node/snapshot', {}, { since: 4 }));
    assert.equal(snapshot.headers!['location'], 'https://10.0.0.1:8000/node/snapshot?since=4');
    const anySnapshot = await call(deps, '/node/snapshot', context('/node/snapshot', {}, {}));
    assert.equal(anySnapshot.headers!['location'], 'https://10.0.0.1:8000/node/snapshot');
    base = undefined;
    assert.equal((await ledger(7)).status, 404);
    assert.equal((await call(deps, '/node/snapshot', context('/node/snapshot', {}, {}))).status, 404);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});

test('digests of a served file are cached, and a changed file is digested again', async () => {
  const root = mkdtempSync(join(tmpdir(), 'covenant-downloads-'));
  try {
    const path = join(root, 'ledger_1-5.committed');
    writeFileSync(path, 'first content');
    const cache = new FileDigestCache(4);
    const deps: DownloadDeps = { ledgerDirectories: [root], snapshotDirectories: [], redirectBase: () => undefined, digestCache: cache };
    const get = () =>
      call(deps, '/node/ledger_chunk/{chunk_name}', context('/node/ledger_chunk/x', { chunk_name: 'ledger_1-5.committed' }, {}, { 'want-repr-digest': 'sha-256=1' }));
    const first = await get();
    assert.equal(String(await drain(first.body)), 'first content');
    assert.equal(cache.misses, 1, 'the ETag and Repr-Digest of the whole file are one digest');
    const second = await get();
    await drain(second.body);
    assert.equal(cache.misses, 1);
    assert.equal(cache.hits, 3);
    assert.equal(second.headers!['etag'], first.headers!['etag']);

    writeFileSync(path, 'other content');
    utimesSync(path, new Date(), new Date(Date.now() + 5000));
    const third = await get();
    assert.equal(String(await drain(third.body)), 'other content');
    const expected = createHash('sha256').update('other content').digest('base64');
    assert.equal(third.headers!['etag'], `"sha-256=:${expected}:"`);

    for (let i = 0; i < 10; i++) {
      await call(deps, '/node/ledger_chunk/{chunk_name}', context('/x', { chunk_name: 'ledger_1-5.committed' }, {}, { range: `bytes=${i}-` }, 'HEAD'));
    }
    assert.ok(cache.size <= 4, 'the cache is bounded');
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
