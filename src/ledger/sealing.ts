/**
 * Sealing a transaction into its ledger entry: everything between a committed write set and the
 * bytes consensus replicates: AES-GCM of the private write set, the commit evidence and its
 * digest, the entry frame, and the entry's Merkle leaf (docs/architecture.md, decision 8).
 *
 * This is the costliest part of the primary's write path that needs no node state beyond the
 * ledger secret, so it can run beside the request thread: an EntrySealer takes jobs in seqno
 * order and hands back sealed entries in the same order. InlineEntrySealer seals at once on the
 * calling thread (in-process tests, and every entry that must be sealed in line);
 * src/platform/worker-sealer.ts seals batches on a worker thread.
 */
import { assert } from '../base/assert.js';
import { sha256 } from '../crypto/index.js';
import { LedgerEncryptor, AES_GCM_TAG_BYTES } from '../kv/index.js';
import { createCommitEvidenceFormatter, leafDigest } from '../merkle/index.js';
import { ENTRY_OVERHEAD_BYTES, encodeEntry, entryWriteSets, writeSetDigest, type DecodedEntry } from './entry.js';

/** A committed transaction to seal: its id, entry flags, claims digest and clear write sets. */
export interface SealJob {
  readonly view: number;
  readonly seqno: number;
  readonly flags: number;
  readonly claimsDigest: Uint8Array;
  readonly publicBytes: Uint8Array;
  /** The private write set in clear (empty when the transaction wrote no private map). */
  readonly privatePlain: Uint8Array;
}

export interface SealedEntry {
  /** The entry frame as the ledger stores it and consensus replicates it. */
  readonly bytes: Uint8Array;
  /** The entry's Merkle leaf. */
  readonly leaf: Uint8Array;
}

/** The Merkle leaf of a ledger entry (docs/architecture.md, decision 8). */
export function entryLeaf(entry: Pick<DecodedEntry, 'publicBytes' | 'privateBytes' | 'commitEvidenceDigest' | 'claimsDigest'>): Uint8Array {
  return leafDigest(writeSetDigest(entry), entry.commitEvidenceDigest, entry.claimsDigest);
}

/** Size of the frame a job seals into, known before sealing (chunk ends are decided from it). */
export function sealedFrameBytes(publicBytes: number, privatePlainBytes: number): number {
  return ENTRY_OVERHEAD_BYTES + publicBytes + (privatePlainBytes > 0 ? privatePlainBytes + AES_GCM_TAG_BYTES : 0);
}

/** Seals jobs under one ledger secret. Deterministic: any thread holding the secret seals alike. */
export class EntrySeal {
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

  /** Seals a job; `into` receives the frame when given (exactly sealedFrameBytes of the job). */
  seal(job: SealJob, into?: Uint8Array): SealedEntry {
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
 * Seals jobs in submission order and reports each sealed entry, in the same order, to the
 * completion callback given at creation. `J` lets the caller carry its own fields on a job.
 */
export interface EntrySealer<J extends SealJob = SealJob> {
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

export type SealCompletion<J extends SealJob = SealJob> = (job: J, sealed: SealedEntry) => void;

/** Creates the sealer of a ledger secret; the node calls it once the secret is known. */
export type EntrySealerFactory = <J extends SealJob>(ledgerSecret: Uint8Array, complete: SealCompletion<J>) => EntrySealer<J>;

/** Seals on the calling thread: each completion runs inside submit. */
export class InlineEntrySealer<J extends SealJob> implements EntrySealer<J> {
  readonly #seal: EntrySeal;
  #closed = false;

  constructor(
    ledgerSecret: Uint8Array,
    private readonly complete: SealCompletion<J>,
  ) {
    this.#seal = new EntrySeal(ledgerSecret);
  }

  get pending(): number {
    return 0;
  }

  get pendingBytes(): number {
    return 0;
  }

  submit(job: J): void {
    assert(!this.#closed, 'the sealer is open');
    this.complete(job, this.#seal.seal(job));
  }

  drain(): void {}

  close(): void {
    this.#closed = true;
  }
}

export const inlineEntrySealer: EntrySealerFactory = (secret, complete) => new InlineEntrySealer(secret, complete);
