/**
 * COSE receipts (GET /node/receipt/cose): a COSE_Sign1 by the service key over a signed Merkle
 * root, with the transaction's inclusion proof in the unprotected header — the shape of
 * draft-ietf-cose-merkle-tree-proofs as CCF uses it, so that one verifier reads both:
 *
 *   protected   = { 1 (alg): -35 (ES384) | -7 (ES256),
 *                   4 (kid): bstr, hex SHA-256 of the service public key (DER SPKI) as text,
 *                   395 (vds): 1 (this ledger's SHA-256 tree, docs/merkle.md),
 *                   15 (CWT claims): { 1 (iss): text, 2 (sub): "ledger.signature" },
 *                   "ccf": { "txid": "<view>.<seqno>" of the signature transaction } }
 *   unprotected = { 396 (vdp): { -1 (inclusion proofs): [ bstr .cbor proof ] } }
 *   payload     = nil (detached: the Merkle root the proof leads to)
 *   proof       = { 1 (leaf): [ write_set_digest: bstr, commit_evidence: tstr, claims_digest: bstr ],
 *                   2 (path): [ [ left: bool, hash: bstr ], ... ] }   leaf to root; left = the
 *                                                                     sibling is on the left
 *
 * The signature covers the protected header and the root only, so one signature per signed root
 * serves every transaction under it (the node signs once per root and caches it).
 */
import type { KeyObject } from 'node:crypto';
import { assert, fromHex, toHex, utf8 } from '../base/index.js';
import {
  CoseHeader,
  type CoseHeaderMap,
  type CoseLabel,
  decodeCbor,
  decodeCoseSign1,
  encodeCbor,
  encodeCoseSign1,
  parseCertificate,
  sha256Hex,
  signCoseSign1,
  verifyCoseSign1,
} from '../crypto/index.js';
import { parseCommitEvidence } from './commit-evidence.js';
import { merkleError, MerkleErrorCode } from './errors.js';
import { HASH_LENGTH_BYTES, leafFromComponents } from './hash.js';
import { PROOF_PATH_LENGTH_MAX, rootFromProof, type InclusionProof, type ProofStep } from './proof.js';
import type { LeafComponents, ReceiptVerifyOptions } from './receipt.js';
import { endorsementsFromChain, verifyEndorsedServiceKey } from './service-endorsements.js';

export const COSE_RECEIPT_HEADER = { cwtClaims: 15, vds: 395, vdp: 396, ccf: 'ccf' } as const;
/** Verifiable data structure: this ledger's SHA-256 Merkle tree (docs/merkle.md). */
export const VDS_LEDGER_SHA256 = 1;
/** Key of the inclusion proofs in the vdp map. */
export const VDP_INCLUSION_PROOFS = -1;
export const COSE_RECEIPT_SUBJECT = 'ledger.signature';
const CWT = { iss: 1, sub: 2 } as const;
const PROOF = { leaf: 1, path: 2 } as const;

/** The key id of a service key: hex SHA-256 of its DER SubjectPublicKeyInfo. */
export function serviceKeyId(publicKey: KeyObject): string {
  return sha256Hex(new Uint8Array(publicKey.export({ type: 'spki', format: 'der' })));
}

export interface SignRootOptions {
  readonly servicePrivateKey: KeyObject;
  readonly servicePublicKey: KeyObject;
  readonly root: Uint8Array;
  /** The signature transaction whose root this is. */
  readonly signatureTxId: string;
  /** CWT issuer: who vouches (the service, named by its key id by default). */
  readonly issuer?: string;
}

/** The service's COSE_Sign1 over a root, detached, without a proof yet (cache it per root). */
export function signRootCose(options: SignRootOptions): Uint8Array {
  assert(options.root.byteLength === HASH_LENGTH_BYTES, 'a Merkle root is 32 bytes');
  const kid = serviceKeyId(options.servicePublicKey);
  const protectedHeader: CoseHeaderMap = new Map<CoseLabel, unknown>([
    [CoseHeader.kid, utf8.encode(kid)],
    [COSE_RECEIPT_HEADER.vds, VDS_LEDGER_SHA256],
    [COSE_RECEIPT_HEADER.cwtClaims, new Map<number, unknown>([[CWT.iss, options.issuer ?? `covenant:service:${kid}`], [CWT.sub, COSE_RECEIPT_SUBJECT]])],
    [COSE_RECEIPT_HEADER.ccf, new Map<string, unknown>([['txid', options.signatureTxId]])],
  ]);
  return signCoseSign1({ protectedHeader, payload: null, detachedPayload: options.root, privateKey: options.servicePrivateKey });
}

function encodeProof(leaf: LeafComponents, proof: InclusionProof): Uint8Array {
  const digest = (value: Uint8Array | string) => (typeof value === 'string' ? fromHex(value) : value);
  const path = proof.path.map((step) => ('left' in step ? [true, fromHex(step.left)] : [false, fromHex(step.right)]));
  return encodeCbor(
    new Map<number, unknown>([
      [PROOF.leaf, [digest(leaf.writeSetDigest), leaf.commitEvidence, digest(leaf.claimsDigest)]],
      [PROOF.path, path],
    ]),
  );
}

/** A receipt: the cached signed root with one transaction's inclusion proof added. */
export function coseReceiptWithProof(signedRoot: Uint8Array, leaf: LeafComponents, proof: InclusionProof): Uint8Array {
  const decoded = decodeCoseSign1(signedRoot);
  const vdp = new Map<number, unknown>([[VDP_INCLUSION_PROOFS, [encodeProof(leaf, proof)]]]);
  return encodeCoseSign1({ ...decoded, unprotectedHeader: new Map<CoseLabel, unknown>([[COSE_RECEIPT_HEADER.vdp, vdp]]) });
}

export interface VerifiedCoseReceipt {
  readonly view: number;
  readonly seqno: number;
  readonly leaf: Uint8Array;
  readonly root: Uint8Array;
  /** `<view>.<seqno>` of the signature transaction, from the protected header. */
  readonly signatureTxId: string | undefined;
  readonly issuer: string;
  /** The protected header's alg. */
  readonly alg: number;
  /** The leaf's components, as the proof carries them. */
  readonly writeSetDigest: Uint8Array;
  readonly commitEvidence: string;
  readonly claimsDigest: Uint8Array;
  /** How many endorsements of the chain given led from the key that signed it to the service certificate (0: that key's own). */
  readonly endorsements: number;
}

function invalid(reason: string): Error {
  return merkleError(MerkleErrorCode.InvalidReceipt, `invalid COSE receipt: ${reason}`);
}

function bytesOf(value: unknown, what: string, length?: number): Uint8Array {
  if (!(value instanceof Uint8Array) || (length !== undefined && value.byteLength !== length)) {
    throw invalid(`${what} must be a byte string${length !== undefined ? ` of ${length} bytes` : ''}`);
  }
  return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
}

/**
 * Verifies a COSE receipt against the service certificate: the structure, the leaf (recomputed
 * from its components), the proof (folded to a root) and the service's signature over that root.
 * A receipt signed by an earlier service key (kept from before a recovery) verifies when
 * `options.serviceEndorsementsChain` holds the endorsement of that key and those after it, up to
 * the service certificate. Throws InvalidReceipt naming the first failed check
 * (InvalidServiceEndorsements for a broken chain).
 */
export function verifyCoseReceipt(bytes: Uint8Array, serviceCertificatePem: string, options: ReceiptVerifyOptions = {}): VerifiedCoseReceipt {
  let decoded;
  try {
    decoded = decodeCoseSign1(bytes);
  } catch (e) {
    throw invalid((e as Error).message);
  }
  if (decoded.payload !== null) throw invalid('the payload must be detached (nil)');
  const vds = decoded.protectedHeader.get(COSE_RECEIPT_HEADER.vds);
  if (vds !== VDS_LEDGER_SHA256) throw invalid(`vds (395) must be ${VDS_LEDGER_SHA256}, got ${String(vds)}`);
  const claims = decoded.protectedHeader.get(COSE_RECEIPT_HEADER.cwtClaims);
  const issuer = claims instanceof Map ? claims.get(CWT.iss) : undefined;
  if (typeof issuer !== 'string' || (claims as Map<number, unknown>).get(CWT.sub) !== COSE_RECEIPT_SUBJECT) {
    throw invalid(`CWT claims (15) must carry iss and sub "${COSE_RECEIPT_SUBJECT}"`);
  }
  const ccf = decoded.protectedHeader.get(COSE_RECEIPT_HEADER.ccf);
  const signatureTxId = ccf instanceof Map && typeof ccf.get('txid') === 'string' ? (ccf.get('txid') as string) : undefined;

  const vdp = decoded.unprotectedHeader.get(COSE_RECEIPT_HEADER.vdp);
  const proofs = vdp instanceof Map ? vdp.get(VDP_INCLUSION_PROOFS) : undefined;
  if (!Array.isArray(proofs) || proofs.length !== 1) throw invalid('vdp (396) must hold exactly one inclusion proof under -1');
  let proof: unknown;
  try {
    proof = decodeCbor(bytesOf(proofs[0], 'the inclusion proof'));
  } catch (e) {
    throw e instanceof Error && 'code' in e ? e : invalid('the inclusion proof is not CBOR');
  }
  if (!(proof instanceof Map)) throw invalid('the inclusion proof must be a map');
  const leafParts = proof.get(PROOF.leaf);
  const path = proof.get(PROOF.path);
  if (!Array.isArray(leafParts) || leafParts.length !== 3) throw invalid('the proof leaf must be [write_set_digest, commit_evidence, claims_digest]');
  if (!Array.isArray(path) || path.length > PROOF_PATH_LENGTH_MAX) throw invalid(`the proof path must be an array of at most ${PROOF_PATH_LENGTH_MAX} steps`);
  const writeSetDigest = bytesOf(leafParts[0], 'write_set_digest', HASH_LENGTH_BYTES);
  const commitEvidence = leafParts[1];
  const claimsDigest = bytesOf(leafParts[2], 'claims_digest', HASH_LENGTH_BYTES);
  if (typeof commitEvidence !== 'string') throw invalid('commit_evidence must be a text string');
  let txId: { view: number; seqno: number };
  try {
    txId = parseCommitEvidence(commitEvidence);
  } catch {
    throw invalid('commit_evidence is not of the form ce:<view>.<seqno>:<hex>');
  }
  const steps: ProofStep[] = path.map((step: unknown) => {
    if (!Array.isArray(step) || step.length !== 2 || typeof step[0] !== 'boolean') throw invalid('each path step is [left: bool, hash: bstr]');
    const hash = toHex(bytesOf(step[1], 'a path hash', HASH_LENGTH_BYTES));
    return step[0] ? { left: hash } : { right: hash };
  });
  const leaf = leafFromComponents(writeSetDigest, commitEvidence, claimsDigest);
  const root = rootFromProof(leaf, { path: steps });
  if (root === undefined) throw invalid('the proof does not fold to a root');

  const kid = decoded.protectedHeader.get(CoseHeader.kid);
  if (!(kid instanceof Uint8Array)) throw invalid('kid (4) must be a byte string');
  const signer = signingServiceKey(utf8.decode(bytesOf(kid, 'kid')), serviceCertificatePem, options.serviceEndorsementsChain);
  if (!verifyCoseSign1(decoded, signer.publicKey, root)) throw invalid('the service signature does not verify over the root the proof leads to');
  return { view: txId.view, seqno: txId.seqno, leaf, root, signatureTxId, issuer, alg: decoded.alg, writeSetDigest, commitEvidence, claimsDigest, endorsements: signer.endorsements };
}

/**
 * The service key that `kid` names: the service certificate's, or an earlier one that the chain
 * endorses up to it (the chain's endorsements from the one certifying that key are checked).
 */
function signingServiceKey(kid: string, serviceCertificatePem: string, chain: readonly string[] | undefined): { publicKey: KeyObject; endorsements: number } {
  let servicePublicKey: KeyObject;
  try {
    servicePublicKey = parseCertificate(serviceCertificatePem).publicKey;
  } catch {
    throw invalid('the service certificate cannot be read');
  }
  if (kid === serviceKeyId(servicePublicKey)) return { publicKey: servicePublicKey, endorsements: 0 };
  const fromChain = chain === undefined ? undefined : endorsementsFromChain(chain, (pem) => serviceKeyId(parseCertificate(pem).publicKey) === kid);
  if (fromChain === undefined) {
    throw invalid(
      chain === undefined
        ? 'kid (4) does not name the key of the service certificate (a receipt signed before a recovery is verified with the chain of GET /node/service/endorsements)'
        : `kid (4) names neither the key of the service certificate nor one that any of the ${chain.length} endorsements of the chain given certifies`,
    );
  }
  verifyEndorsedServiceKey(fromChain, serviceCertificatePem);
  return { publicKey: parseCertificate(fromChain[0]!).publicKey, endorsements: fromChain.length };
}
