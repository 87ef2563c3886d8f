/** Issuers, a stand-in service and its receipts, for tests of signed and transparent statements. */
import { createEndorsedCertificate, createSelfSignedCertificate, generateEcKeyPair, parseCertificate, sha256, type KeyPair } from '../../src/crypto/index.js';
import { didX509Of } from '../../src/gov/did-x509.js';
import { coseReceiptWithProof, leafFromComponents, signRootCose } from '../../src/merkle/index.js';
import { statementDigest } from '../../src/gov/transparent-statement.js';

export interface Issuer {
  readonly keys: KeyPair;
  /** Leaf first, then its CA. */
  readonly chainPem: string;
  readonly caPem: string;
  /** did:x509:0:sha256:<the CA's fingerprint>::subject:CN:<the leaf's CN>: the issuer its chain resolves. */
  readonly did: string;
}

/** An issuer whose statement key (subject CN `commonName`) is certified by its own CA (a chain of two). */
export async function makeIssuer(commonName = 'issuer'): Promise<Issuer> {
  const caKeys = generateEcKeyPair('P-384');
  const caPem = await createSelfSignedCertificate({ keyPair: caKeys, subjectCommonName: `${commonName} ca`, validityDays: 30, isCa: true });
  const keys = generateEcKeyPair('P-384');
  const leafPem = await createEndorsedCertificate({
    subjectPublicKey: keys.publicKey,
    subjectCommonName: commonName,
    subjectAltNames: [],
    issuerCertificatePem: caPem,
    issuerPrivateKey: caKeys.privateKey,
    validityDays: 30,
  });
  return { keys, chainPem: leafPem + caPem, caPem, did: didX509Of(parseCertificate(caPem).derBytes, commonName) };
}

export interface FakeService {
  readonly keys: KeyPair;
  readonly certificatePem: string;
  /** A COSE receipt of a transaction at 2.<seqno> whose claims digest is `claimsDigest`. */
  receiptFor(claimsDigest: Uint8Array, seqno?: number): Uint8Array;
  /** A receipt whose claims digest is the statement's. */
  receiptOf(statement: Uint8Array): Uint8Array;
}

export async function makeService(): Promise<FakeService> {
  const keys = generateEcKeyPair('P-384');
  const certificatePem = await createSelfSignedCertificate({ keyPair: keys, subjectCommonName: 'service', validityDays: 30, isCa: true });
  const receiptFor = (claimsDigest: Uint8Array, seqno = 7) => {
    const leaf = { writeSetDigest: sha256('write set'), commitEvidence: `ce:2.${seqno}:${'ab'.repeat(32)}`, claimsDigest };
    const root = leafFromComponents(leaf.writeSetDigest, leaf.commitEvidence, claimsDigest);
    const signed = signRootCose({ servicePrivateKey: keys.privateKey, servicePublicKey: keys.publicKey, root, signatureTxId: `2.${seqno + 1}` });
    return coseReceiptWithProof(signed, leaf, { path: [] });
  };
  return { keys, certificatePem, receiptFor, receiptOf: (statement) => receiptFor(statementDigest(statement)) };
}
