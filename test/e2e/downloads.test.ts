/**
 * Ledger chunk and snapshot downloads against a real node (spec endpoint rules 1-7): redirects,
 * 404s, byte ranges, HEAD, ETags checked against an independent digest, If-None-Match,
 * Want-Repr-Digest, and the operator features that switch the routes off.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { startNetwork, until } from '../../src/testing/network.js';
import { rawRequest, writeUntilCommittedChunks } from './download-helpers.js';

const b64 = (alg: string, data: Buffer) => createHash(alg).update(data).digest('base64');
const etagOf = (data: Buffer, alg = 'sha256', name = 'sha-256') => `"${name}=:${b64(alg, data)}:"`;

describe('downloads', () => {
  let node: StartedNode;
  let chunks: string[];
  let chunk: string;
  let chunkBytes: Buffer;
  let snapshotName: string;
  let snapshotSeqno: number;
  let snapshotBytes: Buffer;
  let uncommittedName: string;

  before(async () => {
    node = await startNode({ configPatch: { ledger: { chunk_size: '2KB' }, ledger_signatures: { tx_count: 5, delay: '20ms' } } });
    chunks = await writeUntilCommittedChunks(node, 60, 3);
    chunk = chunks[1]!;
    chunkBytes = readFileSync(join(node.dir, 'ledger', chunk));
    // A real snapshot, committed once its evidence is; beside it an older committed file that is
    // corrupt (never served) and an uncommitted one (never listed).
    const snapshots = join(node.dir, 'snapshots');
    assert.equal((await node.client.request('POST', '/node/snapshot:create')).status, 204);
    snapshotName = await until('a committed snapshot', async () => {
      await node.client.request('POST', '/app/log/public', { body: { id: 1000, msg: 'evidence' }, identity: node.user });
      return (existsSync(snapshots) ? readdirSync(snapshots) : []).find((n) => n.endsWith('.committed'));
    }, 30_000, 50);
    snapshotSeqno = Number(/^snapshot_(\d+)_/.exec(snapshotName)![1]);
    snapshotBytes = readFileSync(join(snapshots, snapshotName));
    writeFileSync(join(snapshots, 'snapshot_1_2.committed'), Buffer.from('older, and corrupt'));
    uncommittedName = `snapshot_${snapshotSeqno + 10}_${snapshotSeqno + 12}`;
    writeFileSync(join(snapshots, uncommittedName), Buffer.from('not committed'));
  });

  after(async () => {
    // Set unless startNode itself failed.
    if ((node as StartedNode | undefined) === undefined) return;
    await node.stop();
    removeDir(node.dir);
  });

  test('GET and HEAD /node/ledger_chunk?since= redirect (308) to the chunk holding the seqno', async () => {
    for (const name of chunks) {
      const [, first, last] = /^ledger_(\d+)-(\d+)\.committed$/.exec(name)!.map(Number) as [number, number, number];
      for (const since of [first, last, Math.floor((first + last) / 2)]) {
        for (const method of ['GET', 'HEAD']) {
          const answer = await rawRequest(node, method, `/node/ledger_chunk?since=${since}`);
          assert.equal(answer.status, 308, `${method} since=${since}`);
          assert.equal(answer.headers.location, `/node/ledger_chunk/${name}`);
        }
      }
    }
  });

  test('a seqno no committed chunk holds is 404; a bad since is 400', async () => {
    const lastCommitted = Number(/-(\d+)\.committed$/.exec(chunks.at(-1)!)![1]);
    for (const since of [0, lastCommitted + 10_000]) {
      const answer = await rawRequest(node, 'GET', `/node/ledger_chunk?since=${since}`);
      assert.equal(answer.status, 404, `since=${since}`);
      assert.equal(JSON.parse(answer.body.toString()).error.code, 'LedgerChunkNotFound');
    }
    assert.equal((await rawRequest(node, 'GET', '/node/ledger_chunk')).status, 400);
    assert.equal((await rawRequest(node, 'GET', '/node/ledger_chunk?since=-1')).status, 400);
  });

  test('only existing committed chunk names are served; traversal attempts are 404', async () => {
    const [, first, last] = /^ledger_(\d+)-(\d+)\.committed$/.exec(chunk)!;
    const bad = [
      `ledger_${first}-${last}`,
      `ledger_${first}`,
      `ledger_${first}-${last}.committed.recovery`,
      `ledger_0${first}-${last}.committed`,
      'ledger_999990-999999.committed',
      `..%2Fledger%2F${chunk}`,
      `..%2F..%2Fnode.json`,
      `%2E%2E%2Fnode_cert.pem`,
      `${chunk}%00`,
      'node.json',
    ];
    for (const name of bad) {
      const answer = await rawRequest(node, 'GET', `/node/ledger_chunk/${name}`);
      assert.equal(answer.status, 404, name);
      assert.ok(!answer.body.includes(chunkBytes.subarray(0, 16)), `${name}: no file content`);
    }
    // A path with an unencoded '/' does not even reach the route.
    assert.equal((await rawRequest(node, 'GET', `/node/ledger_chunk/../node.json`)).status, 404);
  });

  test('GET serves the whole chunk with its name, length and a SHA-256 ETag', async () => {
    const answer = await rawRequest(node, 'GET', `/node/ledger_chunk/${chunk}`);
    assert.equal(answer.status, 200);
    assert.deepEqual(answer.body, chunkBytes);
    assert.equal(answer.headers['content-length'], String(chunkBytes.length));
    assert.equal(answer.headers['x-covenant-ledger-chunk-name'], chunk);
    assert.equal(answer.headers['accept-ranges'], 'bytes');
    assert.equal(answer.headers.etag, etagOf(chunkBytes));
    assert.equal(answer.headers['repr-digest'], undefined, 'Repr-Digest only when asked for');
  });

  test('HEAD gives the metadata and no body', async () => {
    const answer = await rawRequest(node, 'HEAD', `/node/ledger_chunk/${chunk}`);
    assert.equal(answer.status, 200);
    assert.equal(answer.body.length, 0);
    assert.equal(answer.headers['content-length'], String(chunkBytes.length));
    assert.equal(answer.headers['x-covenant-ledger-chunk-name'], chunk);
    assert.equal(answer.headers.etag, etagOf(chunkBytes));
  });

  test('Range: closed, open-ended and suffix ranges are 206; past the end is 416; several ranges give the whole file', async () => {
    const size = chunkBytes.length;
    const cases: [string, number, number][] = [
      ['bytes=0-9', 0, 9],
      ['bytes=100-', 100, size - 1],
      ['bytes=-7', size - 7, size - 1],
      [`bytes=5-${size + 100}`, 5, size - 1],
      [`bytes=-${size + 5}`, 0, size - 1],
    ];
    for (const [range, start, end] of cases) {
      const answer = await rawRequest(node, 'GET', `/node/ledger_chunk/${chunk}`, { range });
      const expected = chunkBytes.subarray(start, end + 1);
      assert.equal(answer.status, 206, range);
      assert.deepEqual(answer.body, expected, range);
      assert.equal(answer.headers['content-range'], `bytes ${start}-${end}/${size}`, range);
      assert.equal(answer.headers['content-length'], String(expected.length), range);
      assert.equal(answer.headers.etag, etagOf(expected), `${range}: the ETag covers the returned range`);
      assert.equal(answer.headers['x-covenant-ledger-chunk-name'], chunk);
    }
    for (const range of [`bytes=${size}-`, `bytes=${size + 1}-${size + 9}`, 'bytes=-0']) {
      const answer = await rawRequest(node, 'GET', `/node/ledger_chunk/${chunk}`, { range });
      assert.equal(answer.status, 416, range);
      assert.equal(answer.headers['content-range'], `bytes */${size}`, range);
    }
    for (const range of ['bytes=0-1, 5-9', 'items=0-5', 'bytes=9-2']) {
      const answer = await rawRequest(node, 'GET', `/node/ledger_chunk/${chunk}`, { range });
      assert.equal(answer.status, 200, range);
      assert.deepEqual(answer.body, chunkBytes, range);
    }
    const head = await rawRequest(node, 'HEAD', `/node/ledger_chunk/${chunk}`, { range: 'bytes=0-9' });
    assert.equal(head.status, 206);
    assert.equal(head.body.length, 0);
    assert.equal(head.headers['content-length'], '10');
  });

  test('If-None-Match: a matching tag among several gives 304 without a body, none matching gives 200', async () => {
    const path = `/node/ledger_chunk/${chunk}`;
    const other = etagOf(Buffer.from('something else'));
    const match = await rawRequest(node, 'GET', path, { 'if-none-match': `${other}, ${etagOf(chunkBytes)}, "x"` });
    assert.equal(match.status, 304);
    assert.equal(match.body.length, 0);
    assert.equal(match.headers.etag, etagOf(chunkBytes));

    const weak = await rawRequest(node, 'GET', path, { 'if-none-match': `W/${etagOf(chunkBytes)}` });
    assert.equal(weak.status, 304, 'weak comparison');

    const none = await rawRequest(node, 'GET', path, { 'if-none-match': `${other}, "sha-256=:AAAA:"` });
    assert.equal(none.status, 200);
    assert.deepEqual(none.body, chunkBytes);
    assert.equal(none.headers.etag, etagOf(chunkBytes));

    // The first supported algorithm among the tags decides how the content is digested.
    const sha512 = etagOf(chunkBytes, 'sha512', 'sha-512');
    const by512 = await rawRequest(node, 'GET', path, { 'if-none-match': `"md5=:xyz:", ${sha512}` });
    assert.equal(by512.status, 304);
    assert.equal(by512.headers.etag, sha512);
    const sha384Miss = await rawRequest(node, 'GET', path, { 'if-none-match': `"sha-384=:AAAA:", ${etagOf(chunkBytes)}` });
    assert.equal(sha384Miss.status, 200, 'sha-384 came first, so the sha-256 tag is not compared');
    assert.equal(sha384Miss.headers.etag, etagOf(chunkBytes, 'sha384', 'sha-384'));

    const head = await rawRequest(node, 'HEAD', path, { 'if-none-match': etagOf(chunkBytes) });
    assert.equal(head.status, 304);

    const ranged = chunkBytes.subarray(0, 10);
    const rangeMatch = await rawRequest(node, 'GET', path, { range: 'bytes=0-9', 'if-none-match': etagOf(ranged) });
    assert.equal(rangeMatch.status, 304, 'the ETag of a range compares with the range');
  });

  test('Want-Repr-Digest: highest preference wins, ties by order, otherwise sha-256; always over the full file', async () => {
    const path = `/node/ledger_chunk/${chunk}`;
    const digestField = (alg: string, name: string) => `${name}=:${b64(alg, chunkBytes)}:`;
    const cases: [string, string, string][] = [
      ['sha-256=1', 'sha256', 'sha-256'],
      ['sha-384=1', 'sha384', 'sha-384'],
      ['sha-512=1', 'sha512', 'sha-512'],
      ['sha-256=1, sha-512=3', 'sha512', 'sha-512'],
      ['sha-512=2, sha-384=2', 'sha512', 'sha-512'],
      ['sha-384=5, sha-512=2, sha-256=1', 'sha384', 'sha-384'],
      ['md5=10, sha-384=1', 'sha384', 'sha-384'],
      ['sha-512=0, sha-384=1', 'sha384', 'sha-384'],
      ['md5=3, unixsum=9', 'sha256', 'sha-256'],
      ['not a dictionary ((', 'sha256', 'sha-256'],
      ['sha-512=0', 'sha256', 'sha-256'],
    ];
    for (const [want, alg, name] of cases) {
      for (const method of ['GET', 'HEAD']) {
        const answer = await rawRequest(node, method, path, { 'want-repr-digest': want });
        assert.equal(answer.headers['repr-digest'], digestField(alg, name), `${method} ${want}`);
      }
    }
    const ranged = await rawRequest(node, 'GET', path, { 'want-repr-digest': 'sha-256=1', range: 'bytes=0-9' });
    assert.equal(ranged.status, 206);
    assert.equal(ranged.headers['repr-digest'], digestField('sha256', 'sha-256'), 'the full representation, not the range');
  });

  test('snapshots: latest committed snapshot by redirect, since filters, the file with its headers', async () => {
    for (const method of ['GET', 'HEAD']) {
      const latest = await rawRequest(node, method, '/node/snapshot');
      assert.equal(latest.status, 308);
      assert.equal(latest.headers.location, `/node/snapshot/${snapshotName}`, 'the uncommitted one is ignored');
    }
    assert.equal((await rawRequest(node, 'GET', `/node/snapshot?since=${snapshotSeqno - 1}`)).headers.location, `/node/snapshot/${snapshotName}`);
    assert.equal((await rawRequest(node, 'GET', `/node/snapshot?since=${snapshotSeqno}`)).status, 404);
    // A committed snapshot that does not verify is never served.
    assert.equal((await rawRequest(node, 'GET', '/node/snapshot/snapshot_1_2.committed')).status, 500);
    assert.equal((await rawRequest(node, 'GET', '/node/snapshot?since=zero')).status, 400);

    const path = `/node/snapshot/${snapshotName}`;
    const whole = await rawRequest(node, 'GET', path, { 'want-repr-digest': 'sha-512=1' });
    assert.equal(whole.status, 200);
    assert.deepEqual(whole.body, snapshotBytes);
    assert.equal(whole.headers['x-covenant-snapshot-name'], snapshotName);
    assert.equal(whole.headers.etag, etagOf(snapshotBytes));
    assert.equal(whole.headers['repr-digest'], `sha-512=:${b64('sha512', snapshotBytes)}:`);

    const head = await rawRequest(node, 'HEAD', path);
    assert.equal(head.headers['content-length'], String(snapshotBytes.length));
    assert.equal(head.body.length, 0);

    const part = await rawRequest(node, 'GET', path, { range: 'bytes=-100' });
    assert.equal(part.status, 206);
    assert.deepEqual(part.body, snapshotBytes.subarray(-100));
    assert.equal(part.headers.etag, etagOf(snapshotBytes.subarray(-100)));
    assert.equal((await rawRequest(node, 'GET', path, { range: `bytes=${snapshotBytes.length + 100}-` })).status, 416);
    assert.equal((await rawRequest(node, 'GET', path, { 'if-none-match': etagOf(snapshotBytes) })).status, 304);

    for (const name of [uncommittedName, `snapshot_${snapshotSeqno + 1}_${snapshotSeqno + 2}.committed`, '..%2Fnode.json', `${snapshotName}%2F..`, chunk]) {
      assert.equal((await rawRequest(node, 'GET', `/node/snapshot/${name}`)).status, 404, name);
    }
  });
});

test('the download routes are 404 on an interface without LedgerChunkRead and SnapshotRead', async () => {
  const node = await startNode({ configPatch: { rpc_interfaces: { primary: { bind_address: '127.0.0.1:0', enabled_operator_features: [] } } } });
  try {
    for (const path of ['/node/ledger_chunk?since=1', '/node/ledger_chunk/ledger_1-2.committed', '/node/snapshot', '/node/snapshot/snapshot_1_2.committed']) {
      for (const method of ['GET', 'HEAD']) {
        const answer = await rawRequest(node, method, path);
        assert.equal(answer.status, 404, `${method} ${path}`);
        if (method === 'GET') assert.match(JSON.parse(answer.body.toString()).error.message, /operator feature/);
      }
    }
    assert.equal((await rawRequest(node, 'POST', '/node/snapshot:create')).status, 404);
  } finally {
    await node.stop();
    removeDir(node.dir);
  }
});

test('a backup redirects to the primary on the interface of the same name, where the download routes are enabled too', async () => {
  // The operator features on a second interface, as in docs/configuration.md.
  const network = await startNetwork(2, {
    rpc_interfaces: {
      primary: { bind_address: '127.0.0.1:0', enabled_operator_features: [] },
      operator: { bind_address: '127.0.0.1:0', enabled_operator_features: ['LedgerChunkRead', 'SnapshotRead'] },
    },
  });
  try {
    const primary = await network.primary();
    const backup = network.nodes.find((n) => n !== primary)!;
    const operator = (node: StartedNode) => ({
      address: (JSON.parse(readFileSync(join(node.dir, 'rpc_addresses.json'), 'utf8')) as Record<string, string>)['operator']!,
      serviceCertificatePem: node.serviceCertificatePem,
    });
    const base = `https://${operator(primary).address}`;
    const chunk = await until('the backup to know the primary', async () => {
      const answer = await rawRequest(operator(backup), 'GET', '/node/ledger_chunk?since=1000000');
      return answer.status === 308 ? answer : undefined;
    });
    assert.equal(chunk.headers.location, `${base}/node/ledger_chunk?since=1000000`);
    assert.equal((await rawRequest(operator(backup), 'GET', '/node/snapshot?since=1000000')).headers.location, `${base}/node/snapshot?since=1000000`);
    assert.equal((await rawRequest(operator(backup), 'HEAD', '/node/primary')).headers.location, `${base}/node/primary`);
    // Where the redirect leads the route exists: no such chunk there, rather than a switched-off feature.
    const followed = await rawRequest(operator(primary), 'GET', '/node/ledger_chunk?since=1000000');
    assert.equal(JSON.parse(followed.body.toString()).error.code, 'LedgerChunkNotFound');
    // Requests on the first interface still lead to the primary's first interface.
    assert.equal((await rawRequest(backup, 'HEAD', '/node/primary')).headers.location, `https://${primary.address}/node/primary`);
  } finally {
    await network.stopAll();
  }
});
