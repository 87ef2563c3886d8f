/**
 * A statement's did:x509 issuer is bound to the chain that signed it: a statement under a fresh,
 * self-made CA claiming a trusted issuer's DID is refused, at registration (verifySignedStatement)
 * and when a joiner presents it (checkTransparentStatement); an honest one resolves, for each
 * policy (subject, san, eku, fulcio-issuer) and each fingerprint algorithm, and each malformed or
 * unmatched DID is refused with its reason.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { webcrypto } from 'node:crypto';
import { certificateFingerprint, parseCertificate } from '../../src/crypto/index.js';
import { IssuerResolutionError, parseDidX509, resolveDidX509 } from '../../src/gov/did-x509.js';
import { attachReceipt, checkTransparentStatement, signStatement, StatementError, verifySignedStatement } from '../../src/gov/transparent-statement.js';
import { makeIssuer, makeService } from './statement-helpers.js';

const HOST_DATA = 'e'.repeat(64);

const unresolved = (pattern: RegExp) => (e: unknown) => e instanceof IssuerResolutionError && e.code === 'InvalidStatementIssuer' && e.status === 400 && pattern.test(e.message);

const b64url = (bytes: Uint8Array) => Buffer.from(bytes).toString('base64url');

test('a forged issuer: a self-made CA claiming the trusted root\'s DID is refused at registration and at admission; the honest statement passes', async () => {
  const trusted = await makeIssuer('builds');
  const attacker = await makeIssuer('builds'); // the same leaf subject, under the attacker's own CA
  const service = await makeService();
  const sign = (who: typeof trusted, iss: string, chainPem = who.chainPem) =>
    signStatement({ privateKeyPem: who.keys.privateKeyPem, x5chainPem: chainPem, issuer: iss, subject: 'covenant-node', payload: Buffer.from(HOST_DATA), svn: 99 });

  const forged = sign(attacker, trusted.did);
  assert.throws(() => verifySignedStatement(forged), unresolved(/no CA certificate of x5chain has the sha256 fingerprint/));
  // Registered by another route (a receipt of this service over it): still refused before any policy.
  assert.throws(() => checkTransparentStatement(attachReceipt(forged, service.receiptOf(forged)), [service.certificatePem]), unresolved(/does not resolve against the statement's x5chain/));
  // The trusted root appended to the attacker's chain does not sign the attacker's CA.
  assert.throws(() => verifySignedStatement(sign(attacker, trusted.did, attacker.chainPem + trusted.caPem)), (e: unknown) => e instanceof StatementError && /x5chain\[1\] is not signed by phdr.x5chain\[2\]/.test(e.message));
  // The trusted CA's key signed the leaf, but the DID names another subject.
  const otherSubject = trusted.did.replace('subject:CN:builds', 'subject:CN:releases');
  assert.throws(() => verifySignedStatement(sign(trusted, otherSubject)), unresolved(/subject CN is "builds", not "releases"/));
  // A DID naming the leaf itself (not a CA of the chain).
  const leafDer = parseCertificate(trusted.chainPem).derBytes;
  const leafDid = `did:x509:0:sha256:${b64url(certificateFingerprint(leafDer, 'sha256'))}::subject:CN:builds`;
  assert.throws(() => verifySignedStatement(sign(trusted, leafDid)), unresolved(/no CA certificate of x5chain/));
  // Another DID method is not believed.
  assert.throws(() => verifySignedStatement(sign(trusted, 'did:web:builds.example')), unresolved(/not a did:x509 identifier/));

  const honest = sign(trusted, trusted.did);
  assert.equal(verifySignedStatement(honest).issuer.did, trusted.did);
  const input = checkTransparentStatement(attachReceipt(honest, service.receiptOf(honest)), [service.certificatePem]);
  assert.equal(input.phdr.cwt.iss, trusted.did);
  assert.deepEqual(input.resolved_issuer.ca_fingerprint, { alg: 'sha256', value: trusted.did.split(':')[4] });
  assert.equal(parseCertificate(input.resolved_issuer.ca_certificate).serialNumber, parseCertificate(trusted.caPem).serialNumber);
  // sha384 and sha512 fingerprints name the same CA.
  const caDer = parseCertificate(trusted.caPem).derBytes;
  for (const alg of ['sha384', 'sha512'] as const) {
    const did = `did:x509:0:${alg}:${b64url(certificateFingerprint(caDer, alg))}::subject:CN:builds`;
    assert.equal(verifySignedStatement(sign(trusted, did)).issuer.ca_fingerprint.alg, alg);
  }
});

interface Cert {
  readonly pem: string;
  readonly der: Uint8Array;
  readonly keys: webcrypto.CryptoKeyPair;
  readonly cert: x509.X509Certificate;
}

const EC = { name: 'ECDSA', namedCurve: 'P-256' } as const;
const SIGNING = { name: 'ECDSA', hash: 'SHA-256' } as const;
let serial = 1;

async function certificate(options: { subject: string; issuer?: Cert; ca: boolean; extensions?: x509.Extension[] }): Promise<Cert> {
  const keys = (await webcrypto.subtle.generateKey(EC, true, ['sign', 'verify'])) as webcrypto.CryptoKeyPair;
  const extensions = [new x509.BasicConstraintsExtension(options.ca, undefined, true), ...(options.extensions ?? [])];
  const notBefore = new Date('2026-01-01T00:00:00Z');
  const notAfter = new Date('2036-01-01T00:00:00Z');
  const cert = options.issuer
    ? await x509.X509CertificateGenerator.create({
        serialNumber: (serial++).toString(16).padStart(2, '0'),
        subject: options.subject,
        issuer: options.issuer.cert.subject,
        notBefore,
        notAfter,
        publicKey: keys.publicKey,
        signingKey: options.issuer.keys.privateKey,
        signingAlgorithm: SIGNING,
        extensions,
      })
    : await x509.X509CertificateGenerator.createSelfSigned({ serialNumber: (serial++).toString(16).padStart(2, '0'), name: options.subject, notBefore, notAfter, keys, signingAlgorithm: SIGNING, extensions });
  return { pem: cert.toString('pem') + '\n', der: new Uint8Array(cert.rawData), keys, cert };
}

async function privateKeyPem(keys: webcrypto.CryptoKeyPair): Promise<string> {
  const der = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey));
  return `-----BEGIN PRIVATE KEY-----\n${der.toString('base64').match(/.{1,64}/g)!.join('\n')}\n-----END PRIVATE KEY-----\n`;
}

test('each policy of a three-certificate chain: subject, san, eku and fulcio-issuer, naming the root or the intermediate', async () => {
  const root = await certificate({ subject: 'CN=Root CA', ca: true });
  const intermediate = await certificate({ subject: 'CN=Intermediate CA', issuer: root, ca: true });
  const leaf = await certificate({
    subject: 'CN=builds, O=Example Corp, C=US',
    issuer: intermediate,
    ca: false,
    extensions: [
      new x509.SubjectAlternativeNameExtension([
        { type: 'email', value: 'builds@example.com' },
        { type: 'dns', value: 'builds.example.com' },
        { type: 'url', value: 'https://example.com/builds' },
      ]),
      new x509.ExtendedKeyUsageExtension(['1.3.6.1.5.5.7.3.3']),
      new x509.Extension('1.3.6.1.4.1.57264.1.1', false, new TextEncoder().encode('https://token.actions.githubusercontent.com')),
    ],
  });
  const chainDer = [leaf.der, intermediate.der, root.der];
  const chainPem = [leaf.pem, intermediate.pem, root.pem];
  const rootFp = b64url(certificateFingerprint(root.der, 'sha256'));
  const intermediateFp = b64url(certificateFingerprint(intermediate.der, 'sha256'));
  const resolve = (did: string) => resolveDidX509(did, chainDer, chainPem);

  const all = `did:x509:0:sha256:${rootFp}::subject:CN:builds:O:Example%20Corp::san:email:builds%40example.com::san:uri:https%3A%2F%2Fexample.com%2Fbuilds::eku:1.3.6.1.5.5.7.3.3::fulcio-issuer:token.actions.githubusercontent.com`;
  const resolved = resolve(all);
  assert.equal(resolved.ca_index, 2);
  assert.deepEqual(resolved.policies, [
    { name: 'subject', value: 'CN:builds:O:Example Corp' },
    { name: 'san', value: 'email:builds@example.com' },
    { name: 'san', value: 'uri:https://example.com/builds' },
    { name: 'eku', value: '1.3.6.1.5.5.7.3.3' },
    { name: 'fulcio-issuer', value: 'token.actions.githubusercontent.com' },
  ]);
  assert.equal(resolve(`did:x509:0:sha256:${intermediateFp}::san:dns:builds.example.com`).ca_index, 1);
  assert.equal(resolve(`did:x509:0:sha256:${rootFp}::subject:2.5.4.6:US`).ca_index, 2, 'a subject key may be an OID');

  const refusals: [string, RegExp][] = [
    [`did:x509:0:sha256:${rootFp}::subject:O:Other`, /subject O is "Example Corp", not "Other"/],
    [`did:x509:0:sha256:${rootFp}::subject:OU:builds`, /subject OU is absent/],
    [`did:x509:0:sha256:${rootFp}::subject:CN:builds:CN:builds`, /names CN twice/],
    [`did:x509:0:sha256:${rootFp}::subject:CN`, /must be <key>:<value> pairs/],
    [`did:x509:0:sha256:${rootFp}::subject:XX:builds`, /not CN, L, ST, O, OU, C, STREET or an OID/],
    [`did:x509:0:sha256:${rootFp}::san:email:other%40example.com`, /no subject alternative name email:other@example.com/],
    [`did:x509:0:sha256:${rootFp}::san:dn:builds`, /must be <email\|dns\|uri>:<value>/],
    [`did:x509:0:sha256:${rootFp}::eku:1.3.6.1.5.5.7.3.1`, /no extended key usage 1.3.6.1.5.5.7.3.1/],
    [`did:x509:0:sha256:${rootFp}::fulcio-issuer:accounts.google.com`, /Fulcio issuer is "https:\/\/token.actions.githubusercontent.com", not "https:\/\/accounts.google.com"/],
    [`did:x509:0:sha256:${rootFp}::color:blue`, /not one of subject, san, eku, fulcio-issuer/],
    [`did:x509:0:sha256:${rootFp}::subject:CN:bu%ZZilds`, /not <name>:<percent-encoded value>/],
    [`did:x509:0:sha256:${rootFp}::subject:CN:b%C3`, /not percent-encoded UTF-8/],
    [`did:x509:0:sha256:${rootFp}::subject:CN:with space`, /not <name>:<percent-encoded value>/],
    [`did:x509:0:sha256:${rootFp}`, /names no policy/],
    [`did:x509:1:sha256:${rootFp}::eku:1.2`, /version "1" is not supported/],
    [`did:x509:0:md5:${rootFp}::eku:1.2`, /"md5" is not sha256, sha384 or sha512/],
    [`did:x509:0:sha256:${rootFp.slice(1)}::eku:1.2`, /not a base64url sha256 digest \(43 characters\)/],
    [`did:x509:0:sha256:${rootFp}:extra::eku:1.2`, /expected <hash algorithm>:<CA fingerprint>/],
    [`did:web:example.com`, /not a did:x509 identifier/],
  ];
  for (const [did, reason] of refusals) assert.throws(() => resolve(did), unresolved(reason), did);
  assert.throws(() => resolveDidX509(`did:x509:0:sha256:${rootFp}::subject:CN:builds`, [leaf.der], [leaf.pem]), unresolved(/only the leaf certificate/));
  assert.deepEqual(parseDidX509(all).policies.length, 5);

  // A statement signed by this leaf, with the whole chain: registered as itself.
  const statement = signStatement({ privateKeyPem: await privateKeyPem(leaf.keys), x5chainPem: chainPem.join(''), issuer: all, subject: 'covenant-node', payload: Buffer.from(HOST_DATA) });
  assert.equal(verifySignedStatement(statement).issuer.ca_index, 2);
});

test('a certificate on the path to the named CA must be a CA: one that is not cannot vouch for the leaf', async () => {
  const root = await certificate({ subject: 'CN=Root CA', ca: true });
  const notCa = await certificate({ subject: 'CN=Just a leaf', issuer: root, ca: false });
  const leaf = await certificate({ subject: 'CN=builds', issuer: notCa, ca: false });
  const did = `did:x509:0:sha256:${b64url(certificateFingerprint(root.der, 'sha256'))}::subject:CN:builds`;
  assert.throws(() => resolveDidX509(did, [leaf.der, notCa.der, root.der], [leaf.pem, notCa.pem, root.pem]), unresolved(/x5chain\[1\] signs a certificate but is not a CA certificate/));
});
