/**
 * The node's own identity: its key pair (P-384), its node id (SHA-256 of the public key), its
 * self-signed certificate, the certificate the service endorsed, and its virtual quote (virtual
 * mode: a software stand-in with the shape and checks of a hardware quote, no security).
 */
import { isIP } from 'node:net';
import { assert } from '../../base/assert.js';
import {
  createSelfSignedCertificate,
  generateEcKeyPair,
  loadPrivateKey,
  loadPublicKey,
  nodeIdFromPublicKey,
  publicKeyDer,
  publicKeyPem,
  signEcdsa,
  type EcCurve,
  type KeyPair,
} from '../../crypto/index.js';
import { codeMeasurement, createVirtualQuote, defaultHostData, type QuoteInfo } from '../../attestation/virtual.js';
import { parseHostPort, type NodeCurveId } from '../../config/index.js';

export class NodeIdentity {
  private keys: KeyPair | undefined;
  nodeId = '';
  selfSignedCertificatePem = '';
  /** The certificate endorsed by the service key (empty until the node is part of a service). */
  nodeCertificatePem = '';
  quoteInfo: QuoteInfo | undefined;
  /** Virtual attestation: the measurement of this build (SHA-256 of its version). */
  readonly measurement: string;
  /** Virtual attestation: the host data this node reports (stands for its security policy digest). */
  readonly hostData: string;

  constructor(version: string, hostData: string | undefined) {
    this.measurement = codeMeasurement(version);
    this.hostData = hostData ?? defaultHostData();
  }

  /** A new key (or the one given: of node_certificate.curve_id's curve, ecCurveOfCurveId), self-signed certificate and quote. */
  async create(subjectAltNames: string[], validityDays: number, keys: KeyPair = generateEcKeyPair('P-384')): Promise<void> {
    this.keys = keys;
    this.nodeId = nodeIdFromPublicKey(this.keys.publicKey);
    this.selfSignedCertificatePem = await createSelfSignedCertificate({
      keyPair: this.keys,
      subjectCommonName: 'Covenant Node',
      subjectAltNames,
      validityDays,
      isCa: false,
    });
    this.quoteInfo = createVirtualQuote(publicKeyDer(this.keys.publicKey), this.measurement, this.hostData);
  }

  /** The identity an earlier run of this node persisted (the quote is made again: it is not persisted). */
  restore(state: { privateKeyPem: string; nodeId: string; selfSignedCertificatePem: string; nodeCertificatePem?: string }): void {
    const privateKey = loadPrivateKey(state.privateKeyPem);
    const publicKey = loadPublicKey(state.privateKeyPem);
    this.keys = { privateKey, publicKey, privateKeyPem: state.privateKeyPem, publicKeyPem: publicKeyPem(publicKey) };
    this.nodeId = nodeIdFromPublicKey(publicKey);
    assert(this.nodeId === state.nodeId, 'the persisted node key matches the persisted node id');
    this.selfSignedCertificatePem = state.selfSignedCertificatePem;
    if (state.nodeCertificatePem !== undefined) this.nodeCertificatePem = state.nodeCertificatePem;
    this.quoteInfo = createVirtualQuote(publicKeyDer(publicKey), this.measurement, this.hostData);
  }

  get exists(): boolean {
    return this.keys !== undefined;
  }

  private get keyPair(): KeyPair {
    assert(this.keys, 'node identity exists');
    return this.keys;
  }

  get privateKeyPem(): string {
    return this.keyPair.privateKeyPem;
  }

  get publicKeyPem(): string {
    return this.keyPair.publicKeyPem;
  }

  /** DER ECDSA signature with the node key (signature transactions sign Merkle roots with it). */
  sign(bytes: Uint8Array): Uint8Array {
    return signEcdsa(this.keyPair.privateKey, bytes, 'der');
  }
}

/** "iPAddress:" or "dNSName:" names for the hosts of "host:port" addresses (wildcard hosts name nothing; loopback when none is left). */
export function subjectAltNamesOf(addresses: readonly string[]): string[] {
  const names = new Set<string>();
  for (const address of addresses) {
    const parsed = parseHostPort(address);
    if (typeof parsed === 'string' || parsed.host === '0.0.0.0' || parsed.host === '::') continue;
    names.add(isIP(parsed.host) ? `iPAddress:${parsed.host}` : `dNSName:${parsed.host}`);
  }
  return names.size > 0 ? [...names] : ['iPAddress:127.0.0.1'];
}

/** The curve of node_certificate.curve_id (CCF's names): every signature the node makes follows it. */
export function ecCurveOfCurveId(curveId: NodeCurveId): EcCurve {
  return curveId === 'Secp256R1' ? 'P-256' : 'P-384';
}
