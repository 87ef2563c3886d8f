/**
 * The primary's proposer: hands each transaction applied locally in the store to consensus,
 * framed into its ledger entry (encrypted, framed, hashed) by the framer, then proposed and added
 * to the Merkle tree, in seqno order. Ordinary transactions go through the framer's pipeline
 * (possibly on another thread); anything else first waits for the pipeline to empty and is framed
 * in line, so that signatures sign every earlier entry and reconfigurations take effect at once.
 * It also decides where ledger chunks end (the primary marks chunk ends in the entries, so that
 * committed chunks are byte-identical on every node) and keeps recent proposals for resending.
 */
import { assert } from '../../base/assert.js';
import { errorMessage } from '../../base/errors.js';
import type { TxId } from '../../base/ids.js';
import type { Logger } from '../../base/log.js';
import { encodeWriteSet, type WriteSet } from '../../kv/index.js';
import {
  type DecodedEntry,
  EntryFlags,
  type EntryFraming,
  type EntryFramer,
  type EntryFramerFactory,
  type FrameJob,
  type FramedEntry,
  decodeEntry,
  inlineEntryFramer,
  framedEntryBytes,
  shouldEndChunk,
} from '../../ledger/index.js';
import type { Configuration, Entry, EntryKind, Raft } from '../../consensus/index.js';
import { nodeError, notPrimary } from '../errors.js';
import type { LedgerSecrets } from '../identity/ledger-secrets.js';
import { recentProposalsBytesMax, sidecarBytesMax } from '../limits.js';
import { ProposalWindow } from '../proposal-window.js';
import type { Replica } from '../replica.js';
import { configurationOf } from '../tables.js';

/** A transaction on its way from the KV store to consensus through the framer. */
interface NodeFrameJob extends FrameJob {
  readonly kind: EntryKind;
  readonly configuration: Configuration | undefined;
  readonly retiredCommitted: string[] | undefined;
  /** Framing epoch at submission: jobs of an abandoned epoch complete into nothing. */
  readonly epoch: number;
}

/** What the proposer needs from the rest of the node. */
export interface ProposerHost {
  readonly logger: Logger;
  readonly replica: Replica;
  readonly secrets: LedgerSecrets;
  readonly chunkSizeBytes: number;
  readonly entryBytesMax: number;
  readonly createEntryFramer: EntryFramerFactory | undefined;
  /** The consensus core (the driver owns it). */
  raft(): Raft;
  isPrimary(): boolean;
  /** Consensus has work to do after a proposal: pump soon, outside the current call. */
  schedulePump(): void;
  /** The snapshot manager: whether it wants to see an entry with these flags, and the entry. */
  snapshotWantsEntry(flags: number): boolean;
  snapshotAfterEntry(entry: DecodedEntry): void;
}

const ZERO_DIGEST = new Uint8Array(32);

/** What a kept proposal counts against recentProposalsBytesMax: its frame and its sidecar. */
function proposalBytes(entry: Entry): number {
  return entry.bytes.byteLength + (entry.sidecar?.byteLength ?? 0);
}

export class Proposer {
  /** Frames the primary's ordinary transactions, possibly on another thread. */
  private framer: EntryFramer<NodeFrameJob> | undefined;
  /** The framing of the secret the framer frames under. */
  private framerFraming: EntryFraming | undefined;
  /** Bumped when the pipeline is abandoned: jobs of an earlier epoch complete into nothing. */
  private frameEpoch = 0;
  /** Jobs of the current epoch in the framer, their view, and the seqno of the oldest. */
  private frameInFlight = 0;
  private frameView = 0;
  private framePendingFromSeqno = 0;
  private chunkBytes = 0;
  private forceChunkEnd = false;
  private closed = false;
  /**
   * Entries this node proposed as primary and some peer has not acknowledged yet, newest last,
   * up to recentProposalsBytesMax: when consensus sends one to a peer after it was persisted (a
   * full pipeline, a peer that joined meanwhile), it asks for it again through the driver's
   * storage, and gets it from here with its sidecar (the private write set in clear, so that the
   * backup need not decrypt it) and without a read of the ledger. Pruned at each commit; cleared
   * when anything after the commit may be rewritten (a truncation, a rollback, a change of role).
   */
  private readonly recentProposals = new ProposalWindow<Entry>(recentProposalsBytesMax, proposalBytes);

  constructor(private readonly host: ProposerHost) {}

  /** (Re)creates the framer for the newest ledger secret. */
  useLatestSecret(): void {
    this.useSecret(this.host.secrets.latest);
  }

  private useSecret(link: { readonly secret: Uint8Array; readonly framing: EntryFraming }): void {
    this.framer?.close();
    const factory = this.host.createEntryFramer ?? inlineEntryFramer;
    this.framer = factory<NodeFrameJob>(link.secret, (job, framed) => this.onFramed(job, framed));
    this.framerFraming = link.framing;
  }

  /**
   * The framer frames under the secret that applies at `seqno`: a rekey installs a secret from the
   * seqno after its own transaction, and the first entry under it waits for the entries before.
   */
  private framingFor(seqno: number): EntryFraming {
    const link = this.host.secrets.linkFor(seqno);
    if (link.framing !== this.framerFraming) {
      if (this.framer !== undefined) this.drain();
      this.useSecret(link);
    }
    return link.framing;
  }

  private get activeFramer(): EntryFramer<NodeFrameJob> {
    assert(this.framer, 'the framer exists once a ledger secret is installed');
    return this.framer;
  }

  /** Waits for every job in the framer (each is proposed, or dropped if this node was deposed). */
  drain(): void {
    this.activeFramer.drain();
  }

  /** Write-set bytes waiting in the framer. */
  get pendingBytes(): number {
    return this.framer?.pendingBytes ?? 0;
  }

  /** Requests that the next signature ends the current ledger chunk (trigger_ledger_chunk, snapshots). */
  forceLedgerChunk(): void {
    this.forceChunkEnd = true;
  }

  /** A new primary decides chunk ends from now on: it counts from the chunk being written. */
  onBecomePrimary(): void {
    this.chunkBytes = this.host.replica.ledger.writeChunkSizeBytes;
  }

  /** Whether any proposal is kept (only on a primary, until every peer acknowledged it). */
  get keepsProposals(): boolean {
    return this.recentProposals.size > 0;
  }

  recent(seqno: number): Entry | undefined {
    return this.recentProposals.get(seqno);
  }

  forgetProposals(): void {
    this.recentProposals.clear();
  }

  /** Forgets the proposals every peer acknowledged (through `seqno`): none will be sent again. */
  dropAcknowledged(seqno: number): void {
    if (this.recentProposals.size > 0) this.recentProposals.dropThrough(seqno);
  }

  /**
   * Proposes the transaction the store applied at `seqno`. If consensus refuses it (no
   * longer primary, too many pending entries, too large), the store is rolled back so nothing
   * half-written remains.
   */
  propose(seqno: number, writeSet: WriteSet, flags: number, retiredCommitted: string[] | undefined, claimsDigest: Uint8Array = ZERO_DIGEST): TxId {
    const raft = this.host.raft();
    const { view, retiring } = raft.summary();
    const configuration = configurationOf(writeSet);
    if (configuration) assert(configuration.seqno === seqno, 'a configuration takes effect at its own entry');
    const kind: EntryKind = (flags & EntryFlags.SIGNATURE) !== 0 ? 'signature' : configuration ? 'reconfiguration' : 'normal';
    // A primary whose removal is in its log refuses all but signatures once the removal commits
    // (it hands over). A transaction waiting in the pipeline at that moment could not be proposed,
    // and its seqno would go to the next signature of the same view: from the removal on, every
    // transaction is framed in line, so a refusal reaches its own client.
    const pipelined = kind === 'normal' && retiredCommitted === undefined && !retiring;
    if (!pipelined) {
      this.drain();
      // Draining found that this node is no longer primary, and dropped this transaction too.
      if (this.host.replica.store.version < seqno) throw notPrimary('this node stopped being primary: the transaction was not recorded');
    }
    const framing = this.framingFor(seqno);
    const encoded = encodeWriteSet(writeSet);
    const entryBytes = framedEntryBytes(encoded.publicBytes.byteLength, encoded.privateBytes.byteLength);
    this.checkProposal(raft, kind, seqno, entryBytes);
    const entryFlags = this.chunkFlags(flags | (configuration ? EntryFlags.RECONFIGURATION : 0), kind, entryBytes);
    const job: NodeFrameJob = {
      view,
      seqno,
      flags: entryFlags,
      claimsDigest,
      publicBytes: encoded.publicBytes,
      privatePlain: encoded.privateBytes,
      kind,
      configuration,
      retiredCommitted,
      epoch: this.frameEpoch,
    };
    if (pipelined) {
      if (this.frameInFlight === 0) {
        this.framePendingFromSeqno = seqno;
        this.frameView = view;
      }
      this.frameInFlight++;
      this.activeFramer.submit(job);
    } else {
      this.proposeFramed(job, framing.frame(job));
    }
    return { view, seqno };
  }

  /** Refuses (rolling the store back) what consensus would refuse, and entries too large to replicate. */
  private checkProposal(raft: Raft, kind: EntryKind, seqno: number, entryBytes: number): void {
    try {
      raft.checkProposal(kind, this.frameInFlight);
      const max = this.host.entryBytesMax;
      if (entryBytes > max) {
        // Recorded, it could never be replicated (nor caught up from the ledger): commit would stop.
        throw nodeError(
          'TransactionTooLarge',
          `the transaction's ledger entry would take ${entryBytes} bytes, more than the ${max} a node can replicate: nothing was written`,
        );
      }
    } catch (e) {
      this.host.replica.dropUnproposed(seqno - 1);
      throw e;
    }
  }

  /** The entry's flags with CHUNK_END when this signature ends the chunk; counts the chunk's bytes (sizes are known before framing, so chunk ends are decided in seqno order). */
  private chunkFlags(flags: number, kind: EntryKind, entryBytes: number): number {
    let entryFlags = flags;
    if (kind === 'signature') {
      const end = shouldEndChunk({ chunkBytesSoFar: this.chunkBytes, chunkSizeBytes: this.host.chunkSizeBytes, isSignature: true, forced: this.forceChunkEnd });
      if (end) entryFlags |= EntryFlags.CHUNK_END;
    }
    if ((entryFlags & EntryFlags.CHUNK_END) !== 0) {
      this.chunkBytes = 0;
      this.forceChunkEnd = false;
    } else {
      this.chunkBytes += entryBytes;
    }
    return entryFlags;
  }

  /** A job out of the framer: proposed if this node still can, else the pipeline is abandoned. */
  private onFramed(job: NodeFrameJob, framed: FramedEntry): void {
    if (job.epoch !== this.frameEpoch || this.closed) return;
    // Jobs complete in seqno order: this one is the oldest in flight (framePendingFromSeqno).
    if (!this.canProposeInView(job.view)) {
      this.abandonFraming();
      return;
    }
    this.frameInFlight--;
    this.framePendingFromSeqno = job.seqno + 1;
    try {
      this.proposeFramed(job, framed);
    } catch (e) {
      // Still primary in the job's view, yet refused: the next entry would take this seqno in this
      // view, under a transaction id a client already holds. checkProposal at execution, and
      // framing in line while retiring, leave consensus no reason to refuse.
      assert(false, () => `consensus refused pipelined transaction ${job.view}.${job.seqno}: ${errorMessage(e)}`);
    }
  }

  private proposeFramed(job: NodeFrameJob, framed: FramedEntry): void {
    const { view, seqno, kind, configuration, retiredCommitted } = job;
    const plain = job.privatePlain;
    // One object of one shape per entry (absent fields undefined): spreading optional fields in
    // made three objects per entry and gave the kept one a shape built field by field.
    const entry: Entry = {
      view,
      seqno,
      kind,
      bytes: framed.bytes,
      configuration,
      retiredCommitted,
      // Backups apply the private write set from here instead of decrypting it (Replica.applyReplicated).
      sidecar: plain.byteLength > 0 && plain.byteLength <= sidecarBytesMax ? plain : undefined,
    };
    try {
      this.host.raft().propose(entry);
    } catch (e) {
      this.host.replica.dropUnproposed(seqno - 1);
      throw e;
    }
    this.recentProposals.push(entry);
    this.host.replica.tree.append(framed.leaf);
    if (this.host.snapshotWantsEntry(job.flags)) this.host.snapshotAfterEntry(decodeEntry(framed.bytes));
    this.host.schedulePump();
  }

  private canProposeInView(view: number): boolean {
    return this.host.isPrimary() && this.host.raft().summary().view === view;
  }

  /** Before consensus rewrites the store (a new primary's entries): drops what this node can no longer propose. */
  abandonIfDeposed(): void {
    if (this.frameInFlight > 0 && !this.canProposeInView(this.frameView)) this.abandonFraming();
  }

  /**
   * This node can no longer propose what is in the framer (it lost its primacy): those
   * transactions leave the store, and their completions are ignored. Their clients hold
   * transaction ids of a view that has ended; GET /app/tx reports them Invalid.
   */
  private abandonFraming(): void {
    const fromSeqno = this.framePendingFromSeqno;
    const store = this.host.replica.store;
    this.frameEpoch++;
    this.frameInFlight = 0;
    if (store.version >= fromSeqno) {
      this.host.logger.info(`dropping transactions ${fromSeqno}..${store.version} not yet in consensus: no longer primary in view ${this.frameView}`);
      this.host.replica.dropUnproposed(fromSeqno - 1);
    }
    this.framePendingFromSeqno = store.version + 1;
  }

  close(): void {
    this.closed = true;
    this.framer?.close();
  }
}

