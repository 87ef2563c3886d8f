/**
 * Snapshots (spec "Snapshot", ledger invariants 3 and 4, "Join from a snapshot"; layout in
 * docs/snapshots.md).
 *
 * Only the primary decides to snapshot, and the decision travels in the replicated signature
 * entry (a write of its own seqno to Tables.snapshotMarker; that signature also ends its chunk).
 * Every node, on applying such a signature, writes the same bytes: the store at that seqno, the
 * canonical Merkle tree of that many leaves, the view history and configuration at that seqno,
 * over later turns (snapshot-generation.ts: packed in slices, written by the snapshot writer).
 * Once its file is written the primary records its SHA-256 in a transaction of its own, at any
 * later seqno (SNAPSHOT_EVIDENCE flag, the digest also as its claims digest, so a receipt for it
 * binds the digest); every node checks its own digest against it. At the first signature after the evidence every node builds the
 * receipt; once that signature commits, the receipt is appended and the file becomes `.committed`.
 */
import { assert } from '../base/assert.js';
import { bytesEqual, fromBase64, fromHex, toHex } from '../base/bytes.js';
import { CovenantError, errorMessage } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import type { Clock, TimerHandle } from '../base/clock.js';
import type { NodeConfig } from '../config/index.js';
import { buildReceipt, HistoryTree, type Receipt } from '../merkle/index.js';
import { readSnapshotHeader, type LedgerEncryptor, type Store } from '../kv/index.js';
import {
  type DecodedEntry,
  type Disk,
  EntryFlags,
  encodeSnapshotReceipt,
  formatSnapshotFileName,
  hasFlag,
  parseSnapshotFile,
  parseSnapshotFileName,
  SNAPSHOT_WRITING_SUFFIX,
  writeSetDigest,
  type SnapshotFileParts,
  type SnapshotMeta,
  type SnapshotWriter,
  type SnapshotWriteResult,
} from '../ledger/index.js';
import type { Configuration } from '../consensus/index.js';
import { retryLater } from './errors.js';
import { replaceSnapshotFile, verifySnapshotReceipt } from './snapshot-trust.js';
import { snapshotsUnevidencedMax } from './limits.js';
import { SnapshotCadence } from './snapshot-cadence.js';
import { canonicalTreeOf, SnapshotGenerator, type GenerationHandle, type SnapshotGenerationMetrics } from './snapshot-generation.js';
import { isUncommittedSnapshotName, uncommittedSnapshotName } from './snapshot-names.js';
import { SINGLETON_KEY, TableDefs, signatureRecordOf, singletonValueIn, type SignatureRecord, type SnapshotEvidenceRecord } from './tables.js';

export type { SnapshotEvidenceRecord } from './tables.js';


/** What the snapshot manager needs from its node. */
export interface SnapshotHost {
  readonly config: NodeConfig;
  readonly disk: Disk;
  readonly logger: Logger;
  readonly clock: Clock;
  store(): Store;
  tree(): HistoryTree;
  /** The encryptor of the secret that applies at `seqno` (a snapshot at seqno is framed under it). */
  encryptor(seqno: number): LedgerEncryptor;
  serviceCertificatePem(): string;
  genesisConfiguration(): Configuration;
  /** viewHistory of the consensus core (viewHistory[v - 1] = first seqno of view v). */
  viewHistory(): readonly number[];
  /** `ce:<view>.<seqno>:<hex>` of a transaction. */
  commitEvidence(view: number, seqno: number): string;
  isPrimary(): boolean;
  /** Whether the store holds the whole private domain (not during a recovery's public phase). */
  holdsPrivateDomain(): boolean;
  /** Asks the primary for a signature transaction soon (outside the current call). */
  requestSignature(): void;
  /** Bytes of the ledger's chunks after `seqno` (snapshots.min_ledger_fraction: snapshot-cadence.ts). */
  ledgerBytesAfter(seqno: number): number;
  /** Primary: records the evidence of the snapshots whose files are written (SnapshotManager.dueEvidence), outside the current call. */
  requestEvidence(): void;
  /** Encodes, writes and syncs snapshot files (a worker thread in a node process). */
  readonly snapshotWriter: SnapshotWriter;
  readonly snapshotWriterKind: 'worker' | 'inline';
}

/** A verified snapshot a node can start from. */
export interface StartupSnapshot {
  readonly name: string;
  readonly seqno: number;
  readonly evidenceSeqno: number;
  readonly parts: SnapshotFileParts;
  /** The endorsements of its receipt that chain it to the certificate it was verified against (snapshot-trust.ts). */
  readonly serviceEndorsements: readonly string[];
  /** Where the node found it (set by findStartupSnapshot and adoptFetchedSnapshot). */
  readonly path?: string;
  /**
   * Set once the node started from it and dropped its store's bytes (parts.kv is then empty):
   * reads them again from `path` (startup-snapshot-store.ts, storeBytesOf).
   */
  readonly rereadStore?: () => Promise<Uint8Array | undefined>;
}

interface Pending {
  readonly seqno: number;
  /** Path of the uncommitted file (uncommittedSnapshotName). */
  readonly path: string;
  /** The packing under way, until the file is handed to the writer. */
  readonly generation: GenerationHandle;
  /** SHA-256 of the file, once written. */
  digest: Uint8Array | undefined;
  /** Primary: the seqno of the evidence transaction it proposed, until that entry is applied or rolled back. */
  evidenceProposedSeqno: number | undefined;
  /** The evidence entry, once applied (and, once the file is written, checked against its digest). */
  evidence: { seqno: number; view: number; writeSetDigest: Uint8Array; claimsDigest: Uint8Array; recordedSha256: string } | undefined;
  receipt: { receipt: Receipt; signatureSeqno: number } | undefined;
}

/** A fetched snapshot is written under its name with this suffix, then renamed. */
const DOWNLOAD_SUFFIX = '.download';

/** Names of committed snapshots in `directories`, newest (highest seqno, then evidence) first. */
export function listCommittedSnapshots(disk: Disk, directories: readonly string[]): { name: string; directory: string; seqno: number; evidenceSeqno: number }[] {
  const out: { name: string; directory: string; seqno: number; evidenceSeqno: number }[] = [];
  for (const directory of directories) {
    if (!disk.exists(directory)) continue;
    for (const name of disk.listDirectory(directory)) {
      const parsed = parseSnapshotFileName(name);
      if (parsed?.committed) out.push({ name, directory, seqno: parsed.seqno, evidenceSeqno: parsed.evidenceSeqno });
    }
  }
  return out.sort((a, b) => b.seqno - a.seqno || b.evidenceSeqno - a.evidenceSeqno);
}

/**
 * Checks a committed snapshot file on its own against the service certificate: its layout, that
 * the store and tree it holds are at the seqno of its name, and that its receipt verifies and
 * proves the evidence transaction of its name recorded exactly this file's digest.
 */
export function verifySnapshotFile(name: string, bytes: Uint8Array, serviceCertificatePem: string, evidenceDigest?: Uint8Array): StartupSnapshot {
  const parsedName = parseSnapshotFileName(name);
  const invalid = (why: string) => new CovenantError('InvalidSnapshot', `snapshot ${name}: ${why}`, 400);
  if (!parsedName?.committed) throw invalid('not named snapshot_<seqno>_<evidence_seqno>.committed');
  let parts: SnapshotFileParts;
  try {
    parts = parseSnapshotFile(bytes, evidenceDigest);
    const header = readSnapshotHeader(parts.kv);
    if (header.seqno !== parsedName.seqno) throw invalid(`holds the store at seqno ${header.seqno}`);
  } catch (e) {
    if (e instanceof CovenantError && e.code === 'InvalidSnapshot') throw e;
    throw invalid(errorMessage(e));
  }
  const { meta, receipt } = parts;
  if (meta.seqno !== parsedName.seqno || meta.tree.size !== parsedName.seqno) throw invalid('metadata is not at the seqno of the name');
  if (receipt === undefined) throw invalid('has no receipt (its evidence was never committed)');
  let verified;
  let serviceEndorsements: readonly string[];
  try {
    ({ verified, serviceEndorsements } = verifySnapshotReceipt(receipt as Receipt, serviceCertificatePem));
  } catch (e) {
    throw invalid(errorMessage(e));
  }
  if (verified.seqno !== parsedName.evidenceSeqno) throw invalid(`receipt is for seqno ${verified.seqno}, not the evidence at ${parsedName.evidenceSeqno}`);
  if ((receipt as Receipt).leaf_components.claims_digest !== toHex(parts.digest)) throw invalid('the evidence records another digest than this file has');
  return { name, seqno: parsedName.seqno, evidenceSeqno: parsedName.evidenceSeqno, parts, serviceEndorsements };
}

/** Rebuilds the Merkle tree a snapshot carries, checked against the signature in its store. */
export function treeOfSnapshot(meta: SnapshotMeta, store: Store): HistoryTree {
  const tree = HistoryTree.fromState({
    size: meta.tree.size,
    compactionPoint: meta.tree.compaction_point,
    blockHashes: fromBase64(meta.tree.block_hashes),
    leaves: fromBase64(meta.tree.leaves),
  });
  const signature = store.current().table(TableDefs.signatures).get(SINGLETON_KEY);
  if (signature === undefined || signature.seqno !== meta.seqno || signature.root !== toHex(tree.root(meta.seqno - 1))) {
    throw new CovenantError('InvalidSnapshot', `snapshot at ${meta.seqno}: its Merkle tree does not match the signature it was taken at`, 400);
  }
  return tree;
}

/**
 * What a snapshot request did: `requested` asks for a snapshot at the next signature; `coalesced`
 * finds one already asked for and not yet written, which serves this request too.
 */
export type SnapshotRequestOutcome = 'requested' | 'coalesced';

export class SnapshotManager {
  readonly #host: SnapshotHost;
  readonly #pending: Pending[] = [];
  /** A snapshot was asked for and no signature has been made a snapshot point for it yet. */
  #requested = false;
  /** The snapshot point a request was given, until its snapshot is written (or rolled back). */
  #requestedPointSeqno: number | undefined;
  /** When (monotonic) POST /node/snapshot:create last asked for a snapshot (snapshots.min_interval). */
  #lastOperatorRequestMs: number | undefined;
  #intervalElapsed = false;
  #timer: TimerHandle | undefined;
  #stopped = false;
  readonly #generator: SnapshotGenerator;
  readonly #cadence: SnapshotCadence;
  /** The highest commit seqno seen (a file written after its receipt committed completes at once). */
  #commitSeqno = 0;

  constructor(host: SnapshotHost) {
    this.#host = host;
    this.#generator = new SnapshotGenerator(host.clock, host.snapshotWriter, host.snapshotWriterKind);
    this.#cadence = new SnapshotCadence(host.config.snapshots.min_ledger_fraction, Math.max(1, Math.floor(host.config.snapshots.tx_count / 10)));
  }

  /** GET /node/metrics: what this node's snapshot generation did. */
  metrics(): SnapshotGenerationMetrics {
    return this.#generator.metrics();
  }

  get #directory(): string {
    return this.#host.config.snapshots.directory;
  }

  /**
   * Once the node has its state (after any replay): removes what an earlier run left half-done
   * in snapshots.directory, then starts the time_interval timer (when time-based snapshots are on).
   */
  start(): void {
    this.#removeLeftovers();
    const newest = listCommittedSnapshots(this.#host.disk, [this.#directory])[0];
    if (newest !== undefined) this.#cadence.written(newest.seqno, this.#host.disk.sizeBytes(this.#host.disk.join(newest.directory, newest.name)));
    const intervalMs = this.#host.config.snapshots.time_interval;
    if (intervalMs <= 0 || this.#timer !== undefined) return;
    const fire = () => {
      if (this.#stopped) return;
      this.#intervalElapsed = true;
      const store = this.#host.store();
      // A signature now would be seqno version + 1: due if that is more than min_tx_count past the last.
      if (this.#host.isPrimary() && store.version + 1 - this.lastSnapshotSeqno() > this.#host.config.snapshots.min_tx_count) this.#host.requestSignature();
      this.#timer = this.#host.clock.setTimer(intervalMs, fire);
    };
    this.#timer = this.#host.clock.setTimer(intervalMs, fire);
  }

  /**
   * Uncommitted snapshot files and interrupted downloads an earlier run left: a snapshot becomes
   * `.committed` only in the run that wrote it (replaying the ledger at restart makes none), so
   * these can never be completed, and would otherwise stay forever.
   */
  #removeLeftovers(): void {
    const disk = this.#host.disk;
    const directory = this.#directory;
    if (!disk.exists(directory)) return;
    const ours = new Set(this.#pending.map((p) => p.path));
    for (const name of disk.listDirectory(directory)) {
      const writing = name.endsWith(SNAPSHOT_WRITING_SUFFIX) ? name.slice(0, -SNAPSHOT_WRITING_SUFFIX.length) : undefined;
      if (writing !== undefined && isUncommittedSnapshotName(writing)) {
        // A file this run is writing is named after the snapshot's path, with the suffix.
        this.#removeLeftover(disk.join(directory, name), ours.has(disk.join(directory, writing)), 'a snapshot being written');
        continue;
      }
      const download = name.endsWith(DOWNLOAD_SUFFIX);
      const parsed = parseSnapshotFileName(download ? name.slice(0, -DOWNLOAD_SUFFIX.length) : name);
      if ((parsed === undefined && !isUncommittedSnapshotName(name)) || (parsed?.committed === true && !download)) continue;
      const path = disk.join(directory, name);
      this.#removeLeftover(path, ours.has(path), download ? 'a snapshot download' : 'an uncommitted snapshot');
    }
  }

  #removeLeftover(path: string, ours: boolean, what: string): void {
    if (ours) return;
    try {
      this.#host.disk.remove(path);
      this.#host.logger.info(`removed ${path}: ${what} an earlier run of this node left unfinished`);
    } catch (e) {
      this.#host.logger.fail(`could not remove ${path}: ${errorMessage(e)}`);
    }
  }

  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
    for (const p of this.#pending) p.generation.cancel();
    this.#generator.close();
  }

  /**
   * trigger_snapshot (and POST /node/snapshot:create through requestByOperator): a snapshot at the
   * next signature. While one is asked for and not yet written, another request adds nothing: each
   * snapshot writes a whole state and ends a ledger chunk, so repeated requests must not multiply them.
   */
  request(): SnapshotRequestOutcome {
    if (this.#requestPending()) return 'coalesced';
    this.#requested = true;
    if (this.#host.isPrimary()) this.#host.requestSignature();
    return 'requested';
  }

  /**
   * POST /node/snapshot:create, which anyone reaching the interface may send: coalesced with a
   * pending request, and otherwise at most one per snapshots.min_interval; beyond, refused with
   * TooManySnapshotRequests (429, Retry-After). trigger_snapshot is a governance decision and is
   * only coalesced.
   */
  requestByOperator(): SnapshotRequestOutcome {
    if (this.#requestPending()) return 'coalesced';
    const now = this.#host.clock.monotonicMs();
    const intervalMs = this.#host.config.snapshots.min_interval;
    const last = this.#lastOperatorRequestMs;
    if (intervalMs > 0 && last !== undefined && now - last < intervalMs) {
      const retryAfterMs = intervalMs - (now - last);
      this.#host.logger.info(`snapshot:create refused: the last one was ${Math.round(now - last)}ms ago, snapshots.min_interval is ${intervalMs}ms`);
      throw retryLater(
        'TooManySnapshotRequests',
        `a snapshot was requested ${Math.round(now - last)}ms ago: at most one per snapshots.min_interval (${intervalMs}ms); retry later`,
        retryAfterMs,
      );
    }
    this.#lastOperatorRequestMs = now;
    return this.request();
  }

  #requestPending(): boolean {
    return this.#requested || this.#requestedPointSeqno !== undefined;
  }

  /** Seqno of the latest snapshot recorded in the replicated state (0 when none). */
  lastSnapshotSeqno(): number {
    const record = this.#host.store().current().table(TableDefs.snapshotEvidence).get(SINGLETON_KEY);
    return record?.seqno ?? 0;
  }

  /** Primary, before writing the signature at `seqno`: whether it is a snapshot point. */
  dueAt(seqno: number): boolean {
    // A recovering service's store lacks the private domain of the previous service's entries
    // until members recover its secrets: a snapshot of it would lose them.
    if (!this.#host.holdsPrivateDomain()) return false;
    // Snapshots are never taken faster than they are written: none while this node still writes
    // one or has not yet seen its evidence (a request waits for it).
    if (this.#pending.some((p) => p.evidence === undefined)) return false;
    const { tx_count, time_interval, min_tx_count } = this.#host.config.snapshots;
    const since = seqno - Math.max(this.lastSnapshotSeqno(), this.#pending.at(-1)?.seqno ?? 0);
    const automatic = since >= tx_count || (time_interval > 0 && this.#intervalElapsed && since > min_tx_count);
    const due = this.#requested || (automatic && this.#cadence.allows(seqno, seqno - since, (s) => this.#host.ledgerBytesAfter(s), (m) => this.#host.logger.info(m)));
    if (due) {
      if (this.#requested) this.#requestedPointSeqno = seqno;
      this.#requested = false;
      this.#intervalElapsed = false;
    }
    return due;
  }

  /** The marker a snapshot signature writes (in the signature transaction). */
  static markerValue(seqno: number): unknown {
    return seqno;
  }

  /**
   * Primary: the evidence of a snapshot whose file is written and whose evidence is neither
   * applied nor proposed (the snapshot the node wrote, or one an earlier primary's snapshot point
   * made every node write and whose evidence that primary did not record). The caller proposes it
   * and tells evidenceProposed.
   */
  dueEvidence(): { record: SnapshotEvidenceRecord; digest: Uint8Array } | undefined {
    const p = this.#pending.find((q) => q.digest !== undefined && q.evidence === undefined && q.evidenceProposedSeqno === undefined);
    return p ? { record: { seqno: p.seqno, sha256: toHex(p.digest!) }, digest: p.digest! } : undefined;
  }

  /** Primary: the evidence of the snapshot at `seqno` was proposed at `evidenceSeqno`. */
  evidenceProposed(seqno: number, evidenceSeqno: number): void {
    const p = this.#pending.find((q) => q.seqno === seqno);
    assert(p !== undefined && p.evidenceProposedSeqno === undefined, `evidence of snapshot ${seqno} proposed once, for a snapshot this node holds`);
    p.evidenceProposedSeqno = evidenceSeqno;
  }

  /**
   * Every entry, in order, once it is in the store and the Merkle tree (primary and backups alike).
   * Cheap for entries that matter to no snapshot.
   */
  /** Whether afterEntry has anything to do for an entry with these flags (saves decoding it). */
  wantsEntry(flags: number): boolean {
    return hasFlag(flags, EntryFlags.SIGNATURE) || this.#pending.length > 0;
  }

  afterEntry(entry: DecodedEntry): void {
    if (!this.wantsEntry(entry.flags)) return;
    const isSignature = hasFlag(entry.flags, EntryFlags.SIGNATURE);
    if (hasFlag(entry.flags, EntryFlags.SNAPSHOT_EVIDENCE)) this.#onEvidence(entry);
    if (!isSignature) return;
    let record: SignatureRecord | undefined;
    for (const p of this.#pending) {
      if (p.evidence === undefined || p.receipt !== undefined || p.evidence.seqno >= entry.seqno) continue;
      record ??= signatureRecordOf(entry);
      p.receipt = { receipt: this.#receiptFor(p, record, entry.seqno), signatureSeqno: entry.seqno };
    }
    if (singletonValueIn(entry.publicBytes, TableDefs.snapshotMarker) === entry.seqno) this.#generate(entry.seqno, entry.view);
  }

  /** The commit advanced: snapshots whose receipt's signature is committed become `.committed`. */
  onCommit(seqno: number): void {
    this.#commitSeqno = Math.max(this.#commitSeqno, seqno);
    for (let i = 0; i < this.#pending.length; ) {
      const p = this.#pending[i]!;
      if (p.digest !== undefined && p.receipt !== undefined && p.receipt.signatureSeqno <= seqno) {
        this.#pending.splice(i, 1);
        this.#finish(p);
      } else i++;
    }
  }

  /** Entries after `seqno` were dropped (view change): so are snapshots and evidence after it. */
  onRollback(seqno: number): void {
    // The snapshot point of a request was dropped: a later request must not be coalesced with it.
    if (this.#requestedPointSeqno !== undefined && this.#requestedPointSeqno > seqno) this.#requestedPointSeqno = undefined;
    for (let i = 0; i < this.#pending.length; ) {
      const p = this.#pending[i]!;
      if (p.seqno > seqno) {
        this.#pending.splice(i, 1);
        this.#discard(p, `rolled back to ${seqno}`);
        continue;
      }
      // The snapshot point stays: its evidence may be recorded again, by whichever node is primary.
      if (p.evidenceProposedSeqno !== undefined && p.evidenceProposedSeqno > seqno) p.evidenceProposedSeqno = undefined;
      if (p.evidence !== undefined && p.evidence.seqno > seqno) p.evidence = undefined;
      if (p.receipt !== undefined && p.receipt.signatureSeqno > seqno) p.receipt = undefined;
      i++;
    }
  }

  /**
   * Every node, at a snapshot point: the metadata now (small), the store's state packed in slices
   * over the next turns and written by the snapshot writer (docs/snapshots.md, "Generation").
   */
  #generate(seqno: number, view: number): void {
    if (this.#requestedPointSeqno !== undefined && this.#requestedPointSeqno <= seqno) this.#requestedPointSeqno = undefined;
    const unevidenced = this.#pending.filter((p) => p.evidence === undefined).length;
    if (unevidenced >= snapshotsUnevidencedMax) {
      this.#host.logger.fail(`snapshot at ${seqno} skipped: this node still writes or awaits the evidence of ${unevidenced} earlier ones`);
      return;
    }
    const store = this.#host.store();
    assert(store.version === seqno, `snapshot at ${seqno} taken with the store at ${store.version}`);
    const meta: SnapshotMeta = {
      seqno,
      view,
      view_history: this.#viewHistoryAt(seqno, view),
      configurations: [this.#configurationAt(store)],
      service_certificate: this.#host.serviceCertificatePem(),
      tree: canonicalTreeOf(this.#host.tree(), seqno),
    };
    const disk = this.#host.disk;
    disk.ensureDirectory(this.#directory);
    const path = disk.join(this.#directory, uncommittedSnapshotName(seqno, view));
    const request = { seqno, packer: store.snapshotPacker(view, seqno), secret: this.#host.encryptor(seqno).secrets.keysFor(seqno).secret, meta, path };
    // The generator answers in a later turn, never from start() itself: p exists by then.
    // eslint-disable-next-line prefer-const
    let p: Pending;
    const generation = this.#generator.start(request, (outcome) => this.#written(p, outcome));
    p = { seqno, path, generation, digest: undefined, evidenceProposedSeqno: undefined, evidence: undefined, receipt: undefined };
    this.#pending.push(p);
  }

  /** The writer answered for `p`: its digest is known (or the file could not be written). */
  #written(p: Pending, outcome: SnapshotWriteResult | Error): void {
    if (this.#stopped) return;
    if (!this.#pending.includes(p)) {
      // Abandoned (rolled back) while it was being written.
      this.#removeFile(p.path);
      return;
    }
    if (outcome instanceof Error) {
      this.#host.logger.fail(`snapshot at ${p.seqno}: could not write ${p.path}: ${outcome.message}`);
      this.#pending.splice(this.#pending.indexOf(p), 1);
      this.#removeFile(p.path);
      return;
    }
    p.digest = outcome.digest;
    this.#cadence.written(p.seqno, outcome.sizeBytes);
    const last = this.#generator.metrics().last;
    this.#host.logger.info(
      `snapshot ${p.path}: ${outcome.sizeBytes} bytes, sha-256 ${toHex(outcome.digest)}, in ${last?.generation_ms}ms (${last?.slices} slices, written by the ${this.#host.snapshotWriterKind} writer)`,
    );
    if (p.evidence !== undefined && !this.#evidenceMatches(p)) return;
    if (p.evidence === undefined && this.#host.isPrimary()) this.#host.requestEvidence();
    this.onCommit(this.#commitSeqno);
  }

  #viewHistoryAt(seqno: number, view: number): number[] {
    const history = this.#host.viewHistory().slice(0, view);
    assert(history.length === view && history.every((s) => s <= seqno), `view history reaches view ${view} at seqno ${seqno}`);
    return history;
  }

  #configurationAt(store: Store): Configuration {
    const recorded = store.current().table(TableDefs.configurations).get(SINGLETON_KEY);
    const configuration = recorded ?? this.#host.genesisConfiguration();
    return { seqno: configuration.seqno, nodes: [...configuration.nodes] };
  }

  /** An evidence entry: it records the digest of the snapshot at the seqno it names. */
  #onEvidence(entry: DecodedEntry): void {
    const record = singletonValueIn(entry.publicBytes, TableDefs.snapshotEvidence);
    const p = record === undefined ? undefined : this.#pending.find((q) => q.seqno === record.seqno && q.evidence === undefined);
    // A snapshot this node does not hold (it started after it, or skipped it): nothing to check.
    if (record === undefined || p === undefined) return;
    if (p.evidenceProposedSeqno === entry.seqno) p.evidenceProposedSeqno = undefined;
    p.evidence = { seqno: entry.seqno, view: entry.view, writeSetDigest: writeSetDigest(entry), claimsDigest: entry.claimsDigest, recordedSha256: record.sha256 };
    if (p.digest !== undefined) this.#evidenceMatches(p);
  }

  /** Whether the evidence records this node's digest; a snapshot whose does not is abandoned. */
  #evidenceMatches(p: Pending): boolean {
    const evidence = p.evidence!;
    const digest = p.digest!;
    if (bytesEqual(evidence.claimsDigest, digest) && evidence.recordedSha256 === toHex(digest)) return true;
    this.#host.logger.fail(`snapshot at ${p.seqno}: evidence at ${evidence.seqno} records sha-256 ${evidence.recordedSha256}, this node's snapshot has ${toHex(digest)}`);
    this.#pending.splice(this.#pending.indexOf(p), 1);
    this.#discard(p, 'digest differs from the evidence');
    return false;
  }

  #receiptFor(p: Pending, record: SignatureRecord, signatureSeqno: number): Receipt {
    const evidence = p.evidence!;
    // The signature at signatureSeqno signs the root over the signatureSeqno - 1 entries before it.
    const proof = this.#host.tree().inclusionProof(evidence.seqno - 1, signatureSeqno - 1);
    return buildReceipt({
      leafComponents: {
        writeSetDigest: evidence.writeSetDigest,
        commitEvidence: this.#host.commitEvidence(evidence.view, evidence.seqno),
        claimsDigest: evidence.claimsDigest,
      },
      proof,
      signature: fromBase64(record.sig),
      nodeCertificatePem: record.cert,
      nodeId: record.node,
      signedRoot: fromHex(record.root),
    });
  }

  #finish(p: Pending): void {
    const disk = this.#host.disk;
    const committedPath = disk.join(this.#directory, formatSnapshotFileName({ seqno: p.seqno, evidenceSeqno: p.evidence!.seqno, committed: true }));
    try {
      const file = disk.openForAppend(p.path);
      try {
        file.append([encodeSnapshotReceipt(p.receipt!.receipt)]);
        file.sync();
      } finally {
        file.close();
      }
      disk.rename(p.path, committedPath);
      disk.syncDirectory(this.#directory);
      this.#host.logger.info(`snapshot at ${p.seqno} committed: ${committedPath}`);
    } catch (e) {
      this.#host.logger.fail(`snapshot at ${p.seqno}: could not complete ${p.path}: ${errorMessage(e)}`);
    }
  }

  #discard(p: Pending, why: string): void {
    this.#host.logger.info(`snapshot at ${p.seqno} abandoned: ${why}`);
    p.generation.cancel();
    // A file still with the writer is removed when the writer answers (#written).
    if (p.digest !== undefined) this.#removeFile(p.path);
  }

  #removeFile(path: string): void {
    try {
      if (this.#host.disk.exists(path)) this.#host.disk.remove(path);
    } catch (e) {
      this.#host.logger.fail(`could not remove ${path}: ${errorMessage(e)}`);
    }
  }

  // ---------------------------------------------------------------- starting from a snapshot

  /**
   * The newest valid committed snapshot in snapshots.directory and snapshots.read_only_directory
   * (spec "Join from a snapshot" 1): invalid ones in the writable directory are deleted and the
   * next is tried.
   */
  findStartupSnapshot(serviceCertificatePem: string, options: { readonly keepInvalid?: boolean } = {}): StartupSnapshot | undefined {
    const { directory, read_only_directory: readOnly } = this.#host.config.snapshots;
    const disk = this.#host.disk;
    for (const candidate of listCommittedSnapshots(disk, readOnly === undefined ? [directory] : [directory, readOnly])) {
      const path = disk.join(candidate.directory, candidate.name);
      try {
        const found = verifySnapshotFile(candidate.name, disk.readAll(path), serviceCertificatePem);
        this.#host.logger.info(`starting from snapshot ${path}`);
        return { ...found, path };
      } catch (e) {
        this.#host.logger.fail(`invalid snapshot ${path}: ${errorMessage(e)}`);
        if (candidate.directory === directory && options.keepInvalid !== true) disk.remove(path);
      }
    }
    return undefined;
  }

  /** Verifies a downloaded snapshot and keeps it in snapshots.directory. Throws InvalidSnapshot. */
  adoptFetchedSnapshot(name: string, bytes: Uint8Array, serviceCertificatePem: string): StartupSnapshot {
    const found = verifySnapshotFile(name, bytes, serviceCertificatePem);
    const disk = this.#host.disk;
    const path = disk.join(this.#directory, name);
    if (!disk.exists(path)) replaceSnapshotFile(disk, this.#directory, name, bytes, DOWNLOAD_SUFFIX);
    return { ...found, path };
  }
}
