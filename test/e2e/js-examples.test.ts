/**
 * End to end: the example applications. `covenant sandbox --app examples/bank` starts a network
 * with the bank deployed (accounts, deposits, transfers whose receipt binds what they did);
 * examples/logging answers as the built-in message log does; `covenant app bundle` writes the
 * set_js_app proposal of a folder.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { HttpsClient, type ClientIdentity } from '../../src/platform/https-client.js';
import { CLI_ENTRY, memberConnectionOf, removeDir, startNode, waitForExit, type StartedNode } from '../../src/testing/node-process.js';
import { until, waitCommitted } from '../../src/testing/network.js';
import { deployApp } from '../../src/cli/app.js';
import { readBundleDirectory } from '../../src/apps/js/bundle-files.js';
import type { NetworkJson } from '../../src/cli/sandbox.js';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const EXAMPLES = join(ROOT, 'examples');

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('the bank example in covenant sandbox --app', () => {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-bank-'));
  let child: ReturnType<typeof spawn>;
  let network: NetworkJson;
  let client: HttpsClient;
  let user: ClientIdentity;

  before(async () => {
    child = spawn(process.execPath, [CLI_ENTRY, 'sandbox', '--nodes', '1', '--dir', join(dir, 'sb'), '--app', join(EXAMPLES, 'bank')], { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr!.on('data', (c: Buffer) => (output += c.toString()));
    const networkFile = join(dir, 'sb', 'network.json');
    await until('network.json', async () => (existsSync(networkFile) ? true : undefined), 60_000, 100).catch((e: Error) => {
      throw new Error(`${e.message}:\n${output}`);
    });
    assert.match(output, /The application is deployed/);
    network = JSON.parse(readFileSync(networkFile, 'utf8')) as NetworkJson;
    client = new HttpsClient(network.nodes[0]!.rpc_address, readFileSync(network.service_certificate, 'utf8'));
    user = { certificatePem: readFileSync(network.users[0]!.cert, 'utf8'), privateKeyPem: readFileSync(network.users[0]!.private_key, 'utf8') };
  });

  after(async () => {
    client?.close();
    child.kill('SIGINT');
    await waitForExit(child);
    for (const node of network?.nodes ?? []) await until(`node ${node.pid} to stop`, async () => (processAlive(node.pid) ? undefined : true), 10_000);
    rmSync(dir, { recursive: true, force: true });
  });

  test('accounts, deposits and transfers; a refused transfer changes nothing; a receipt binds the transfer', async () => {
    const call = (method: string, path: string, body?: unknown) => client.request(method, path, { identity: user, ...(body === undefined ? {} : { body }) });
    assert.equal((await call('PUT', '/app/accounts/alice')).status, 201);
    assert.equal((await call('PUT', '/app/accounts/bob')).status, 201);
    assert.equal((await call('PUT', '/app/accounts/alice')).body.error.code, 'AccountExists');
    assert.deepEqual((await call('POST', '/app/accounts/alice/deposit', { amount: 100 })).body, { id: 'alice', balance: 100 });

    const moved = await call('POST', '/app/transfers', { from: 'alice', to: 'bob', amount: 30 });
    assert.equal(moved.status, 200, moved.text);
    assert.deepEqual(moved.body, { from: 'alice', to: 'bob', amount: 30, number: 1, balance: 70 });
    const refused = await call('POST', '/app/transfers', { from: 'alice', to: 'bob', amount: 500 });
    assert.equal(refused.status, 409);
    assert.equal(refused.body.error.code, 'InsufficientFunds');
    assert.equal((await call('GET', '/app/accounts/alice')).body.balance, 70, 'the refused transfer wrote nothing');
    assert.equal((await call('GET', '/app/accounts/bob')).body.balance, 30);
    assert.deepEqual((await client.request('GET', '/app/transfers/count')).body, { transfers: 1 });
    assert.equal((await call('POST', '/app/transfers', { from: 'alice', to: 'bob', amount: -1 })).status, 400);

    // The transfer's receipt carries the digest of what it did.
    const txId = moved.headers['x-covenant-transaction-id'] as string;
    await waitCommitted({ address: network.nodes[0]!.rpc_address, client }, txId);
    const receipt = await until('the receipt', async () => {
      const answer = await client.request('GET', `/node/receipt?transaction_id=${txId}`);
      return answer.status === 200 ? answer.body.receipt : undefined;
    });
    const claims = JSON.stringify({ from: 'alice', to: 'bob', amount: 30, number: 1 });
    assert.equal(receipt.leaf_components.claims_digest, createHash('sha256').update(claims).digest('hex'));
  });
});

describe('the logging example answers as the built-in message log', () => {
  let node: StartedNode;

  before(async () => {
    node = await startNode({ configPatch: { ledger_signatures: { delay: '20ms' } } });
  });

  after(async () => {
    await node.stop();
    removeDir(node.dir);
  });

  /** The same requests, on fresh ids, with what each answered: status, and the body or the error code. */
  const script = async (base: number) => {
    const as = { identity: node.user };
    const out: unknown[] = [];
    const record = (answer: { status: number; body: any }) =>
      out.push([answer.status, answer.status >= 400 ? answer.body?.error?.code : answer.body]);
    for (const scope of ['private', 'public']) {
      const path = `/app/log/${scope}`;
      record(await node.client.request('POST', path, { ...as, body: { id: base, msg: `hello ${scope}` } }));
      record(await node.client.request('GET', `${path}?id=${base}`, as));
      record(await node.client.request('GET', `${path}?id=${base + 1}`, as));
      record(await node.client.request('GET', path, as));
      record(await node.client.request('GET', `${path}?id=x`, as));
      record(await node.client.request('POST', path, { ...as, body: { id: -1, msg: 'x' } }));
      record(await node.client.request('POST', path, { ...as, body: { id: 1, msg: 'x', extra: true } }));
      record(await node.client.request('POST', path, { body: { id: base, msg: 'no identity' } }));
      record(await node.client.request('DELETE', `${path}?id=${base}`, as));
      record(await node.client.request('DELETE', `${path}?id=${base}`, as));
    }
    return out;
  };

  test('the same requests get the same answers from the built-in log and from the bundle', async () => {
    const builtIn = await script(100);
    const bundle = readBundleDirectory(join(EXAMPLES, 'logging'));
    await deployApp(bundle, [memberConnectionOf(node)], () => undefined);
    const fromBundle = await script(200);
    assert.deepEqual(fromBundle, builtIn);
    // The bundle serves them: the built-in log would not list its openapi summary.
    const api = await node.client.request('GET', '/node/api');
    assert.equal(api.body.paths['/app/log/private'].post['x-covenant-mode'], 'readwrite');
  });

  test('a public record binds its claim: covenant receipt verify --claims accepts it offline and refuses an altered claim or receipt', async () => {
    const bundle = readBundleDirectory(join(EXAMPLES, 'logging'));
    await deployApp(bundle, [memberConnectionOf(node)], () => undefined);
    const as = { identity: node.user };
    const written = await node.client.request('POST', '/app/log/public', { ...as, body: { id: 300, msg: 'bound' } });
    assert.equal(written.status, 200, written.text);
    const privateWrite = await node.client.request('POST', '/app/log/private', { ...as, body: { id: 300, msg: 'not bound' } });
    const txId = written.headers['x-covenant-transaction-id'] as string;
    const privateTxId = privateWrite.headers['x-covenant-transaction-id'] as string;
    await waitCommitted({ address: node.address, client: node.client }, privateTxId);
    const receiptOf = (path: string, id: string) =>
      until(`${path} of ${id}`, async () => {
        const answer = await node.client.request('GET', `${path}?transaction_id=${id}`);
        return answer.status === 200 ? answer : undefined;
      });
    const json = await receiptOf('/node/receipt', txId);
    const cose = await receiptOf('/node/receipt/cose', txId);
    const claim = Buffer.from(JSON.stringify({ id: 300, msg: 'bound' }));
    const digest = createHash('sha256').update(claim).digest('hex');
    assert.equal(json.body.receipt.leaf_components.claims_digest, digest);
    assert.equal((await receiptOf('/node/receipt', privateTxId)).body.receipt.leaf_components.claims_digest, '0'.repeat(64), 'a private record binds no claim');

    const file = (name: string, bytes: string | Uint8Array) => {
      const path = join(node.dir, name);
      writeFileSync(path, bytes);
      return path;
    };
    const receiptFile = file('claimed.json', json.text);
    const coseFile = file('claimed.cose', cose.bytes);
    const claimFile = file('claim.json', claim);
    const otherClaimFile = file('other-claim.json', JSON.stringify({ id: 300, msg: 'bount' }));
    const altered = JSON.parse(json.text);
    altered.receipt.leaf_components.claims_digest = createHash('sha256').update(readFileSync(otherClaimFile)).digest('hex');
    const alteredFile = file('altered.json', JSON.stringify(altered));
    const serviceCert = join(node.dir, 'service_cert.pem');
    const verify = async (...args: string[]) => {
      const run = await promisify(execFile)(process.execPath, [CLI_ENTRY, 'receipt', 'verify', ...args, '--service-cert', serviceCert]).then(
        (r) => ({ code: 0, out: r.stdout + r.stderr }),
        (e: { code: number; stdout: string; stderr: string }) => ({ code: e.code, out: e.stdout + e.stderr }),
      );
      return run;
    };
    const ok = await verify(receiptFile, '--claims', claimFile);
    assert.equal(ok.code, 0, ok.out);
    assert.match(ok.out, new RegExp(`binds claims digest ${digest}`));
    assert.equal((await verify(coseFile, '--claims', claimFile)).code, 0);
    assert.equal((await verify(receiptFile, '--claims-digest', digest.toUpperCase())).code, 0);
    const wrongClaim = await verify(receiptFile, '--claims', otherClaimFile);
    assert.equal(wrongClaim.code, 1, wrongClaim.out);
    assert.match(wrongClaim.out, /does not bind that claim/);
    assert.equal((await verify(coseFile, '--claims', otherClaimFile)).code, 1);
    // A receipt whose claims digest was altered to match the other claim fails its proof.
    const forged = await verify(alteredFile, '--claims', otherClaimFile);
    assert.equal(forged.code, 1, forged.out);
    assert.match(forged.out, /signature does not verify/);
    assert.equal((await verify(receiptFile, '--claims-digest', 'abc')).code, 2);
    assert.equal((await verify(receiptFile, '--claims', claimFile, '--claims-digest', digest)).code, 2);
  });

  test('covenant app bundle writes the set_js_app proposal of a folder', async () => {
    const out = join(node.dir, 'proposal.json');
    await promisify(execFile)(process.execPath, [CLI_ENTRY, 'app', 'bundle', join(EXAMPLES, 'logging'), '--out', out]);
    const proposal = JSON.parse(readFileSync(out, 'utf8'));
    assert.equal(proposal.actions[0].name, 'set_js_app');
    assert.deepEqual(proposal.actions[0].args.bundle.modules.map((m: { name: string }) => m.name), ['logging.js', 'validation.js']);
    const refused = await promisify(execFile)(process.execPath, [CLI_ENTRY, 'app', 'bundle', join(ROOT, 'test')]).catch((e: { code: number; stderr: string }) => e);
    assert.equal((refused as { code: number }).code, 1);
    assert.match((refused as { stderr: string }).stderr, /app\.json/);
  });
});
