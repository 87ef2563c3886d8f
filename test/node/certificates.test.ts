/**
 * The node's certificates part (src/node/certificates.ts): it adopts a renewal once it is
 * committed (never while it is only applied), never trades the certificate it holds for an older
 * one on its first look at the store, presents the adopted certificate (install), keeps it in the
 * state and certificate files, and warns ahead of expiry on its own clock.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemoryLogger } from '../../src/base/log.js';
import { createEndorsedCertificate, createSelfSignedCertificate, generateEcKeyPair, loadPublicKey } from '../../src/crypto/index.js';
import { jsonCodec, Store } from '../../src/kv/index.js';
import { NodeCertificates } from '../../src/node/certificates.js';
import { NodeIdentity } from '../../src/node/identity/node-identity.js';
import { ServiceIdentity } from '../../src/node/identity/service-identity.js';
import { certificateExpiryCheckIntervalMs } from '../../src/node/limits.js';
import { SINGLETON_KEY, Tables } from '../../src/node/tables.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

const json = jsonCodec<any>();
const DAY_MS = 86_400_000;
const HOUR_MS = 3_600_000;

async function parts() {
  const clock = new ManualClock();
  const logger = new MemoryLogger();
  const start = new Date(clock.nowMs());
  const serviceKeys = generateEcKeyPair('P-384');
  const serviceCert = await createSelfSignedCertificate({ keyPair: serviceKeys, subjectCommonName: 'Covenant Service', validityDays: 1, isCa: true, notBefore: start });
  const service = new ServiceIdentity();
  service.adopt(serviceCert, serviceKeys.privateKeyPem);
  const identity = new NodeIdentity('test', undefined);
  await identity.create(['iPAddress:127.0.0.1'], 1);
  identity.nodeCertificatePem = await createEndorsedCertificate({
    subjectPublicKey: loadPublicKey(identity.publicKeyPem),
    subjectCommonName: 'Covenant Node',
    subjectAltNames: ['iPAddress:127.0.0.1'],
    issuerCertificatePem: serviceCert,
    issuerPrivateKey: serviceKeys.privateKey,
    validityDays: 1,
    notBefore: start,
  });
  const store = new Store();
  const counts = { persisted: 0, files: 0, installs: 0 };
  const certificates = new NodeCertificates({
    logger,
    clock,
    identity,
    service,
    committedView: () => store.readAt(store.committedVersion),
    persistState: () => counts.persisted++,
    writeCertificateFiles: () => counts.files++,
  });
  certificates.onInstall(() => counts.installs++);
  const write = (service: string, node: string, commit = true) => {
    const tx = store.beginTx();
    tx.map(Tables.serviceInfo, json).put(SINGLETON_KEY, { status: 'Open', cert: service, recovery_count: 0, service_data: null });
    tx.map(Tables.nodesEndorsedCertificates, json).put(identity.nodeId, node);
    const version = tx.apply()!.version;
    if (commit) store.compact(version);
  };
  return { clock, logger, service, identity, store, certificates, counts, write, start };
}

test('a renewal is adopted once committed: the node certificate is installed, both are persisted and written', async () => {
  const p = await parts();
  const original = { service: p.service.certificatePem, node: p.identity.nodeCertificatePem };
  p.write(original.service, original.node);
  p.certificates.onCommit();
  assert.deepEqual(p.counts, { persisted: 0, files: 0, installs: 0 }, 'nothing changed');

  const from = new Date(p.clock.nowMs());
  const renewed = { service: p.service.renewServiceCertificate(original.service, from, 30), node: p.service.renewNodeCertificate(original.node, from, 30) };
  // Applied, not committed: it could still be rolled back.
  p.write(renewed.service, renewed.node, false);
  p.certificates.onCommit();
  assert.equal(p.identity.nodeCertificatePem, original.node);
  assert.equal(p.service.certificatePem, original.service);

  p.store.compact(p.store.version);
  p.certificates.onCommit();
  assert.equal(p.identity.nodeCertificatePem, renewed.node);
  assert.equal(p.service.certificatePem, renewed.service);
  assert.deepEqual(p.counts, { persisted: 1, files: 1, installs: 1 });
  assert.ok(p.service.holdsKey, 'the service key is kept');
  const lines = p.logger.entries.map((e) => e.msg).filter((m) => m.startsWith('renewed'));
  assert.equal(lines.length, 2);
  assert.match(lines.join('\n'), /renewed node certificate committed and installed: valid to /);

  // Only the service certificate changes: the node's TLS identity is not reinstalled.
  const again = p.service.renewServiceCertificate(renewed.service, from, 60);
  p.write(again, renewed.node);
  p.certificates.onCommit();
  assert.equal(p.service.certificatePem, again);
  assert.deepEqual(p.counts, { persisted: 2, files: 2, installs: 1 });
});

test('on its first look a node keeps a certificate that outlives the committed one (it joined from an older snapshot); later changes are adopted as committed', async () => {
  const p = await parts();
  const from = new Date(p.clock.nowMs());
  const older = p.identity.nodeCertificatePem;
  const held = p.service.renewNodeCertificate(older, from, 30);
  p.identity.nodeCertificatePem = held;
  p.write(p.service.certificatePem, older);
  p.certificates.onCommit();
  assert.equal(p.identity.nodeCertificatePem, held, 'the first look does not go back to an older certificate');
  assert.equal(p.counts.installs, 0);

  // The members' next decision is adopted, even a shorter one.
  const shorter = p.service.renewNodeCertificate(older, from, 2);
  p.write(p.service.certificatePem, shorter);
  p.certificates.onCommit();
  assert.equal(p.identity.nodeCertificatePem, shorter);
  assert.equal(p.counts.installs, 1);
});

test('a node restarted with an older certificate than the committed one adopts the committed one on its first look', async () => {
  const p = await parts();
  const newer = p.service.renewNodeCertificate(p.identity.nodeCertificatePem, new Date(p.clock.nowMs()), 30);
  p.write(p.service.certificatePem, newer);
  p.certificates.onCommit();
  assert.equal(p.identity.nodeCertificatePem, newer);
  assert.equal(p.counts.installs, 1);
});

test('certificates under other keys (a previous service\'s, which a recovering node replays) are never adopted', async () => {
  const p = await parts();
  const other = await parts();
  const from = new Date(p.clock.nowMs());
  const held = { service: p.service.certificatePem, node: p.identity.nodeCertificatePem };
  // Another service's certificate, and this node's key endorsed by that other service: both outlive what is held.
  const otherService = other.service.renewServiceCertificate(other.service.certificatePem, from, 365);
  const foreignEndorsement = await other.service.endorse(p.identity.publicKeyPem, ['iPAddress:127.0.0.1'], 365, from);
  p.write(otherService, foreignEndorsement);
  p.certificates.onCommit();
  assert.equal(p.service.certificatePem, held.service);
  assert.equal(p.identity.nodeCertificatePem, held.node);
  // Another node's certificate under this node's id is not this node's either.
  p.write(held.service, other.identity.nodeCertificatePem);
  p.certificates.onCommit();
  assert.equal(p.identity.nodeCertificatePem, held.node);
  assert.deepEqual(p.counts, { persisted: 0, files: 0, installs: 0 });
});

test('the node warns ahead of expiry on its own clock, reports the time left, and says so once expired', async () => {
  const p = await parts();
  p.certificates.start();
  const warnings = () => p.logger.entries.filter((e) => e.level === 'fail').map((e) => e.msg);
  assert.deepEqual(warnings(), [], 'a fresh one-day certificate is far from expiry');
  assert.equal(p.certificates.metrics().node?.seconds_until_expiry, DAY_MS / 1000);
  assert.equal(p.certificates.metrics().service?.valid_to, new Date(p.start.getTime() + DAY_MS).toISOString().replace('.000Z', 'Z'));

  // A third of the day is left after 16 hours: the hourly check warns about both certificates.
  p.clock.advance(17 * HOUR_MS);
  assert.ok(warnings().some((m) => /^the node certificate expires at .* in 25200 s: members renew it with a set_node_certificate_validity/.test(m)), warnings().join('\n'));
  assert.ok(warnings().some((m) => /^the service certificate expires at .*set_service_certificate_validity proposal/.test(m)));
  assert.equal(p.certificates.metrics().node?.seconds_until_expiry, 7 * 3600);

  p.clock.advance(8 * HOUR_MS);
  assert.ok(warnings().some((m) => /^the node certificate expired at /.test(m)));
  assert.ok(p.certificates.metrics().node!.seconds_until_expiry < 0);

  // A renewal committed far from expiry stops the warnings.
  const from = new Date(p.clock.nowMs());
  p.write(p.service.renewServiceCertificate(p.service.certificatePem, from, 30), p.service.renewNodeCertificate(p.identity.nodeCertificatePem, from, 30));
  p.certificates.onCommit();
  const count = warnings().length;
  p.clock.advance(certificateExpiryCheckIntervalMs);
  assert.equal(warnings().length, count);
  p.certificates.stop();
  assert.deepEqual(p.clock.pendingDelaysMs(), [], 'stop cancels the check');
});
