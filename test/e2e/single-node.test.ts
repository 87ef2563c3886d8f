/**
 * End to end: one real node process over TLS. Every operator endpoint, the logging application,
 * the bad-input answers, and the ledger files the node leaves on disk.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHash, X509Certificate } from 'node:crypto';
import { generateIdentity } from '../../src/crypto/index.js';
import { LOCK_FILE_NAME } from '../../src/platform/directory-lock.js';
import { verifyCoseReceipt, verifyReceipt, verifySignatureReceipt } from '../../src/merkle/index.js';
import { runReceiptVerify } from '../../src/cli/receipt-tools.js';
import { removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(25);
  }
}

describe('a single node', () => {
  let node: StartedNode;

  before(async () => {
    node = await startNode({
      configPatch: {
        ledger: { chunk_size: '4KB' },
        ledger_signatures: { tx_count: 10, delay: '50ms' },
        rpc_interfaces: { primary: { max_body_size: '2KB' } },
      },
    });
  });

  after(async () => {
    const code = await node.stop();
    assert.equal(code, 0, `node stops cleanly on SIGTERM:\n${node.output()}`);
    removeDir(node.dir);
  });

  const get = (path: string) => node.client.request('GET', path);

  test('state, version and identity', async () => {
    const state = await get('/node/state');
    assert.equal(state.status, 200);
    assert.equal(state.body.state, 'PartOfNetwork');
    assert.match(state.body.node_id, /^[0-9a-f]{64}$/);
    assert.ok(state.body.last_signed_seqno >= 2);
    assert.equal(state.body.startup_seqno, 0);

    // node_id = SHA-256 of the DER SubjectPublicKeyInfo of the node certificate's key.
    const nodeCert = new X509Certificate(readFileSync(join(node.dir, 'node_cert.pem')));
    const spki = nodeCert.publicKey.export({ type: 'spki', format: 'der' });
    assert.equal(state.body.node_id, createHash('sha256').update(spki).digest('hex'));
    // The node certificate is endorsed by the service certificate.
    assert.ok(nodeCert.verify(new X509Certificate(node.serviceCertificatePem).publicKey));
    assert.ok(nodeCert.subjectAltName?.includes('IP Address:127.0.0.1'));

    const version = await get('/node/version');
    assert.equal(version.status, 200);
    assert.match(version.body.version, /^\d+\.\d+\.\d+/);
  });

  test('commit, consensus and network reports', async () => {
    const commit = await get('/node/commit');
    assert.equal(commit.status, 200);
    assert.match(commit.body.transaction_id, /^\d+\.\d+$/);
    const withHistory = await get('/node/commit?view_history=true');
    assert.ok(Array.isArray(withHistory.body.view_history));
    assert.ok(withHistory.body.view_history.length >= 1);
    const badHistory = await get('/node/commit?view_history_since=abc');
    assert.equal(badHistory.status, 400);
    assert.equal(badHistory.body.error.code, 'InvalidQueryParameterValue');

    const consensus = await get('/node/consensus');
    assert.equal(consensus.status, 200);
    assert.equal(typeof consensus.body.current_view, 'number');
    assert.equal(consensus.body.configs.length, 1);

    const network = await get('/node/network');
    assert.equal(network.status, 200);
    assert.equal(network.body.service_status, 'Open', 'member0 opened the service (startNode)');
    assert.equal(network.body.recovery_count, 0);
    assert.equal(network.body.service_certificate.trim(), node.serviceCertificatePem.trim());
    const state = await get('/node/state');
    assert.equal(network.body.primary_id, state.body.node_id);
  });

  test('node listing with filters, self, primary, by id', async () => {
    const state = await get('/node/state');
    const nodeId = state.body.node_id as string;
    const all = await get('/node/network/nodes');
    assert.equal(all.status, 200);
    assert.equal(all.body.nodes.length, 1);
    assert.equal(all.body.nodes[0].node_id, nodeId);
    assert.equal(all.body.nodes[0].status, 'Trusted');
    assert.equal(all.body.nodes[0].primary, true);

    const [host, port] = node.address.split(':');
    assert.equal((await get(`/node/network/nodes?host=${host}&port=${port}`)).body.nodes.length, 1);
    assert.equal((await get(`/node/network/nodes?host=10.9.9.9`)).body.nodes.length, 0);
    assert.equal((await get(`/node/network/nodes?port=0${port}`)).body.nodes.length, 1, 'a port is a number');
    assert.equal((await get(`/node/network/nodes?port=${Number(port) === 1 ? 2 : 1}`)).body.nodes.length, 0);
    for (const bad of ['abc', '65536', '-1', '']) {
      const answer = await get(`/node/network/nodes?port=${bad}`);
      assert.equal(answer.status, 400, `port=${bad}`);
      assert.equal(answer.body.error.code, 'InvalidQueryParameterValue', `port=${bad}`);
    }
    assert.equal((await get('/node/network/nodes?status=Trusted')).body.nodes.length, 1);
    assert.equal((await get('/node/network/nodes?status=Pending')).body.nodes.length, 0);
    assert.equal((await get('/node/network/nodes?status=Bogus')).status, 400);

    assert.equal((await get('/node/network/nodes/self')).body.node_id, nodeId);
    assert.equal((await get('/node/network/nodes/primary')).body.node_id, nodeId);
    assert.equal((await get(`/node/network/nodes/${nodeId}`)).body.node_id, nodeId);
    const unknown = await get(`/node/network/nodes/${'0'.repeat(64)}`);
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.error.code, 'ResourceNotFound');
    assert.deepEqual((await get('/node/network/removable_nodes')).body.nodes, []);
    const del = await node.client.request('DELETE', `/node/network/nodes/${nodeId}`);
    assert.equal(del.status, 400);
    assert.equal(del.body.error.code, 'NodeNotRetired');
  });

  test('primary redirect, readiness, certificates, configuration and attestation', async () => {
    const head = await node.client.request('HEAD', '/node/primary');
    assert.equal(head.status, 200, 'the primary answers for itself (backups redirect to it)');
    assert.equal(head.headers.location, undefined);

    const app = await get('/node/ready/app');
    assert.equal(app.status, 204);
    assert.equal(app.text, '');
    assert.equal((await get('/node/ready/gov')).status, 204);

    const selfSigned = await get('/node/self_signed_certificate');
    assert.match(selfSigned.body.self_signed_certificate, /BEGIN CERTIFICATE/);
    const configuration = await get('/node/service/configuration');
    assert.equal(configuration.status, 200);
    assert.equal(configuration.body.recovery_threshold, 1);
    const previous = await get('/node/service/previous_identity');
    assert.equal(previous.status, 404);

    const state = await get('/node/state');
    for (const path of ['/node/quotes/self', '/node/attestations/self']) {
      const quote = await get(path);
      assert.equal(quote.status, 200);
      assert.equal(quote.body.format, 'Insecure_Virtual');
      assert.match(quote.body.measurement, /^[0-9a-f]{64}$/);
      assert.match(quote.body.host_data, /^[0-9a-f]{64}$/);
      // report_data binds the node's public key, whose digest is the node id.
      assert.equal(quote.body.report_data, state.body.node_id);
    }
    const all = await get('/node/attestations');
    assert.equal(all.status, 200);
    assert.deepEqual(all.body.attestations, [(await get('/node/attestations/self')).body], 'every trusted node: this one');
    for (const path of ['/node/historical_cache', '/node/index/strategies', '/node/js_metrics', '/node/jwt_keys/refresh/metrics']) {
      assert.equal((await get(path)).status, 200, path);
    }
  });

  test('/node/api lists every operator route of the spec', async () => {
    const api = await get('/node/api');
    assert.equal(api.status, 200);
    assert.equal(api.body.openapi, '3.0.0');
    const expected: [string, string][] = [
      ['get', '/node/api'], ['get', '/node/attestations'], ['get', '/node/attestations/self'], ['get', '/node/commit'],
      ['get', '/node/consensus'], ['get', '/node/historical_cache'], ['get', '/node/index/strategies'], ['get', '/node/js_metrics'],
      ['get', '/node/jwt_keys/refresh/metrics'], ['get', '/node/ledger_chunk'], ['head', '/node/ledger_chunk'],
      ['get', '/node/ledger_chunk/{chunk_name}'], ['head', '/node/ledger_chunk/{chunk_name}'], ['get', '/node/network/nodes'],
      ['get', '/node/network/nodes/primary'], ['get', '/node/network/nodes/self'], ['get', '/node/network/nodes/{node_id}'],
      ['delete', '/node/network/nodes/{node_id}'], ['get', '/node/network/removable_nodes'], ['head', '/node/primary'],
      ['get', '/node/quotes/self'], ['get', '/node/ready/app'], ['get', '/node/ready/gov'], ['get', '/node/receipt'],
      ['get', '/node/receipt/cose'], ['get', '/node/self_signed_certificate'], ['get', '/node/service/configuration'],
      ['get', '/node/service/previous_identity'], ['get', '/node/snapshot'], ['head', '/node/snapshot'],
      ['get', '/node/snapshot/{snapshot_name}'], ['head', '/node/snapshot/{snapshot_name}'], ['post', '/node/snapshot:create'],
      ['get', '/node/state'], ['get', '/node/version'], ['get', '/node/network'], ['post', '/app/log/private'], ['get', '/app/tx'],
      ['get', '/app/log/private/historical'], ['get', '/app/log/public/historical'],
      ['get', '/gov/recovery/encrypted-shares/{member_id}'], ['post', '/gov/recovery/members/{member_id}:recover'],
    ];
    for (const [method, path] of expected) assert.ok(api.body.paths[path]?.[method], `${method.toUpperCase()} ${path} is documented`);
    assert.ok(api.body.paths['/node/receipt'].get.parameters.some((p: any) => p.name === 'transaction_id' && p.required));
    // Parameters are described by what they mean, as the spec's table types them.
    const parameter = (path: string, name: string) => api.body.paths[path].get.parameters.find((p: any) => p.name === name);
    assert.equal(parameter('/node/ledger_chunk', 'since').schema.type, 'integer');
    assert.equal(parameter('/node/ledger_chunk', 'since').required, true);
    assert.equal(parameter('/node/commit', 'view_history_since').schema.type, 'integer');
    assert.equal(parameter('/node/commit', 'view_history').schema.type, 'boolean');
    // A member that holds no share of the last issue: a JSON error that names it.
    const shares = await get('/gov/recovery/encrypted-shares/abc');
    assert.equal(shares.status, 404);
    assert.equal(shares.body.error.code, 'RecoveryShareNotFound');
    assert.match(shares.body.error.message, /abc/);
  });

  test('receipt endpoints refuse missing and malformed transaction ids with a JSON error', async () => {
    for (const path of ['/node/receipt', '/node/receipt/cose']) {
      assert.equal((await get(path)).body.error.code, 'MissingRequiredQueryParameter', path);
      const bad = await get(`${path}?transaction_id=seven`);
      assert.equal(bad.status, 400, path);
      assert.equal(bad.body.error.code, 'InvalidQueryParameterValue', path);
    }
  });

  test('the logging app writes, reads, deletes and reports transaction status', async () => {
    const user = node.user;
    const write = await node.client.request('POST', '/app/log/private', { body: { id: 42, msg: 'hello private' }, identity: user });
    assert.equal(write.status, 200);
    const txId = write.headers['x-covenant-transaction-id'] as string;
    assert.match(txId, /^\d+\.\d+$/);
    const pub = await node.client.request('POST', '/app/log/public', { body: { id: 42, msg: 'hello public' }, identity: user });
    assert.equal(pub.status, 200);

    const status = await until('commit', async () => {
      const answer = await node.client.request('GET', `/app/tx?transaction_id=${txId}`);
      return answer.body.status === 'Committed' ? answer.body.status : undefined;
    });
    assert.equal(status, 'Committed');
    const [view, seqno] = txId.split('.').map(Number) as [number, number];
    assert.equal((await get(`/app/tx?transaction_id=${view}.${seqno + 100000}`)).body.status, 'Unknown');
    assert.equal((await get(`/app/tx?transaction_id=${view + 5}.${seqno}`)).body.status, 'Invalid');
    assert.equal((await get('/app/tx?transaction_id=nonsense')).status, 400);

    const read = await node.client.request('GET', '/app/log/private?id=42', { identity: user });
    assert.equal(read.status, 200);
    assert.equal(read.body.msg, 'hello private');
    assert.equal((await node.client.request('GET', '/app/log/public?id=42', { identity: user })).body.msg, 'hello public');

    const del = await node.client.request('DELETE', '/app/log/private?id=42', { identity: user });
    assert.equal(del.status, 200);
    assert.match(del.headers['x-covenant-transaction-id'] as string, /^\d+\.\d+$/);
    const gone = await node.client.request('GET', '/app/log/private?id=42', { identity: user });
    assert.equal(gone.status, 404);
    assert.equal(gone.body.error.code, 'ResourceNotFound');

    // Every id a write accepts can be read back, and the first id past 2^53 - 1 is refused both ways.
    const largest = Number.MAX_SAFE_INTEGER;
    assert.equal((await node.client.request('POST', '/app/log/public', { body: { id: largest, msg: 'edge' }, identity: user })).status, 200);
    assert.equal((await node.client.request('GET', `/app/log/public?id=${largest}`, { identity: user })).body.msg, 'edge');
    const tooLargeWrite = await node.client.request('POST', '/app/log/public', { rawBody: `{"id": ${largest + 1}, "msg": "x"}`, identity: user });
    assert.equal(tooLargeWrite.body.error.code, 'InvalidInput');
    const tooLargeRead = await node.client.request('GET', '/app/log/public?id=9007199254740992', { identity: user });
    assert.deepEqual(tooLargeRead.body.error, { code: 'InvalidQueryParameterValue', message: 'query parameter "id": must be at most 9007199254740991' });
  });

  test('historical queries read a record as a committed transaction wrote it, from the ledger', async () => {
    const user = node.user;
    const txIdOf = (answer: { status: number; headers: Record<string, unknown> }) => {
      assert.equal(answer.status, 200);
      return answer.headers['x-covenant-transaction-id'] as string;
    };
    const first = txIdOf(await node.client.request('POST', '/app/log/private', { body: { id: 77, msg: 'first' }, identity: user }));
    const second = txIdOf(await node.client.request('POST', '/app/log/private', { body: { id: 77, msg: 'second' }, identity: user }));
    const removal = txIdOf(await node.client.request('DELETE', '/app/log/private?id=77', { identity: user }));
    const pub = txIdOf(await node.client.request('POST', '/app/log/public', { body: { id: 77, msg: 'in clear' }, identity: user }));
    const historical = (scope: string, id: number, txId: string | undefined, identity = user) =>
      node.client.request('GET', `/app/log/${scope}/historical?id=${id}`, { identity, headers: txId === undefined ? {} : { 'x-covenant-transaction-id': txId } });

    const [view, seqno] = pub.split('.').map(Number) as [number, number];
    const notYet = await historical('public', 77, `${view}.${seqno + 100000}`);
    assert.equal(notYet.status, 202, 'a transaction this node has not committed: ask again later');
    assert.equal(notYet.headers['retry-after'], '1');
    assert.equal(notYet.body.status, 'Pending');
    const inClear = await until('the last write to commit', async () => {
      const answer = await historical('public', 77, pub);
      return answer.status === 200 ? answer : undefined;
    });
    assert.equal(inClear.body.msg, 'in clear');

    // The record is gone from the current state: these answers come from the ledger files.
    assert.equal((await node.client.request('GET', '/app/log/private?id=77', { identity: user })).status, 404);
    assert.equal((await historical('private', 77, first)).body.msg, 'first');
    assert.equal((await historical('private', 77, second)).body.msg, 'second');
    const removed = await historical('private', 77, removal);
    assert.equal(removed.status, 404);
    assert.match(removed.body.error.message, /removed/);
    const other = await historical('private', 78, first);
    assert.equal(other.status, 404);
    assert.equal(other.body.error.code, 'ResourceNotFound');
    assert.equal((await historical('private', 77, pub)).status, 404, 'the public write wrote no private record');

    const invalid = await historical('private', 77, `${Number(first.split('.')[0]) + 5}.${first.split('.')[1]}`);
    assert.equal(invalid.status, 404);
    assert.equal(invalid.body.error.code, 'TransactionInvalid');
    const missing = await historical('private', 77, undefined);
    assert.equal(missing.status, 400);
    assert.equal(missing.body.error.code, 'MissingRequiredHeader');
    const malformed = await historical('private', 77, 'seven');
    assert.equal(malformed.status, 400);
    assert.equal(malformed.body.error.code, 'InvalidHeaderValue');
    const anonymous = await node.client.request('GET', `/app/log/private/historical?id=77`, { headers: { 'x-covenant-transaction-id': first } });
    assert.equal(anonymous.status, 401);
  });

  test('bad input gets the right JSON error, writes nothing, and the node keeps serving', async () => {
    const user = node.user;
    const before = (await get('/node/commit')).body.transaction_id;
    const cases: [string, Promise<{ status: number; body: any }>, number, string][] = [
      ['malformed JSON', node.client.request('POST', '/app/log/private', { rawBody: '{"id": 1, "msg":', identity: user }), 400, 'InvalidJsonBody'],
      ['wrong types', node.client.request('POST', '/app/log/private', { body: { id: 'one', msg: 5 }, identity: user }), 400, 'InvalidInput'],
      ['unknown field', node.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'x', extra: true }, identity: user }), 400, 'InvalidInput'],
      ['unknown path', node.client.request('GET', '/app/nothing-here'), 404, 'ResourceNotFound'],
      ['wrong method', node.client.request('PUT', '/node/state'), 405, 'UnsupportedHttpVerb'],
      ['missing query parameter', node.client.request('GET', '/app/log/private', { identity: user }), 400, 'MissingRequiredQueryParameter'],
      ['body over the limit', node.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'x'.repeat(4096) }, identity: user }), 413, 'RequestBodyTooLarge'],
      ['no client certificate', node.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'x' } }), 401, 'InvalidAuthenticationInfo'],
      // Deeper than any schema check or JSON.stringify into the store could walk safely.
      ['body not UTF-8', node.client.request('POST', '/app/log/private', { rawBody: Buffer.concat([Buffer.from('{"id": 1, "msg": "'), Buffer.from([0xc3]), Buffer.from('"}')]), identity: user }), 400, 'InvalidJsonBody'],
      ['query parameter given twice', node.client.request('GET', '/app/log/private?id=1&id=2', { identity: user }), 400, 'InvalidQueryParameterValue'],
      ['JSON nested too deeply', node.client.request('POST', '/node/join', { rawBody: `{"node_data": ${'['.repeat(600)}${']'.repeat(600)}}` }), 400, 'InvalidJsonBody'],
    ];
    const stranger = await generateIdentity({ commonName: 'stranger' });
    cases.push([
      'unknown client certificate',
      node.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'x' }, identity: stranger }),
      401,
      'InvalidAuthenticationInfo',
    ]);
    for (const [name, answer, status, code] of cases) {
      const { status: got, body } = await answer;
      assert.equal(got, status, name);
      assert.equal(body?.error?.code, code, name);
      assert.equal(typeof body.error.message, 'string', name);
    }
    await sleep(150);
    const read = await node.client.request('GET', '/app/log/private?id=1', { identity: user });
    assert.equal(read.status, 404, 'no bad request wrote record 1');
    const state = await get('/node/state');
    assert.equal(state.body.state, 'PartOfNetwork');
    // Only signatures may have been added since: the commit moved by at most signature entries.
    assert.ok((await get('/node/commit')).body.transaction_id >= before);
  });

  test('ledger files: chunks end on signatures, committed chunks are renamed', async () => {
    const user = node.user;
    let lastTx = '';
    for (let i = 0; i < 120; i++) {
      const answer = await node.client.request('POST', '/app/log/private', { body: { id: 1000 + i, msg: 'm'.repeat(100) }, identity: user });
      assert.equal(answer.status, 200);
      lastTx = answer.headers['x-covenant-transaction-id'] as string;
    }
    await until('commit of the last write', async () => {
      const answer = await get(`/app/tx?transaction_id=${lastTx}`);
      return answer.body.status === 'Committed' ? true : undefined;
    });
    // Beside the chunks, the running node's lock (docs/node.md, "One process per node").
    const files = readdirSync(join(node.dir, 'ledger'))
      .filter((f) => f !== LOCK_FILE_NAME)
      .sort();
    assert.ok(readdirSync(join(node.dir, 'ledger')).includes(LOCK_FILE_NAME), 'the running node holds its ledger directory');
    const committed = files.filter((f) => f.endsWith('.committed'));
    assert.ok(committed.length >= 2, `several committed chunks with a 4KB chunk size: ${files.join(', ')}`);
    for (const name of files) assert.match(name, /^ledger_\d+(-\d+)?(\.committed)?$/);
    // Consecutive ranges without gaps, starting at 1.
    const ranges = committed.map((f) => /^ledger_(\d+)-(\d+)\.committed$/.exec(f)!).map((m) => [Number(m[1]), Number(m[2])] as const);
    ranges.sort((a, b) => a[0] - b[0]);
    assert.equal(ranges[0]![0], 1);
    for (let i = 1; i < ranges.length; i++) assert.equal(ranges[i]![0], ranges[i - 1]![1] + 1);
  });

  test('receipts verify against the service certificate, also once the proof must be rebuilt from the ledger', async () => {
    const user = node.user;
    const first = await node.client.request('POST', '/app/log/public', { body: { id: 1, msg: 'receipted' }, identity: user });
    const firstTx = first.headers['x-covenant-transaction-id'] as string;
    // Far beyond the last seqno the node knows of: not committed, and it cannot be soon (GET /app/tx
    // says Unknown): a JSON 404, not a 202 to be asked again forever.
    for (const path of ['/node/receipt', '/node/receipt/cose']) {
      for (const beyond of [`${firstTx.split('.')[0]}.${Number(firstTx.split('.')[1]) + 1_000_000}`, '1.999999999999999']) {
        const unknown = await get(`${path}?transaction_id=${beyond}`);
        assert.equal(unknown.status, 404, `${path} ${beyond}`);
        assert.equal(unknown.body.error.code, 'TransactionUnknown', path);
        assert.equal((await get(`/app/tx?transaction_id=${beyond}`)).body.status, 'Unknown');
      }
    }

    // More than two Merkle blocks (1024 leaves each) after it, so its block is compacted in memory.
    let last = '';
    for (let batch = 0; batch < 70; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 32 }, (_, i) =>
          node.client.request('POST', '/app/log/private', { body: { id: 10_000 + batch * 32 + i, msg: 'filler' }, identity: user }),
        ),
      );
      // The highest id of the batch (answers to concurrent writes arrive in any order).
      for (const answer of answers) {
        const txId = answer.headers['x-covenant-transaction-id'] as string;
        if (last === '' || Number(txId.split('.')[1]) > Number(last.split('.')[1])) last = txId;
      }
    }
    // Every filler committed: no signature comes after this, so both receipts below name the same one.
    await until('commit of the fillers', async () => {
      const answer = await get(`/app/tx?transaction_id=${last}`);
      return answer.body.status === 'Committed' ? true : undefined;
    });
    for (const txId of [firstTx, last]) {
      const answer = await until(`the receipt of ${txId}`, async () => {
        const r = await get(`/node/receipt?transaction_id=${txId}`);
        return r.status === 200 ? r : undefined;
      });
      const verified = verifyReceipt(answer.body.receipt, node.serviceCertificatePem);
      assert.equal(`${verified.view}.${verified.seqno}`, txId);
      // Any change to the receipt breaks it.
      const forged = structuredClone(answer.body.receipt);
      forged.leaf_components.claims_digest = '11'.repeat(32);
      assert.throws(() => verifyReceipt(forged, node.serviceCertificatePem));

      // The COSE receipt: the service key's signature over the same committed root.
      const cose = await get(`/node/receipt/cose?transaction_id=${txId}`);
      assert.equal(cose.status, 200);
      assert.equal(cose.headers['content-type'], 'application/cose');
      const coseVerified = verifyCoseReceipt(cose.bytes, node.serviceCertificatePem);
      assert.equal(`${coseVerified.view}.${coseVerified.seqno}`, txId);
      assert.deepEqual(coseVerified.leaf, verified.leaf);
      assert.deepEqual(coseVerified.root, verified.root);
      const signature = await get(`/app/tx?transaction_id=${coseVerified.signatureTxId}`);
      assert.equal(signature.body.status, 'Committed', 'the receipt names a committed signature transaction');
      const tampered = Buffer.from(cose.bytes);
      tampered[tampered.length - 5]! ^= 1; // inside the signature
      assert.throws(() => verifyCoseReceipt(tampered, node.serviceCertificatePem));

      // Offline, as an auditor would: `covenant receipt verify <file> --service-cert <pem>`.
      const serviceCertificateFile = join(node.dir, 'service_cert.pem');
      const files = { json: join(node.dir, 'receipt.json'), cose: join(node.dir, 'receipt.cose'), bad: join(node.dir, 'tampered.cose') };
      writeFileSync(files.json, answer.text);
      writeFileSync(files.cose, cose.bytes);
      writeFileSync(files.bad, tampered);
      for (const [file, expected] of [[files.json, 0], [files.cose, 0], [files.bad, 1]] as const) {
        const lines: string[] = [];
        const code = runReceiptVerify({ receiptFile: file, serviceCertificateFile }, { out: (l) => lines.push(l), err: (l) => lines.push(l) });
        assert.equal(code, expected, `${file}: ${lines.join('\n')}`);
        if (expected === 0) assert.match(lines.join('\n'), new RegExp(`transaction ${txId.replace('.', '\\.')},`));
      }
    }
    assert.ok(Number(last.split('.')[1]) - Number(firstTx.split('.')[1]) > 2048);

    // The signature that committed the fillers is the last transaction, and nothing will come to
    // cover it while the service is idle: its receipt is the root it signed, available at once.
    const commit = (await get('/node/commit')).body.transaction_id as string;
    assert.ok(Number(commit.split('.')[1]) > Number(last.split('.')[1]));
    const signatureAnswer = await get(`/node/receipt?transaction_id=${commit}`);
    assert.equal(signatureAnswer.status, 200, signatureAnswer.text);
    assert.deepEqual(Object.keys(signatureAnswer.body.receipt).sort(), ['cert', 'node_id', 'signature', 'signed_root']);
    const signed = verifySignatureReceipt(signatureAnswer.body.receipt, node.serviceCertificatePem);
    const lastAnswer = await get(`/node/receipt?transaction_id=${last}`);
    assert.deepEqual(signed.root, verifyReceipt(lastAnswer.body.receipt, node.serviceCertificatePem).root, 'the root the fillers are proven under');
    const signedRootHex = signatureAnswer.body.receipt.signed_root as string;
    const forgedRoot = { ...signatureAnswer.body.receipt, signed_root: (signedRootHex[0] === '0' ? '1' : '0') + signedRootHex.slice(1) };
    assert.throws(() => verifySignatureReceipt(forgedRoot, node.serviceCertificatePem));
    // A signature transaction has no COSE receipt: the error says where its receipt is.
    const coseOfSignature = await get(`/node/receipt/cose?transaction_id=${commit}`);
    assert.equal(coseOfSignature.status, 404);
    assert.equal(coseOfSignature.body.error.code, 'ReceiptUnavailable');
    assert.match(coseOfSignature.body.error.message, /\/node\/receipt\?transaction_id=/);
    const signatureFile = join(node.dir, 'signature-receipt.json');
    writeFileSync(signatureFile, signatureAnswer.text);
    const lines: string[] = [];
    const code = runReceiptVerify({ receiptFile: signatureFile, serviceCertificateFile: join(node.dir, 'service_cert.pem') }, { out: (l) => lines.push(l), err: (l) => lines.push(l) });
    assert.equal(code, 0, lines.join('\n'));
    assert.match(lines.join('\n'), new RegExp(`signature transaction ${commit.replace('.', '\\.')}, root ${signedRootHex}`));
    writeFileSync(signatureFile, JSON.stringify(forgedRoot));
    assert.equal(runReceiptVerify({ receiptFile: signatureFile, serviceCertificateFile: join(node.dir, 'service_cert.pem') }, { out: () => {}, err: () => {} }), 1);
  });
});

test('a transaction whose ledger entry could not be replicated is refused with 413, writes nothing, and commit goes on', async () => {
  // The real bound is just under the 64 MiB node-to-node frame; the test lowers it (above the
  // genesis transaction, which carries the constitution and certificates).
  const node = await startNode({
    // No signature falls between the writes below (they take milliseconds), so seqnos are consecutive.
    configPatch: { ledger_signatures: { tx_count: 1000, delay: '3s' }, rpc_interfaces: { primary: { max_body_size: '512KB' } } },
    env: { COVENANT_BUGGIFY_MAX_ENTRY_BYTES: String(200 * 1024) },
  });
  try {
    const write = (id: number, size: number) => node.client.request('POST', '/app/log/private', { body: { id, msg: 'm'.repeat(size) }, identity: node.user });
    const before = await write(1, 100);
    assert.equal(before.status, 200, before.text);
    const tooLarge = await write(2, 300 * 1024);
    assert.equal(tooLarge.status, 413, tooLarge.text);
    assert.equal(tooLarge.body.error.code, 'TransactionTooLarge');
    assert.match(tooLarge.body.error.message, /more than the 204800 a node can replicate: nothing was written/);
    assert.equal(tooLarge.headers['x-covenant-transaction-id'], undefined);
    const fits = await write(3, 150 * 1024);
    assert.equal(fits.status, 200, fits.text);
    // The refused transaction took no seqno: the next one follows the one before it.
    const [view, seqBefore] = (before.headers['x-covenant-transaction-id'] as string).split('.').map(Number);
    const txId = fits.headers['x-covenant-transaction-id'] as string;
    assert.equal(txId, `${view}.${seqBefore! + 1}`);
    await until('the later write to commit', async () => ((await node.client.request('GET', `/app/tx?transaction_id=${txId}`)).body.status === 'Committed' ? true : undefined));
    assert.equal((await node.client.request('GET', '/app/log/private?id=2', { identity: node.user })).status, 404, 'the refused record is absent');
    assert.equal((await node.client.request('GET', '/app/log/private?id=3', { identity: node.user })).body.msg.length, 150 * 1024);
  } finally {
    await node.stop();
    removeDir(node.dir);
  }
});

test('a signature due while a large write set is being framed waits for the framing worker instead of holding the node', async () => {
  // The worker answers each batch 1 s late; the signature is due 100 ms after the write, and may
  // wait for the worker half an election timeout (2 s). Had it drained the pipeline at once, the
  // request thread would have blocked until the worker answered, and the GET below, sent 300 ms
  // after the write, would have been answered after the signature had committed the write.
  const node = await startNode({
    configPatch: { ledger_signatures: { tx_count: 1000, delay: '100ms' }, consensus: { election_timeout: '4s', message_timeout: '200ms' } },
    env: { COVENANT_BUGGIFY_FRAME_DELAY_MS: '1000' },
  });
  try {
    const write = await node.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'L'.repeat(300 * 1024) }, identity: node.user });
    assert.equal(write.status, 200, write.text);
    const txId = write.headers['x-covenant-transaction-id'] as string;
    const seqno = Number(txId.split('.')[1]);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const during = await node.client.request('GET', '/node/commit');
    assert.equal(during.status, 200, during.text);
    assert.ok(Number(String(during.body.transaction_id).split('.')[1]) < seqno, `answered while the write was still being framed (${during.text})`);
    // Once the worker answers, the signature follows and commits the write.
    await until('the large write to commit', async () => ((await node.client.request('GET', `/app/tx?transaction_id=${txId}`)).body.status === 'Committed' ? true : undefined));
    assert.equal((await node.client.request('GET', '/app/log/private?id=1', { identity: node.user })).body.msg.length, 300 * 1024);
  } finally {
    await node.stop();
    removeDir(node.dir);
  }
});
