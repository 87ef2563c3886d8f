/**
 * End to end: a JavaScript application deployed by governance (set_js_app) on real node processes.
 * Refused bundles, every mode and authentication policy, the ledger's two domains, error answers
 * and setApplyWrites, hostile handlers bounded with the node staying primary, redeploy, removal
 * (back to the built-in message log), a restart; on three nodes a backup that serves readonly
 * endpoints itself and forwards readwrite ones, and a node joining from a snapshot; and the
 * bundle with its private records through a disaster recovery.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generateKeyPairSync } from 'node:crypto';
import { SignJWT } from 'jose';
import { ACCEPT_BALLOT, propose, vote } from '../../src/cli/member.js';
import { readBundleDirectory } from '../../src/apps/js/bundle-files.js';
import { joinOptionsOf, memberConnectionOf, removeDir, restartNode, startJoiningNode, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { parseSnapshotFileName } from '../../src/ledger/index.js';
import { openRecoveredService, prepareRecoveryMembers, removeRecoverDir, startRecoverNode } from '../../src/testing/recovery.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { startNetwork, until, waitCommitted, type TestNetwork } from '../../src/testing/network.js';

const FAST = { ledger_signatures: { tx_count: 10, delay: '20ms' } };
const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
const FIXTURE = join(ROOT, 'test', 'e2e', 'fixtures', 'js-app');

/** Proposes `actions` as member0 and votes for it; returns the proposal's final record. */
async function govern(node: StartedNode, actions: unknown[]) {
  const connection = memberConnectionOf(node);
  const proposed = await propose(connection, actions);
  const id = (proposed.body as { proposal_id: string }).proposal_id;
  const voted = await vote(connection, id, ACCEPT_BALLOT);
  return voted.body as { state: string; failure?: { reason: string } };
}

async function governRefused(node: StartedNode, actions: unknown[]): Promise<string> {
  try {
    await propose(memberConnectionOf(node), actions);
  } catch (e) {
    return (e as Error).message;
  }
  throw new Error('the proposal was accepted');
}

function ledgerBytes(node: StartedNode): Buffer {
  const dir = join(node.dir, 'ledger');
  return Buffer.concat(readdirSync(dir).map((f) => readFileSync(join(dir, f))));
}

describe('a JavaScript application on one node', () => {
  let node: StartedNode;
  const bundle = readBundleDirectory(FIXTURE);
  const as = (who: 'user' | 'member' | 'none') => (who === 'none' ? {} : { identity: who === 'user' ? node.user : node.member });
  const call = (method: string, path: string, options: Record<string, unknown> = {}) => node.client.request(method, path, options);

  before(async () => {
    node = await startNode({ configPatch: { ledger_signatures: { tx_count: 10, delay: '20ms' } } });
  });

  after(async () => {
    await node.stop();
    removeDir(node.dir);
  });

  test('bundles that do not compile, name a missing function or module, or have a malformed app.json are refused', async () => {
    const broken = { ...bundle, modules: bundle.modules.map((m) => (m.name === 'lib/codec.js' ? { ...m, module: 'export const key = (;' } : m)) };
    assert.match(await governRefused(node, [{ name: 'set_js_app', args: { bundle: broken } }]), /module "lib\/codec.js": SyntaxError/);
    const noFunction = { ...bundle, modules: bundle.modules.map((m) => (m.name === 'app.js' ? { ...m, module: m.module.replace('export function whoami', 'function whoami') } : m)) };
    assert.match(await governRefused(node, [{ name: 'set_js_app', args: { bundle: noFunction } }]), /"\/whoami"\.get: module "app.js" does not export a function "whoami"/);
    const noModule = { ...bundle, modules: bundle.modules.filter((m) => m.name !== 'hostile.js') };
    assert.match(await governRefused(node, [{ name: 'set_js_app', args: { bundle: noModule } }]), /module "hostile.js" is not in the bundle/);
    const badMode = { ...bundle, metadata: { endpoints: { '/x': { get: { js_module: 'app.js', js_function: 'open', authn_policies: [], mode: 'sometimes' } } } } };
    assert.match(await governRefused(node, [{ name: 'set_js_app', args: { bundle: badMode } }]), /endpoints\.\/x\.get\.mode/);
    // Nothing was installed: the built-in message log is still the application.
    const write = await call('POST', '/app/log/private', { ...as('user'), body: { id: 1, msg: 'built in' } });
    assert.equal(write.status, 200, write.text);
  });

  test('deploy, then every mode and policy', async () => {
    const outcome = await govern(node, [{ name: 'set_js_app', args: { bundle } }]);
    assert.equal(outcome.state, 'Accepted', JSON.stringify(outcome));

    // Answered once committed: the linearizable read below must see it.
    const put = await call('PUT', '/app/records/7', {
      ...as('user'),
      headers: { 'x-covenant-consistency': 'committed' },
      body: { msg: 'PRIVATE-MARKER-4711', note: 'PUBLIC-MARKER-0815' },
    });
    assert.equal(put.status, 201, put.text);
    assert.deepEqual(put.body, { id: '7' });
    const txId = put.headers['x-covenant-transaction-id'] as string;
    assert.match(txId, /^\d+\.\d+$/);

    const got = await call('GET', '/app/records/7?x=1', as('user'));
    assert.equal(got.status, 200, got.text);
    assert.deepEqual(got.body, { msg: 'PRIVATE-MARKER-4711', caller: 'user_cert', query: 'x=1' });
    assert.match(got.headers['x-covenant-transaction-id'] as string, /^\d+\.\d+$/);
    const linearizable = await call('GET', '/app/records/7', { ...as('user'), headers: { 'x-covenant-consistency': 'linearizable' } });
    assert.equal(linearizable.status, 200, linearizable.text);
    assert.equal((await call('GET', '/app/records/8', as('user'))).status, 404);

    // Policies: a member is not a user; no certificate is refused; an empty list needs nothing.
    assert.equal((await call('GET', '/app/records/7', as('member'))).status, 401);
    assert.equal((await call('PUT', '/app/records/9', { ...as('none'), body: { msg: 'x' } })).status, 401);
    const member = await call('GET', '/app/whoami', as('member'));
    assert.equal(member.status, 200, member.text);
    assert.deepEqual(member.body, { policy: 'member_cert', id: node.member.id, cert: node.member.certificatePem });
    const user = await call('GET', '/app/whoami', as('user'));
    assert.deepEqual(user.body, { policy: 'user_cert', id: node.user.id, cert: node.user.certificatePem });
    const open = await call('GET', '/app/open', as('none'));
    assert.equal(open.status, 200);
    assert.equal(open.text, 'open to no_auth');
    assert.equal(open.headers['x-example'], 'yes');

    // The built-in message log is replaced; /app/commit and /app/tx stay.
    assert.equal((await call('POST', '/app/log/private', { ...as('user'), body: { id: 2, msg: 'x' } })).status, 404);
    assert.equal((await call('GET', '/app/commit')).status, 200);
    await waitCommitted(node, txId);

    // A private value is never in clear in the ledger; a public one is.
    await until('the record in the ledger files', async () => (ledgerBytes(node).includes('PUBLIC-MARKER-0815') ? true : undefined));
    assert.ok(!ledgerBytes(node).includes('PRIVATE-MARKER-4711'), 'the private record is encrypted in the ledger');
  });

  test('the jwt policy accepts a token from a registered issuer and refuses a bad one', async () => {
    const key = generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
    const issuer = 'https://issuer.example';
    const jwk = { ...key.publicKey.export({ format: 'jwk' }), kid: 'app-key' };
    assert.equal((await govern(node, [{ name: 'set_jwt_issuer', args: { issuer, jwks: { keys: [jwk] } } }])).state, 'Accepted');
    const token = await new SignJWT({ iss: issuer, sub: 'alice', exp: Math.floor(Date.now() / 1000) + 300 }).setProtectedHeader({ alg: 'ES256', kid: 'app-key' }).sign(key.privateKey);
    const read = await call('GET', '/app/records/7', { headers: { authorization: `Bearer ${token}` } });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.caller, 'jwt');
    const forged = await call('GET', '/app/records/7', { headers: { authorization: `Bearer ${token.slice(0, -4)}AAAA` } });
    assert.equal(forged.status, 401, forged.text);
  });

  test('an error answer applies its writes only after setApplyWrites(true)', async () => {
    const dropped = await call('POST', '/app/reject');
    assert.equal(dropped.status, 409);
    assert.equal(dropped.headers['x-covenant-transaction-id'], undefined, 'nothing was written');
    const applied = await call('POST', '/app/reject?apply=true');
    assert.equal(applied.status, 409);
    assert.match(applied.headers['x-covenant-transaction-id'] as string, /^\d+\.\d+$/);
  });

  test('/node/api lists the endpoints with their openapi; /node/js_metrics has real figures', async () => {
    const api = await call('GET', '/node/api');
    const put = api.body.paths['/app/records/{id}']?.put;
    assert.equal(put?.summary, 'Writes a record (private and public copies)');
    assert.deepEqual(put?.['x-covenant-authn-policies'], ['user_cert']);
    const metrics = await call('GET', '/node/js_metrics');
    assert.equal(metrics.status, 200);
    assert.ok(metrics.body.bytecode_size > 0, JSON.stringify(metrics.body));
    assert.equal(metrics.body.bytecode_used, true);
    assert.ok(metrics.body.executions >= 5);
    assert.equal(metrics.body.endpoints, 7);
    assert.equal(metrics.body.max_execution_time, 100);
  });

  test('hostile handlers are answered 500, write nothing, and the node stays primary', async () => {
    const tighter = await govern(node, [{ name: 'set_js_runtime_options', args: { max_heap_bytes: 32 * 1024 * 1024, max_execution_time_ms: 50 } }]);
    assert.equal(tighter.state, 'Accepted', JSON.stringify(tighter));
    const viewBefore = (await call('GET', '/node/consensus')).body.view;
    const expected: Record<string, string> = {
      loop: 'JsTimeout',
      allocate: 'JsOutOfMemory',
      grow: 'JsOutOfMemory',
      recurse: 'JsStackOverflow',
      throw: 'JsException',
      malformed: 'JsInvalidResponse',
    };
    for (const [kind, code] of Object.entries(expected)) {
      const answer = await call('POST', `/app/hostile/${kind}`);
      assert.equal(answer.status, 500, `${kind}: ${answer.text}`);
      assert.equal(answer.body.error.code, code, `${kind}: ${answer.text}`);
      assert.equal(answer.headers['x-covenant-transaction-id'], undefined);
      // A normal client is answered right after.
      assert.equal((await call('GET', '/app/records/7', as('user'))).status, 200);
    }
    const harmless = await call('POST', '/app/hostile/none');
    assert.equal(harmless.status, 200, harmless.text);
    const consensus = (await call('GET', '/node/consensus')).body;
    assert.equal(consensus.role, 'Primary');
    assert.equal(consensus.view, viewBefore);
    // Every hostile handler wrote before it failed: none of it was kept; the harmless one's was.
    for (const kind of Object.keys(expected)) assert.equal((await call('GET', `/app/hostile/${kind}`)).body, false, kind);
    assert.equal((await call('GET', '/app/hostile/none')).body, true);
  });

  test('redeploy replaces the endpoints; remove falls back to the built-in application; a restart keeps the bundle', async () => {
    const smaller = {
      metadata: { endpoints: { '/hello': { get: { js_module: 'app.js', js_function: 'hello', authn_policies: [], mode: 'readonly' } } } },
      modules: [{ name: 'app.js', module: 'export function hello() { return { body: { hello: "world" } } }' }],
    };
    assert.equal((await govern(node, [{ name: 'set_js_app', args: { bundle: smaller } }])).state, 'Accepted');
    assert.deepEqual((await call('GET', '/app/hello')).body, { hello: 'world' });
    assert.equal((await call('GET', '/app/records/7', as('user'))).status, 404);

    node = await (async () => {
      await node.stop();
      return restartNode(node);
    })();
    const again = await until('the application after the restart', async () => {
      const answer = await call('GET', '/app/hello');
      return answer.status === 200 ? answer : undefined;
    });
    assert.deepEqual(again.body, { hello: 'world' });
    await until('the restarted node to lead', async () => ((await call('GET', '/node/consensus')).body.role === 'Primary' ? true : undefined));

    assert.equal((await govern(node, [{ name: 'remove_js_app' }])).state, 'Accepted');
    assert.equal((await call('GET', '/app/hello')).status, 404);
    const builtIn = await call('GET', '/app/log/private?id=1', as('user'));
    assert.equal(builtIn.status, 200, builtIn.text);
    assert.deepEqual(builtIn.body, { msg: 'built in' });
  });
});

describe('a JavaScript application on three nodes', () => {
  let network: TestNetwork;

  before(async () => {
    network = await startNetwork(3, FAST);
  });

  after(async () => {
    await network.stopAll();
  });

  test('a backup serves readonly endpoints from its state and forwards readwrite ones', async () => {
    const primary = await network.primary();
    const backup = network.nodes.find((n) => n !== primary)!;
    const outcome = await govern(primary, [{ name: 'set_js_app', args: { bundle: readBundleDirectory(FIXTURE) } }]);
    assert.equal(outcome.state, 'Accepted');
    await until('the backup to apply the bundle', async () => ((await backup.client.request('GET', '/node/js_metrics')).body.app_installed ? true : undefined));

    const put = await backup.client.request('PUT', '/app/records/1', { identity: backup.user, body: { msg: 'via a backup' } });
    assert.equal(put.status, 201, put.text);
    const txId = put.headers['x-covenant-transaction-id'] as string;
    await waitCommitted(backup, txId);
    const read = await backup.client.request('GET', '/app/records/1', { identity: backup.user });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.body.msg, 'via a backup');
    const backupMetrics = await backup.client.request('GET', '/node/js_metrics');
    assert.ok(backupMetrics.body.executions >= 1, 'the backup executed the read itself');
  });

  test('a node that joins from a snapshot serves the bundle the snapshot holds', async () => {
    const primary = await network.primary();
    const snapshots = (node: StartedNode) =>
      existsSync(join(node.dir, 'snapshots')) ? readdirSync(join(node.dir, 'snapshots')).filter((f) => parseSnapshotFileName(f)?.committed === true) : [];
    const before = new Set(snapshots(primary));
    const create = await primary.client.request('POST', '/node/snapshot:create');
    assert.equal(create.status, 204, create.text);
    const snapshot = await until('a committed snapshot', async () => snapshots(primary).find((f) => !before.has(f)), 30_000);
    const joinerDir = `${primary.dir}-snapshot-joiner`;
    mkdirSync(join(joinerDir, 'snapshots'), { recursive: true });
    copyFileSync(join(primary.dir, 'snapshots', snapshot), join(joinerDir, 'snapshots', snapshot));
    const joiner = await startJoiningNode({ ...joinOptionsOf(network.nodes[0]!), dir: joinerDir, configPatch: FAST });
    network.nodes.push(joiner);
    assert.equal((await joiner.client.request('GET', '/node/state')).body.startup_seqno, parseSnapshotFileName(snapshot)!.seqno);
    const read = await until('the joiner to serve the application', async () => {
      const answer = await joiner.client.request('GET', '/app/records/1', { identity: joiner.user });
      return answer.status === 200 ? answer : undefined;
    });
    assert.equal(read.body.msg, 'via a backup');
  });
});

describe('a JavaScript application through a disaster recovery', () => {
  test('the recovered service serves the bundle, with its private records', async () => {
    const oldDir = mkdtempSync(join(tmpdir(), 'covenant-js-recovery-'));
    const { members, startPatch } = await prepareRecoveryMembers(oldDir, 1, 1);
    const old = await startNode({ dir: oldDir, configPatch: { ...FAST, command: { start: startPatch } } });
    members[0]!.identity = old.member;
    let recovered: StartedNode | undefined;
    try {
      await until('recovery shares issued', async () => ((await old.client.request('GET', `/gov/recovery/encrypted-shares/${old.member.id}`)).status === 200 ? true : undefined));
      assert.equal((await govern(old, [{ name: 'set_js_app', args: { bundle: readBundleDirectory(FIXTURE) } }])).state, 'Accepted');
      const put = await old.client.request('PUT', '/app/records/3', {
        identity: old.user,
        headers: { 'x-covenant-consistency': 'committed' },
        body: { msg: 'kept through the disaster' },
      });
      assert.equal(put.status, 201, put.text);
      await old.kill();

      recovered = await startRecoverNode({ from: old.dir, previousServiceCertificatePem: old.serviceCertificatePem, user: old.user, member: old.member, configPatch: FAST });
      await openRecoveredService(recovered, old.serviceCertificatePem, members);
      const node = recovered;
      const read = await until('the recovered application', async () => {
        const answer = await node.client.request('GET', '/app/records/3', { identity: node.user });
        return answer.status === 200 ? answer : undefined;
      }, 60_000);
      assert.equal(read.body.msg, 'kept through the disaster');
    } finally {
      await old.stop();
      if (recovered) {
        await recovered.stop();
        removeRecoverDir(recovered);
      }
      removeDir(oldDir);
    }
  });
});
