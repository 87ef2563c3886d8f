/**
 * Receipts: offline-verifiable proof that a transaction is in the ledger, in CCF's JSON shape.
 * A transaction's receipt proves its leaf is under a signed root; a signature transaction, which
 * is what signs roots (its own leaf only joins the tree after it), gets a signature receipt: the
 * root it signed and its signature, with no proof.
 *
 * The node signs the 32-byte Merkle root itself (not a hex or JSON form of it) with ECDSA over its
 * identity key: P-384 with SHA-384 (P-256 with SHA-256), DER-encoded signature. The node's
 * certificate is endorsed by the service certificate, so a verifier needs only the service
 * certificate. A receipt signed under an earlier service identity (before a recovery) carries the
 * endorsements that lead from that identity to the current one (service-endorsements.ts).
 */
import type { KeyObject } from 'node:crypto';
import { bytesEqual, fromBase64, fromHex, toBase64, toHex, assert } from '../base/index.js';
import { nodeIdFromPublicKey, parseCertificate, signEcdsa, verifyCertificateSignedBy, verifyEcdsa, ecCurveOf } from '../crypto/index.js';
import { parseCommitEvidence } from './commit-evidence.js';
import { merkleError, MerkleErrorCode } from './errors.js';
import { HASH_LENGTH_BYTES, leafFromComponents } from './hash.js';
import { rootFromProof, type InclusionProof, type ProofStep } from './proof.js';
import { endorsementsFromChain, serviceEndorsementsOf, verifyServiceEndorsements } from './service-endorsements.js';

export interface LeafComponentsJson {
  /** Lower-case hex SHA-256 of the serialised write set. */
  readonly write_set_digest: string;
  /** `ce:<view>.<seqno>:<hex>`. */
  readonly commit_evidence: string;
  /** Lower-case hex; 32 zero bytes when the transaction has no claims. */
  readonly claims_digest: string;
}

export interface Receipt {
  /** PEM certificate of the node that signed the root. */
  readonly cert: string;
  readonly node_id: string;
  /** Base64 DER ECDSA signature over the 32-byte root. */
  readonly signature: string;
  readonly proof: readonly ProofStep[];
  readonly leaf_components: LeafComponentsJson;
  /**
   * Present only when `cert` was issued by an earlier service key (the root was signed before a
   * recovery): PEM certificates from that key to the current service's, oldest first.
   */
  readonly service_endorsements?: readonly string[];
}

/** The receipt of a signature transaction: the root it signed (hex), with no proof. */
export interface SignatureReceipt {
  readonly cert: string;
  readonly node_id: string;
  readonly signature: string;
  readonly signed_root: string;
  /** As in Receipt. */
  readonly service_endorsements?: readonly string[];
}

export function isSignatureReceipt(receipt: Receipt | SignatureReceipt): receipt is SignatureReceipt {
  return typeof receipt === 'object' && receipt !== null && 'signed_root' in receipt;
}

export interface LeafComponents {
  readonly writeSetDigest: Uint8Array | string;
  readonly commitEvidence: string;
  readonly claimsDigest: Uint8Array | string;
}

function digestBytes(value: Uint8Array | string): Uint8Array {
  const bytes = typeof value === 'string' ? fromHex(value) : value;
  assert(bytes.byteLength === HASH_LENGTH_BYTES, 'leaf component digests are 32 bytes');
  return bytes;
}

/** Signature over a Merkle root, as stored in a signature transaction (DER ECDSA, hash of the curve). */
export function signMerkleRoot(privateKey: KeyObject, root: Uint8Array): Uint8Array {
  assert(root.byteLength === HASH_LENGTH_BYTES, 'a Merkle root is 32 bytes');
  return signEcdsa(privateKey, root, 'der');
}

export function verifyMerkleRootSignature(publicKey: KeyObject | string, root: Uint8Array, signature: Uint8Array): boolean {
  return root.byteLength === HASH_LENGTH_BYTES && verifyEcdsa(publicKey, root, signature, 'der');
}

export interface BuildReceiptOptions {
  readonly leafComponents: LeafComponents;
  readonly proof: InclusionProof;
  /** The node's DER signature over `signedRoot` (from the signature transaction). */
  readonly signature: Uint8Array;
  readonly nodeCertificatePem: string;
  readonly nodeId: string;
  readonly signedRoot: Uint8Array;
  /** The endorsements from the service key that issued the node certificate to the current one; none when it is the current one. */
  readonly serviceEndorsements?: readonly string[];
}

/** `{service_endorsements}` when there are any, nothing otherwise (the field is omitted when empty). */
function endorsementsField(endorsements: readonly string[] | undefined): { service_endorsements?: readonly string[] } {
  return endorsements !== undefined && endorsements.length > 0 ? { service_endorsements: [...endorsements] } : {};
}

export function buildReceipt(options: BuildReceiptOptions): Receipt {
  const writeSetDigest = digestBytes(options.leafComponents.writeSetDigest);
  const claimsDigest = digestBytes(options.leafComponents.claimsDigest);
  const leaf = leafFromComponents(writeSetDigest, options.leafComponents.commitEvidence, claimsDigest);
  const root = rootFromProof(leaf, options.proof);
  // A receipt whose proof does not reach the signed root would be a bug in the node, not bad input.
  assert(root !== undefined && bytesEqual(root, options.signedRoot), 'receipt proof folds to the signed root');
  return {
    cert: options.nodeCertificatePem,
    node_id: options.nodeId,
    signature: toBase64(options.signature),
    proof: options.proof.path.map((step) => ('left' in step ? { left: step.left } : { right: step.right })),
    leaf_components: {
      write_set_digest: toHex(writeSetDigest),
      commit_evidence: options.leafComponents.commitEvidence,
      claims_digest: toHex(claimsDigest),
    },
    ...endorsementsField(options.serviceEndorsements),
  };
}

export interface VerifiedReceipt {
  readonly view: number;
  readonly seqno: number;
  readonly leaf: Uint8Array;
  readonly root: Uint8Array;
  readonly nodeId: string;
  /** How many endorsements led from the node certificate's issuer to the service certificate (0: it issued it). */
  readonly endorsements: number;
}

const HEX_DIGEST = /^[0-9a-f]{64}$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

function invalid(reason: string): Error {
  return merkleError(MerkleErrorCode.InvalidReceipt, `invalid receipt: ${reason}`);
}

/**
 * Verifies a receipt against the service certificate: recomputes the leaf, folds the proof to a
 * root, checks the node's signature over that root and that the node certificate is endorsed by the
 * service certificate, directly or through the receipt's service_endorsements. Throws
 * InvalidReceipt naming the first failed check (InvalidServiceEndorsements for the endorsements).
 */
/** How receipts kept from before a recovery are verified (docs/merkle.md "Receipts kept from before a recovery"). */
export interface ReceiptVerifyOptions {
  /**
   * The chain of endorsements the service publishes (GET /node/service/endorsements), oldest
   * first: used when the receipt carries none and the service certificate did not issue its node's.
   */
  readonly serviceEndorsementsChain?: readonly string[];
}

export function verifyReceipt(receipt: Receipt, serviceCertificatePem: string, options: ReceiptVerifyOptions = {}): VerifiedReceipt {
  if (typeof receipt !== 'object' || receipt === null) throw invalid('not an object');
  if (isSignatureReceipt(receipt)) throw invalid('this is the receipt of a signature transaction (signed_root, no proof): see verifySignatureReceipt');
  const { cert, node_id: nodeId, signature, proof, leaf_components: components } = receipt;
  if (typeof cert !== 'string' || typeof nodeId !== 'string' || typeof signature !== 'string' || !Array.isArray(proof)) {
    throw invalid('cert, node_id, signature (strings) and proof (array) are required');
  }
  if (typeof components !== 'object' || components === null) throw invalid('leaf_components is required');
  const { write_set_digest: wsd, commit_evidence: ce, claims_digest: cd } = components;
  if (typeof wsd !== 'string' || !HEX_DIGEST.test(wsd)) throw invalid('write_set_digest must be 64 lower-case hex digits');
  if (typeof cd !== 'string' || !HEX_DIGEST.test(cd)) throw invalid('claims_digest must be 64 lower-case hex digits');
  let txId: { view: number; seqno: number };
  try {
    txId = parseCommitEvidence(ce);
  } catch {
    throw invalid('commit_evidence is not of the form ce:<view>.<seqno>:<hex>');
  }
  if (!BASE64.test(signature)) throw invalid('signature is not base64');

  const leaf = leafFromComponents(fromHex(wsd), ce, fromHex(cd));
  const root = rootFromProof(leaf, { path: proof });
  if (root === undefined) throw invalid('proof is malformed (each step is {"left": hex} or {"right": hex})');

  const { nodePublicKey, endorsements } = endorsedNodeKey(receipt, serviceCertificatePem, options);
  if (!verifyMerkleRootSignature(nodePublicKey, root, fromBase64(signature))) {
    throw invalid('signature does not verify over the root the proof leads to');
  }
  return { view: txId.view, seqno: txId.seqno, leaf, root, nodeId, endorsements };
}

export interface BuildSignatureReceiptOptions {
  /** The node's DER signature over `signedRoot`, as its signature transaction holds it. */
  readonly signature: Uint8Array;
  readonly nodeCertificatePem: string;
  readonly nodeId: string;
  readonly signedRoot: Uint8Array;
  /** As in BuildReceiptOptions. */
  readonly serviceEndorsements?: readonly string[];
}

export function buildSignatureReceipt(options: BuildSignatureReceiptOptions): SignatureReceipt {
  assert(options.signedRoot.byteLength === HASH_LENGTH_BYTES, 'a Merkle root is 32 bytes');
  return {
    cert: options.nodeCertificatePem,
    node_id: options.nodeId,
    signature: toBase64(options.signature),
    signed_root: toHex(options.signedRoot),
    ...endorsementsField(options.serviceEndorsements),
  };
}

export interface VerifiedSignatureReceipt {
  readonly root: Uint8Array;
  readonly nodeId: string;
  /** As VerifiedReceipt.endorsements. */
  readonly endorsements: number;
}

/**
 * Verifies a signature receipt against the service certificate: the node certificate is endorsed
 * by the service certificate (directly or through the receipt's service_endorsements), names the
 * node, and its key signed `signed_root`. Throws InvalidReceipt naming the first failed check
 * (InvalidServiceEndorsements for the endorsements).
 */
export function verifySignatureReceipt(receipt: SignatureReceipt, serviceCertificatePem: string, options: ReceiptVerifyOptions = {}): VerifiedSignatureReceipt {
  if (typeof receipt !== 'object' || receipt === null) throw invalid('not an object');
  const { cert, node_id: nodeId, signature, signed_root: signedRoot } = receipt;
  if (typeof cert !== 'string' || typeof nodeId !== 'string' || typeof signature !== 'string' || typeof signedRoot !== 'string') {
    throw invalid('cert, node_id, signature and signed_root (strings) are required');
  }
  if (!HEX_DIGEST.test(signedRoot)) throw invalid('signed_root must be 64 lower-case hex digits');
  if (!BASE64.test(signature)) throw invalid('signature is not base64');
  const root = fromHex(signedRoot);
  const { nodePublicKey, endorsements } = endorsedNodeKey(receipt, serviceCertificatePem, options);
  if (!verifyMerkleRootSignature(nodePublicKey, root, fromBase64(signature))) throw invalid('signature does not verify over signed_root');
  return { root, nodeId, endorsements };
}

/**
 * The public key of `cert`, once it is known to be node `node_id`'s and endorsed by the service:
 * directly, or through the receipt's endorsements when it carries any, or else through the part of
 * the service's published chain that starts with the endorsement of the key that issued `cert`.
 */
function endorsedNodeKey(receipt: Receipt | SignatureReceipt, serviceCertificatePem: string, options: ReceiptVerifyOptions): { nodePublicKey: KeyObject; endorsements: number } {
  const { cert, node_id: nodeId } = receipt;
  let nodePublicKey: KeyObject;
  try {
    nodePublicKey = parseCertificate(cert).publicKey;
    ecCurveOf(nodePublicKey);
  } catch {
    throw invalid('cert is not a PEM certificate with an EC P-384 or P-256 key');
  }
  if (nodeIdFromPublicKey(nodePublicKey) !== nodeId) throw invalid('node_id does not match the key of cert');
  const endorsements = serviceEndorsementsOf(receipt);
  if (endorsements !== undefined) {
    verifyServiceEndorsements(cert, endorsements, serviceCertificatePem);
    return { nodePublicKey, endorsements: endorsements.length };
  }
  if (!verifyCertificateSignedBy(cert, serviceCertificatePem)) {
    const chain = options.serviceEndorsementsChain;
    const fromChain = chain === undefined ? undefined : endorsementsFromChain(chain, (pem) => verifyCertificateSignedBy(cert, pem));
    if (fromChain === undefined) {
      throw invalid(
        chain === undefined
          ? 'cert is not endorsed by the service certificate (a receipt signed before a recovery carries service_endorsements, or is verified with the chain of GET /node/service/endorsements)'
          : `cert is not endorsed by the service certificate, nor by a service key that any of the ${chain.length} endorsements of the chain given certifies`,
      );
    }
    verifyServiceEndorsements(cert, fromChain, serviceCertificatePem);
    return { nodePublicKey, endorsements: fromChain.length };
  }
  return { nodePublicKey, endorsements: 0 };
}
