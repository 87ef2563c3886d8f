import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { isCovenantError } from '../../src/base/index.js';
import {
  certificateValidity,
  createEndorsedCertificate,
  createSelfSignedCertificate,
  generateEcKeyPair,
  parseCertificate,
  renewCertificate,
  verifyCertificateSignedBy,
} from '../../src/crypto/index.js';

const DAY_MS = 86_400_000;

async function serviceAndNode() {
  const serviceKeys = generateEcKeyPair('P-384');
  const serviceCertPem = await createSelfSignedCertificate({ keyPair: serviceKeys, subjectCommonName: 'Covenant Service', validityDays: 1, isCa: true });
  const nodeKeys = generateEcKeyPair('P-384');
  const nodeCertPem = await createEndorsedCertificate({
    subjectPublicKey: nodeKeys.publicKey,
    subjectCommonName: 'Covenant Node',
    subjectAltNames: ['iPAddress:127.0.0.1', 'dNSName:localhost'],
    issuerCertificatePem: serviceCertPem,
    issuerPrivateKey: serviceKeys.privateKey,
    validityDays: 1,
  });
  return { serviceKeys, serviceCertPem, nodeKeys, nodeCertPem };
}

function extensionsOf(pem: string): string {
  const cert = new nodeCrypto.X509Certificate(pem);
  return JSON.stringify({ subject: cert.subject, issuer: cert.issuer, ca: cert.ca, keyUsage: cert.keyUsage, san: cert.subjectAltName });
}

test('a renewed service certificate keeps key, names and extensions, and carries the new period and a new serial number', async () => {
  const { serviceKeys, serviceCertPem } = await serviceAndNode();
  const notBefore = new Date(Date.UTC(2030, 0, 2, 3, 4, 5));
  const renewed = renewCertificate({ certificatePem: serviceCertPem, issuerCertificatePem: serviceCertPem, issuerPrivateKey: serviceKeys.privateKey, notBefore, validityDays: 90 });
  const before = parseCertificate(serviceCertPem);
  const after = parseCertificate(renewed);
  assert.equal(after.publicKeyPem, before.publicKeyPem);
  assert.equal(extensionsOf(renewed), extensionsOf(serviceCertPem));
  assert.notEqual(after.serialNumber, before.serialNumber);
  assert.deepEqual(certificateValidity(renewed), { notBefore, notAfter: new Date(notBefore.getTime() + 90 * DAY_MS) });
  // Self-signed again with the same key: it verifies under itself and under the original certificate.
  assert.ok(verifyCertificateSignedBy(renewed, renewed));
  assert.ok(verifyCertificateSignedBy(renewed, serviceCertPem));
});

test('a renewed node certificate chains to the original and the renewed service certificate', async () => {
  const { serviceKeys, serviceCertPem, nodeKeys, nodeCertPem } = await serviceAndNode();
  const now = new Date();
  const service2 = renewCertificate({ certificatePem: serviceCertPem, issuerCertificatePem: serviceCertPem, issuerPrivateKey: serviceKeys.privateKey, notBefore: now, validityDays: 30 });
  const node2 = renewCertificate({ certificatePem: nodeCertPem, issuerCertificatePem: service2, issuerPrivateKey: serviceKeys.privateKey, notBefore: now, validityDays: 30 });
  assert.equal(parseCertificate(node2).publicKeyPem, nodeKeys.publicKeyPem);
  assert.deepEqual(parseCertificate(node2).subjectAltNames, ['iPAddress:127.0.0.1', 'dNSName:localhost']);
  assert.ok(verifyCertificateSignedBy(node2, serviceCertPem));
  assert.ok(verifyCertificateSignedBy(node2, service2));
  assert.equal(certificateValidity(node2).notAfter.getTime(), Math.floor(now.getTime() / 1000) * 1000 + 30 * DAY_MS);

  // A TLS client trusting either service certificate accepts a server presenting the renewed node certificate.
  const server = tls.createServer({ key: nodeKeys.privateKeyPem, cert: node2 }, (socket) => socket.end());
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const port = (server.address() as AddressInfo).port;
    for (const ca of [serviceCertPem, service2]) {
      const presented = await new Promise<string>((resolve, reject) => {
        const socket = tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
          resolve(socket.getPeerX509Certificate()!.validTo);
          socket.destroy();
        });
        socket.on('error', reject);
      });
      assert.equal(new Date(presented).getTime(), certificateValidity(node2).notAfter.getTime());
    }
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
});

test('renewal refuses another issuer, a key that is not the issuer certificate\'s, and validity outside 1..36500 days', async () => {
  const { serviceKeys, serviceCertPem, nodeCertPem } = await serviceAndNode();
  const other = await serviceAndNode();
  const now = new Date();
  const code = (c: string) => (e: unknown) => isCovenantError(e) && e.code === c;
  // The node certificate was not issued by the other service.
  assert.throws(
    () => renewCertificate({ certificatePem: nodeCertPem, issuerCertificatePem: other.serviceCertPem, issuerPrivateKey: other.serviceKeys.privateKey, notBefore: now, validityDays: 1 }),
    code('InvalidCertificate'),
  );
  // The key does not match the issuer certificate named.
  assert.throws(
    () => renewCertificate({ certificatePem: nodeCertPem, issuerCertificatePem: serviceCertPem, issuerPrivateKey: other.serviceKeys.privateKey, notBefore: now, validityDays: 1 }),
    code('InvalidKey'),
  );
  for (const validityDays of [0, 1.5, 36_501]) {
    assert.throws(
      () => renewCertificate({ certificatePem: serviceCertPem, issuerCertificatePem: serviceCertPem, issuerPrivateKey: serviceKeys.privateKey, notBefore: now, validityDays }),
      code('InvalidCertificate'),
      String(validityDays),
    );
  }
  assert.throws(
    () => renewCertificate({ certificatePem: 'not a certificate', issuerCertificatePem: serviceCertPem, issuerPrivateKey: serviceKeys.privateKey, notBefore: now, validityDays: 1 }),
    code('InvalidCertificate'),
  );
});

test('renewal writes UTCTime before 2050 and GeneralizedTime from 2050 on, both read back exactly', async () => {
  const { serviceKeys, serviceCertPem } = await serviceAndNode();
  const notBefore = new Date(Date.UTC(2049, 11, 1));
  const renewed = renewCertificate({ certificatePem: serviceCertPem, issuerCertificatePem: serviceCertPem, issuerPrivateKey: serviceKeys.privateKey, notBefore, validityDays: 365 });
  assert.deepEqual(certificateValidity(renewed), { notBefore, notAfter: new Date(notBefore.getTime() + 365 * DAY_MS) });
  assert.ok(verifyCertificateSignedBy(renewed, serviceCertPem));
});
