import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import tls from 'node:tls';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import type { AddressInfo } from 'node:net';
import { isCovenantError } from '../../src/base/index.js';
import {
  generateEcKeyPair, createSelfSignedCertificate, createEndorsedCertificate, parseCertificate, certificateId,
  verifyCertificateSignedBy, generateIdentity, parseSubjectAltName, nodeIdFromPublicKey, splitPemCertificates,
  certificateValidAt, signEcdsa, verifyEcdsa, loadPrivateKey,
} from '../../src/crypto/index.js';

const DAY_MS = 86_400_000;

async function serviceAndNode(sans = ['iPAddress:127.0.0.1', 'dNSName:localhost']) {
  const serviceKeys = generateEcKeyPair('P-384');
  const serviceCertPem = await createSelfSignedCertificate({ keyPair: serviceKeys, subjectCommonName: 'CN-service', validityDays: 30, isCa: true });
  const nodeKeys = generateEcKeyPair('P-384');
  const nodeCertPem = await createEndorsedCertificate({
    subjectPublicKey: nodeKeys.publicKey,
    subjectCommonName: 'node',
    subjectAltNames: sans,
    issuerCertificatePem: serviceCertPem,
    issuerPrivateKey: serviceKeys.privateKey,
    validityDays: 10,
  });
  return { serviceKeys, serviceCertPem, nodeKeys, nodeCertPem };
}

test('subject alternative names parse from CCF syntax and bad ones are rejected clearly', () => {
  assert.deepEqual(parseSubjectAltName('iPAddress:127.0.0.1'), { type: 'ip', value: '127.0.0.1' });
  assert.deepEqual(parseSubjectAltName('iPAddress:::1'), { type: 'ip', value: '::1' });
  assert.deepEqual(parseSubjectAltName('dNSName:Node-1.Example.com'), { type: 'dns', value: 'node-1.example.com' });
  for (const bad of ['127.0.0.1', 'iPAddress:300.1.1.1', 'iPAddress:localhost', 'dNSName:', 'dNSName:a..b', 'dnsname:localhost', 'uri:http://x', 'dNSName:-bad.com']) {
    assert.throws(
      () => parseSubjectAltName(bad),
      (e) => isCovenantError(e) && e.code === 'InvalidSubjectAltName' && e.message.includes(bad),
      bad,
    );
  }
});

test('a self-signed CA certificate parses back with its names, key, dates and CA flag', async () => {
  const keys = generateEcKeyPair('P-384');
  const notBefore = new Date('2024-01-01T00:00:00Z');
  const pem = await createSelfSignedCertificate({
    keyPair: keys, subjectCommonName: 'service', subjectAltNames: ['dNSName:svc.example', 'iPAddress:10.0.0.1'], validityDays: 365, isCa: true, notBefore,
  });
  const parsed = parseCertificate(pem);
  assert.equal(parsed.subject, 'CN=service');
  assert.equal(parsed.issuer, 'CN=service');
  assert.equal(parsed.isCa, true);
  assert.deepEqual(parsed.subjectAltNames, ['dNSName:svc.example', 'iPAddress:10.0.0.1']);
  assert.equal(parsed.notBefore.getTime(), notBefore.getTime());
  assert.equal(parsed.notAfter.getTime(), notBefore.getTime() + 365 * DAY_MS);
  assert.equal(parsed.publicKeyPem, keys.publicKeyPem);
  assert.equal(nodeIdFromPublicKey(parsed.publicKeyPem), nodeIdFromPublicKey(keys.publicKey));
  assert.deepEqual(parsed.publicKeyDer, new Uint8Array(keys.publicKey.export({ format: 'der', type: 'spki' })));
  assert.match(parsed.serialNumber, /^[0-9A-F]+$/);
  assert.equal(certificateId(pem), nodeCrypto.createHash('sha256').update(parsed.derBytes).digest('hex'));
  assert.equal(verifyCertificateSignedBy(pem, pem), true);
  assert.equal(certificateValidAt(pem, new Date('2024-06-01T00:00:00Z')), true);
  assert.equal(certificateValidAt(pem, new Date('2026-01-01T00:00:00Z')), false);
  // A P-384 key signs with ECDSA SHA-384; a P-256 key with SHA-256.
  assert.deepEqual(new x509.X509Certificate(pem).signatureAlgorithm, { name: 'ECDSA', hash: { name: 'SHA-384' } });
  const p256 = await createSelfSignedCertificate({ keyPair: generateEcKeyPair('P-256'), subjectCommonName: 'u', validityDays: 1, isCa: false });
  assert.deepEqual(new x509.X509Certificate(p256).signatureAlgorithm, { name: 'ECDSA', hash: { name: 'SHA-256' } });
});

test('an endorsed node certificate chains to the service certificate and not to another CA', async () => {
  const { serviceCertPem, nodeKeys, nodeCertPem } = await serviceAndNode();
  const otherCa = await createSelfSignedCertificate({ keyPair: generateEcKeyPair('P-384'), subjectCommonName: 'CN-service', validityDays: 30, isCa: true });
  const parsed = parseCertificate(nodeCertPem);
  assert.equal(parsed.isCa, false);
  assert.equal(parsed.issuer, 'CN=CN-service');
  assert.deepEqual(parsed.subjectAltNames, ['iPAddress:127.0.0.1', 'dNSName:localhost']);
  assert.equal(parsed.publicKeyPem, nodeKeys.publicKeyPem);
  assert.equal(verifyCertificateSignedBy(nodeCertPem, serviceCertPem), true);
  assert.equal(verifyCertificateSignedBy(nodeCertPem, otherCa), false);
  assert.equal(verifyCertificateSignedBy(serviceCertPem, nodeCertPem), false);
  assert.equal(splitPemCertificates(nodeCertPem + serviceCertPem).length, 2);
});

test('endorsement refuses an issuer key that does not match the issuer certificate, and bad SANs', async () => {
  const { serviceCertPem, nodeKeys } = await serviceAndNode();
  await assert.rejects(
    createEndorsedCertificate({
      subjectPublicKey: nodeKeys.publicKey, subjectCommonName: 'node', subjectAltNames: [], issuerCertificatePem: serviceCertPem,
      issuerPrivateKey: generateEcKeyPair('P-384').privateKey, validityDays: 1,
    }),
    (e) => isCovenantError(e) && e.code === 'InvalidKey',
  );
  await assert.rejects(
    serviceAndNode(['ipaddress:127.0.0.1']),
    (e) => isCovenantError(e) && e.code === 'InvalidSubjectAltName',
  );
  assert.throws(() => parseCertificate('garbage'), (e) => isCovenantError(e) && e.code === 'InvalidCertificate');
});

test('generated identities have distinct ids equal to the certificate DER digest and a usable key', async () => {
  const a = await generateIdentity({ commonName: 'member0' });
  const b = await generateIdentity({ commonName: 'user0', curve: 'P-256' });
  assert.notEqual(a.id, b.id);
  assert.equal(a.id, certificateId(a.certificatePem));
  assert.equal(parseCertificate(b.certificatePem).publicKeyPem, b.publicKeyPem);
  const sig = signEcdsa(loadPrivateKey(a.privateKeyPem), new Uint8Array([1, 2, 3]));
  assert.equal(verifyEcdsa(a.certificatePem, new Uint8Array([1, 2, 3]), sig), true);
});

async function tlsHandshake(serverKeyPem: string, serverCertPem: string, caPem: string, servername: string | undefined) {
  const server = tls.createServer({ key: serverKeyPem, cert: serverCertPem }, (socket) => socket.end('hello'));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  try {
    return await new Promise<string>((resolve, reject) => {
      const socket = tls.connect({ host: '127.0.0.1', port, ca: caPem, rejectUnauthorized: true, ...(servername === undefined ? {} : { servername }) });
      let data = '';
      socket.on('data', (chunk) => (data += chunk.toString()));
      socket.on('end', () => resolve(data));
      socket.on('error', reject);
    });
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

test('TLS: a client trusting only the service certificate accepts an endorsed node, by IP and by DNS name', async () => {
  const { serviceCertPem, nodeKeys, nodeCertPem } = await serviceAndNode();
  assert.equal(await tlsHandshake(nodeKeys.privateKeyPem, nodeCertPem, serviceCertPem, undefined), 'hello');
  assert.equal(await tlsHandshake(nodeKeys.privateKeyPem, nodeCertPem, serviceCertPem, 'localhost'), 'hello');
});

test('TLS: the handshake fails with a different CA or a host name not in the SANs', async () => {
  const { nodeKeys, nodeCertPem } = await serviceAndNode();
  const otherCa = await createSelfSignedCertificate({ keyPair: generateEcKeyPair('P-384'), subjectCommonName: 'CN-service', validityDays: 30, isCa: true });
  await assert.rejects(tlsHandshake(nodeKeys.privateKeyPem, nodeCertPem, otherCa, undefined), (e: NodeJS.ErrnoException) => /signature|verify|issuer/i.test(e.code ?? e.message));
  const { serviceCertPem: ca2, nodeKeys: k2, nodeCertPem: c2 } = await serviceAndNode(['dNSName:node.example']);
  await assert.rejects(tlsHandshake(k2.privateKeyPem, c2, ca2, undefined), (e: NodeJS.ErrnoException) => e.code === 'ERR_TLS_CERT_ALTNAME_INVALID');
});

test('TLS: a pending node is reachable with its own self-signed certificate as the CA', async () => {
  const keys = generateEcKeyPair('P-384');
  const pem = await createSelfSignedCertificate({ keyPair: keys, subjectCommonName: 'node', subjectAltNames: ['iPAddress:127.0.0.1'], validityDays: 2, isCa: false });
  assert.equal(await tlsHandshake(keys.privateKeyPem, pem, pem, undefined), 'hello');
});
