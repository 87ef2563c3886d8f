/**
 * Proofs and history of committed transactions: JSON receipts (GET /node/receipt), COSE receipts
 * (GET /node/receipt/cose) and historical writes read back from the ledger files. Each answers
 * 'pending' until the node knows the transaction committed, and TransactionInvalid if it never
 * will be; a receipt of a seqno beyond every one this node knows of is TransactionUnknown (it
 * cannot commit soon: asking again every second would go on forever).
 *
 * A receipt of a transaction whose Merkle block the tree has compacted needs the block's leaves
 * re-read from the ledger files: the receipt waits for them asynchronously (RebuiltBlocks: cached,
 * read off the request thread, a bounded number at once), then builds its proof at once.
 *
 * A JSON receipt whose root was signed before a recovery (by a node the previous service
 * identity endorsed) carries the service endorsements that lead to the current identity
 * (service-endorsements.ts); a COSE receipt needs none: the current service key signs it.
 */
import { assert } from '../../base/assert.js';
import { fromHex } from '../../base/bytes.js';
import { formatTxId, type TxId } from '../../base/ids.js';
import { BLOCK_LEAF_COUNT, buildReceipt, buildSignatureReceipt, coseReceiptWithProof, type Receipt, type SignatureReceipt } from '../../merkle/index.js';
import { decodeWriteSetParts, type WriteSet } from '../../kv/index.js';
import { type DecodedEntry, EntryFlags, hasFlag, writeSetDigest } from '../../ledger/index.js';
import { nodeError, transactionInvalid } from '../errors.js';
import type { LedgerSecrets } from '../identity/ledger-secrets.js';
import type { ServiceIdentity } from '../identity/service-identity.js';
import type { Replica } from '../replica.js';
import { signatureRecordOf } from '../tables.js';
import type { TxStatus } from '../tx-status.js';
import type { RebuiltBlocks } from './rebuilt-blocks.js';

export interface ReceiptsHost {
  readonly replica: Replica;
  readonly service: ServiceIdentity;
  readonly secrets: LedgerSecrets;
  readonly rebuiltBlocks: RebuiltBlocks;
  /** The service endorsements for a root signed at `signatureSeqno` (ServiceEndorsements.forSignature). */
  serviceEndorsementsFor(signatureSeqno: number): readonly string[];
  statusOf(txId: TxId): TxStatus;
  viewOf(seqno: number): number;
}

/** The leaves of one compacted Merkle block, re-read from the ledger files. */
interface BlockLeaves {
  readonly blockIndex: number;
  readonly leaves: readonly Uint8Array[];
}

export class Receipts {
  constructor(private readonly host: ReceiptsHost) {}

  /**
   * A receipt for a committed transaction: the latest committed signature (commit always lands on
   * one, and any later signed root covers the transaction), with the inclusion proof of its leaf in
   * that root, from memory or rebuilt from the ledger files when the tree has compacted that part.
   * A signature transaction gets its signature receipt (the root it signed, no proof) as soon as it
   * is committed: no later root may ever come to cover it. Either carries the service endorsements
   * for the seqno of the signature whose node signed it (not of the transaction proven: a
   * transaction from before a recovery is proven under the latest root, signed now).
   */
  async receipt(txId: TxId): Promise<Receipt | SignatureReceipt | 'pending'> {
    const entry = this.committedEntry(txId, true);
    if (entry === 'pending') return entry;
    if (hasFlag(entry.flags, EntryFlags.SIGNATURE)) {
      const record = signatureRecordOf(entry);
      return buildSignatureReceipt({
        signature: Buffer.from(record.sig, 'base64'),
        nodeCertificatePem: record.cert,
        nodeId: record.node,
        signedRoot: fromHex(record.root),
        serviceEndorsements: this.host.serviceEndorsementsFor(entry.seqno),
      });
    }
    // No await unless a block must be re-read: the proof is then built in the same turn as the check.
    const reread = this.blockLeavesFor(entry.seqno);
    const parts = this.receiptParts(entry, reread instanceof Promise ? await reread : reread);
    return buildReceipt({
      leafComponents: parts.leafComponents,
      proof: parts.proof,
      signature: Buffer.from(parts.record.sig, 'base64'),
      nodeCertificatePem: parts.record.cert,
      nodeId: parts.record.node,
      signedRoot: fromHex(parts.record.root),
      serviceEndorsements: this.host.serviceEndorsementsFor(parts.signatureSeqno),
    });
  }

  /**
   * The COSE receipt of a committed transaction: the service key signs the same committed root
   * once (cached per signature), and each receipt adds its own proof. A signature transaction has
   * no COSE receipt (it signs roots; its JSON receipt says which).
   */
  async coseReceipt(txId: TxId): Promise<Uint8Array | 'pending'> {
    const entry = this.committedEntry(txId, true);
    if (entry === 'pending') return entry;
    if (hasFlag(entry.flags, EntryFlags.SIGNATURE)) {
      throw nodeError(
        'ReceiptUnavailable',
        `transaction ${formatTxId(txId)} is a signature transaction: a COSE receipt proves a transaction under a signed root, and ` +
          `this transaction is the signature of one. GET /node/receipt?transaction_id=${formatTxId(txId)} answers its signature receipt`,
      );
    }
    if (!this.host.service.holdsKey) throw nodeError('ServiceKeyUnavailable', 'this node does not hold the service key yet; ask a trusted node');
    // No await unless a block must be re-read: the proof is then built in the same turn as the check.
    const reread = this.blockLeavesFor(entry.seqno);
    const parts = this.receiptParts(entry, reread instanceof Promise ? await reread : reread);
    const signatureTxId = formatTxId({ view: this.host.viewOf(parts.signatureSeqno), seqno: parts.signatureSeqno });
    const signedRoot = this.host.service.signedRoot(parts.signatureSeqno, fromHex(parts.record.root), signatureTxId);
    return coseReceiptWithProof(signedRoot, parts.leafComponents, parts.proof);
  }

  /**
   * The writes of a committed transaction, read back from this node's ledger files (historical
   * queries): both domains, the private one decrypted. HistoricalDataUnavailable when the files do
   * not hold it (the node started from a later snapshot).
   */
  historicalWrites(txId: TxId): WriteSet | 'pending' {
    const status = this.host.statusOf(txId);
    if (status === 'Invalid') throw transactionInvalid(formatTxId(txId));
    if (status !== 'Committed') return 'pending';
    if (!this.host.secrets.held) {
      throw nodeError('LedgerSecretUnavailable', 'this node does not hold the ledger secret yet: private writes cannot be read');
    }
    const entry = this.host.replica.readEntryFrame(txId.seqno);
    assert(entry.view === txId.view, () => `committed transaction ${formatTxId(txId)} is the ledger entry at its seqno (view ${entry.view})`);
    return decodeWriteSetParts(entry.publicBytes, this.host.replica.privatePlainOf(entry));
  }

  /**
   * The writes of the committed entry at `seqno`, whatever its view (historical endpoints and
   * application indexes, which find seqnos in the index): as historicalWrites, for a seqno at or
   * below commit.
   */
  historicalEntryAt(seqno: number): { view: number; writes: WriteSet } {
    const commit = this.host.replica.commitSeqno;
    if (!Number.isSafeInteger(seqno) || seqno < 1 || seqno > commit) throw nodeError('HistoricalDataUnavailable', `seqno ${seqno} is not committed (commit is at ${commit})`);
    if (!this.host.secrets.held) {
      throw nodeError('LedgerSecretUnavailable', 'this node does not hold the ledger secret yet: private writes cannot be read');
    }
    const entry = this.host.replica.readEntryFrame(seqno);
    return { view: entry.view, writes: decodeWriteSetParts(entry.publicBytes, this.host.replica.privatePlainOf(entry)) };
  }

  /**
   * The ledger entry of a committed transaction; 'pending' until it commits, TransactionInvalid
   * if it never will; with `unknownBeyondLast`, TransactionUnknown for a seqno beyond the last
   * this node holds (a transaction can be committed soon only once some node replicated it here).
   */
  private committedEntry(txId: TxId, unknownBeyondLast: boolean): DecodedEntry | 'pending' {
    const status = this.host.statusOf(txId);
    if (status === 'Invalid') throw transactionInvalid(formatTxId(txId));
    const lastSeqno = this.host.replica.store.version;
    if (unknownBeyondLast && status === 'Unknown' && txId.seqno > lastSeqno) {
      throw nodeError(
        'TransactionUnknown',
        `transaction ${formatTxId(txId)} is Unknown: its seqno is beyond the last one this node holds (${lastSeqno}), so it is not committed ` +
          'and cannot be soon; ask again once GET /app/tx says it is Pending or Committed',
      );
    }
    if (status !== 'Committed') return 'pending';
    return this.host.replica.readEntryFrame(txId.seqno);
  }

  /**
   * The leaves of the compacted Merkle block holding `seqno`, once re-read (at once when cached),
   * or undefined when the tree still holds the seqno's leaf. The proof is built after the wait, with
   * the commit of that time.
   */
  private blockLeavesFor(seqno: number): BlockLeaves | Promise<BlockLeaves> | undefined {
    if (seqno - 1 >= this.host.replica.tree.compactionPoint) return undefined;
    const blockIndex = Math.floor((seqno - 1) / BLOCK_LEAF_COUNT);
    const leaves = this.host.rebuiltBlocks.leaves(blockIndex);
    return leaves instanceof Promise ? leaves.then((l) => ({ blockIndex, leaves: l })) : { blockIndex, leaves };
  }

  /** The latest committed signature and the inclusion proof of a committed non-signature entry under its root. */
  private receiptParts(entry: DecodedEntry, block: BlockLeaves | undefined) {
    const replica = this.host.replica;
    // Commit lands on signatures only, so a committed entry that is not one precedes the latest.
    const signatureSeqno = replica.commitSeqno;
    assert(entry.seqno < signatureSeqno, () => `committed entry ${entry.seqno} precedes commit ${signatureSeqno}, a signature`);
    const signature = replica.readEntryFrame(signatureSeqno);
    assert(hasFlag(signature.flags, EntryFlags.SIGNATURE), `commit ${signatureSeqno} lands on a signature`);
    const record = signatureRecordOf(signature);
    const proof = replica.tree.inclusionProof(entry.seqno - 1, signatureSeqno - 1, (blockIndex) => {
      // The tree compacts only forwards, so a leaf compacted now was compacted before the wait.
      assert(block !== undefined && block.blockIndex === blockIndex, () => `the leaves of compacted block ${blockIndex} were re-read first`);
      return block.leaves;
    });
    const leafComponents = {
      writeSetDigest: writeSetDigest(entry),
      commitEvidence: replica.commitEvidence(entry.view, entry.seqno),
      claimsDigest: entry.claimsDigest,
    };
    return { signatureSeqno, record, proof, leafComponents };
  }
}
