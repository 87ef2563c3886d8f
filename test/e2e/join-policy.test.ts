/**
 * End to end: the join policy and transparent statements on real node processes. Statements are
 * signed and registered with the CLI (`covenant statement sign|register`) and through its client,
 * a policy admits statements of one issuer DID with svn at least N, and each row of the decision
 * table and each structure failure is a join request answered with its code, leaving the network
 * unchanged. Then the code upgrade through the policy: a node with new host data and svn N+1 joins
 * and is trusted by the usual vote; one with svn N-1 exits naming the policy's reason. Hostile
 * policies fail joins with an error and leave the node serving.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { toBase64 } from '../../src/base/bytes.js';
import { codeMeasurement, createVirtualQuote, defaultHostData } from '../../src/attestation/virtual.js';
import { ACCEPT_BALLOT, propose, vote } from '../../src/cli/member.js';
import { registerStatement } from '../../src/cli/statement.js';
import { decodeCoseSign1, encodeCoseSign1, generateEcKeyPair, generateIdentity, loadPrivateKey, publicKeyDer, signCoseSign1, type Identity } from '../../src/crypto/index.js';
import { attachReceipt, signStatement, StatementHeader } from '../../src/gov/transparent-statement.js';
import { HttpsClient } from '../../src/platform/https-client.js';
import { CLI_ENTRY, joinOptionsOf, memberConnectionOf, startJoiningNode, waitForExit, type StartedNode } from '../../src/testing/node-process.js';
import { startNetwork, until } from '../../src/testing/network.js';
import { makeIssuer, makeService, type Issuer } from '../gov/statement-helpers.js';

const run = promisify(execFile);
const FAST = { ledger_signatures: { delay: '20ms' }, consensus: { election_timeout: '500ms', message_timeout: '50ms' } };
const SVN_MIN = 5;
/** Admits statements of the issuer `did` (resolved against their chains by the service) with svn at least SVN_MIN. */
const policyFor = (did: string) => `export function policy(statements) {
  for (const s of statements) {
    if (s.phdr.cwt.iss !== ${JSON.stringify(did)}) return 'statement from an unknown issuer ' + s.phdr.cwt.iss;
    if (s.resolved_issuer.did !== s.phdr.cwt.iss || s.resolved_issuer.ca_index < 1) return 'the issuer was not resolved';
    if (!(s.phdr.cwt.svn >= ${SVN_MIN})) return 'svn ' + s.phdr.cwt.svn + ' is below ${SVN_MIN}';
    if (s.receipts[0].vds !== 1 || s.receipts[0].leaves[0].claims_digest.length !== 64) return 'unexpected receipt';
  }
  return true;
}`;
const hostData = (name: string) => createHash('sha256').update(name).digest('hex');

test('the join policy judges transparent statements: the decision table, the structure checks, the code upgrade, hostile policies', async () => {
  const network = await startNetwork(1, FAST);
  const first = network.nodes[0]!;
  const work = mkdtempSync(join(tmpdir(), 'covenant-statements-'));
  const issuer = await makeIssuer();
  const ISSUER = issuer.did;
  const POLICY = policyFor(ISSUER);
  const member = memberConnectionOf(first);
  const passProposal = async (actions: unknown[]) => {
    const proposal = await propose(member, actions);
    const id = proposal.body.proposal_id as string;
    const state = proposal.body.state === 'Open' ? (await vote(member, id, ACCEPT_BALLOT)).body.state : proposal.body.state;
    assert.equal(state, 'Accepted', JSON.stringify(actions));
  };
  const register = async (statement: Uint8Array, as: Identity | StartedNode['user'] = first.user) =>
    (await registerStatement({ address: first.address, caPem: first.serviceCertificatePem, identity: as, statement })).transparentStatement;
  const sign = (host: string, svn: number, who: Issuer = issuer, overrides: Partial<Parameters<typeof signStatement>[0]> = {}) =>
    signStatement({ privateKeyPem: who.keys.privateKeyPem, x5chainPem: who.chainPem, issuer: ISSUER, subject: 'covenant-node', payload: Buffer.from(host), svn, ...overrides });

  const version = (await first.client.request('GET', '/node/version')).body.version as string;
  /** One raw join request with this host data and statement; its answer. */
  const joinRequest = async (host: string, statement?: Uint8Array) => {
    const identity = await generateIdentity({ commonName: 'joiner' });
    const client = new HttpsClient(first.address, first.serviceCertificatePem);
    try {
      return await client.request('POST', '/node/join', {
        identity,
        body: {
          public_key: identity.publicKeyPem,
          quote_info: createVirtualQuote(publicKeyDer(identity.publicKeyPem), codeMeasurement(version), host),
          node_data: null,
          rpc_interfaces: { primary: { bind_address: '127.0.0.1:1', published_address: '127.0.0.1:1', enabled_operator_features: [] } },
          node_to_node_interface: { bind_address: '127.0.0.1:2', published_address: '127.0.0.1:2' },
          startup_seqno: 0,
          subject_alt_names: ['iPAddress:127.0.0.1'],
          ...(statement ? { host_data_transparent_statement: toBase64(statement) } : {}),
        },
      });
    } finally {
      client.close();
    }
  };
  const refused = async (host: string, statement: Uint8Array | undefined, code: string, reason: RegExp) => {
    const answer = await joinRequest(host, statement);
    assert.equal(answer.status, 403, `${code}: ${answer.text}`);
    assert.equal(answer.body.error.code, code, answer.text);
    assert.match(answer.body.error.message, reason);
  };
  const nodes = async () => (await first.client.request('GET', '/node/network/nodes')).body.nodes.length as number;

  try {
    const NEW = hostData('covenant code version 2');
    // Registration: the CLI signs and registers (as the user); the transparent statement carries the receipt.
    writeFileSync(join(work, 'key.pem'), issuer.keys.privateKeyPem);
    writeFileSync(join(work, 'chain.pem'), issuer.chainPem);
    writeFileSync(join(work, 'host_data'), NEW);
    writeFileSync(join(work, 'user_cert.pem'), first.user.certificatePem);
    writeFileSync(join(work, 'user_key.pem'), first.user.privateKeyPem);
    writeFileSync(join(work, 'service_cert.pem'), first.serviceCertificatePem);
    const cli = (...args: string[]) => run(process.execPath, [CLI_ENTRY, 'statement', ...args], { cwd: work });
    // No --issuer: the CLI names the chain's root and the key certificate's CN, the issuer's DID.
    await cli('sign', '--key', 'key.pem', '--chain', 'chain.pem', '--subject', 'covenant-node', '--payload', 'host_data', '--svn', String(SVN_MIN + 1), '--out', 'statement.cose');
    const registered = await cli('register', '--statement', 'statement.cose', '--address', first.address, '--ca', 'service_cert.pem', '--cert', 'user_cert.pem', '--key', 'user_key.pem', '--out', 'transparent.cose');
    assert.match(JSON.parse(registered.stdout).transaction_id as string, /^\d+\.\d+$/);
    const goodNew = new Uint8Array(readFileSync(join(work, 'transparent.cose')));
    assert.ok(decodeCoseSign1(goodNew).unprotectedHeader.get(StatementHeader.receipts), 'the receipt is embedded (label 394)');

    // The register endpoint: members may register too; a stranger, or a badly signed statement, may not.
    const lowNew = await register(sign(NEW, SVN_MIN - 1), first.member);
    const stranger = await generateIdentity({ commonName: 'stranger' });
    await assert.rejects(register(sign(NEW, 1), stranger), /InvalidAuthenticationInfo \(401\)/);
    const intruder = generateEcKeyPair('P-384');
    await assert.rejects(register(sign(NEW, 1, { ...issuer, keys: intruder })), /InvalidSignedStatement \(400\).*x5chain/);
    // Signed under a fresh, self-made CA (its leaf named as the issuer's) but claiming the issuer's DID: not bound, refused.
    const forger = await makeIssuer();
    const forged = sign(NEW, SVN_MIN + 10, forger);
    await assert.rejects(register(forged), /InvalidStatementIssuer \(400\).*does not resolve against the statement's x5chain: no CA certificate of x5chain has the sha256 fingerprint/);

    const before = await nodes();
    // No policy set yet: a statement does not help untrusted host data.
    await refused(NEW, goodNew, 'UntrustedHostData', /no join policy is set/);
    await passProposal([{ name: 'set_node_join_policy', args: { policy: POLICY } }]);

    // Decision table. Untrusted host data without a statement: refused.
    await refused(NEW, undefined, 'UntrustedHostData', /sent no transparent statement/);
    // The policy answers a string: refused with it.
    await refused(NEW, lowNew, 'JoinPolicyRefused', new RegExp(`svn ${SVN_MIN - 1} is below ${SVN_MIN}`));
    // Structure failures, before any policy runs.
    const other = await makeService();
    const withReceipts = (statement: Uint8Array, receipts: Uint8Array[]) =>
      encodeCoseSign1({ ...decodeCoseSign1(statement), unprotectedHeader: new Map([[StatementHeader.receipts, receipts]]) });
    const bySomeoneElse = sign(NEW, SVN_MIN + 1, { ...issuer, keys: generateEcKeyPair('P-384') });
    await refused(NEW, attachReceipt(bySomeoneElse, decodeReceipt(goodNew)), 'InvalidTransparentStatement', /signature does not verify with the key of its x5chain/);
    // The forged statement with a receipt of this service: its issuer is resolved again before the policy.
    await refused(NEW, attachReceipt(forged, decodeReceipt(goodNew)), 'InvalidTransparentStatement', /does not resolve against the statement's x5chain/);
    const unregistered = sign(NEW, SVN_MIN + 1);
    await refused(NEW, attachReceipt(unregistered, other.receiptOf(unregistered)), 'InvalidTransparentStatement', /not a receipt of this service/);
    await refused(NEW, withReceipts(sign(NEW, SVN_MIN + 2), [decodeReceipt(goodNew)]), 'InvalidTransparentStatement', /does not bind this statement/);
    const claims = new Map(decodeCoseSign1(unregistered).protectedHeader.get(StatementHeader.cwtClaims) as Map<unknown, unknown>);
    claims.delete(2);
    const protectedHeader = new Map(decodeCoseSign1(unregistered).protectedHeader);
    protectedHeader.delete(1);
    protectedHeader.set(StatementHeader.cwtClaims, claims);
    const withoutSub = signCoseSign1({ protectedHeader, payload: Buffer.from(NEW), privateKey: loadPrivateKey(issuer.keys.privateKeyPem) });
    await refused(NEW, withReceipts(withoutSub, [decodeReceipt(goodNew)]), 'InvalidTransparentStatement', /phdr.cwt.sub is missing/);
    await refused(NEW, withReceipts(unregistered, []), 'InvalidTransparentStatement', /receipts must be a non-empty array/);
    await refused(hostData('yet another build'), goodNew, 'InvalidTransparentStatement', /not for the joiner's host data/);
    // Registered host data joins whatever its statement says: the policy is not run.
    const trusted = await joinRequest(defaultHostData(), await register(sign(defaultHostData(), 0)));
    assert.equal(trusted.status, 200, trusted.text);
    assert.equal(trusted.body.node_status, 'Pending');
    assert.equal(await nodes(), before + 1, 'refusals recorded nothing; the trusted joiner is Pending');

    // The code upgrade through the policy: svn N+1 joins (Pending) and is trusted by the usual vote.
    const upgradeDir = mkdtempSync(join(tmpdir(), 'covenant-join-'));
    writeFileSync(join(upgradeDir, 'transparent.cose'), goodNew);
    const upgraded = await startJoiningNode({
      ...joinOptionsOf(first),
      dir: upgradeDir,
      configPatch: { ...FAST, command: { join: { host_data_transparent_statement_path: 'transparent.cose' } } },
      env: { COVENANT_VIRTUAL_HOST_DATA: NEW },
    });
    network.nodes.push(upgraded);
    assert.equal((await upgraded.client.request('GET', '/node/state')).body.state, 'PartOfNetwork');
    assert.match(upgraded.output(), /joined the network/);

    // svn N-1: the joiner exits non-zero naming the policy's reason.
    const lowDir = mkdtempSync(join(tmpdir(), 'covenant-join-'));
    writeFileSync(join(lowDir, 'transparent.cose'), lowNew);
    const low = await startJoiningNode({
      ...joinOptionsOf(first),
      dir: lowDir,
      configPatch: { ...FAST, command: { join: { host_data_transparent_statement_path: 'transparent.cose' } } },
      env: { COVENANT_VIRTUAL_HOST_DATA: NEW },
      waitUntilJoined: false,
    });
    network.nodes.push(low);
    assert.notEqual(await waitForExit(low.process), 0);
    assert.match(low.output(), /JoinPolicyRefused/);
    assert.match(low.output(), new RegExp(`svn ${SVN_MIN - 1} is below ${SVN_MIN}`));

    // Policies that do not answer true or a string, and hostile ones: an error, and the node keeps serving.
    const policies: [string, RegExp][] = [
      ['export function policy() { return 42 }', /returned 42, neither true nor a string/],
      ['export function policy() { for (;;) {} }', /Timeout/],
      ['export function policy() { const a = []; for (;;) a.push(new Array(1 << 16).fill(1)) }', /OutOfMemory|Timeout/],
      ['export function policy() { return process.exit(1) }', /'process' is not defined/],
    ];
    for (const [policy, reason] of policies) {
      await passProposal([{ name: 'set_node_join_policy', args: { policy } }]);
      await refused(NEW, goodNew, 'JoinPolicyFailed', reason);
      const state = await first.client.request('GET', '/node/state');
      assert.equal(state.body.state, 'PartOfNetwork');
      const write = await first.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'still serving' }, identity: first.user });
      assert.equal(write.status, 200, write.text);
    }
    await until('the network to list the upgraded node Trusted', async () => {
      const listed = await first.client.request('GET', '/node/network/nodes?status=Trusted');
      return listed.body.nodes.length === 2 ? true : undefined;
    });
  } finally {
    await network.stopAll();
    rmSync(work, { recursive: true, force: true });
  }
});

/** The first receipt embedded in a transparent statement. */
function decodeReceipt(transparent: Uint8Array): Uint8Array {
  return (decodeCoseSign1(transparent).unprotectedHeader.get(StatementHeader.receipts) as Uint8Array[])[0]!;
}
