/**
 * Renewal of a certificate: the same certificate (subject, key, names, extensions) re-issued by the
 * same issuer for another validity period, with a new serial number. The service certificate is
 * renewed with its own key, a node certificate with the service key, so receipts, clients' trust
 * anchors and node ids all keep working: only the dates change.
 *
 * Synchronous (node:crypto signs, @peculiar/asn1-x509 encodes), because governance applies
 * proposals inside one synchronous transaction (docs/architecture.md, decision 2).
 */
import 'reflect-metadata';
import { AsnConvert } from '@peculiar/asn1-schema';
import { Certificate, Validity } from '@peculiar/asn1-x509';
import nodeCrypto, { type KeyObject } from 'node:crypto';
import { toHex } from '../base/index.js';
import { cryptoError, CryptoErrorCode } from './errors.js';
import { ecCurveOf, publicKeyDer } from './keys.js';

const DAY_MS = 86_400_000;
const VALIDITY_DAYS_MAX = 36_500;
/** ecdsa-with-SHA256 and ecdsa-with-SHA384 (RFC 5758, 3.2). */
const ECDSA_SHA256 = '1.2.840.10045.4.3.2';
const ECDSA_SHA384 = '1.2.840.10045.4.3.3';

export interface RenewCertificateOptions {
  /** The certificate to renew (PEM). */
  readonly certificatePem: string;
  /** The certificate of its issuer: the certificate itself for the self-signed service certificate. */
  readonly issuerCertificatePem: string;
  readonly issuerPrivateKey: KeyObject;
  readonly notBefore: Date;
  readonly validityDays: number;
}

/** The validity period of a certificate as its holders see it. */
export interface CertificateValidity {
  readonly notBefore: Date;
  readonly notAfter: Date;
}

/** The notBefore and notAfter of a PEM certificate. */
export function certificateValidity(pem: string): CertificateValidity {
  const cert = x509Of(pem);
  return { notBefore: new Date(cert.validFrom), notAfter: new Date(cert.validTo) };
}

/** `options.certificatePem` re-issued for [notBefore, notBefore + validityDays] with a new serial number. */
export function renewCertificate(options: RenewCertificateOptions): string {
  const { notBefore, validityDays } = options;
  if (!Number.isInteger(validityDays) || validityDays < 1 || validityDays > VALIDITY_DAYS_MAX) {
    throw cryptoError(CryptoErrorCode.InvalidCertificate, `validity must be a whole number of days in [1, ${VALIDITY_DAYS_MAX}], got ${validityDays}`);
  }
  if (Number.isNaN(notBefore.getTime())) throw cryptoError(CryptoErrorCode.InvalidCertificate, 'the start of validity is not a date');
  const current = x509Of(options.certificatePem);
  const issuer = x509Of(options.issuerCertificatePem);
  if (toHex(publicKeyDer(options.issuerPrivateKey)) !== toHex(publicKeyDer(issuer.publicKey))) {
    throw cryptoError(CryptoErrorCode.InvalidKey, 'the issuer private key does not match the issuer certificate');
  }
  if (!current.checkIssued(issuer) || !current.verify(issuer.publicKey)) {
    throw cryptoError(CryptoErrorCode.InvalidCertificate, 'the certificate to renew was not issued by this issuer');
  }
  const cert = AsnConvert.parse(current.raw, Certificate);
  const tbs = cert.tbsCertificate;
  tbs.serialNumber = randomSerialNumber();
  tbs.validity = new Validity({ notBefore, notAfter: new Date(notBefore.getTime() + validityDays * DAY_MS) });
  const sha384 = ecCurveOf(options.issuerPrivateKey) === 'P-384';
  tbs.signature.algorithm = sha384 ? ECDSA_SHA384 : ECDSA_SHA256;
  delete tbs.signature.parameters;
  // The parsed bytes would be written back as they were: the certificate is encoded from its fields.
  delete cert.tbsCertificateRaw;
  const tbsDer = new Uint8Array(AsnConvert.serialize(tbs));
  const signature = nodeCrypto.sign(sha384 ? 'sha384' : 'sha256', tbsDer, { key: options.issuerPrivateKey, dsaEncoding: 'der' });
  cert.signatureAlgorithm.algorithm = tbs.signature.algorithm;
  delete cert.signatureAlgorithm.parameters;
  cert.signatureValue = new Uint8Array(signature).buffer;
  const der = Buffer.from(AsnConvert.serialize(cert));
  return `-----BEGIN CERTIFICATE-----\n${der.toString('base64').match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
}

function x509Of(pem: string): nodeCrypto.X509Certificate {
  try {
    return new nodeCrypto.X509Certificate(pem);
  } catch (e) {
    throw cryptoError(CryptoErrorCode.InvalidCertificate, `not a PEM certificate: ${(e as Error).message}`);
  }
}

function randomSerialNumber(): ArrayBuffer {
  const bytes = nodeCrypto.randomBytes(16);
  bytes[0] = (bytes[0]! & 0x7f) | 0x01; // a positive INTEGER without a leading zero byte
  return new Uint8Array(bytes).buffer;
}
