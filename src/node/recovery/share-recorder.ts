/**
 * The recovery machine's share effects (recovery-machine.ts, docs/recovery.md "Shares"): a
 * member's share is checked against the store and recorded in one transaction, with no await
 * between; at the threshold the key is reassembled outside any transaction, and the transaction
 * that records the recovered chain checks the share and the key again.
 */
import type { TxId } from '../../base/ids.js';
import type { Logger } from '../../base/log.js';
import type { Tx } from '../../kv/index.js';
import {
  type ChainSecret,
  type CheckedSubmission,
  type RandomBytes,
  type RecordedSharing,
  type StoredSubmittedShare,
  chainFromWrappingKey,
  checkSubmission,
  combineKey,
  forget,
  notWaitingForShares,
  submittedShareStorageKey,
} from '../../recovery/index.js';
import { nodeError } from '../errors.js';
import type { ServiceIdentity } from '../identity/service-identity.js';
import { SINGLETON_KEY, TableDefs, type RecoveredSecretsRecord } from '../tables.js';

/** The answer to a submitted share. */
export interface ShareSubmission {
  readonly message: string;
  readonly submitted_count: number;
  readonly recovery_threshold: number;
  /** The transaction that kept the share (not part of the JSON answer: the x-covenant-transaction-id header). */
  readonly txId: TxId | undefined;
}

/** A share a member submitted, and where its answer goes. */
export interface SubmittedShare {
  readonly memberId: string;
  readonly share: Uint8Array;
  /** Runs in the transaction that keeps the outcome (the governance layer's replay check and history). */
  readonly record: (tx: Tx) => void;
  resolve(answer: ShareSubmission): void;
  reject(error: unknown): void;
}

export interface ShareRecorderHost {
  readonly logger: Logger;
  readonly service: ServiceIdentity;
  readonly randomBytes: RandomBytes;
  isPrimary(): boolean;
  executeWrite(fn: (tx: Tx) => void): { readonly txId?: TxId | undefined };
  recoveredRecordOf(chain: readonly ChainSecret[]): RecoveredSecretsRecord;
  /** Posts the end of a reassembly to the machine (`key-reassembled`). */
  keyReassembled(submission: SubmittedShare, key: Uint8Array | undefined, error: unknown): void;
}

export class ShareRecorder {
  constructor(private readonly host: ShareRecorderHost) {}

  /**
   * Checks the share and, below the threshold, records it with the request (answered at once);
   * at the threshold nothing is written yet: the key's reassembly starts, and its end is an event.
   */
  checkAndRecord(submission: SubmittedShare): void {
    let checked: CheckedSubmission | undefined;
    const { txId } = this.host.executeWrite((tx) => {
      checked = this.check(tx, submission);
      if (checked.status !== 'Accepted') return;
      submission.record(tx);
      tx.table(TableDefs.submittedShares).put(submission.memberId, Buffer.from(checked.storedShare).toString('base64'));
    });
    const outcome = checked!;
    if (outcome.status === 'AtThreshold') {
      this.reassemble(submission, outcome);
      return;
    }
    const more = outcome.threshold - outcome.submittedCount;
    this.host.logger.info(`recovery shares: ${outcome.submittedCount} of ${outcome.threshold} submitted`);
    submission.resolve({
      message: `${outcome.submittedCount} recovery share(s) of ${outcome.threshold} submitted; ${more} more needed`,
      submitted_count: outcome.submittedCount,
      recovery_threshold: outcome.threshold,
      txId,
    });
  }

  /**
   * The end of a reassembly: the share is checked again against the store (which may have changed
   * meanwhile), the key against the latest secret, and the recovered chain is recorded with the
   * request, the stored shares dropped, in one transaction.
   */
  recordChain(submission: SubmittedShare, key: Uint8Array | undefined, error: unknown): void {
    if (key === undefined) throw error;
    try {
      let recovered: { submittedCount: number; threshold: number } | undefined;
      const { txId } = this.host.executeWrite((tx) => {
        const checked = this.check(tx, submission);
        if (checked.status !== 'AtThreshold') throw notWaitingForShares('the shares stored changed while the key was reassembled: submit the share again');
        forget(checked.shares);
        const chain = chainFromWrappingKey(this.sharingOf(tx), key, checked.memberIds);
        submission.record(tx);
        tx.table(TableDefs.recoveredLedgerSecrets).put(SINGLETON_KEY, this.host.recoveredRecordOf(chain));
        clearSubmittedShares(tx);
        recovered = { submittedCount: checked.submittedCount, threshold: checked.threshold };
      });
      const { submittedCount, threshold } = recovered!;
      this.host.logger.info(`recovery shares: ${submittedCount} of ${threshold} submitted; the ledger secrets are recovered`);
      submission.resolve({ message: 'the ledger secrets are recovered; the service opens once the private ledger is read', submitted_count: submittedCount, recovery_threshold: threshold, txId });
    } finally {
      key.fill(0);
    }
  }

  private reassemble(submission: SubmittedShare, checked: Extract<CheckedSubmission, { status: 'AtThreshold' }>): void {
    void combineKey(checked.shares)
      .finally(() => forget(checked.shares))
      .then(
        (key) => this.host.keyReassembled(submission, key, undefined),
        (error: unknown) => this.host.keyReassembled(submission, undefined, error),
      );
  }

  /**
   * Every check of a submission, in the transaction that records it: this node is primary, the
   * service waits for shares and has not recovered its secrets yet, and the share passes the
   * collection's checks against the stored ones.
   */
  private check(tx: Tx, submission: SubmittedShare): CheckedSubmission {
    if (!this.host.isPrimary()) throw nodeError('NotPrimary', 'recovery shares are submitted to the primary');
    const info = tx.table(TableDefs.serviceInfo).get(SINGLETON_KEY);
    if (info?.status !== 'WaitingForRecoveryShares') {
      throw notWaitingForShares(`the service is ${info?.status ?? 'not created'}, not waiting for recovery shares (members vote transition_service_to_open first)`);
    }
    if (tx.table(TableDefs.recoveredLedgerSecrets).has(SINGLETON_KEY)) throw notWaitingForShares('the ledger secrets are already recovered: no more shares are needed');
    const stored: StoredSubmittedShare[] = [];
    tx.table(TableDefs.submittedShares).forEach((b64, memberId) => void stored.push({ memberId, storedShare: fromBase64(b64) }));
    const storageKey = submittedShareStorageKey(this.host.service.keyPem);
    return checkSubmission(this.sharingOf(tx), storageKey, stored, submission, this.host.randomBytes);
  }

  private sharingOf(tx: Tx): RecordedSharing {
    const record = tx.table(TableDefs.recoveryShares).get(SINGLETON_KEY);
    if (record === undefined) throw notWaitingForShares('the recovered ledger records no recovery shares: it cannot be recovered with member shares');
    const previousSecretRecords: Uint8Array[] = [];
    tx.table(TableDefs.previousLedgerSecrets).forEach((b64) => void previousSecretRecords.push(fromBase64(b64)));
    return {
      recoveryMemberIds: Object.keys(record.encrypted_shares),
      threshold: record.threshold,
      sharingId: new Uint8Array(Buffer.from(record.sharing_id, 'hex')),
      wrappedLatestSecret: fromBase64(record.wrapped_latest_secret),
      previousSecretRecords,
    };
  }
}

function clearSubmittedShares(tx: Tx): void {
  const map = tx.table(TableDefs.submittedShares);
  const keys: string[] = [];
  map.forEach((_, key) => void keys.push(key));
  for (const key of keys) map.remove(key);
}

function fromBase64(b64: string): Uint8Array {
  return new Uint8Array(Buffer.from(b64, 'base64'));
}
