/**
 * The fields of a certificate that identify its holder, in the shape the did:x509 method reads
 * them (src/gov/did-x509.ts): subject attributes by OID, subject alternative names, extended key
 * usages, and the Fulcio issuer extension; and its fingerprints.
 */
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
import { cryptoError, CryptoErrorCode } from './errors.js';
import { sha256, sha384, sha512 } from './digest.js';

/** The names @peculiar/x509 gives attribute types it knows (other types it writes as dotted OIDs). */
const ATTRIBUTE_OIDS: Record<string, string> = {
  CN: '2.5.4.3',
  L: '2.5.4.7',
  ST: '2.5.4.8',
  O: '2.5.4.10',
  OU: '2.5.4.11',
  C: '2.5.4.6',
  DC: '0.9.2342.19200300.100.1.25',
  E: '1.2.840.113549.1.9.1',
  G: '2.5.4.42',
  I: '2.5.4.43',
  SN: '2.5.4.4',
  T: '2.5.4.12',
};

/** The Fulcio issuer extension (a text value, as written by Sigstore's Fulcio). */
export const FULCIO_ISSUER_OID = '1.3.6.1.4.1.57264.1.1';

export type SanType = 'email' | 'dns' | 'uri' | 'ip' | 'dn' | 'other';

export interface CertificateFields {
  /** Subject attributes, each type (a dotted OID) with all its values, in the certificate's order. */
  readonly subject: ReadonlyMap<string, readonly string[]>;
  readonly subjectAltNames: readonly { readonly type: SanType; readonly value: string }[];
  /** Extended key usage OIDs (empty without the extension). */
  readonly extendedKeyUsages: readonly string[];
  /** The Fulcio issuer extension's text, if present. */
  readonly fulcioIssuer: string | undefined;
}

const SAN_TYPES: Record<string, SanType> = { email: 'email', dns: 'dns', url: 'uri', ip: 'ip', dn: 'dn' };

/** The identifying fields of a DER certificate. Throws InvalidCertificate if it does not parse. */
export function certificateFields(der: Uint8Array): CertificateFields {
  let cert: x509.X509Certificate;
  try {
    cert = new x509.X509Certificate(der);
  } catch (e) {
    throw cryptoError(CryptoErrorCode.InvalidCertificate, `not a DER certificate: ${(e as Error).message}`);
  }
  const subject = new Map<string, string[]>();
  for (const rdn of cert.subjectName.toJSON()) {
    for (const [type, values] of Object.entries(rdn)) {
      const oid = ATTRIBUTE_OIDS[type] ?? type;
      subject.set(oid, [...(subject.get(oid) ?? []), ...values]);
    }
  }
  const san = cert.getExtension(x509.SubjectAlternativeNameExtension);
  const subjectAltNames = (san?.names.items ?? []).map((name) => ({ type: SAN_TYPES[name.type] ?? 'other', value: name.value }));
  const eku = cert.getExtension(x509.ExtendedKeyUsageExtension);
  const extendedKeyUsages = (eku?.usages ?? []).map((usage) => String(usage));
  const fulcio = cert.getExtension(FULCIO_ISSUER_OID);
  const fulcioIssuer = fulcio === null ? undefined : new TextDecoder('utf-8', { fatal: false }).decode(fulcio.value);
  return { subject, subjectAltNames, extendedKeyUsages, fulcioIssuer };
}

export type FingerprintAlgorithm = 'sha256' | 'sha384' | 'sha512';

/** The digest of a certificate's DER by `algorithm`. */
export function certificateFingerprint(der: Uint8Array, algorithm: FingerprintAlgorithm): Uint8Array {
  return algorithm === 'sha256' ? sha256(der) : algorithm === 'sha384' ? sha384(der) : sha512(der);
}
