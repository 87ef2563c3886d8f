/**
 * Resolving a `did:x509` issuer against a signed statement's certificate chain
 * (docs/join-policy.md, "The issuer"), so that a statement's `iss` is bound to the key that signed
 * it: a statement claiming a trusted issuer's DID but signed under another CA does not resolve.
 *
 *   did:x509:0:<sha256|sha384|sha512>:<base64url fingerprint of a CA certificate>::<policy>:<value>(::<policy>:<value>)*
 *
 * The fingerprint names a certificate of the chain other than the leaf (an intermediate or the
 * root): the digest of its DER. The chain must be at least two certificates, each signed by the
 * next (checked by verifySignedStatement) with every certificate from the leaf's issuer up to the
 * named one a CA. Every policy must hold for the leaf:
 *
 *   subject:<key>:<value>(:<key>:<value>)*  each attribute of the leaf's subject (CN, L, ST, O, OU,
 *                                           C, STREET or a dotted OID; no key twice) has that value
 *   san:<email|dns|uri>:<value>             the leaf has that subject alternative name
 *   eku:<oid>                               the leaf has that extended key usage
 *   fulcio-issuer:<value>                   the leaf's Fulcio issuer extension is https://<value>
 *
 * Values are percent-encoded (everything but ALPHA, DIGIT, "-", ".", "_"). Pure: no clock, no I/O.
 */
import { CovenantError } from '../base/errors.js';
import { toBase64 } from '../base/bytes.js';
import { certificateFields, certificateFingerprint, parseCertificate, type CertificateFields, type FingerprintAlgorithm } from '../crypto/index.js';

export const DID_X509_PREFIX = 'did:x509:';

/** A statement's issuer that is not bound to its certificate chain: the reason names the failed check. */
export class IssuerResolutionError extends CovenantError {
  constructor(message: string) {
    super('InvalidStatementIssuer', message, 400);
    this.name = 'IssuerResolutionError';
  }
}

function unresolved(did: string, reason: string): IssuerResolutionError {
  return new IssuerResolutionError(`the issuer ${did.length > 200 ? `${did.slice(0, 200)}…` : did} does not resolve against the statement's x5chain: ${reason}`);
}

export interface DidX509Policy {
  readonly name: string;
  /** As written in the DID (percent-encoded). */
  readonly value: string;
}

export interface ParsedDidX509 {
  readonly fingerprintAlgorithm: FingerprintAlgorithm;
  /** base64url, as written. */
  readonly fingerprint: string;
  readonly policies: readonly DidX509Policy[];
}

/** What the join policy is given about a resolved issuer (`resolved_issuer`). */
export interface ResolvedIssuer {
  readonly did: string;
  /** The chain's certificate the DID names (PEM), and where it is in x5chain (1 or more). */
  readonly ca_certificate: string;
  readonly ca_index: number;
  readonly ca_fingerprint: { readonly alg: FingerprintAlgorithm; readonly value: string };
  /** The DID's policies, values percent-decoded. */
  readonly policies: readonly { readonly name: string; readonly value: string }[];
}

/** RFC 4648 base64url without padding. */
function toBase64Url(bytes: Uint8Array): string {
  return toBase64(bytes).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

const FINGERPRINT_LENGTHS: Record<FingerprintAlgorithm, number> = { sha256: 43, sha384: 64, sha512: 86 };
const BASE64URL = /^[A-Za-z0-9_-]+$/;
/** ALPHA words; "-" too, as the method's own fulcio-issuer has it. */
const POLICY_NAME = /^[A-Za-z]+(?:-[A-Za-z]+)*$/;
/** DID idchar (ALPHA / DIGIT / "." / "-" / "_" / pct-encoded), in ":"-separated parts. */
const POLICY_VALUE = /^(?:[A-Za-z0-9._-]|%[0-9A-Fa-f]{2})+(?::(?:[A-Za-z0-9._-]|%[0-9A-Fa-f]{2})+)*$/;
const OID = /^\d+(?:\.\d+)*$/;
const SUBJECT_LABELS: Record<string, string> = { CN: '2.5.4.3', L: '2.5.4.7', ST: '2.5.4.8', O: '2.5.4.10', OU: '2.5.4.11', C: '2.5.4.6', STREET: '2.5.4.9' };

/** Parses a did:x509 identifier. Throws IssuerResolutionError naming what is malformed. */
export function parseDidX509(did: string): ParsedDidX509 {
  if (!did.startsWith(DID_X509_PREFIX)) throw unresolved(did, 'it is not a did:x509 identifier');
  const rest = did.slice(DID_X509_PREFIX.length);
  const versionEnd = rest.indexOf(':');
  const version = versionEnd === -1 ? rest : rest.slice(0, versionEnd);
  if (version !== '0') throw unresolved(did, `version ${JSON.stringify(version)} is not supported (only 0)`);
  const [head, ...policyParts] = rest.slice(versionEnd + 1).split('::');
  const [algorithm, fingerprint, ...extra] = head!.split(':');
  if (extra.length > 0 || fingerprint === undefined) throw unresolved(did, 'expected <hash algorithm>:<CA fingerprint> after the version');
  if (!(algorithm! in FINGERPRINT_LENGTHS)) throw unresolved(did, `the CA fingerprint algorithm ${JSON.stringify(algorithm)} is not sha256, sha384 or sha512`);
  const fingerprintAlgorithm = algorithm as FingerprintAlgorithm;
  if (!BASE64URL.test(fingerprint) || fingerprint.length !== FINGERPRINT_LENGTHS[fingerprintAlgorithm]) {
    throw unresolved(did, `the CA fingerprint is not a base64url ${fingerprintAlgorithm} digest (${FINGERPRINT_LENGTHS[fingerprintAlgorithm]} characters)`);
  }
  if (policyParts.length === 0) throw unresolved(did, 'it names no policy (subject, san, eku or fulcio-issuer)');
  const policies = policyParts.map((part) => {
    const colon = part.indexOf(':');
    const name = colon === -1 ? part : part.slice(0, colon);
    const value = colon === -1 ? '' : part.slice(colon + 1);
    if (!POLICY_NAME.test(name) || !POLICY_VALUE.test(value)) throw unresolved(did, `the policy ${JSON.stringify(part.slice(0, 100))} is not <name>:<percent-encoded value>`);
    return { name, value };
  });
  return { fingerprintAlgorithm, fingerprint, policies };
}

function percentDecoded(did: string, value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    throw unresolved(did, `${JSON.stringify(value.slice(0, 100))} is not percent-encoded UTF-8`);
  }
}

/** Checks one policy against the leaf's fields; answers the value decoded. Throws IssuerResolutionError. */
function checkPolicy(did: string, policy: DidX509Policy, leaf: CertificateFields): string {
  const { name, value } = policy;
  if (name === 'subject') {
    const items = value.split(':');
    if (items.length % 2 !== 0) throw unresolved(did, 'the subject policy must be <key>:<value> pairs');
    const seen = new Set<string>();
    for (let i = 0; i < items.length; i += 2) {
      const key = items[i]!;
      const oid = SUBJECT_LABELS[key] ?? (OID.test(key) ? key : undefined);
      if (oid === undefined) throw unresolved(did, `the subject policy's key ${JSON.stringify(key)} is not CN, L, ST, O, OU, C, STREET or an OID`);
      if (seen.has(oid)) throw unresolved(did, `the subject policy names ${key} twice`);
      seen.add(oid);
      const wanted = percentDecoded(did, items[i + 1]!);
      const actual = leaf.subject.get(oid) ?? [];
      if (actual.length !== 1 || actual[0] !== wanted) {
        throw unresolved(did, `the leaf certificate's subject ${key} is ${actual.length === 0 ? 'absent' : JSON.stringify(actual.join(', '))}, not ${JSON.stringify(wanted)}`);
      }
    }
    return percentDecoded(did, value);
  }
  if (name === 'san') {
    const [type, encoded, ...extra] = value.split(':');
    if (extra.length > 0 || encoded === undefined || !['email', 'dns', 'uri'].includes(type!)) throw unresolved(did, 'the san policy must be <email|dns|uri>:<value>');
    const wanted = percentDecoded(did, encoded);
    if (!leaf.subjectAltNames.some((san) => san.type === type && san.value === wanted)) throw unresolved(did, `the leaf certificate has no subject alternative name ${type}:${wanted}`);
    return `${type}:${wanted}`;
  }
  if (name === 'eku') {
    if (!OID.test(value)) throw unresolved(did, 'the eku policy must be an OID');
    if (!leaf.extendedKeyUsages.includes(value)) throw unresolved(did, `the leaf certificate has no extended key usage ${value}`);
    return value;
  }
  if (name === 'fulcio-issuer') {
    const wanted = `https://${percentDecoded(did, value)}`;
    if (leaf.fulcioIssuer !== wanted) throw unresolved(did, `the leaf certificate's Fulcio issuer is ${leaf.fulcioIssuer === undefined ? 'absent' : JSON.stringify(leaf.fulcioIssuer)}, not ${JSON.stringify(wanted)}`);
    return percentDecoded(did, value);
  }
  throw unresolved(did, `the policy ${JSON.stringify(name)} is not one of subject, san, eku, fulcio-issuer`);
}

/**
 * Resolves `did` against a statement's x5chain (DER and PEM, leaf first, each certificate already
 * checked to be signed by the next). Throws IssuerResolutionError naming the first failed check.
 */
export function resolveDidX509(did: string, chainDer: readonly Uint8Array[], chainPem: readonly string[]): ResolvedIssuer {
  const parsed = parseDidX509(did);
  if (chainDer.length < 2) throw unresolved(did, 'x5chain holds only the leaf certificate; a did:x509 issuer names a CA certificate of the chain');
  let caIndex = -1;
  for (let i = 1; i < chainDer.length && caIndex === -1; i++) {
    if (toBase64Url(certificateFingerprint(chainDer[i]!, parsed.fingerprintAlgorithm)) === parsed.fingerprint) caIndex = i;
  }
  if (caIndex === -1) throw unresolved(did, `no CA certificate of x5chain has the ${parsed.fingerprintAlgorithm} fingerprint ${parsed.fingerprint}`);
  // The path from the leaf's issuer up to the named CA: CA certificates only.
  for (let i = 1; i <= caIndex; i++) {
    if (!parseCertificate(chainPem[i]!).isCa) throw unresolved(did, `x5chain[${i}] signs a certificate but is not a CA certificate`);
  }
  const leaf = certificateFields(chainDer[0]!);
  const policies = parsed.policies.map((policy) => ({ name: policy.name, value: checkPolicy(did, policy, leaf) }));
  return {
    did,
    ca_certificate: chainPem[caIndex]!,
    ca_index: caIndex,
    ca_fingerprint: { alg: parsed.fingerprintAlgorithm, value: parsed.fingerprint },
    policies,
  };
}

/** The did:x509 of the CA certificate `caDer` with the leaf's subject CN as its policy: what `covenant statement did` prints. */
export function didX509Of(caDer: Uint8Array, leafCommonName: string, algorithm: FingerprintAlgorithm = 'sha256'): string {
  const encoded = encodeURIComponent(leafCommonName).replace(/[!'()*~]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `${DID_X509_PREFIX}0:${algorithm}:${toBase64Url(certificateFingerprint(caDer, algorithm))}::subject:CN:${encoded}`;
}
