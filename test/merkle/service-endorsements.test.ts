/**
 * Receipts across recoveries (src/merkle/service-endorsements.ts, docs/merkle.md): three service
 * identities in turn, each endorsing the one before it; a receipt signed by a node the first one
 * endorsed verifies with the newest certificate and the endorsements oldest first, and every broken
 * chain is refused with InvalidServiceEndorsements.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import 'reflect-metadata';
import * as x509lib from '@peculiar/x509';
import { isCovenantError } from '../../src/base/index.js';
import { runReceiptVerify } from '../../src/cli/receipt-tools.js';
import { generateEcKeyPair, nodeIdFromPublicKey, parseCertificate } from '../../src/crypto/index.js';
import {
  buildReceipt, buildSignatureReceipt, coseReceiptWithProof, serviceEndorsementsChainOf, signMerkleRoot, verifyCoseReceipt, verifyReceipt, verifySignatureReceipt,
  SERVICE_ENDORSEMENTS_MAX, type Receipt, type SignatureReceipt,
} from '../../src/merkle/index.js';
import { ServiceIdentity } from '../../src/node/identity/service-identity.js';
import { treeOfTransactions } from './helpers.js';

const isBrokenChain = (e: unknown) => isCovenantError(e) && e.code === 'InvalidServiceEndorsements' && e.status === 400;

interface Era {
  readonly service: ServiceIdentity;
  readonly receipt: (seqno: number, endorsements?: readonly string[]) => Receipt;
  readonly signatureReceipt: (endorsements?: readonly string[]) => SignatureReceipt;
}

/** A node that `service` endorsed signs the root of a tree of 12 transactions. */
async function nodeOf(service: ServiceIdentity): Promise<Era> {
  const nodeKeys = generateEcKeyPair('P-384');
  const nodeCertificatePem = await service.endorse(nodeKeys.publicKeyPem, ['iPAddress:127.0.0.1'], 30);
  const nodeId = nodeIdFromPublicKey(nodeKeys.publicKey);
  const { tree, components } = treeOfTransactions(12);
  const signedRoot = tree.root();
  const signature = signMerkleRoot(nodeKeys.privateKey, signedRoot);
  const common = { signature, nodeCertificatePem, nodeId, signedRoot };
  // Through JSON, as a client receives it.
  const asJson = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;
  return {
    service,
    receipt: (seqno, serviceEndorsements) =>
      asJson(buildReceipt({ ...common, leafComponents: components[seqno - 1]!, proof: tree.inclusionProof(seqno - 1), serviceEndorsements })),
    signatureReceipt: (serviceEndorsements) => asJson(buildSignatureReceipt({ ...common, serviceEndorsements })),
  };
}

async function serviceIdentity(): Promise<ServiceIdentity> {
  const service = new ServiceIdentity();
  await service.create(30);
  return service;
}

let gen0: ServiceIdentity, gen1: ServiceIdentity, gen2: ServiceIdentity, unrelated: ServiceIdentity;
/** e01: gen1's endorsement of gen0; e12: gen2's of gen1. */
let e01: string, e12: string;
let era0: Era, era1: Era;

before(async () => {
  [gen0, gen1, gen2, unrelated] = await Promise.all([serviceIdentity(), serviceIdentity(), serviceIdentity(), serviceIdentity()]);
  e01 = await gen1.endorsePreviousIdentity(gen0.certificatePem, 30);
  e12 = await gen2.endorsePreviousIdentity(gen1.certificatePem, 30);
  [era0, era1] = await Promise.all([nodeOf(gen0), nodeOf(gen1)]);
});

test('an endorsement is a CA certificate for the previous service key, under its name, issued and signed by the endorsing service', async () => {
  const endorsement = parseCertificate(e01);
  const previous = parseCertificate(gen0.certificatePem);
  assert.ok(endorsement.isCa);
  assert.deepEqual(endorsement.publicKeyDer, previous.publicKeyDer);
  assert.notDeepEqual(endorsement.publicKeyDer, parseCertificate(gen1.certificatePem).publicKeyDer);
  assert.equal(endorsement.subject, previous.subject, 'the name the old node certificates give as their issuer');
  const keyIdOf = (pem: string) => new x509lib.X509Certificate(pem).getExtension(x509lib.SubjectKeyIdentifierExtension)?.keyId;
  assert.ok(keyIdOf(e01) !== undefined && keyIdOf(e01) === keyIdOf(gen0.certificatePem), 'the key identifier they give as their authority key');
  const x509 = new nodeCrypto.X509Certificate(e01);
  assert.ok(x509.checkIssued(new nodeCrypto.X509Certificate(gen1.certificatePem)));
  assert.ok(x509.verify(parseCertificate(gen1.certificatePem).publicKey));
  assert.ok(!x509.verify(parseCertificate(gen0.certificatePem).publicKey));
  // Only a service (CA) certificate is endorsed.
  await assert.rejects(gen1.endorsePreviousIdentity(era0.receipt(1).cert, 30), (e) => isCovenantError(e) && e.code === 'InvalidCertificate');
});

test('a receipt signed under the first identity verifies with the newest certificate through both endorsements, oldest first', () => {
  const verified = verifyReceipt(era0.receipt(5, [e01, e12]), gen2.certificatePem);
  assert.equal(verified.seqno, 5);
  assert.deepEqual(verifySignatureReceipt(era0.signatureReceipt([e01, e12]), gen2.certificatePem).root, verified.root);
  // Signed under the second identity: one endorsement.
  assert.equal(verifyReceipt(era1.receipt(7, [e12]), gen2.certificatePem).seqno, 7);
  // Without endorsements, unchanged: a receipt verifies with the certificate that endorsed its node, and only that one.
  assert.equal(verifyReceipt(era0.receipt(5), gen0.certificatePem).seqno, 5);
  assert.throws(() => verifyReceipt(era0.receipt(5), gen2.certificatePem), (e) => isCovenantError(e) && e.code === 'InvalidReceipt' && /service_endorsements/.test(e.message));
  // An empty list is no list.
  assert.equal(verifyReceipt({ ...era0.receipt(5), service_endorsements: [] }, gen0.certificatePem).seqno, 5);
});

test('a broken chain is refused: a missing link, the wrong order, an unrelated endorser, a tampered endorsement, the wrong trust anchor', async () => {
  const byUnrelated = await unrelated.endorsePreviousIdentity(gen0.certificatePem, 30);
  const tamperedSignature = tamper(e01, (der) => der.length - 1);
  // A byte of the serial number: names and key identifiers still chain, only the signature does not hold.
  const tamperedBody = tamper(e01, (der) => {
    assert.equal(der[13], 0x02, 'the serial number INTEGER');
    return 16;
  });
  assert.ok(new nodeCrypto.X509Certificate(tamperedBody).checkIssued(new nodeCrypto.X509Certificate(e12)), 'the names chain');
  const cases: [string, readonly string[], string][] = [
    ['missing the newest link', [e01], gen2.certificatePem],
    ['missing the oldest link', [e12], gen2.certificatePem],
    ['reversed', [e12, e01], gen2.certificatePem],
    ['repeated', [e01, e01, e12], gen2.certificatePem],
    ['endorsed by an unrelated service', [byUnrelated, e12], gen2.certificatePem],
    ['tampered signature', [tamperedSignature, e12], gen2.certificatePem],
    ['tampered body', [tamperedBody, e12], gen2.certificatePem],
    ['gen1 as trust anchor', [e01, e12], gen1.certificatePem],
    ['gen0 as trust anchor', [e01, e12], gen0.certificatePem],
    ['a node certificate as an endorsement', [era0.receipt(1).cert, e12], gen2.certificatePem],
    ['not a certificate', ['-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', e12], gen2.certificatePem],
  ];
  for (const [what, endorsements, anchor] of cases) {
    assert.throws(() => verifyReceipt(era0.receipt(3, endorsements), anchor), isBrokenChain, what);
    assert.throws(() => verifySignatureReceipt(era0.signatureReceipt(endorsements), anchor), isBrokenChain, what);
  }
  // The message names the link that fails.
  assert.throws(() => verifyReceipt(era0.receipt(3, [e12, e01]), gen2.certificatePem), /cert \(the node certificate\) is not issued/);
  assert.throws(() => verifyReceipt(era0.receipt(3, [e01]), gen2.certificatePem), /service_endorsements\[0\] is not issued .* the service certificate/);
  const malformed: unknown[] = ['x', [1], Array.from({ length: SERVICE_ENDORSEMENTS_MAX + 1 }, () => e01)];
  for (const endorsements of malformed) {
    assert.throws(() => verifyReceipt({ ...era0.receipt(3), service_endorsements: endorsements } as Receipt, gen2.certificatePem), isBrokenChain);
  }
});

/** `pem` with one bit flipped in the DER byte that `at` chooses. */
function tamper(pem: string, at: (der: Uint8Array) => number): string {
  const der = new Uint8Array(new nodeCrypto.X509Certificate(pem).raw);
  der[at(der)] ^= 0x01;
  const base64 = Buffer.from(der).toString('base64').replace(/.{64}/g, '$&\n');
  return `-----BEGIN CERTIFICATE-----\n${base64}\n-----END CERTIFICATE-----\n`;
}

test('a COSE receipt needs no endorsement: the current service key signs the root, whichever node signed it', () => {
  const { tree, components } = treeOfTransactions(12);
  const signed = gen2.signedRoot(13, tree.root(), '4.13');
  const cose = coseReceiptWithProof(signed, components[4]!, tree.inclusionProof(4));
  assert.equal(verifyCoseReceipt(cose, gen2.certificatePem).seqno, 5);
  assert.throws(() => verifyCoseReceipt(cose, gen0.certificatePem));
});

test('covenant receipt verify follows the endorsements to the one service certificate given', () => {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-endorsements-'));
  try {
    const file = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const run = (receipt: unknown, serviceCertificatePem: string) => {
      const lines: string[] = [];
      const code = runReceiptVerify(
        { receiptFile: file('receipt.json', JSON.stringify({ transaction_id: '2.3', receipt })), serviceCertificateFile: file('service.pem', serviceCertificatePem) },
        { out: (l) => lines.push(l), err: (l) => lines.push(l) },
      );
      return { code, text: lines.join('\n') };
    };
    const good = run(era0.receipt(3, [e01, e12]), gen2.certificatePem);
    assert.equal(good.code, 0, good.text);
    assert.match(good.text, /transaction 2\.3, .*\(endorsed through 2 earlier service identities\)/);
    const signature = run(era0.signatureReceipt([e01, e12]), gen2.certificatePem);
    assert.equal(signature.code, 0, signature.text);
    const reversed = run(era0.receipt(3, [e12, e01]), gen2.certificatePem);
    assert.equal(reversed.code, 1);
    assert.match(reversed.text, /invalid service_endorsements/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test('a receipt kept from before a recovery (no endorsements in it) verifies with the published chain, from the link that certifies its signer', () => {
  const chain = serviceEndorsementsChainOf({ service_certificate: gen2.certificatePem, endorsements: [{ endorsement: e01 }, { endorsement: e12 }] });
  assert.deepEqual(chain, [e01, e12]);
  const options = { serviceEndorsementsChain: chain };
  const fromFirst = verifyReceipt(era0.receipt(5), gen2.certificatePem, options);
  assert.equal(fromFirst.endorsements, 2);
  assert.equal(verifySignatureReceipt(era0.signatureReceipt(), gen2.certificatePem, options).endorsements, 2);
  // Signed under the second identity: only the newest endorsement applies.
  assert.equal(verifyReceipt(era1.receipt(7), gen2.certificatePem, options).endorsements, 1);
  // The current identity's receipts need none, chain or not.
  assert.equal(verifyReceipt(era0.receipt(5), gen0.certificatePem, options).endorsements, 0);
  // A receipt's own endorsements take precedence over the chain given.
  assert.equal(verifyReceipt(era0.receipt(5, [e01, e12]), gen2.certificatePem, { serviceEndorsementsChain: [e12] }).endorsements, 2);

  const refused: [string, readonly string[], string, (e: unknown) => boolean][] = [
    ['no link certifies the signer', [e12], gen2.certificatePem, (e) => isCovenantError(e) && e.code === 'InvalidReceipt' && /nor by a service key/.test(e.message)],
    ['missing the newest link', [e01], gen2.certificatePem, isBrokenChain],
    ['reversed', [e12, e01], gen2.certificatePem, isBrokenChain],
    ['another trust anchor', [e01, e12], gen1.certificatePem, isBrokenChain],
    ['tampered', [tamper(e01, (der) => der.length - 1), e12], gen2.certificatePem, isBrokenChain],
  ];
  for (const [what, given, anchor, expected] of refused) {
    assert.throws(() => verifyReceipt(era0.receipt(5), anchor, { serviceEndorsementsChain: given }), expected, what);
  }
  for (const malformed of [{}, 'x', [1], { endorsements: [{ cert: 'x' }] }, Array.from({ length: SERVICE_ENDORSEMENTS_MAX + 1 }, () => e01)]) {
    assert.throws(() => serviceEndorsementsChainOf(malformed), isBrokenChain);
  }
});

test('a COSE receipt signed by an earlier service key verifies with the chain that endorses that key up to the newest certificate', () => {
  const { tree, components } = treeOfTransactions(12);
  const cose = coseReceiptWithProof(gen0.signedRoot(13, tree.root(), '2.13'), components[4]!, tree.inclusionProof(4));
  assert.throws(() => verifyCoseReceipt(cose, gen2.certificatePem), (e) => isCovenantError(e) && /GET \/node\/service\/endorsements/.test(e.message));
  const verified = verifyCoseReceipt(cose, gen2.certificatePem, { serviceEndorsementsChain: [e01, e12] });
  assert.equal(verified.seqno, 5);
  assert.equal(verified.endorsements, 2);
  const fromSecond = coseReceiptWithProof(gen1.signedRoot(13, tree.root(), '4.13'), components[4]!, tree.inclusionProof(4));
  assert.equal(verifyCoseReceipt(fromSecond, gen2.certificatePem, { serviceEndorsementsChain: [e01, e12] }).endorsements, 1);
  assert.throws(() => verifyCoseReceipt(cose, gen2.certificatePem, { serviceEndorsementsChain: [e12] }), /names neither the key of the service certificate/);
  assert.throws(() => verifyCoseReceipt(cose, gen2.certificatePem, { serviceEndorsementsChain: [e01] }), isBrokenChain);
  assert.throws(() => verifyCoseReceipt(cose, gen1.certificatePem, { serviceEndorsementsChain: [e01, e12] }), isBrokenChain);
  assert.throws(() => verifyCoseReceipt(cose, gen2.certificatePem, { serviceEndorsementsChain: [tamper(e01, (der) => der.length - 1), e12] }), isBrokenChain);
  // The chain certifies the key: a receipt whose signature is not that key's still fails.
  const forged = coseReceiptWithProof(unrelated.signedRoot(13, tree.root(), '2.13'), components[4]!, tree.inclusionProof(4));
  assert.throws(() => verifyCoseReceipt(forged, gen2.certificatePem, { serviceEndorsementsChain: [e01, e12] }), /names neither/);
});

test('covenant receipt verify takes the chain as a file: the answer of GET /node/service/endorsements', () => {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-chain-'));
  try {
    const file = (name: string, text: string | Uint8Array) => {
      writeFileSync(join(dir, name), text);
      return join(dir, name);
    };
    const chainFile = file('endorsements.json', JSON.stringify({ service_certificate: gen2.certificatePem, endorsements: [{ endorsement: e01 }, { endorsement: e12 }] }));
    const run = (receiptFile: string, endorsementsFile?: string) => {
      const lines: string[] = [];
      const code = runReceiptVerify(
        { receiptFile, serviceCertificateFile: file('service.pem', gen2.certificatePem), ...(endorsementsFile !== undefined ? { endorsementsFile } : {}) },
        { out: (l) => lines.push(l), err: (l) => lines.push(l) },
      );
      return { code, text: lines.join('\n') };
    };
    const json = file('receipt.json', JSON.stringify({ receipt: era0.receipt(3) }));
    assert.equal(run(json).code, 1);
    const good = run(json, chainFile);
    assert.equal(good.code, 0, good.text);
    assert.match(good.text, /endorsed through 2 earlier service identities of the chain given/);
    const { tree, components } = treeOfTransactions(12);
    const cose = file('receipt.cose', coseReceiptWithProof(gen0.signedRoot(13, tree.root(), '2.13'), components[2]!, tree.inclusionProof(2)));
    assert.equal(run(cose).code, 1);
    const coseGood = run(cose, chainFile);
    assert.equal(coseGood.code, 0, coseGood.text);
    assert.match(coseGood.text, /under an earlier identity, endorsed through 2 earlier service identities/);
    assert.equal(run(json, file('bad.json', '{"endorsements": 3}')).code, 2, 'an unusable chain file');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
