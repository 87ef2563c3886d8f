/** The primary's admission of joiners: a chain of checks, each refusing with its own code and writing nothing, then the record. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import { generateEcKeyPair, nodeIdFromPublicKey, publicKeyDer } from '../../src/crypto/index.js';
import { Store, jsonCodec, type Tx } from '../../src/kv/index.js';
import { codeMeasurement, createVirtualQuote } from '../../src/attestation/virtual.js';
import { ADMISSION_CHECKS, admit, type AdmissionCheck, type AdmissionHost } from '../../src/node/join/admission.js';
import { isNodeError } from '../../src/node/errors.js';
import type { JoinRequest } from '../../src/node/join.js';
import { Tables, type NodeInfo, type ServiceStatus } from '../../src/node/tables.js';

const json = jsonCodec<any>();
const MEASUREMENT = codeMeasurement('test');
const TRUSTED_HOST_DATA = 'a'.repeat(64);

function service(status: ServiceStatus, checks: readonly AdmissionCheck[] = ADMISSION_CHECKS) {
  const store = new Store();
  const seen: string[] = [];
  const write = (fn: (tx: Tx) => void) => {
    const tx = store.beginTx();
    fn(tx);
    tx.commit();
  };
  write((tx) => {
    tx.map(Tables.hostData, json).put(TRUSTED_HOST_DATA, { measurement: MEASUREMENT });
    tx.map(Tables.virtualMeasurements, json).put(MEASUREMENT, {});
  });
  const host: AdmissionHost = {
    logger: new MemoryLogger(),
    ownMeasurement: MEASUREMENT,
    startupSeqno: 10,
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
  };
  const nodes = () => {
    const out = new Map<string, NodeInfo>();
    store.beginTx().map(Tables.nodesInfo, json).forEach((v: NodeInfo, k: string) => void out.set(k, v));
    return out;
  };
  return { host, seen, nodes, version: () => store.version };
}

function joiner(hostData = TRUSTED_HOST_DATA, startupSeqno = 10) {
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
  };
  return { request, der, nodeId: nodeIdFromPublicKey(keys.publicKey) };
}

test('while the service opens, a joiner with trusted code is recorded Trusted and given the network; once open, it is Pending', async () => {
  const opening = service('Opening');
  const a = joiner();
  const answer = await admit(opening.host, a.request, a.der);
  assert.equal(answer.node_status, 'Trusted');
  assert.equal(answer.network_info?.endorsed_certificate, 'ENDORSED CERTIFICATE');
  assert.equal(opening.nodes().get(a.nodeId)?.status, 'Trusted');
  assert.deepEqual(opening.seen, [a.nodeId]);

  const open = service('Open');
  const b = joiner();
  const pending = await admit(open.host, b.request, b.der);
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
    await assert.rejects(admit(s.host, request, der), (e: unknown) => isNodeError(e) && e.code === code, code);
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
  await assert.rejects(admit(s.host, j.request, j.der), /policy says no/);
  assert.equal(s.nodes().size, 0);
});
