/**
 * Signed statements, their receipts and transparent statements (docs/join-policy.md): the input
 * of the join policy.
 *
 * A signed statement is a COSE_Sign1 by an issuer over an artefact (for a node build: its host
 * data), with the protected header
 *
 *   1 (alg)          -35 (ES384) | -7 (ES256)
 *   3 (cty)          optional, integer or text
 *   33 (x5chain)     the issuer's certificate chain, leaf first (one DER bstr, or an array of them)
 *   15 (CWT claims)  { 1 (iss): text (a DID), 2 (sub): text, 6 (iat)?: int, "svn"?: int }
 *
 * The service is its own transparency service: it records a statement in the ledger with the
 * statement's digest (`statementDigest`) as the transaction's claims digest, and the COSE receipt
 * of that transaction (src/merkle/cose-receipt.ts) proves it. The transparent statement is the
 * signed statement with its receipts in the unprotected header (label 394, a list of receipts).
 *
 * `checkTransparentStatement` checks the structure the join policy may rely on (every required
 * field present and non-empty, the statement's signature against its x5chain, its `did:x509`
 * issuer resolved against that x5chain (src/gov/did-x509.ts), each receipt's
 * signature against a service identity, and that each receipt's leaf binds this statement), and
 * answers the statement in the shape the policy receives. It reads no store and runs no script.
 */
import { CovenantError } from '../base/errors.js';
import { bytesEqual, toHex, utf8 } from '../base/bytes.js';
import {
  CoseHeader,
  type CoseHeaderMap,
  type CoseLabel,
  decodeCoseSign1,
  type DecodedCoseSign1,
  encodeCoseSign1,
  loadPrivateKey,
  parseCertificate,
  sha256,
  signCoseSign1,
  splitPemCertificates,
  verifyCertificateSignedBy,
  verifyCoseSign1,
} from '../crypto/index.js';
import { jsonTable } from '../kv/index.js';
import { COSE_RECEIPT_HEADER, verifyCoseReceipt } from '../merkle/index.js';
import { DID_X509_PREFIX, IssuerResolutionError, resolveDidX509, type ResolvedIssuer } from './did-x509.js';

/** Largest signed or transparent statement the service accepts (registration, join requests). */
export const TRANSPARENT_STATEMENT_BYTES_MAX = 64 * 1024;
/** Longest chain of certificates in x5chain. */
export const X5CHAIN_CERTIFICATES_MAX = 8;
/** Most receipts one transparent statement carries. */
export const RECEIPTS_MAX = 8;

/** Header labels of signed statements (RFC 9360 x5chain, RFC 9597 CWT claims, the SCITT receipts list). */
export const StatementHeader = { contentType: CoseHeader.contentType, x5chain: 33, cwtClaims: 15, receipts: 394 } as const;
/** CWT claim keys (RFC 8392), and the security version number, a text key. */
export const CwtClaim = { iss: 1, sub: 2, iat: 6, svn: 'svn' } as const;

/** The public table in which registered statements are recorded, by their digest (hex). */
export const STATEMENTS_TABLE = 'public:svc.transparency.statements';

/** What the statements table records for one registered statement. */
export interface StatementRecord {
  /** Base64 of the signed statement, as registered. */
  readonly statement: string;
  readonly issuer: string;
  readonly subject: string;
  /** The member or user who registered it. */
  readonly registered_by: string;
}

/** The statements table, declared with its record type. */
export const StatementsTable = jsonTable<StatementRecord>(STATEMENTS_TABLE);

/** The spec's "Transparent statement (input of the join policy)" table: what the policy receives. */
export interface TransparentStatementInput {
  phdr: {
    alg: number;
    cty?: number | string;
    x5chain: string[];
    cwt: { iss: string; sub: string; iat?: number; svn?: number };
  };
  receipts: ReceiptInput[];
  /** `phdr.cwt.iss` resolved against `phdr.x5chain` (src/gov/did-x509.ts): the statement is refused if it does not resolve. */
  resolved_issuer: ResolvedIssuer;
}

export interface ReceiptInput {
  alg: number;
  vds: number;
  kid?: string;
  cwt: { iss: string; sub: string; iat?: number };
  ccf?: { txid?: string };
  leaves: { claims_digest: string; commit_evidence: string; write_set_digest: string }[];
}

/** A signed or transparent statement that fails a structure check: the reason names it. */
export class StatementError extends CovenantError {
  constructor(message: string) {
    super('InvalidSignedStatement', message, 400);
    this.name = 'StatementError';
  }
}

function invalid(message: string): StatementError {
  return new StatementError(message);
}

/**
 * The digest that binds a statement: SHA-256 of its COSE_Sign1 with an empty unprotected header,
 * so that it is the same before and after receipts are attached (the signature covers neither).
 */
export function statementDigest(statement: Uint8Array | DecodedCoseSign1): Uint8Array {
  const decoded = statement instanceof Uint8Array ? decodeStatement(statement) : statement;
  return sha256(encodeCoseSign1({ ...decoded, unprotectedHeader: new Map() }));
}

function decodeStatement(bytes: Uint8Array): DecodedCoseSign1 {
  if (bytes.byteLength > TRANSPARENT_STATEMENT_BYTES_MAX) {
    throw invalid(`the statement is ${bytes.byteLength} bytes, more than ${TRANSPARENT_STATEMENT_BYTES_MAX}`);
  }
  try {
    return decodeCoseSign1(bytes);
  } catch (e) {
    throw invalid(`the statement is not a COSE_Sign1: ${(e as Error).message}`);
  }
}

export interface SignStatementOptions {
  /** PEM of the issuer's EC private key (P-384 signs ES384, P-256 ES256). */
  readonly privateKeyPem: string;
  /** PEM certificates, the signing key's first. */
  readonly x5chainPem: string;
  readonly issuer: string;
  readonly subject: string;
  readonly payload: Uint8Array;
  /** Seconds since the Unix epoch. */
  readonly issuedAtSeconds?: number;
  readonly svn?: number;
  readonly contentType?: number | string;
}

/** Signs a statement (no receipts yet). */
export function signStatement(options: SignStatementOptions): Uint8Array {
  const chain = splitPemCertificates(options.x5chainPem).map((pem) => parseCertificate(pem).derBytes);
  if (chain.length === 0) throw invalid('the certificate chain holds no PEM certificate');
  const claims = new Map<CoseLabel, unknown>([
    [CwtClaim.iss, options.issuer],
    [CwtClaim.sub, options.subject],
  ]);
  if (options.issuedAtSeconds !== undefined) claims.set(CwtClaim.iat, options.issuedAtSeconds);
  if (options.svn !== undefined) claims.set(CwtClaim.svn, options.svn);
  const protectedHeader: CoseHeaderMap = new Map<CoseLabel, unknown>();
  if (options.contentType !== undefined) protectedHeader.set(StatementHeader.contentType, options.contentType);
  protectedHeader.set(StatementHeader.x5chain, chain.length === 1 ? chain[0] : chain);
  protectedHeader.set(StatementHeader.cwtClaims, claims);
  return signCoseSign1({ protectedHeader, payload: options.payload, privateKey: loadPrivateKey(options.privateKeyPem) });
}

/** The statement with `receipt` appended to the receipts of its unprotected header: a transparent statement. */
export function attachReceipt(statement: Uint8Array, receipt: Uint8Array): Uint8Array {
  const decoded = decodeStatement(statement);
  const existing = decoded.unprotectedHeader.get(StatementHeader.receipts);
  const receipts = Array.isArray(existing) ? [...(existing as unknown[]), receipt] : [receipt];
  const unprotectedHeader: CoseHeaderMap = new Map(decoded.unprotectedHeader);
  unprotectedHeader.set(StatementHeader.receipts, receipts);
  return encodeCoseSign1({ ...decoded, unprotectedHeader });
}

function bytesOf(value: unknown): Uint8Array | undefined {
  return value instanceof Uint8Array ? new Uint8Array(value.buffer, value.byteOffset, value.byteLength) : undefined;
}

function isInteger(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value);
}

function nonEmptyString(value: unknown, field: string): string {
  if (value === undefined) throw invalid(`${field} is missing`);
  if (typeof value !== 'string' || value.length === 0) throw invalid(`${field} must be a non-empty string`);
  return value;
}

function optionalInteger(value: unknown, field: string): number | undefined {
  if (value === undefined) return undefined;
  if (!isInteger(value)) throw invalid(`${field} must be an integer`);
  return value;
}

function derToPem(der: Uint8Array): string {
  const lines = Buffer.from(der).toString('base64').match(/.{1,64}/g) ?? [];
  return `-----BEGIN CERTIFICATE-----\n${lines.join('\n')}\n-----END CERTIFICATE-----\n`;
}

/** The signed statement's protected header as the policy sees it, after checking its signature against its x5chain. */
export interface VerifiedSignedStatement {
  readonly decoded: DecodedCoseSign1;
  readonly phdr: TransparentStatementInput['phdr'];
  /** statementDigest of it. */
  readonly digest: Uint8Array;
  /** Its issuer, resolved against its x5chain. */
  readonly issuer: ResolvedIssuer;
}

/**
 * Checks a signed statement: its required protected fields (alg, x5chain, CWT iss and sub), an
 * attached payload, each certificate of x5chain signed by the next, and the statement's signature
 * by the first. Throws StatementError naming the first failed check.
 */
export function verifySignedStatement(bytes: Uint8Array): VerifiedSignedStatement {
  const decoded = decodeStatement(bytes);
  const header = decoded.protectedHeader;
  const cty = header.get(StatementHeader.contentType);
  if (cty !== undefined && !isInteger(cty) && !(typeof cty === 'string' && cty.length > 0)) throw invalid('phdr.cty must be an integer or a non-empty string');
  const rawChain = header.get(StatementHeader.x5chain);
  if (rawChain === undefined) throw invalid('phdr.x5chain is missing');
  const chainDer = (Array.isArray(rawChain) ? rawChain : [rawChain]).map(bytesOf);
  if (chainDer.length === 0) throw invalid('phdr.x5chain is empty');
  if (chainDer.length > X5CHAIN_CERTIFICATES_MAX) throw invalid(`phdr.x5chain holds more than ${X5CHAIN_CERTIFICATES_MAX} certificates`);
  if (chainDer.some((der) => der === undefined || der.byteLength === 0)) throw invalid('phdr.x5chain must hold DER certificates (byte strings)');
  const x5chain = chainDer.map((der) => derToPem(der!));
  const claims = header.get(StatementHeader.cwtClaims);
  if (!(claims instanceof Map)) throw invalid('phdr.cwt (CWT claims, label 15) is missing');
  const iss = nonEmptyString(claims.get(CwtClaim.iss), 'phdr.cwt.iss');
  const sub = nonEmptyString(claims.get(CwtClaim.sub), 'phdr.cwt.sub');
  const iat = optionalInteger(claims.get(CwtClaim.iat), 'phdr.cwt.iat');
  const svn = optionalInteger(claims.get(CwtClaim.svn), 'phdr.cwt.svn');
  if (decoded.payload === null) throw invalid('the statement must carry its payload (attached)');

  let leafKey;
  try {
    leafKey = parseCertificate(x5chain[0]!).publicKey;
  } catch {
    throw invalid('phdr.x5chain[0] is not a certificate');
  }
  for (let i = 0; i + 1 < x5chain.length; i++) {
    let signed = false;
    try {
      signed = verifyCertificateSignedBy(x5chain[i]!, x5chain[i + 1]!);
    } catch {
      signed = false;
    }
    if (!signed) throw invalid(`phdr.x5chain[${i}] is not signed by phdr.x5chain[${i + 1}]`);
  }
  if (!verifyCoseSign1(decoded, leafKey)) throw invalid("the statement's signature does not verify with the key of its x5chain");
  // The issuer is believed only once bound to the chain that signed: its DID names a CA of the chain and the leaf.
  if (!iss.startsWith(DID_X509_PREFIX)) throw new IssuerResolutionError(`the issuer ${iss.slice(0, 200)} is not a did:x509 identifier: the service binds only did:x509 issuers to a statement's x5chain`);
  const issuer = resolveDidX509(iss, chainDer as Uint8Array[], x5chain);
  const phdr: TransparentStatementInput['phdr'] = {
    alg: decoded.alg,
    ...(cty !== undefined ? { cty: cty as number | string } : {}),
    x5chain,
    cwt: { iss, sub, ...(iat !== undefined ? { iat } : {}), ...(svn !== undefined ? { svn } : {}) },
  };
  return { decoded, phdr, digest: statementDigest(decoded), issuer };
}

/**
 * Checks a transparent statement against the service identities (the current service
 * certificate, and previous ones it endorsed) and answers it in the policy's input shape. Throws
 * StatementError naming the first failed check; the join is refused with it, before any policy runs.
 */
export function checkTransparentStatement(bytes: Uint8Array, serviceCertificatesPem: readonly string[]): TransparentStatementInput {
  const { decoded, phdr, digest, issuer } = verifySignedStatement(bytes);
  const rawReceipts = decoded.unprotectedHeader.get(StatementHeader.receipts);
  if (rawReceipts === undefined) throw invalid('receipts (unprotected header label 394) are missing');
  if (!Array.isArray(rawReceipts) || rawReceipts.length === 0) throw invalid('receipts must be a non-empty array');
  if (rawReceipts.length > RECEIPTS_MAX) throw invalid(`more than ${RECEIPTS_MAX} receipts`);
  const receipts = rawReceipts.map((raw: unknown, i) => checkReceipt(raw, i, digest, serviceCertificatesPem));
  return { phdr, receipts, resolved_issuer: issuer };
}

function checkReceipt(raw: unknown, index: number, digest: Uint8Array, serviceCertificatesPem: readonly string[]): ReceiptInput {
  const where = `receipts[${index}]`;
  const bytes = bytesOf(raw);
  if (bytes === undefined) throw invalid(`${where} must be a COSE receipt (byte string)`);
  let verified: ReturnType<typeof verifyCoseReceipt> | undefined;
  let firstFailure = 'no service identity to verify it with';
  for (const certificate of serviceCertificatesPem) {
    try {
      verified = verifyCoseReceipt(bytes, certificate);
      break;
    } catch (e) {
      if (certificate === serviceCertificatesPem[0]) firstFailure = (e as Error).message;
    }
  }
  if (verified === undefined) throw invalid(`${where} is not a receipt of this service: ${firstFailure}`);
  if (!bytesEqual(verified.claimsDigest, digest)) {
    throw invalid(`${where} does not bind this statement: its leaf's claims digest ${toHex(verified.claimsDigest)} is not the statement's digest ${toHex(digest)}`);
  }
  // verifyCoseReceipt checked these fields; read them for the policy.
  const decoded = decodeCoseSign1(bytes);
  const claims = decoded.protectedHeader.get(COSE_RECEIPT_HEADER.cwtClaims) as Map<CoseLabel, unknown>;
  const iat = claims.get(CwtClaim.iat);
  const kid = bytesOf(decoded.protectedHeader.get(CoseHeader.kid));
  return {
    alg: verified.alg,
    vds: decoded.protectedHeader.get(COSE_RECEIPT_HEADER.vds) as number,
    ...(kid !== undefined ? { kid: utf8.decode(kid) } : {}),
    cwt: { iss: verified.issuer, sub: claims.get(CwtClaim.sub) as string, ...(isInteger(iat) ? { iat } : {}) },
    ...(verified.signatureTxId !== undefined ? { ccf: { txid: verified.signatureTxId } } : {}),
    leaves: [{ claims_digest: toHex(verified.claimsDigest), commit_evidence: verified.commitEvidence, write_set_digest: toHex(verified.writeSetDigest) }],
  };
}
