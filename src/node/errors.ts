/**
 * Operating errors of the node layer. Each failure mode has one stable code and one HTTP status,
 * listed here once (test/node/errors.test.ts lists them all); callers build them with `nodeError`
 * or the named factories and recognise them with `isNodeError`, never by duck typing.
 */
import { CovenantError } from '../base/errors.js';

/** Every code the node layer raises, with the HTTP status it answers. */
export const NODE_ERROR_STATUS = {
  /** A write, a join or a receipt signature reached a node that is not (or no longer) the primary. */
  NotPrimary: 503,
  /** command.type Recover with no ledger in ledger.directory or ledger.read_only_directories. */
  RecoveryLedgerEmpty: 400,
  /** command.type Recover on a ledger with no signature transaction (or no service record) to recover. */
  RecoveryLedgerUnsigned: 400,
  /** A recovering node cannot read an entry of the previous service's ledger it had read before. */
  LedgerEntryUnreadable: 500,
  /** A member asks for a recovery share it does not hold. */
  RecoveryShareNotFound: 404,
  /** Start or Join on a ledger directory that already holds a ledger. */
  LedgerAlreadyExists: 400,
  /** The node state file cannot be read as this version writes it. */
  InvalidNodeState: 500,
  /** A node that started from a snapshot restarts without a snapshot to start from again. */
  StartupSnapshotMissing: 500,
  /** The join target's TLS identity is not the service's (not transient: the joiner stops). */
  JoinTargetNotTrusted: 400,
  /** The joiner met the same failure (an invalid snapshot, the same failed download) too many times in a row. */
  JoinRetriesExhausted: 500,
  /** The join target refused the join (the target's own code is in the message). */
  JoinFailed: 400,
  /** The joiner's transparent statement fails a structure check (fields, signatures, receipts, binding). */
  InvalidTransparentStatement: 403,
  /** The join policy refused the joiner (the policy's reason is in the message). */
  JoinPolicyRefused: 403,
  /** The join policy failed to decide (it threw, ran out of time or memory, or returned neither true nor a string): refused. */
  JoinPolicyFailed: 403,
  /** A join request's public key is not a PEM public key. */
  InvalidNodeKey: 400,
  /** A join request's TLS client certificate does not carry the key being joined. */
  InvalidAuthenticationInfo: 401,
  /** The joiner's quote does not verify. */
  InvalidQuote: 403,
  /** The joiner's measurement is not trusted (add_virtual_measurement). */
  UntrustedMeasurement: 403,
  /** The joiner's host data is not trusted (add_snp_host_data). */
  UntrustedHostData: 403,
  /** A joiner starts before the target's own startup snapshot (spec "Join from a snapshot"). */
  StartupSeqnoIsOld: 400,
  /** A retired node asks to join again. */
  NodeRetired: 403,
  /** A transaction's ledger entry would be larger than a node can replicate. */
  TransactionTooLarge: 413,
  /** Too many writes wait for their commit on this node (x-covenant-consistency: committed). */
  TooManyCommitWaiters: 503,
  /** A write that asked to be answered once committed was rolled back (another transaction took its seqno). */
  TransactionRolledBack: 503,
  /** A write that asked to be answered once committed did not commit in time; its id says where to look. */
  CommitWaitTimedOut: 503,
  /** Too many linearizable reads wait on this node (x-covenant-consistency: linearizable; Retry-After). */
  TooManyPendingReads: 503,
  /** A linearizable read the primary could not confirm in time, or abandoned as it stopped being primary (Retry-After). */
  ReadNotConfirmed: 503,
  /** A transaction id that will never be committed. */
  TransactionInvalid: 404,
  /** A receipt asked for a transaction beyond every seqno this node knows of: it cannot be committed soon. */
  TransactionUnknown: 404,
  /** A receipt needs a Merkle block re-read from the ledger while as many re-reads as allowed run (Retry-After). */
  ReceiptRebuildsBusy: 503,
  /** A COSE receipt asked for a transaction that has none (a signature transaction). */
  ReceiptUnavailable: 404,
  /** This node does not hold the service key yet. */
  ServiceKeyUnavailable: 503,
  /** This node does not hold the ledger secret yet. */
  LedgerSecretUnavailable: 503,
  /** A committed transaction this node's ledger files do not hold (it started from a later snapshot). */
  HistoricalDataUnavailable: 404,
  /** A configuration input (a file named by command.start) cannot be used. */
  InvalidConfiguration: 400,
  /** POST /node/snapshot:create within snapshots.min_interval of the last snapshot it asked for (Retry-After). */
  TooManySnapshotRequests: 429,
  /** Join requests from one client address beyond its rate (Retry-After). */
  TooManyJoinRequests: 429,
  /** A new node's join while the service already holds pendingNodesMax Pending nodes (Retry-After). */
  TooManyPendingNodes: 503,
} as const;

export type NodeErrorCode = keyof typeof NODE_ERROR_STATUS;

export class NodeError extends CovenantError {
  declare readonly code: NodeErrorCode;
  constructor(code: NodeErrorCode, message: string, details?: Record<string, unknown>, retryAfterSeconds?: number) {
    super(code, message, NODE_ERROR_STATUS[code], details, retryAfterSeconds);
    this.name = 'NodeError';
  }
}

export function nodeError(code: NodeErrorCode, message: string, details?: Record<string, unknown>): NodeError {
  return new NodeError(code, message, details);
}

/** A refusal by rate or capacity: answered with Retry-After, in whole seconds (at least 1), rounded up from `retryAfterMs`. */
export function retryLater(code: NodeErrorCode, message: string, retryAfterMs: number): NodeError {
  return new NodeError(code, message, undefined, Math.max(1, Math.ceil(retryAfterMs / 1000)));
}

/** Whether `e` is a node error, optionally of one code. */
export function isNodeError(e: unknown, code?: NodeErrorCode): e is NodeError {
  return e instanceof NodeError && (code === undefined || e.code === code);
}

/** The one way to say "not here: writes (joins, ...) go to the primary". */
export function notPrimary(message: string): NodeError {
  return nodeError('NotPrimary', message);
}

/** A transaction id that will never be committed: rolled back, or never assigned (seqno 0, a view that never held it). */
export function transactionInvalid(txId: string): NodeError {
  return nodeError(
    'TransactionInvalid',
    `transaction ${txId} is Invalid: it will never be committed (it was rolled back, or no such transaction was ever assigned)`,
  );
}
