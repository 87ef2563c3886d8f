/**
 * Framing a transaction into its ledger entry: everything between a committed write set and the
 * bytes consensus replicates: AES-GCM of the private write set, the commit evidence and its
 * digest, the entry frame, and the entry's Merkle leaf (docs/architecture.md, decision 8).
 *
 * This is the costliest part of the primary's write path that needs no node state beyond the
 * ledger secret, so it can run beside the request thread: an EntryFramer takes jobs in seqno
 * order and hands back framed entries in the same order. InlineEntryFramer frames at once on the
 * calling thread (in-process tests, and every entry that must be framed in line);
 * src/platform/worker-framer.ts frames batches on a worker thread.
 */
import { assert } from '../base/assert.js';
import { sha256 } from '../crypto/index.js';
import { LedgerEncryptor, AES_GCM_TAG_BYTES } from '../kv/index.js';
import { createCommitEvidenceFormatter, leafDigest } from '../merkle/index.js';
import { ENTRY_OVERHEAD_BYTES, encodeEntry, entryWriteSets, writeSetDigest, type DecodedEntry } from './entry.js';

/** A committed transaction to frame: its id, entry flags, claims digest and clear write sets. */
export interface FrameJob {
  readonly view: number;
  readonly seqno: number;
  readonly flags: number;
  readonly claimsDigest: Uint8Array;
  readonly publicBytes: Uint8Array;
  /** The private write set in clear (empty when the transaction wrote no private map). */
  readonly privatePlain: Uint8Array;
}

export interface FramedEntry {
  /** The entry frame as the ledger stores it and consensus replicates it. */
  readonly bytes: Uint8Array;
  /** The entry's Merkle leaf. */
  readonly leaf: Uint8Array;
}

/** The Merkle leaf of a ledger entry (docs/architecture.md, decision 8). */
export function entryLeaf(entry: Pick<DecodedEntry, 'publicBytes' | 'privateBytes' | 'commitEvidenceDigest' | 'claimsDigest'>): Uint8Array {
  return leafDigest(writeSetDigest(entry), entry.commitEvidenceDigest, entry.claimsDigest);
}

/** Size of the frame a job frames into, known before framing (chunk ends are decided from it). */
export function framedEntryBytes(publicBytes: number, privatePlainBytes: number): number {
  return ENTRY_OVERHEAD_BYTES + publicBytes + (privatePlainBytes > 0 ? privatePlainBytes + AES_GCM_TAG_BYTES : 0);
}

/** Frames jobs under one ledger secret. Deterministic: any thread holding the secret frames alike. */
export class EntryFraming {
  readonly #encryptor: LedgerEncryptor;
  readonly #commitEvidence: (view: number, seqno: number) => string;

  constructor(ledgerSecret: Uint8Array) {
    this.#encryptor = new LedgerEncryptor(ledgerSecret);
    this.#commitEvidence = createCommitEvidenceFormatter(ledgerSecret);
  }

  get encryptor(): LedgerEncryptor {
    return this.#encryptor;
  }

  /** The commit evidence of a transaction (its digest is in the entry, the text in receipts). */
  commitEvidence(view: number, seqno: number): string {
    return this.#commitEvidence(view, seqno);
  }

  /** Frames a job; `into` receives the frame when given (exactly framedEntryBytes of the job). */
  frame(job: FrameJob, into?: Uint8Array): FramedEntry {
    const { view, seqno, flags, claimsDigest, publicBytes, privatePlain } = job;
    const privateBytes = privatePlain.byteLength > 0 ? this.#encryptor.encryptPrivate(view, seqno, privatePlain) : new Uint8Array(0);
    const commitEvidenceDigest = sha256(this.commitEvidence(view, seqno));
    const bytes = encodeEntry({ view, seqno, flags, claimsDigest, commitEvidenceDigest, publicBytes, privateBytes }, into);
    // The frame holds the public and private write sets side by side: the leaf hashes them in place.
    // The four fields are named, not spread from entryWriteSets: V8 rebuilt a spread object's shape
    // at every entry, more than half of the leaf's cost (2.4 µs per leaf with it, 1.0 without).
    const { publicBytes: framePublic, privateBytes: framePrivate } = entryWriteSets(bytes);
    const leaf = entryLeaf({ publicBytes: framePublic, privateBytes: framePrivate, commitEvidenceDigest, claimsDigest });
    return { bytes, leaf };
  }
}

/**
 * Frames jobs in submission order and reports each framed entry, in the same order, to the
 * completion callback given at creation. `J` lets the caller carry its own fields on a job.
 */
export interface EntryFramer<J extends FrameJob = FrameJob> {
  /** Queues a job; its completion may run before submit returns (inline) or later. */
  submit(job: J): void;
  /** Jobs submitted and not yet completed. */
  readonly pending: number;
  /** The write-set bytes of those jobs. */
  readonly pendingBytes: number;
  /** Blocks until every submitted job has completed (their completions run inside drain). */
  drain(): void;
  /** Completes nothing more: jobs not yet completed are dropped. Used when the node stops. */
  close(): void;
}

export type FrameCompletion<J extends FrameJob = FrameJob> = (job: J, framed: FramedEntry) => void;

/** Creates the framer of a ledger secret; the node calls it once the secret is known. */
export type EntryFramerFactory = <J extends FrameJob>(ledgerSecret: Uint8Array, complete: FrameCompletion<J>) => EntryFramer<J>;

/** Frames on the calling thread: each completion runs inside submit. */
export class InlineEntryFramer<J extends FrameJob> implements EntryFramer<J> {
  readonly #framing: EntryFraming;
  #closed = false;

  constructor(
    ledgerSecret: Uint8Array,
    private readonly complete: FrameCompletion<J>,
  ) {
    this.#framing = new EntryFraming(ledgerSecret);
  }

  get pending(): number {
    return 0;
  }

  get pendingBytes(): number {
    return 0;
  }

  submit(job: J): void {
    assert(!this.#closed, 'the framer is open');
    this.complete(job, this.#framing.frame(job));
  }

  drain(): void {}

  close(): void {
    this.#closed = true;
  }
}

export const inlineEntryFramer: EntryFramerFactory = (secret, complete) => new InlineEntryFramer(secret, complete);
