/**
 * Offline verification of a ledger (what `covenant ledger verify` runs): every frame of every
 * chunk in seqno order (crc, seqno continuity, chunk names against contents, completed chunks
 * ending on a CHUNK_END signature, or where the next entry records a recovery), the Merkle tree
 * rebuilt from the entries, every signature record's root against the tree before it, every
 * signature against the certificate in the record, and that certificate against the service
 * certificate when one is given: issued by it directly, or by an earlier service identity that
 * the recoveries recorded after the signature endorse, link by link, up to it
 * (service-identities.ts).
 *
 * Verification stops at the first problem, reported with the file, the byte offset of the frame
 * and what is wrong: after one bad entry every later root differs, so more reports add nothing.
 */
import { assert, bytesEqual, errorMessage, isCovenantError, type Seqno } from '../base/index.js';
import { loadPublicKey, nodeIdFromPublicKey, parseCertificate, verifyEcdsa } from '../crypto/index.js';
import { decodeWriteSet, readSnapshotHeader, Store } from '../kv/index.js';
import { EntryFlags, hasFlag, isChunkFileName, LedgerError, parseChunkName, parseSnapshotFile, readLedgerDirectories, writeSetDigest, type DecodedEntry, type Disk } from '../ledger/index.js';
import { HistoryTree, leafDigest } from '../merkle/index.js';
import type { KeyObject } from 'node:crypto';
import { RecordError, recoveriesRecordedBy, ServiceIdentities, type RecordedRecovery } from './service-identities.js';

/**
 * Table names as the node writes them (src/node/tables.ts; the audit layer may not import the
 * node, a test keeps the two equal).
 */
export const SIGNATURES_TABLE = 'public:svc.internal.signatures';
export const SNAPSHOT_EVIDENCE_TABLE = 'public:svc.internal.snapshot_evidence';
const SINGLETON_KEY = '0';

/** The signature record of a signature transaction (src/node/tables.ts SignatureRecord). */
interface SignatureRecordFields {
  view: number;
  seqno: number;
  root: string;
  sig: string;
  node: string;
  cert: string;
}

export type VerifyProblemCode =
  /** Frames, file names or chunk boundaries (the ledger layer's LedgerError codes). */
  | 'LedgerCorrupted'
  | 'LedgerFilesInconsistent'
  | 'InvalidLedgerFileName'
  | 'LedgerEntryOutOfOrder'
  | 'MissingEntries'
  | 'ChunkNotEnded'
  | 'MalformedSignatureRecord'
  | 'MalformedServiceEndorsement'
  | 'MerkleRootMismatch'
  | 'InvalidSignature'
  | 'UntrustedNodeCertificate'
  | 'SnapshotMismatch'
  | 'ReadFailed';

export interface VerifyProblem {
  readonly code: VerifyProblemCode;
  readonly message: string;
  readonly file?: string;
  readonly offsetBytes?: number;
  readonly seqno?: Seqno;
}

export interface VerifiedFile {
  readonly file: string;
  readonly first: Seqno;
  readonly last: Seqno;
  readonly sizeBytes: number;
}

export interface VerifyProgress {
  readonly bytesDone: number;
  readonly bytesTotal: number;
  readonly entries: number;
}

export interface VerifyReport {
  /** Chunk files fully verified, in order (the file holding a problem is not listed). */
  readonly files: readonly VerifiedFile[];
  readonly entries: number;
  readonly signatures: number;
  /** Bytes of the verified files. */
  readonly bytes: number;
  readonly firstSeqno: Seqno | undefined;
  readonly lastSeqno: Seqno | undefined;
  /** Last seqno covered by a verified signature (entries after it are checked only as frames). */
  readonly lastSignedSeqno: Seqno | undefined;
  /** Whether roots were checked (not when the ledger starts after a snapshot: the tree before it is unknown). */
  readonly rootsChecked: boolean;
  /** First seqnos of the recovered services the ledger records, in order (one per recovery). */
  readonly recoveries: readonly Seqno[];
  readonly problem: VerifyProblem | undefined;
}

export interface VerifyLedgerOptions {
  /**
   * PEM of the newest service certificate: every signing node's certificate must be issued by it,
   * or by a service identity that the recoveries recorded after the signature endorse up to it.
   */
  readonly serviceCertificatePem?: string;
  /** A committed snapshot the ledger starts after (a node that joined or recovered from it). */
  readonly snapshot?: { readonly name: string; readonly bytes: Uint8Array };
  /** Called after each chunk file. */
  readonly onProgress?: (progress: VerifyProgress) => void;
}

const SNAPSHOT_NAME = /^snapshot_(\d+)_(\d+)(?:\.committed)?$/;

class Problem extends Error {
  constructor(readonly problem: VerifyProblem) {
    super(problem.message);
  }
}

/** Sum of the chunk files' sizes, for progress (the same selection readLedgerDirectories makes). */
function chunkFilesSizeBytes(disk: Disk, directories: readonly string[]): number {
  const seen = new Set<string>();
  let total = 0;
  for (const directory of directories) {
    for (const name of disk.listDirectory(directory)) {
      if (!isChunkFileName(name) || seen.has(name)) continue;
      seen.add(name);
      try {
        if (parseChunkName(name).recovery) continue;
      } catch (e) {
        if (e instanceof LedgerError) continue; // reported when the files are read
        throw e;
      }
      total += disk.sizeBytes(disk.join(directory, name));
    }
  }
  return total;
}

export function verifyLedger(disk: Disk, directories: readonly string[], options: VerifyLedgerOptions = {}): VerifyReport {
  const files: VerifiedFile[] = [];
  const tree = new HistoryTree();
  const certificates = new Map<string, KeyObject>();
  const identities = new ServiceIdentities(options.serviceCertificatePem);
  let entries = 0;
  let signatures = 0;
  let bytes = 0;
  let firstSeqno: Seqno | undefined;
  let lastSeqno: Seqno | undefined;
  let lastSignedSeqno: Seqno | undefined;
  let problem: VerifyProblem | undefined;

  let startAfter = 0;
  let evidence: { seqno: Seqno; sha256Hex: string; name: string } | undefined;
  if (options.snapshot !== undefined) {
    const checked = checkSnapshot(options.snapshot);
    if ('problem' in checked) return report(checked.problem);
    startAfter = checked.seqno;
    evidence = { seqno: checked.evidenceSeqno, sha256Hex: checked.sha256Hex, name: options.snapshot.name };
  }
  const rootsChecked = startAfter === 0;
  const bytesTotal = chunkFilesSizeBytes(disk, directories);

  let current: { file: string; first: Seqno; last: Seqno; lastFlags: number } | undefined;
  /**
   * A completed chunk whose last entry does not carry CHUNK_END: legitimate only as the end of a
   * service that was recovered, that is when the next entry begins a view in which the ledger
   * records a recovery that began there. `inNextView` once that entry is read.
   */
  let unended: { file: string; last: Seqno; inNextView: boolean } | undefined;
  const notEnded = (chunk: { file: string; last: Seqno }, why: string): Problem =>
    new Problem({ code: 'ChunkNotEnded', message: `${chunk.file}: completed chunk's last entry ${chunk.last} does not carry CHUNK_END, ${why}`, file: chunk.file, seqno: chunk.last });
  let previousView: number | undefined;
  /** Undefined while in the view of a snapshot the ledger starts after: where it began is not here. */
  let viewStartSeqno: Seqno | undefined;
  const finishFile = () => {
    if (current === undefined) return;
    const name = current.file.slice(current.file.lastIndexOf('/') + 1);
    const parsed = parseChunkName(name);
    if (parsed.last !== undefined && !hasFlag(current.lastFlags, EntryFlags.CHUNK_END)) {
      if (unended !== undefined) throw notEnded(unended, `and the service that began at seqno ${unended.last + 1} records no recovery before it ends too`);
      unended = { file: current.file, last: current.last, inNextView: false };
    }
    const sizeBytes = disk.sizeBytes(current.file);
    bytes += sizeBytes;
    files.push({ file: current.file, first: current.first, last: current.last, sizeBytes });
    options.onProgress?.({ bytesDone: bytes, bytesTotal, entries });
    current = undefined;
  };

  try {
    for (const { entry, file, offsetBytes } of readLedgerDirectories(disk, directories, { fromSeqno: startAfter + 1, allowGaps: startAfter > 0 })) {
      if (current !== undefined && current.file !== file) finishFile();
      if (current === undefined) current = { file, first: entry.seqno, last: entry.seqno, lastFlags: entry.flags };
      current.last = entry.seqno;
      current.lastFlags = entry.flags;
      const at = { file, offsetBytes, seqno: entry.seqno };

      if (firstSeqno === undefined) {
        firstSeqno = entry.seqno;
        if (entry.seqno !== startAfter + 1) {
          const why = startAfter === 0 ? 'the ledger does not start at seqno 1 (pass the snapshot it starts from)' : `the ledger does not continue the snapshot at seqno ${startAfter + 1}`;
          throw new Problem({ code: 'MissingEntries', message: `${file} at offset ${offsetBytes}: first entry is ${entry.seqno}; ${why}`, ...at });
        }
      }
      lastSeqno = entry.seqno;

      if (entry.view !== previousView) {
        if (unended?.inNextView === true) throw notEnded(unended, `and the view that began at seqno ${unended.last + 1} records no recovery that began there`);
        if (unended !== undefined) unended.inNextView = true;
        viewStartSeqno = previousView === undefined && startAfter > 0 ? undefined : entry.seqno;
        previousView = entry.view;
      } else if (unended !== undefined && !unended.inNextView) {
        throw notEnded(unended, `and the next entry (seqno ${entry.seqno}) does not begin a new view, as a recovered service does`);
      }
      for (const recovery of readRecoveries(entry, at)) {
        addRecovery(identities, recovery, viewStartSeqno, at);
        if (recovery.seqno === (unended?.last ?? -1) + 1) unended = undefined;
      }

      if (hasFlag(entry.flags, EntryFlags.SIGNATURE)) {
        const root = rootsChecked ? tree.root() : undefined;
        checkSignature(entry, root, at, certificates, identities);
        signatures++;
        lastSignedSeqno = entry.seqno;
        // Leaves before a checked root are never needed again: keep memory flat on long ledgers.
        if (rootsChecked) tree.compactBefore(tree.size);
      }
      if (evidence !== undefined && entry.seqno === evidence.seqno) checkEvidence(entry, evidence, at);
      if (rootsChecked) tree.append(leafDigest(writeSetDigest(entry), entry.commitEvidenceDigest, entry.claimsDigest));
      entries++;
    }
    finishFile();
    if (unended !== undefined) throw notEnded(unended, 'and the ledger records no recovery that began after it');
  } catch (e) {
    if (e instanceof Problem) problem = e.problem;
    else if (e instanceof LedgerError) problem = afterLastFile(e);
    else if (isCovenantError(e)) problem = { code: 'ReadFailed', message: e.message, ...(current ? { file: current.file } : {}) };
    else throw e;
  }
  if (problem === undefined && evidence !== undefined && (lastSeqno === undefined || lastSeqno < evidence.seqno)) {
    problem = { code: 'SnapshotMismatch', message: `the ledger ends before seqno ${evidence.seqno}, where the evidence of ${evidence.name} is recorded` };
  }
  if (problem === undefined) problem = untrustedProblem(identities);
  return report(problem);

  /** The reader moves to the next file only after yielding every entry of the current one. */
  function afterLastFile(e: LedgerError): VerifyProblem {
    if (current !== undefined && e.file !== undefined && e.file !== current.file) {
      try {
        finishFile();
      } catch (inner) {
        if (inner instanceof Problem) return inner.problem;
        throw inner;
      }
    }
    return fromLedgerError(e);
  }

  function report(found: VerifyProblem | undefined): VerifyReport {
    const recoveries = identities.recorded.map((r) => r.seqno);
    return { files, entries, signatures, bytes, firstSeqno, lastSeqno, lastSignedSeqno, rootsChecked: options.snapshot === undefined, recoveries, problem: found };
  }
}

function fromLedgerError(e: LedgerError): VerifyProblem {
  const code: VerifyProblemCode = (['LedgerCorrupted', 'LedgerFilesInconsistent', 'InvalidLedgerFileName', 'LedgerEntryOutOfOrder'] as const).find((c) => c === e.code) ?? 'LedgerCorrupted';
  const seqno = e.details?.['seqno'];
  return {
    code,
    message: e.message,
    ...(e.file !== undefined ? { file: e.file } : {}),
    ...(e.offsetBytes !== undefined ? { offsetBytes: e.offsetBytes } : {}),
    ...(typeof seqno === 'number' ? { seqno } : {}),
  };
}

interface At {
  file: string;
  offsetBytes: number;
  seqno: Seqno;
}

function fail(code: VerifyProblemCode, at: At, what: string): never {
  throw new Problem({ code, message: `${at.file} at offset ${at.offsetBytes}: seqno ${at.seqno}: ${what}`, ...at });
}

function readRecoveries(entry: DecodedEntry, at: At): RecordedRecovery[] {
  try {
    return recoveriesRecordedBy(entry);
  } catch (e) {
    if (e instanceof RecordError) fail('MalformedServiceEndorsement', at, e.message);
    throw e;
  }
}

function addRecovery(identities: ServiceIdentities, recovery: RecordedRecovery, viewStartSeqno: Seqno | undefined, at: At): void {
  try {
    identities.addRecovery(recovery, viewStartSeqno);
  } catch (e) {
    if (e instanceof RecordError) fail('MalformedServiceEndorsement', at, e.message);
    throw e;
  }
}

/** Once the ledger is read: a signing certificate that does not chain to the service certificate. */
function untrustedProblem(identities: ServiceIdentities): VerifyProblem | undefined {
  const untrusted = identities.untrusted();
  if (untrusted === undefined) return undefined;
  const at = untrusted.at;
  return {
    code: 'UntrustedNodeCertificate',
    message: `${at.file} at offset ${at.offsetBytes}: seqno ${at.seqno}: certificate of node ${untrusted.node} is not endorsed by the service certificate: ${untrusted.why}`,
    ...at,
  };
}

function readSignatureRecord(entry: DecodedEntry, at: At): SignatureRecordFields {
  let record: unknown;
  try {
    const value = decodeWriteSet(entry.publicBytes).get(SIGNATURES_TABLE)?.get(SINGLETON_KEY);
    if (value === undefined || value === null) fail('MalformedSignatureRecord', at, `signature entry without a ${SIGNATURES_TABLE} record`);
    record = JSON.parse(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8'));
  } catch (e) {
    if (e instanceof Problem) throw e;
    fail('MalformedSignatureRecord', at, `unreadable signature record: ${errorMessage(e)}`);
  }
  const r = record as Partial<Record<keyof SignatureRecordFields, unknown>> | null;
  if (
    r === null ||
    typeof r !== 'object' ||
    typeof r.view !== 'number' ||
    typeof r.seqno !== 'number' ||
    typeof r.root !== 'string' ||
    !/^[0-9a-f]{64}$/.test(r.root) ||
    typeof r.sig !== 'string' ||
    typeof r.node !== 'string' ||
    typeof r.cert !== 'string'
  ) {
    fail('MalformedSignatureRecord', at, 'signature record lacks view, seqno, root, sig, node or cert');
  }
  return r as SignatureRecordFields;
}

function checkSignature(
  entry: DecodedEntry,
  treeRoot: Uint8Array | undefined,
  at: At,
  certificates: Map<string, KeyObject>,
  identities: ServiceIdentities,
): void {
  const record = readSignatureRecord(entry, at);
  if (record.seqno !== entry.seqno || record.view !== entry.view) {
    fail('MalformedSignatureRecord', at, `signature record names ${record.view}.${record.seqno}, the entry is ${entry.view}.${entry.seqno}`);
  }
  const root = Buffer.from(record.root, 'hex');
  if (treeRoot !== undefined && !bytesEqual(root, treeRoot)) {
    fail('MerkleRootMismatch', at, `signed root ${record.root} differs from the root ${Buffer.from(treeRoot).toString('hex')} of the ${entry.seqno - 1} entries before it`);
  }
  let key = certificates.get(record.cert);
  if (key === undefined) {
    try {
      const certificate = parseCertificate(record.cert);
      key = loadPublicKey(certificate.publicKeyPem);
    } catch (e) {
      fail('MalformedSignatureRecord', at, `node certificate does not parse: ${errorMessage(e)}`);
    }
    if (nodeIdFromPublicKey(key) !== record.node) fail('MalformedSignatureRecord', at, `certificate is not node ${record.node}'s`);
    certificates.set(record.cert, key);
  }
  identities.signedBy(record.cert, record.node, entry.view, at);
  if (!verifyEcdsa(key, root, Buffer.from(record.sig, 'base64'), 'der')) {
    fail('InvalidSignature', at, `signature of node ${record.node} over root ${record.root} does not verify`);
  }
}

interface CheckedSnapshot {
  seqno: Seqno;
  evidenceSeqno: Seqno;
  sha256Hex: string;
}

function checkSnapshot(snapshot: { name: string; bytes: Uint8Array }): CheckedSnapshot | { problem: VerifyProblem } {
  const base = snapshot.name.slice(snapshot.name.lastIndexOf('/') + 1);
  const m = SNAPSHOT_NAME.exec(base);
  const problem = (message: string) => ({ problem: { code: 'SnapshotMismatch' as const, message: `${snapshot.name}: ${message}`, file: snapshot.name } });
  if (!m) return problem('not named snapshot_<seqno>_<evidence_seqno>[.committed]');
  const seqno = Number(m[1]);
  const evidenceSeqno = Number(m[2]);
  let digestHex: string;
  try {
    // The snapshot file (docs/snapshots.md): the evidence is the SHA-256 of all but its receipt section.
    const parts = parseSnapshotFile(snapshot.bytes);
    const header = readSnapshotHeader(parts.kv);
    if (header.seqno !== seqno) return problem(`holds the state at seqno ${header.seqno}, its name says ${seqno}`);
    // Checks the body digest and that the public part decodes.
    Store.fromSnapshot(parts.kv);
    digestHex = Buffer.from(parts.digest).toString('hex');
  } catch (e) {
    if (isCovenantError(e)) return problem(e.message);
    throw e;
  }
  assert(Number.isSafeInteger(seqno) && Number.isSafeInteger(evidenceSeqno), 'digits only');
  return { seqno, evidenceSeqno, sha256Hex: digestHex };
}

/** The evidence entry must record the snapshot's SHA-256 (spec: the snapshot_evidence table). */
function checkEvidence(entry: DecodedEntry, evidence: { sha256Hex: string; name: string }, at: At): void {
  let text = '';
  try {
    const writes = decodeWriteSet(entry.publicBytes).get(SNAPSHOT_EVIDENCE_TABLE);
    for (const value of writes?.values() ?? []) if (value !== null) text += Buffer.from(value).toString('utf8');
  } catch (e) {
    fail('SnapshotMismatch', at, `unreadable write set: ${errorMessage(e)}`);
  }
  const base64 = Buffer.from(evidence.sha256Hex, 'hex').toString('base64');
  if (!text.includes(evidence.sha256Hex) && !text.includes(base64)) {
    fail('SnapshotMismatch', at, `no ${SNAPSHOT_EVIDENCE_TABLE} record of the SHA-256 ${evidence.sha256Hex} of ${evidence.name}`);
  }
}
