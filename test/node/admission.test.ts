/** The primary's admission of joiners: a chain of checks, each refusing with its own code and writing nothing, then the record. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import { generateEcKeyPair, nodeIdFromPublicKey, publicKeyDer } from '../../src/crypto/index.js';
import { Store, jsonCodec, type Tx } from '../../src/kv/index.js';
import { codeMeasurement, createVirtualQuote } from '../../src/attestation/virtual.js';
import { ADMISSION_CHECKS, admit, type AdmissionCheck, type AdmissionHost, type JoinPolicyEvaluator } from '../../src/node/join/admission.js';
import { isNodeError } from '../../src/node/errors.js';
import { JoinRateLimiter } from '../../src/node/join/rate.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import type { JoinRequest } from '../../src/node/join.js';
import { SINGLETON_KEY, Tables, type NodeInfo, type ServiceStatus } from '../../src/node/tables.js';
import { toBase64 } from '../../src/base/bytes.js';
import type { JoinPolicyVerdict } from '../../src/gov/join-policy.js';
import { attachReceipt, signStatement, type TransparentStatementInput } from '../../src/gov/transparent-statement.js';
import { makeIssuer, makeService, type FakeService, type Issuer } from '../gov/statement-helpers.js';

const json = jsonCodec<any>();
const MEASUREMENT = codeMeasurement('test');
const TRUSTED_HOST_DATA = 'a'.repeat(64);
const ADDRESS = '192.0.2.1';

interface PolicyOptions {
  /** The join policy stored in the service. */
  readonly policy?: string;
  /** The sandbox stand-in: the verdict for each evaluation (it records what it was given). */
  readonly evaluator?: FakeEvaluator;
  readonly serviceCertificatePem?: string;
}

class FakeEvaluator implements JoinPolicyEvaluator {
  readonly calls: { source: string; statements: readonly TransparentStatementInput[] }[] = [];
  readyCalls = 0;
  constructor(private readonly verdict: JoinPolicyVerdict) {}
  async ready() {
    this.readyCalls++;
  }
  evaluate(source: string, statements: readonly TransparentStatementInput[]) {
    this.calls.push({ source, statements });
    return this.verdict;
  }
}

function service(status: ServiceStatus, checks: readonly AdmissionCheck[] = ADMISSION_CHECKS, pendingNodesMax = 64, policy: PolicyOptions = {}) {
  const store = new Store();
  const clock = new ManualClock();
  const logger = new MemoryLogger();
  const seen: string[] = [];
  const write = (fn: (tx: Tx) => void) => {
    const tx = store.beginTx();
    fn(tx);
    tx.apply();
  };
  write((tx) => {
    tx.map(Tables.hostData, json).put(TRUSTED_HOST_DATA, { measurement: MEASUREMENT });
    tx.map(Tables.virtualMeasurements, json).put(MEASUREMENT, {});
    if (policy.policy !== undefined) tx.map(Tables.joinPolicy, json).put(SINGLETON_KEY, policy.policy);
  });
  const host: AdmissionHost = {
    logger,
    ownMeasurement: MEASUREMENT,
    startupSeqno: 10,
    pendingNodesMax,
    joinRate: new JoinRateLimiter(clock, logger),
    checks,
    isPrimary: () => true,
    executeRead: (fn) => fn(store.beginTx()),
    executeWrite: write,
    serviceStatus: () => status,
    endorse: async () => 'ENDORSED CERTIFICATE',
    networkInfoFor: (endorsed) => ({
      service_certificate: 'S',
      service_key: 'K',
      ledger_secrets: [],
      endorsed_certificate: endorsed,
      genesis_configuration: { seqno: 0, nodes: [] },
      peers: [],
    }),
    seen: (id) => seen.push(id),
    serviceIdentities: () => (policy.serviceCertificatePem ? [policy.serviceCertificatePem] : []),
    ...(policy.evaluator ? { joinPolicy: policy.evaluator } : {}),
  };
  const nodes = () => {
    const out = new Map<string, NodeInfo>();
    store.beginTx().map(Tables.nodesInfo, json).forEach((v: NodeInfo, k: string) => void out.set(k, v));
    return out;
  };
  return { host, seen, nodes, clock, logger, version: () => store.version };
}

function joiner(hostData = TRUSTED_HOST_DATA, startupSeqno = 10, statement?: Uint8Array) {
  const keys = generateEcKeyPair('P-384');
  const der = publicKeyDer(keys.publicKey);
  const request: JoinRequest = {
    public_key: keys.publicKeyPem,
    quote_info: createVirtualQuote(der, MEASUREMENT, hostData),
    node_data: null,
    rpc_interfaces: { primary: { bind_address: '127.0.0.1:1', published_address: '127.0.0.1:1', enabled_operator_features: [] } },
    node_to_node_interface: { bind_address: '127.0.0.1:2', published_address: '127.0.0.1:2' },
    startup_seqno: startupSeqno,
    subject_alt_names: ['iPAddress:127.0.0.1'],
    ...(statement ? { host_data_transparent_statement: toBase64(statement) } : {}),
  };
  return { request, der, nodeId: nodeIdFromPublicKey(keys.publicKey) };
}

test('while the service opens, a joiner with trusted code is recorded Trusted and given the network; once open, it is Pending', async () => {
  const opening = service('Opening');
  const a = joiner();
  const answer = await admit(opening.host, a.request, a.der, ADDRESS);
  assert.equal(answer.node_status, 'Trusted');
  assert.equal(answer.network_info?.endorsed_certificate, 'ENDORSED CERTIFICATE');
  assert.equal(opening.nodes().get(a.nodeId)?.status, 'Trusted');
  assert.deepEqual(opening.seen, [a.nodeId]);

  const open = service('Open');
  const b = joiner();
  const pending = await admit(open.host, b.request, b.der, ADDRESS);
  assert.equal(pending.node_status, 'Pending');
  assert.equal(pending.network_info, undefined);
  assert.equal(open.nodes().get(b.nodeId)?.status, 'Pending');
});

test('each check refuses with its own code and nothing is written nor remembered', async () => {
  const cases: [string, () => { request: JoinRequest; der: Uint8Array | undefined }][] = [
    ['UntrustedHostData', () => joiner('b'.repeat(64))],
    ['StartupSeqnoIsOld', () => joiner(TRUSTED_HOST_DATA, 3)],
    ['InvalidAuthenticationInfo', () => ({ ...joiner(), der: joiner().der })],
    ['InvalidQuote', () => {
      const j = joiner();
      return { request: { ...j.request, quote_info: { ...j.request.quote_info, quote: 'bm90IGEgcXVvdGU=' } }, der: j.der };
    }],
    ['InvalidNodeKey', () => ({ request: { ...joiner().request, public_key: 'not a key' }, der: undefined })],
  ];
  for (const [code, make] of cases) {
    const s = service('Opening');
    const before = s.version();
    const { request, der } = make();
    await assert.rejects(admit(s.host, request, der, ADDRESS), (e: unknown) => isNodeError(e) && e.code === code, code);
    assert.equal(s.version(), before, `${code}: nothing written`);
    assert.deepEqual(s.seen, [], `${code}: a refused request is not remembered`);
  }
});

test('the chain is data: a check added to it (a join policy) refuses with its reason', async () => {
  const policy: AdmissionCheck = ({ quote }) => {
    if (quote.host_data === TRUSTED_HOST_DATA) throw Object.assign(new Error('policy says no'), { code: 'JoinPolicyRefused' });
  };
  const s = service('Opening', [...ADMISSION_CHECKS, policy]);
  const j = joiner();
  await assert.rejects(admit(s.host, j.request, j.der, ADDRESS), /policy says no/);
  assert.equal(s.nodes().size, 0);
});

test('a new node beyond pendingNodesMax Pending ones is refused (503 with Retry-After, a log line); known nodes still poll and re-announce', async () => {
  const s = service('Open', ADMISSION_CHECKS, 2);
  const [a, b, c] = [joiner(), joiner(), joiner()];
  assert.equal((await admit(s.host, a.request, a.der, ADDRESS)).node_status, 'Pending');
  assert.equal((await admit(s.host, b.request, b.der, ADDRESS)).node_status, 'Pending');
  const before = s.version();
  await assert.rejects(
    admit(s.host, c.request, c.der, ADDRESS),
    (e: unknown) => isNodeError(e, 'TooManyPendingNodes') && e.status === 503 && (e.retryAfterSeconds ?? 0) >= 1,
  );
  assert.equal(s.version(), before, 'nothing written');
  assert.equal(s.nodes().has(c.nodeId), false);
  assert.ok(s.logger.entries.some((e) => /join refused: .* would be Pending/.test(e.msg)), 'a log line says why');
  // A Pending node polling, and one re-announcing new addresses, are known: not refused.
  assert.equal((await admit(s.host, a.request, a.der, ADDRESS)).node_status, 'Pending');
  const moved = { ...b.request, node_to_node_interface: { bind_address: '127.0.0.1:9', published_address: '127.0.0.1:9' } };
  assert.equal((await admit(s.host, moved, b.der, ADDRESS)).node_status, 'Pending');
  assert.equal(s.nodes().get(b.nodeId)?.node_to_node_interface?.published_address, '127.0.0.1:9');
  // While the service opens, joiners are trusted at once: the bound on Pending nodes does not apply.
  const opening = service('Opening', ADMISSION_CHECKS, 0);
  assert.equal((await admit(opening.host, c.request, c.der, ADDRESS)).node_status, 'Trusted');
});

test('join requests beyond the rate of one client address are refused with 429 and Retry-After, before any other check', async () => {
  const s = service('Open');
  const a = joiner();
  // A burst of 20 passes (a Pending node polling), the 21st at the same instant does not.
  for (let i = 0; i < 20; i++) assert.equal((await admit(s.host, a.request, a.der, ADDRESS)).node_status, 'Pending');
  const bad = { request: { ...a.request, public_key: 'not a key' }, der: undefined };
  await assert.rejects(
    admit(s.host, bad.request, bad.der, ADDRESS),
    (e: unknown) => isNodeError(e, 'TooManyJoinRequests') && e.status === 429 && e.retryAfterSeconds === 1,
    'refused by rate before its key is read',
  );
  await assert.rejects(admit(s.host, a.request, a.der, ADDRESS), (e: unknown) => isNodeError(e, 'TooManyJoinRequests'));
  assert.equal(s.logger.entries.filter((e) => /join requests from 192\.0\.2\.1 refused/.test(e.msg)).length, 1, 'one log line per episode');
  // Another address has its own bucket.
  assert.equal((await admit(s.host, a.request, a.der, '192.0.2.2')).node_status, 'Pending');
  // Refilled at 10 per second: after 100 ms, one more.
  s.clock.advance(100);
  assert.equal((await admit(s.host, a.request, a.der, ADDRESS)).node_status, 'Pending');
  await assert.rejects(admit(s.host, a.request, a.der, ADDRESS), (e: unknown) => isNodeError(e, 'TooManyJoinRequests'));
  // A node polling every 100 ms (10 per second) is never refused once its bucket has refilled.
  s.clock.advance(2000);
  for (let i = 0; i < 100; i++) {
    s.clock.advance(100);
    assert.equal((await admit(s.host, a.request, a.der, ADDRESS)).node_status, 'Pending');
  }
});

test('the join rate tracks a bounded number of client addresses, forgetting the least recently seen first', () => {
  const clock = new ManualClock();
  const rate = new JoinRateLimiter(clock, new MemoryLogger(), { perSecond: 1, burst: 1, addressesMax: 3 });
  for (let i = 0; i < 100; i++) rate.take(`198.51.100.${i}`);
  assert.equal(rate.trackedAddresses, 3);
  assert.throws(() => rate.take('198.51.100.99'), (e: unknown) => isNodeError(e, 'TooManyJoinRequests'), 'a recent address is still limited');
  assert.throws(() => rate.take('198.51.100.98'), (e: unknown) => isNodeError(e, 'TooManyJoinRequests'));
  assert.equal(rate.trackedAddresses, 3);
});

const NEW_HOST_DATA = 'd'.repeat(64);
const POLICY = 'export function policy(statements) { return true }';

function statementFor(issuer: Issuer, svc: FakeService, hostData = NEW_HOST_DATA, svn = 2, iss = issuer.did): Uint8Array {
  const statement = signStatement({
    privateKeyPem: issuer.keys.privateKeyPem,
    x5chainPem: issuer.chainPem,
    issuer: iss,
    subject: 'covenant-node',
    payload: Buffer.from(hostData),
    svn,
  });
  return attachReceipt(statement, svc.receiptOf(statement));
}

test('the join policy decision table: trusted host data joins without the policy; otherwise true joins, a string refuses with it, anything else is an error', async () => {
  const issuer = await makeIssuer();
  const svc = await makeService();
  const transparent = statementFor(issuer, svc);
  const admitted = new FakeEvaluator({ kind: 'admitted' });

  // Registered host data: joins, and the policy is not run even with a statement.
  const trusted = service('Open', ADMISSION_CHECKS, 64, { policy: POLICY, evaluator: admitted, serviceCertificatePem: svc.certificatePem });
  const t = joiner(TRUSTED_HOST_DATA, 10, statementFor(issuer, svc, TRUSTED_HOST_DATA));
  assert.equal((await admit(trusted.host, t.request, t.der, ADDRESS)).node_status, 'Pending');
  assert.equal(admitted.calls.length, 0, 'the policy is not run for registered host data');

  // The policy returns true: joins; it was given the statement in the input table's shape.
  const open = service('Open', ADMISSION_CHECKS, 64, { policy: POLICY, evaluator: admitted, serviceCertificatePem: svc.certificatePem });
  const j = joiner(NEW_HOST_DATA, 10, transparent);
  assert.equal((await admit(open.host, j.request, j.der, ADDRESS)).node_status, 'Pending');
  assert.equal(admitted.readyCalls, 2, 'the sandbox is awaited before the transaction (once per request carrying a statement)');
  assert.equal(admitted.calls.length, 1);
  assert.equal(admitted.calls[0]!.source, POLICY);
  assert.equal(admitted.calls[0]!.statements[0]!.phdr.cwt.svn, 2);
  assert.equal(admitted.calls[0]!.statements[0]!.receipts[0]!.vds, 1);
  assert.equal(admitted.calls[0]!.statements[0]!.resolved_issuer.did, issuer.did, 'the policy is given the resolved issuer');
  assert.ok(open.logger.entries.some((e) => /the join policy admits node/.test(e.msg)));

  // Refused with the policy's reason, or with an error; nothing written either way.
  const refusals: [JoinPolicyVerdict, string, RegExp][] = [
    [{ kind: 'refused', reason: 'svn 2 is below 5' }, 'JoinPolicyRefused', /the join policy refused node .*: svn 2 is below 5/],
    [{ kind: 'error', reason: 'the join policy returned 42, neither true nor a string' }, 'JoinPolicyFailed', /could not decide .*returned 42/],
  ];
  for (const [verdict, code, message] of refusals) {
    const s = service('Open', ADMISSION_CHECKS, 64, { policy: POLICY, evaluator: new FakeEvaluator(verdict), serviceCertificatePem: svc.certificatePem });
    const before = s.version();
    await assert.rejects(admit(s.host, j.request, j.der, ADDRESS), (e: unknown) => isNodeError(e, code as 'JoinPolicyRefused') && e.status === 403 && message.test(e.message), code);
    assert.equal(s.version(), before, `${code}: nothing written`);
    assert.ok(s.logger.entries.some((e) => message.test(e.msg)), `${code}: the log shows the reason`);
  }
});

test('untrusted host data without a statement, or without a policy, is refused as untrusted; a bad statement is refused before any policy runs', async () => {
  const issuer = await makeIssuer();
  const svc = await makeService();
  const evaluator = new FakeEvaluator({ kind: 'admitted' });
  const withPolicy = () => service('Open', ADMISSION_CHECKS, 64, { policy: POLICY, evaluator, serviceCertificatePem: svc.certificatePem });

  const bare = joiner(NEW_HOST_DATA);
  await assert.rejects(admit(withPolicy().host, bare.request, bare.der, ADDRESS), (e: unknown) => isNodeError(e, 'UntrustedHostData') && /sent no transparent statement/.test(e.message));
  const noPolicy = service('Open', ADMISSION_CHECKS, 64, { evaluator, serviceCertificatePem: svc.certificatePem });
  const j = joiner(NEW_HOST_DATA, 10, statementFor(issuer, svc));
  await assert.rejects(admit(noPolicy.host, j.request, j.der, ADDRESS), (e: unknown) => isNodeError(e, 'UntrustedHostData') && /no join policy is set/.test(e.message));

  // Structure failures: a receipt of another service, a statement for other host data.
  const other = await makeService();
  const cases: [Uint8Array, RegExp][] = [
    [statementFor(issuer, other), /receipts\[0\] is not a receipt of this service/],
    [statementFor(issuer, svc, 'e'.repeat(64)), /speaks for e{64}, not for the joiner's host data d{64}/],
    // Signed under a fresh, self-made CA but claiming the trusted issuer's DID, with a receipt of this service.
    [statementFor(await makeIssuer(), svc, NEW_HOST_DATA, 99, issuer.did), /the issuer did:x509:0:sha256:\S+ does not resolve against the statement's x5chain: no CA certificate of x5chain has the sha256 fingerprint/],
  ];
  for (const [statement, reason] of cases) {
    const k = joiner(NEW_HOST_DATA, 10, statement);
    await assert.rejects(admit(withPolicy().host, k.request, k.der, ADDRESS), (e: unknown) => isNodeError(e, 'InvalidTransparentStatement') && reason.test(e.message), String(reason));
  }
  assert.equal(evaluator.calls.length, 0, 'no policy ran for a refused structure');
});

test('a Pending node admitted by the join policy polls without the policy being run again', async () => {
  const issuer = await makeIssuer();
  const svc = await makeService();
  const admitted = new FakeEvaluator({ kind: 'admitted' });
  const s = service('Open', ADMISSION_CHECKS, 64, { policy: POLICY, evaluator: admitted, serviceCertificatePem: svc.certificatePem });
  const j = joiner(NEW_HOST_DATA, 10, statementFor(issuer, svc));
  for (let poll = 0; poll < 3; poll++) assert.equal((await admit(s.host, j.request, j.der, ADDRESS)).node_status, 'Pending');
  assert.equal(admitted.calls.length, 1, 'the policy ran once, when the node was recorded');
  // Another node with the same statement is judged on its own.
  const other = joiner(NEW_HOST_DATA, 10, statementFor(issuer, svc));
  assert.equal((await admit(s.host, other.request, other.der, ADDRESS)).node_status, 'Pending');
  assert.equal(admitted.calls.length, 2);
});
