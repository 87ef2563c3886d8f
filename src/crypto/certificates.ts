/**
 * X.509 certificates: the service certificate (a self-signed CA), node certificates endorsed by the
 * service key, a service's endorsement of the previous service's key (after a recovery), and
 * self-signed member/user identities. Creation uses @peculiar/x509 over WebCrypto;
 * parsing and signature checks use node:crypto's X509Certificate, which is synchronous.
 *
 * Subject alternative names use CCF's string syntax: "iPAddress:127.0.0.1", "dNSName:localhost".
 */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import nodeCrypto, { type KeyObject } from 'node:crypto';
import { isIP } from 'node:net';
import { toHex } from '../base/index.js';
import { cryptoError, CryptoErrorCode } from './errors.js';
import { sha256 } from './digest.js';
import { ecCurveOf, generateEcKeyPair, publicKeyDer, type EcCurve, type KeyPair } from './keys.js';

const webcrypto = nodeCrypto.webcrypto;
x509.cryptoProvider.set(webcrypto as unknown as Parameters<typeof x509.cryptoProvider.set>[0]);

const DAY_MS = 86_400_000;
const VALIDITY_DAYS_MAX = 36_500;

export type SubjectAltName = { type: 'dns'; value: string } | { type: 'ip'; value: string };

// RFC 1123 host names, optionally with one leading wildcard label.
const DNS_NAME = /^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*$/;

/** Parses "iPAddress:<v4|v6>" or "dNSName:<host>"; InvalidSubjectAltName otherwise. */
export function parseSubjectAltName(text: string): SubjectAltName {
  const colon = text.indexOf(':');
  const kind = colon < 0 ? '' : text.slice(0, colon);
  const value = colon < 0 ? '' : text.slice(colon + 1);
  if (kind === 'iPAddress') {
    if (isIP(value) === 0) throw cryptoError(CryptoErrorCode.InvalidSubjectAltName, `"${text}": "${value}" is not an IPv4 or IPv6 address`);
    return { type: 'ip', value };
  }
  if (kind === 'dNSName') {
    if (value.length > 253 || !DNS_NAME.test(value)) throw cryptoError(CryptoErrorCode.InvalidSubjectAltName, `"${text}": "${value}" is not a DNS name`);
    return { type: 'dns', value: value.toLowerCase() };
  }
  throw cryptoError(
    CryptoErrorCode.InvalidSubjectAltName,
    `"${text}" is not a subject alternative name; expected "iPAddress:<address>" or "dNSName:<host name>"`,
  );
}

export function formatSubjectAltName(san: SubjectAltName): string {
  return san.type === 'ip' ? `iPAddress:${san.value}` : `dNSName:${san.value}`;
}

function signingAlgorithmFor(key: KeyObject): nodeCrypto.webcrypto.EcdsaParams {
  return { name: 'ECDSA', hash: ecCurveOf(key) === 'P-384' ? 'SHA-384' : 'SHA-256' };
}

async function toCryptoKey(key: KeyObject): Promise<nodeCrypto.webcrypto.CryptoKey> {
  const namedCurve = ecCurveOf(key);
  if (key.type === 'private') {
    const der = key.export({ format: 'der', type: 'pkcs8' });
    return webcrypto.subtle.importKey('pkcs8', der, { name: 'ECDSA', namedCurve }, true, ['sign']);
  }
  return webcrypto.subtle.importKey('spki', publicKeyDer(key), { name: 'ECDSA', namedCurve }, true, ['verify']);
}

function randomSerialNumberHex(): string {
  const bytes = nodeCrypto.randomBytes(16);
  bytes[0] = bytes[0]! & 0x7f; // positive INTEGER
  bytes[0] = bytes[0]! | 0x01; // no leading zero byte, so the encoding is stable
  return bytes.toString('hex');
}

function checkValidityDays(validityDays: number): void {
  if (!Number.isInteger(validityDays) || validityDays < 1 || validityDays > VALIDITY_DAYS_MAX) {
    throw cryptoError(CryptoErrorCode.InvalidCertificate, `validity must be a whole number of days in [1, ${VALIDITY_DAYS_MAX}], got ${validityDays}`);
  }
}

function checkCommonName(cn: string): void {
  if (cn.length === 0 || cn.length > 64) throw cryptoError(CryptoErrorCode.InvalidCertificate, `common name must be 1 to 64 characters, got ${cn.length}`);
}

function sanExtension(subjectAltNames: readonly string[]): x509.Extension[] {
  if (subjectAltNames.length === 0) return [];
  const names = subjectAltNames.map(parseSubjectAltName);
  return [new x509.SubjectAlternativeNameExtension(names.map((n) => ({ type: n.type, value: n.value })), false)];
}

export interface SelfSignedCertificateOptions {
  readonly keyPair: Pick<KeyPair, 'privateKey' | 'publicKey'>;
  readonly subjectCommonName: string;
  readonly subjectAltNames?: readonly string[];
  readonly validityDays: number;
  /** A CA certificate (the service certificate) may sign other certificates. */
  readonly isCa: boolean;
  /** Start of validity; defaults to now. */
  readonly notBefore?: Date;
}

/** A self-signed certificate in PEM (service identity, pending node identity, member/user identity). */
export async function createSelfSignedCertificate(options: SelfSignedCertificateOptions): Promise<string> {
  checkCommonName(options.subjectCommonName);
  checkValidityDays(options.validityDays);
  const notBefore = options.notBefore ?? new Date();
  const keys = { privateKey: await toCryptoKey(options.keyPair.privateKey), publicKey: await toCryptoKey(options.keyPair.publicKey) };
  const usages = options.isCa
    ? x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature
    : x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement;
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(options.isCa, undefined, true),
    new x509.KeyUsagesExtension(usages, true),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    await x509.AuthorityKeyIdentifierExtension.create(keys.publicKey),
    ...sanExtension(options.subjectAltNames ?? []),
  ];
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: randomSerialNumberHex(),
    name: [{ CN: [options.subjectCommonName] }],
    notBefore,
    notAfter: new Date(notBefore.getTime() + options.validityDays * DAY_MS),
    keys,
    signingAlgorithm: signingAlgorithmFor(options.keyPair.privateKey),
    extensions,
  });
  return cert.toString('pem') + '\n';
}

export interface EndorsedCertificateOptions {
  readonly subjectPublicKey: KeyObject;
  readonly subjectCommonName: string;
  readonly subjectAltNames: readonly string[];
  readonly issuerCertificatePem: string;
  readonly issuerPrivateKey: KeyObject;
  readonly validityDays: number;
  readonly notBefore?: Date;
}

/** The issuer's certificate (parsed) and private key, once they are known to match. */
function checkedIssuer(issuerCertificatePem: string, issuerPrivateKey: KeyObject): x509.X509Certificate {
  const issuer = new x509.X509Certificate(parseX509(issuerCertificatePem).raw);
  if (toHex(publicKeyDer(issuerPrivateKey)) !== toHex(new Uint8Array(issuer.publicKey.rawData))) {
    throw cryptoError(CryptoErrorCode.InvalidKey, 'the issuer private key does not match the issuer certificate');
  }
  return issuer;
}

interface IssueOptions {
  readonly subject: x509.X509CertificateCreateParamsName;
  readonly subjectKey: nodeCrypto.webcrypto.CryptoKey;
  /** Hex; by default derived from the subject key. */
  readonly subjectKeyIdentifierHex?: string;
  readonly issuer: x509.X509Certificate;
  readonly issuerPrivateKey: KeyObject;
  readonly validityDays: number;
  readonly notBefore: Date | undefined;
  /** Beyond the subject and authority key identifiers, which every issued certificate carries. */
  readonly extensions: readonly x509.Extension[];
}

/** A certificate for `subjectKey` signed by the issuer's key, with key identifiers that chain it to the issuer. */
async function issueCertificate(options: IssueOptions): Promise<string> {
  const notBefore = options.notBefore ?? new Date();
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: randomSerialNumberHex(),
    subject: options.subject,
    issuer: options.issuer.subjectName,
    notBefore,
    notAfter: new Date(notBefore.getTime() + options.validityDays * DAY_MS),
    publicKey: options.subjectKey,
    signingKey: await toCryptoKey(options.issuerPrivateKey),
    signingAlgorithm: signingAlgorithmFor(options.issuerPrivateKey),
    extensions: [
      ...options.extensions,
      options.subjectKeyIdentifierHex !== undefined
        ? new x509.SubjectKeyIdentifierExtension(options.subjectKeyIdentifierHex)
        : await x509.SubjectKeyIdentifierExtension.create(options.subjectKey),
      await x509.AuthorityKeyIdentifierExtension.create(options.issuer.publicKey),
    ],
  });
  return cert.toString('pem') + '\n';
}

/**
 * A certificate for `subjectPublicKey` signed by the issuer (the service key endorsing a node).
 * It carries serverAuth and clientAuth usages (node certificates serve clients and node-to-node
 * mutual TLS), and key identifiers that chain it to the issuer.
 */
export async function createEndorsedCertificate(options: EndorsedCertificateOptions): Promise<string> {
  checkCommonName(options.subjectCommonName);
  checkValidityDays(options.validityDays);
  const issuer = checkedIssuer(options.issuerCertificatePem, options.issuerPrivateKey);
  const subjectKey = await toCryptoKey(options.subjectPublicKey.type === 'private' ? nodeCrypto.createPublicKey(options.subjectPublicKey) : options.subjectPublicKey);
  return issueCertificate({
    subject: [{ CN: [options.subjectCommonName] }],
    subjectKey,
    issuer,
    issuerPrivateKey: options.issuerPrivateKey,
    validityDays: options.validityDays,
    notBefore: options.notBefore,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyAgreement, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth], false),
      ...sanExtension(options.subjectAltNames),
    ],
  });
}

export interface CaEndorsementOptions {
  /** The CA certificate whose key is endorsed (a previous service certificate). */
  readonly subjectCertificatePem: string;
  readonly issuerCertificatePem: string;
  readonly issuerPrivateKey: KeyObject;
  readonly validityDays: number;
  readonly notBefore?: Date;
}

/**
 * A CA certificate for the key of another CA certificate, signed by the issuer: one service
 * vouching for a previous service's key (a cross-certificate). It keeps the endorsed certificate's
 * subject name and key identifier, so that what that key issued (node certificates) names it as
 * issuer, and standard X.509 path checks (names, key identifiers, signatures) follow the chain.
 */
export async function createCaEndorsementCertificate(options: CaEndorsementOptions): Promise<string> {
  checkValidityDays(options.validityDays);
  const issuer = checkedIssuer(options.issuerCertificatePem, options.issuerPrivateKey);
  const endorsed = parseX509(options.subjectCertificatePem);
  if (!endorsed.ca) throw cryptoError(CryptoErrorCode.InvalidCertificate, 'the endorsed certificate is not a CA certificate');
  const endorsedX509 = new x509.X509Certificate(endorsed.raw);
  return issueCertificate({
    subject: endorsedX509.subjectName,
    subjectKey: await toCryptoKey(endorsed.publicKey),
    // The identifier that the authority key identifier of what the endorsed key issued names.
    subjectKeyIdentifierHex: endorsedX509.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId,
    issuer,
    issuerPrivateKey: options.issuerPrivateKey,
    validityDays: options.validityDays,
    notBefore: options.notBefore,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign | x509.KeyUsageFlags.digitalSignature, true),
    ],
  });
}

function parseX509(pem: string): nodeCrypto.X509Certificate {
  try {
    return new nodeCrypto.X509Certificate(pem);
  } catch (e) {
    throw cryptoError(CryptoErrorCode.InvalidCertificate, `not a PEM certificate: ${(e as Error).message}`);
  }
}

export interface ParsedCertificate {
  readonly derBytes: Uint8Array;
  readonly publicKey: KeyObject;
  readonly publicKeyPem: string;
  readonly publicKeyDer: Uint8Array;
  /** In CCF's syntax, e.g. "iPAddress:127.0.0.1". */
  readonly subjectAltNames: string[];
  readonly notBefore: Date;
  readonly notAfter: Date;
  /** Distinguished names as OpenSSL prints them, one attribute per line ("CN=node"). */
  readonly subject: string;
  readonly issuer: string;
  /** Upper-case hex, as OpenSSL prints it. */
  readonly serialNumber: string;
  readonly isCa: boolean;
}

/** Parses one PEM certificate (the first, if a bundle is given). */
export function parseCertificate(pem: string): ParsedCertificate {
  const cert = parseX509(pem);
  const derBytes = new Uint8Array(cert.raw);
  const sans: string[] = [];
  const ext = new x509.X509Certificate(derBytes).getExtension(x509.SubjectAlternativeNameExtension);
  if (ext !== null) {
    for (const name of ext.names.items) {
      if (name.type === 'dns') sans.push(`dNSName:${name.value}`);
      else if (name.type === 'ip') sans.push(`iPAddress:${name.value}`);
    }
  }
  return {
    derBytes,
    publicKey: cert.publicKey,
    publicKeyPem: cert.publicKey.export({ format: 'pem', type: 'spki' }).toString(),
    publicKeyDer: publicKeyDer(cert.publicKey),
    subjectAltNames: sans,
    notBefore: new Date(cert.validFrom),
    notAfter: new Date(cert.validTo),
    subject: cert.subject,
    issuer: cert.issuer,
    serialNumber: cert.serialNumber,
    isCa: cert.ca,
  };
}

/** Member and user id: lower-case hex SHA-256 of the certificate's DER. */
export function certificateId(pem: string): string {
  return toHex(sha256(new Uint8Array(parseX509(pem).raw)));
}

/** True when `issuerCertPem`'s key signed `certPem` and the issuer names match. Validity dates are not checked. */
export function verifyCertificateSignedBy(certPem: string, issuerCertPem: string): boolean {
  const cert = parseX509(certPem);
  const issuer = parseX509(issuerCertPem);
  return cert.checkIssued(issuer) && cert.verify(issuer.publicKey);
}

/** True when `at` is inside the certificate's validity period. */
export function certificateValidAt(pem: string, at: Date): boolean {
  const cert = parseX509(pem);
  const t = at.getTime();
  return t >= new Date(cert.validFrom).getTime() && t <= new Date(cert.validTo).getTime();
}

/** Splits a PEM bundle into its certificates (each ending with a newline). */
export function splitPemCertificates(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)?.map((pem) => pem + '\n') ?? [];
}

export interface Identity {
  readonly privateKeyPem: string;
  readonly publicKeyPem: string;
  readonly certificatePem: string;
  /** certificateId(certificatePem). */
  readonly id: string;
}

/** A fresh key pair and self-signed certificate, for members, users and the sandbox. */
export async function generateIdentity(options: { commonName: string; curve?: EcCurve; validityDays?: number }): Promise<Identity> {
  const keyPair = generateEcKeyPair(options.curve ?? 'P-384');
  const certificatePem = await createSelfSignedCertificate({
    keyPair,
    subjectCommonName: options.commonName,
    validityDays: options.validityDays ?? 365,
    isCa: false,
  });
  return { privateKeyPem: keyPair.privateKeyPem, publicKeyPem: keyPair.publicKeyPem, certificatePem, id: certificateId(certificatePem) };
}
