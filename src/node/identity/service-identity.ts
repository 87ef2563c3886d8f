/**
 * The service identity as this node holds it: the service certificate (every client's TLS trust
 * anchor) and, once the node is trusted, the service private key, with which it endorses joiners'
 * certificates and signs committed Merkle roots for COSE receipts (one signature per committed
 * root, cached for the few recent roots receipts are asked under). A recovered service has a new
 * identity, which endorses the previous one so that receipts signed before the recovery still
 * verify with the newest certificate alone (docs/architecture.md, decision 16; docs/merkle.md
 * "Receipts across recoveries").
 */
import { assert } from '../../base/assert.js';
import {
  createCaEndorsementCertificate,
  createEndorsedCertificate,
  createSelfSignedCertificate,
  generateEcKeyPair,
  loadPrivateKey,
  loadPublicKey,
  parseCertificate,
  renewCertificate,
} from '../../crypto/index.js';
import { notPrimary } from '../errors.js';
import { signRootCose } from '../../merkle/index.js';
import { signedRootCacheEntriesMax } from '../limits.js';

export class ServiceIdentity {
  certificatePem = '';
  private privateKeyPem: string | undefined;
  /** The service's COSE signature over recent committed roots, by signature seqno (COSE receipts). */
  private readonly signedRoots = new Map<number, { certificatePem: string; cose: Uint8Array }>();

  /** A new service key and self-signed service certificate (a new service). */
  async create(validityDays: number): Promise<void> {
    const keys = generateEcKeyPair('P-384');
    this.privateKeyPem = keys.privateKeyPem;
    this.certificatePem = await createSelfSignedCertificate({ keyPair: keys, subjectCommonName: 'Covenant Service', validityDays, isCa: true });
  }

  /** The identity the service gave this node (join) or this node persisted (restart); the key may not be held yet. */
  adopt(certificatePem: string, privateKeyPem?: string): void {
    this.certificatePem = certificatePem;
    if (privateKeyPem !== undefined) this.privateKeyPem = privateKeyPem;
  }

  get holdsKey(): boolean {
    return this.privateKeyPem !== undefined && this.certificatePem !== '';
  }

  /** The service private key, for a joiner being trusted and for the node state file. */
  get keyPem(): string {
    assert(this.privateKeyPem, 'the service key is held');
    return this.privateKeyPem;
  }

  /** A node certificate endorsed by the service key, valid from `notBefore` (default: now). */
  endorse(publicKeyPem: string, subjectAltNames: string[], validityDays: number, notBefore?: Date): Promise<string> {
    return createEndorsedCertificate({
      subjectPublicKey: loadPublicKey(publicKeyPem),
      subjectCommonName: 'Covenant Node',
      subjectAltNames,
      issuerCertificatePem: this.certificatePem,
      issuerPrivateKey: loadPrivateKey(this.keyPem),
      validityDays,
      ...(notBefore !== undefined ? { notBefore } : {}),
    });
  }

  /**
   * This service's endorsement of the previous service's key: a CA certificate for the key of
   * `previousServiceCertificatePem`, under its subject name, signed by this service's key (the
   * record of Tables.serviceEndorsements that a recovery writes).
   */
  endorsePreviousIdentity(previousServiceCertificatePem: string, validityDays: number): Promise<string> {
    return createCaEndorsementCertificate({
      subjectCertificatePem: previousServiceCertificatePem,
      issuerCertificatePem: this.certificatePem,
      issuerPrivateKey: loadPrivateKey(this.keyPem),
      validityDays,
    });
  }

  /**
   * The service certificate `currentPem` (this service's, maybe renewed before) self-signed again
   * by the service key for [validFrom, validFrom + validityDays]: set_service_certificate_validity.
   */
  renewServiceCertificate(currentPem: string, validFrom: Date, validityDays: number): string {
    return renewCertificate({ certificatePem: currentPem, issuerCertificatePem: currentPem, issuerPrivateKey: this.renewalKey(), notBefore: validFrom, validityDays });
  }

  /** A node certificate this service endorsed, endorsed again for the period: set_node_certificate_validity. */
  renewNodeCertificate(currentPem: string, validFrom: Date, validityDays: number): string {
    return renewCertificate({ certificatePem: currentPem, issuerCertificatePem: this.certificatePem, issuerPrivateKey: this.renewalKey(), notBefore: validFrom, validityDays });
  }

  private renewalKey() {
    // A backup applies no proposal; a node still joining holds no key: an operating error, not a broken invariant.
    if (!this.holdsKey) throw notPrimary('this node does not hold the service key: certificates are renewed by the primary');
    return loadPrivateKey(this.keyPem);
  }

  /** The service's COSE signature over the root signed at `signatureSeqno` (made once per root and certificate). */
  signedRoot(signatureSeqno: number, root: Uint8Array, signatureTxId: string): Uint8Array {
    const cached = this.signedRoots.get(signatureSeqno);
    if (cached !== undefined && cached.certificatePem === this.certificatePem) return cached.cose;
    const cose = signRootCose({
      servicePrivateKey: loadPrivateKey(this.keyPem),
      servicePublicKey: parseCertificate(this.certificatePem).publicKey,
      root,
      signatureTxId,
    });
    if (this.signedRoots.size >= signedRootCacheEntriesMax) this.signedRoots.delete(this.signedRoots.keys().next().value!);
    this.signedRoots.set(signatureSeqno, { certificatePem: this.certificatePem, cose });
    return cose;
  }
}
