/**
 * A ledger written with the ledger library the way a primary writes one: entries with write sets,
 * a signature transaction every `signatureEveryEntries` (the Merkle root of every entry before it,
 * signed with a node key whose certificate the service key endorsed), chunks cut on signatures.
 * For tests and benchmarks of offline verification without running a node.
 */
import { sha256, createEndorsedCertificate, createSelfSignedCertificate, generateEcKeyPair, nodeIdFromPublicKey, signEcdsa, type KeyPair } from '../crypto/index.js';
import { encodeWriteSet, type WriteSet } from '../kv/index.js';
import { encodeEntry, EntryFlags, Ledger, shouldEndChunk, writeSetDigest, type Disk } from '../ledger/index.js';
import { HistoryTree, leafDigest, NO_CLAIMS_DIGEST } from '../merkle/index.js';

export const SIGNATURES_TABLE = 'public:svc.internal.signatures';
export const SNAPSHOT_EVIDENCE_TABLE = 'public:svc.internal.snapshot_evidence';

export interface SigningIdentities {
  readonly service: { keyPair: KeyPair; certificatePem: string };
  readonly node: { keyPair: KeyPair; certificatePem: string; id: string };
}

export async function generateSigningIdentities(): Promise<SigningIdentities> {
  const serviceKeys = generateEcKeyPair('P-384');
  const serviceCert = await createSelfSignedCertificate({ keyPair: serviceKeys, subjectCommonName: 'service', validityDays: 30, isCa: true });
  const nodeKeys = generateEcKeyPair('P-384');
  const nodeCert = await createEndorsedCertificate({
    subjectPublicKey: nodeKeys.publicKey,
    subjectCommonName: 'node',
    subjectAltNames: [],
    issuerCertificatePem: serviceCert,
    issuerPrivateKey: serviceKeys.privateKey,
    validityDays: 30,
  });
  return {
    service: { keyPair: serviceKeys, certificatePem: serviceCert },
    node: { keyPair: nodeKeys, certificatePem: nodeCert, id: nodeIdFromPublicKey(nodeKeys.publicKey) },
  };
}

export interface SignedLedgerOptions {
  readonly disk: Disk;
  readonly directory: string;
  readonly identities: SigningIdentities;
  readonly entries: number;
  readonly signatureEveryEntries: number;
  readonly chunkSizeBytes: number;
  readonly payloadBytes?: number;
  /** Entries appended per Ledger.append call. */
  readonly batchEntries?: number;
  /** Seqnos committed (chunks up to it are renamed .committed); the last entry by default. */
  readonly commitSeqno?: number;
  /**
   * Each entry's commit evidence (its digest goes in the frame), so that receipts of the entries
   * can be built; by default the digest is the seqno's low byte repeated.
   */
  readonly commitEvidenceOf?: (seqno: number) => string;
  /** The signature at this seqno is made with another key than the certificate's (a forgery). */
  readonly forgeSignatureAt?: number;
  /** A snapshot_evidence record written at `seqno` (never a signature seqno). */
  readonly snapshotEvidence?: { readonly seqno: number; readonly sha256Hex: string; readonly snapshotSeqno: number };
}

export interface SignedLedgerSummary {
  readonly entries: number;
  readonly signatures: number;
  readonly bytes: number;
}

const VIEW = 2;

/** Writes the ledger; the last entry is always a signature, so every chunk can complete. */
export function writeSignedLedger(options: SignedLedgerOptions): SignedLedgerSummary {
  const ledger = new Ledger({ disk: options.disk, directory: options.directory });
  ledger.open();
  const tree = new HistoryTree();
  const payload = new Uint8Array(options.payloadBytes ?? 200).fill(0x5a);
  const evidence = new Uint8Array(32);
  const batchEntries = options.batchEntries ?? 1000;
  let batch: Uint8Array[] = [];
  let chunkBytes = 0;
  let signatures = 0;
  let bytes = 0;
  for (let seqno = 1; seqno <= options.entries; seqno++) {
    const isSignature = seqno % options.signatureEveryEntries === 0 || seqno === options.entries;
    let writes: WriteSet;
    if (isSignature) {
      const root = tree.root();
      const signingKey = seqno === options.forgeSignatureAt ? generateEcKeyPair('P-384').privateKey : options.identities.node.keyPair.privateKey;
      const record = {
        view: VIEW,
        seqno,
        root: Buffer.from(root).toString('hex'),
        sig: Buffer.from(signEcdsa(signingKey, root, 'der')).toString('base64'),
        node: options.identities.node.id,
        commit_seqno: seqno - 1,
        commit_view: VIEW,
        cert: options.identities.node.certificatePem,
      };
      writes = new Map([[SIGNATURES_TABLE, new Map([['0', Buffer.from(JSON.stringify(record))]])]]);
      signatures++;
    } else if (seqno === options.snapshotEvidence?.seqno) {
      const value = JSON.stringify({ hash: options.snapshotEvidence.sha256Hex, version: options.snapshotEvidence.snapshotSeqno });
      writes = new Map([[SNAPSHOT_EVIDENCE_TABLE, new Map([['0', Buffer.from(value)]])]]);
    } else {
      writes = new Map([['public:records', new Map([[String(seqno % 1000), payload]])]]);
    }
    const { publicBytes } = encodeWriteSet(writes);
    if (options.commitEvidenceOf !== undefined) evidence.set(sha256(options.commitEvidenceOf(seqno)));
    else evidence.fill(seqno & 0xff);
    let flags = isSignature ? EntryFlags.SIGNATURE : 0;
    if (shouldEndChunk({ chunkBytesSoFar: chunkBytes, chunkSizeBytes: options.chunkSizeBytes, isSignature, forced: seqno === options.entries })) flags |= EntryFlags.CHUNK_END;
    const fields = { view: VIEW, seqno, flags, claimsDigest: NO_CLAIMS_DIGEST, commitEvidenceDigest: evidence, publicBytes, privateBytes: new Uint8Array(0) };
    const frame = encodeEntry(fields);
    tree.append(leafDigest(writeSetDigest(fields), evidence, NO_CLAIMS_DIGEST));
    chunkBytes = (flags & EntryFlags.CHUNK_END) !== 0 ? 0 : chunkBytes + frame.byteLength;
    bytes += frame.byteLength;
    batch.push(frame);
    if (batch.length >= batchEntries) {
      ledger.append(batch);
      batch = [];
    }
  }
  if (batch.length > 0) ledger.append(batch);
  ledger.commit(options.commitSeqno ?? options.entries);
  ledger.close();
  return { entries: options.entries, signatures, bytes };
}

/** The service endorsements table as the node names it (src/node/tables.ts). */
export const SERVICE_ENDORSEMENTS_TABLE = 'public:svc.internal.previous_service_identity_endorsements';

/** One service of a ledger that spans recoveries. */
export interface LedgerEpoch {
  readonly identities: SigningIdentities;
  /** Entries this service writes, its first signature and its recovery record included. */
  readonly entries: number;
  /**
   * From the second service on: its endorsement of the previous service's key, recorded as a
   * recovery records it, or undefined to leave the recovery unrecorded (a forged ledger).
   */
  readonly endorsement?: string;
  /** The record's key, when not the seqno where the service began (a forged record). */
  readonly endorsementKey?: number;
}

export interface RecoveredLedgerOptions {
  readonly disk: Disk;
  readonly directory: string;
  readonly epochs: readonly LedgerEpoch[];
  readonly signatureEveryEntries: number;
  readonly chunkSizeBytes: number;
}

/**
 * Writes a ledger as a service recovered `epochs.length - 1` times leaves it: each service but the
 * last ends on a signature without CHUNK_END (its nodes were lost), and the next one, a recover
 * node, completes that chunk, begins two views above with a signature, records its endorsement
 * of the previous service's key under the seqno where it began, and goes on in `.recovery` files
 * that it renames once done. Every service's nodes sign the one Merkle tree of the whole ledger.
 * Returns the seqnos where the recovered services began.
 */
export function writeRecoveredLedger(options: RecoveredLedgerOptions): number[] {
  const tree = new HistoryTree();
  const began: number[] = [];
  let seqno = 0;
  let view = VIEW;
  let chunkBytes = 0;
  const frame = (writes: WriteSet, kind: { signature: boolean; lastOfEpoch: boolean; lastOfLedger: boolean }): Uint8Array => {
    const { publicBytes } = encodeWriteSet(writes);
    const evidence = new Uint8Array(32).fill(seqno & 0xff);
    let flags = kind.signature ? EntryFlags.SIGNATURE : 0;
    // A service that is lost never ends its chunk; the last one ends the ledger's.
    const ends = shouldEndChunk({ chunkBytesSoFar: chunkBytes, chunkSizeBytes: options.chunkSizeBytes, isSignature: kind.signature, forced: kind.lastOfLedger });
    if (ends && !(kind.lastOfEpoch && !kind.lastOfLedger)) flags |= EntryFlags.CHUNK_END;
    const fields = { view, seqno, flags, claimsDigest: NO_CLAIMS_DIGEST, commitEvidenceDigest: evidence, publicBytes, privateBytes: new Uint8Array(0) };
    const bytes = encodeEntry(fields);
    tree.append(leafDigest(writeSetDigest(fields), evidence, NO_CLAIMS_DIGEST));
    chunkBytes = (flags & EntryFlags.CHUNK_END) !== 0 ? 0 : chunkBytes + bytes.byteLength;
    return bytes;
  };
  options.epochs.forEach((epoch, e) => {
    const node = epoch.identities.node;
    const frames: Uint8Array[] = [];
    const first = seqno + 1;
    if (e > 0) {
      view += 2;
      began.push(first);
    }
    for (let i = 0; i < epoch.entries; i++) {
      seqno++;
      const lastOfEpoch = i === epoch.entries - 1;
      const lastOfLedger = lastOfEpoch && e === options.epochs.length - 1;
      const recordsRecovery = e > 0 && i === 1 && epoch.endorsement !== undefined;
      const signature = !recordsRecovery && (lastOfEpoch || (e > 0 && i === 0) || seqno % options.signatureEveryEntries === 0);
      let writes: WriteSet;
      if (signature) {
        const root = tree.root();
        const record = { view, seqno, root: Buffer.from(root).toString('hex'), sig: Buffer.from(signEcdsa(node.keyPair.privateKey, root, 'der')).toString('base64'), node: node.id, commit_seqno: seqno - 1, commit_view: view, cert: node.certificatePem };
        writes = new Map([[SIGNATURES_TABLE, new Map([['0', Buffer.from(JSON.stringify(record))]])]]);
      } else if (recordsRecovery) {
        const key = epoch.endorsementKey ?? first;
        const record = { endorsing_service_created_seqno: key, previous_service_certificate: options.epochs[e - 1]!.identities.service.certificatePem, endorsement: epoch.endorsement };
        writes = new Map([[SERVICE_ENDORSEMENTS_TABLE, new Map([[String(key), Buffer.from(JSON.stringify(record))]])]]);
      } else {
        writes = new Map([['public:records', new Map([[String(seqno), Buffer.from(`epoch ${e} entry ${i}`)]])]]);
      }
      frames.push(frame(writes, { signature, lastOfEpoch, lastOfLedger }));
    }
    const ledger = new Ledger({ disk: options.disk, directory: options.directory, recoverySuffix: e > 0 });
    ledger.open();
    ledger.append(frames);
    ledger.commit(seqno);
    if (e > 0) ledger.completeRecovery();
    ledger.close();
  });
  return began;
}
