/**
 * The default constitution's certificate actions (set_service_certificate_validity,
 * set_node_certificate_validity, set_all_nodes_certificate_validity): argument checks, the
 * configured maxima, which nodes are renewed, and the certificates they write: the same keys and
 * names re-issued by the service key for the period asked.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CovenantError } from '../../src/base/index.js';
import { certificateValidity, createEndorsedCertificate, createSelfSignedCertificate, generateEcKeyPair, parseCertificate, verifyCertificateSignedBy } from '../../src/crypto/index.js';
import { Governance, GovTables, loadJsEngine, parseValidFrom } from '../../src/gov/index.js';
import { jsonCodec } from '../../src/kv/index.js';
import { ServiceIdentity } from '../../src/node/identity/service-identity.js';
import { fixture, table, TEST_LIMITS, type Fixture } from './helpers.js';

const json = jsonCodec<any>();
const DAY_MS = 86_400_000;

interface CertFixture {
  f: Fixture;
  service: ServiceIdentity;
  nodes: { trusted: string; trusted2: string; pending: string; unendorsed: string };
  accept(actions: unknown[]): { state: string; failure?: string };
}

async function certFixture(options: { renewer?: boolean } = {}): Promise<CertFixture> {
  const f = await fixture();
  const [m] = f.members as [Fixture['members'][0]];
  f.activate(m);
  const keys = generateEcKeyPair('P-384');
  const serviceCert = await createSelfSignedCertificate({ keyPair: keys, subjectCommonName: 'Covenant Service', validityDays: 1, isCa: true, notBefore: new Date(f.nowMs - 1000) });
  const service = new ServiceIdentity();
  service.adopt(serviceCert, keys.privateKeyPem);
  f.gov = new Governance({ engine: await loadJsEngine(), nowMs: () => f.nowMs, sandboxLimits: TEST_LIMITS, ...(options.renewer === false ? {} : { certificates: service }) });
  const ids = { trusted: 'a'.repeat(64), trusted2: 'b'.repeat(64), pending: 'c'.repeat(64), unendorsed: 'd'.repeat(64) };
  const endorse = async () =>
    createEndorsedCertificate({
      subjectPublicKey: generateEcKeyPair('P-384').publicKey,
      subjectCommonName: 'Covenant Node',
      subjectAltNames: ['iPAddress:127.0.0.1'],
      issuerCertificatePem: serviceCert,
      issuerPrivateKey: keys.privateKey,
      validityDays: 1,
      notBefore: new Date(f.nowMs - 1000),
    });
  const certs = { trusted: await endorse(), trusted2: await endorse() };
  f.write((tx) => {
    const info = tx.map(GovTables.serviceInfo, json);
    info.put('0', { ...info.get('0'), cert: serviceCert });
    const nodes = tx.map(GovTables.nodesInfo, json);
    nodes.put(ids.trusted, { status: 'Trusted' });
    nodes.put(ids.trusted2, { status: 'Trusted' });
    nodes.put(ids.pending, { status: 'Pending' });
    // Trusted by a proposal, not endorsed yet (it is endorsed when it next asks to join).
    nodes.put(ids.unendorsed, { status: 'Trusted' });
    tx.map(GovTables.nodesEndorsedCertificates, json).put(ids.trusted, certs.trusted);
    tx.map(GovTables.nodesEndorsedCertificates, json).put(ids.trusted2, certs.trusted2);
  });
  return {
    f,
    service,
    nodes: ids,
    accept(actions) {
      const id = f.propose(m, actions);
      f.vote(m, id, true);
      const proposal = f.read((tx) => f.gov.proposal(tx, id));
      return { state: proposal.state, ...(proposal.failure ? { failure: proposal.failure.reason } : {}) };
    },
  };
}

function refusedToValidate(f: Fixture, actions: unknown[]): string {
  const before = f.store.version;
  try {
    f.propose(f.members[0]!, actions);
  } catch (e) {
    assert.ok(e instanceof CovenantError, String(e));
    assert.equal(e.code, 'ProposalFailedToValidate');
    assert.equal(f.store.version, before, 'a refused proposal writes nothing');
    return e.message;
  }
  assert.fail(`expected ${JSON.stringify(actions)} to be refused`);
}

const iso = (ms: number) => new Date(ms).toISOString();

test('the certificate actions check their arguments by name and type', async () => {
  const { f, nodes } = await certFixture();
  const cases: [unknown[], RegExp][] = [
    [[{ name: 'set_service_certificate_validity', args: {} }], /missing argument "valid_from"/],
    [[{ name: 'set_service_certificate_validity', args: { valid_from: 'tomorrow' } }], /"valid_from" must be a date and time/],
    [[{ name: 'set_service_certificate_validity', args: { valid_from: '2026-01-01T00:00:00' } }], /must be a date and time/],
    [[{ name: 'set_service_certificate_validity', args: { valid_from: 20260101 } }], /must be a date and time/],
    [[{ name: 'set_service_certificate_validity', args: { valid_from: '20260101000000Z', validity_period_days: 0 } }], /integer in \[1, 36500\]/],
    [[{ name: 'set_service_certificate_validity', args: { valid_from: '20260101000000Z', validity_period_days: 1.5 } }], /integer in \[1, 36500\]/],
    [[{ name: 'set_service_certificate_validity', args: { valid_from: '20260101000000Z', days: 1 } }], /unknown argument "days"/],
    [[{ name: 'set_node_certificate_validity', args: { valid_from: '20260101000000Z' } }], /missing argument "node_id"/],
    [[{ name: 'set_node_certificate_validity', args: { node_id: 'xyz', valid_from: '20260101000000Z' } }], /64 lower-case hex/],
    [[{ name: 'set_node_certificate_validity', args: { node_id: nodes.trusted } }], /missing argument "valid_from"/],
    [[{ name: 'set_all_nodes_certificate_validity', args: { node_id: nodes.trusted, valid_from: '20260101000000Z' } }], /unknown argument "node_id"/],
  ];
  for (const [actions, reason] of cases) assert.match(refusedToValidate(f, actions), reason, JSON.stringify(actions));
});

test('set_service_certificate_validity re-issues the service certificate with its key for the period asked', async () => {
  const { f, service, accept } = await certFixture();
  const before = table(f, GovTables.serviceInfo, '0');
  const validFrom = f.nowMs - 3600_000;
  assert.deepEqual(accept([{ name: 'set_service_certificate_validity', args: { valid_from: iso(validFrom), validity_period_days: 30 } }]), { state: 'Accepted' });
  const after = table(f, GovTables.serviceInfo, '0');
  assert.notEqual(after.cert, before.cert);
  assert.equal(after.status, before.status, 'the rest of the service record is kept');
  assert.equal(parseCertificate(after.cert).publicKeyPem, parseCertificate(before.cert).publicKeyPem);
  assert.equal(parseCertificate(after.cert).subject, parseCertificate(before.cert).subject);
  assert.deepEqual(certificateValidity(after.cert), { notBefore: new Date(validFrom), notAfter: new Date(validFrom + 30 * DAY_MS) });
  assert.ok(verifyCertificateSignedBy(after.cert, service.certificatePem));
});

test('without validity_period_days a renewal lasts the configured maximum (365 days when none is configured); above it the proposal fails', async () => {
  const { f, accept } = await certFixture();
  const validFrom = Math.floor(f.nowMs / 1000) * 1000;
  // The fixture's service configuration names no maximum for the service certificate: 365 days.
  assert.equal(accept([{ name: 'set_service_certificate_validity', args: { valid_from: iso(validFrom) } }]).state, 'Accepted');
  assert.equal(certificateValidity(table(f, GovTables.serviceInfo, '0').cert).notAfter.getTime(), validFrom + 365 * DAY_MS);

  assert.equal(accept([{ name: 'set_service_configuration', args: { maximum_service_certificate_validity_days: 10, maximum_node_certificate_validity_days: 20 } }]).state, 'Accepted');
  const kept = table(f, GovTables.serviceInfo, '0').cert;
  const tooLong = accept([{ name: 'set_service_certificate_validity', args: { valid_from: iso(validFrom), validity_period_days: 11 } }]);
  assert.equal(tooLong.state, 'Failed');
  assert.match(tooLong.failure!, /validity_period_days 11 is above maximum_service_certificate_validity_days \(10\)/);
  assert.equal(table(f, GovTables.serviceInfo, '0').cert, kept, 'a failed renewal writes nothing');
  assert.equal(accept([{ name: 'set_service_certificate_validity', args: { valid_from: iso(validFrom) } }]).state, 'Accepted');
  assert.equal(certificateValidity(table(f, GovTables.serviceInfo, '0').cert).notAfter.getTime(), validFrom + 10 * DAY_MS);

  const nodeTooLong = accept([{ name: 'set_all_nodes_certificate_validity', args: { valid_from: iso(validFrom), validity_period_days: 21 } }]);
  assert.match(nodeTooLong.failure!, /validity_period_days 21 is above maximum_node_certificate_validity_days \(20\)/);
});

test('set_node_certificate_validity renews one trusted node; pending, unknown and unendorsed nodes fail the proposal', async () => {
  const { f, service, nodes, accept } = await certFixture();
  const before = table(f, GovTables.nodesEndorsedCertificates, nodes.trusted);
  const other = table(f, GovTables.nodesEndorsedCertificates, nodes.trusted2);
  const validFrom = f.nowMs - 1000;
  // CCF's ASN.1 time form.
  const asn1 = new Date(Math.floor(validFrom / 1000) * 1000).toISOString().replace(/[-:T]/g, '').replace(/\.000Z$/, 'Z');
  assert.equal(accept([{ name: 'set_node_certificate_validity', args: { node_id: nodes.trusted, valid_from: asn1, validity_period_days: 7 } }]).state, 'Accepted');
  const after = table(f, GovTables.nodesEndorsedCertificates, nodes.trusted);
  assert.equal(parseCertificate(after).publicKeyPem, parseCertificate(before).publicKeyPem);
  assert.deepEqual(parseCertificate(after).subjectAltNames, ['iPAddress:127.0.0.1']);
  assert.equal(certificateValidity(after).notAfter.getTime(), parseValidFrom(asn1).getTime() + 7 * DAY_MS);
  assert.ok(verifyCertificateSignedBy(after, service.certificatePem));
  assert.equal(table(f, GovTables.nodesEndorsedCertificates, nodes.trusted2), other, 'the other node is left alone');

  for (const [nodeId, reason] of [
    [nodes.pending, /is Pending, not Trusted/],
    ['e'.repeat(64), /no node with id/],
    [nodes.unendorsed, /has no endorsed certificate yet/],
  ] as const) {
    const outcome = accept([{ name: 'set_node_certificate_validity', args: { node_id: nodeId, valid_from: iso(validFrom) } }]);
    assert.equal(outcome.state, 'Failed');
    assert.match(outcome.failure!, reason);
  }
});

test('set_all_nodes_certificate_validity renews every trusted node that holds an endorsed certificate', async () => {
  const { f, nodes, accept } = await certFixture();
  const before = [nodes.trusted, nodes.trusted2].map((id) => table(f, GovTables.nodesEndorsedCertificates, id));
  const validFrom = Math.floor(f.nowMs / 1000) * 1000;
  assert.equal(accept([{ name: 'set_all_nodes_certificate_validity', args: { valid_from: iso(validFrom), validity_period_days: 5 } }]).state, 'Accepted');
  [nodes.trusted, nodes.trusted2].forEach((id, i) => {
    const after = table(f, GovTables.nodesEndorsedCertificates, id);
    assert.notEqual(after, before[i]);
    assert.equal(certificateValidity(after).notAfter.getTime(), validFrom + 5 * DAY_MS);
  });
  assert.equal(table(f, GovTables.nodesEndorsedCertificates, nodes.pending), undefined);
  assert.equal(table(f, GovTables.nodesEndorsedCertificates, nodes.unendorsed), undefined);
});

test('a renewal that would not be valid at the applying node\'s time, or that no service key can sign, fails', async () => {
  const { f, accept } = await certFixture();
  const kept = table(f, GovTables.serviceInfo, '0').cert;
  const future = accept([{ name: 'set_service_certificate_validity', args: { valid_from: iso(f.nowMs + 60_000), validity_period_days: 1 } }]);
  assert.match(future.failure!, /is in the future: the renewed certificate would not be valid yet/);
  const expired = accept([{ name: 'set_service_certificate_validity', args: { valid_from: iso(f.nowMs - 2 * DAY_MS), validity_period_days: 1 } }]);
  assert.match(expired.failure!, /would have expired already/);
  assert.equal(table(f, GovTables.serviceInfo, '0').cert, kept);

  const keyless = await certFixture({ renewer: false });
  const outcome = keyless.accept([{ name: 'set_service_certificate_validity', args: { valid_from: iso(keyless.f.nowMs) } }]);
  assert.equal(outcome.state, 'Failed');
  assert.match(outcome.failure!, /holds no service key/);
});

test('valid_from is read as ISO 8601 or as an ASN.1 time; other forms are refused', () => {
  assert.equal(parseValidFrom('2026-03-04T05:06:07Z').getTime(), Date.UTC(2026, 2, 4, 5, 6, 7));
  assert.equal(parseValidFrom('2026-03-04T05:06:07+01:00').getTime(), Date.UTC(2026, 2, 4, 4, 6, 7));
  assert.equal(parseValidFrom('2026-03-04').getTime(), Date.UTC(2026, 2, 4));
  assert.equal(parseValidFrom('20260304050607Z').getTime(), Date.UTC(2026, 2, 4, 5, 6, 7));
  assert.equal(parseValidFrom('260304050607Z').getTime(), Date.UTC(2026, 2, 4, 5, 6, 7));
  assert.equal(parseValidFrom('990304050607Z').getTime(), Date.UTC(1999, 2, 4, 5, 6, 7));
  for (const bad of ['20261304050607Z', '20260230000000Z', '2026-03-04T05:06', 'now', '', '2026030405Z']) {
    assert.throws(() => parseValidFrom(bad), /is not a date/, bad);
  }
});
