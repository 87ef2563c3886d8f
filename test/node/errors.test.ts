/** Every error code of the node layer with its HTTP status, and the predicates that recognise them. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { CovenantError } from '../../src/base/errors.js';
import { notPrimary as consensusNotPrimary } from '../../src/consensus/index.js';
import { LedgerError, isLedgerError } from '../../src/ledger/index.js';
import { NODE_ERROR_STATUS, isNodeError, nodeError, notPrimary, retryLater, transactionInvalid, type NodeErrorCode } from '../../src/node/errors.js';

const EXPECTED: Record<NodeErrorCode, number> = {
  NotPrimary: 503,
  RecoveryLedgerEmpty: 400,
  RecoveryLedgerUnsigned: 400,
  LedgerEntryUnreadable: 500,
  RecoveryShareNotFound: 404,
  LedgerAlreadyExists: 400,
  InvalidNodeState: 500,
  StartupSnapshotMissing: 500,
  JoinTargetNotTrusted: 400,
  JoinRetriesExhausted: 500,
  JoinFailed: 400,
  InvalidTransparentStatement: 403,
  JoinPolicyRefused: 403,
  JoinPolicyFailed: 403,
  InvalidNodeKey: 400,
  InvalidAuthenticationInfo: 401,
  InvalidQuote: 403,
  UntrustedMeasurement: 403,
  UntrustedHostData: 403,
  StartupSeqnoIsOld: 400,
  NodeRetired: 403,
  TransactionTooLarge: 413,
  TooManyCommitWaiters: 503,
  TransactionRolledBack: 503,
  CommitWaitTimedOut: 503,
  TooManyPendingReads: 503,
  ReadNotConfirmed: 503,
  TransactionInvalid: 404,
  TransactionUnknown: 404,
  ReceiptRebuildsBusy: 503,
  ReceiptUnavailable: 404,
  ServiceKeyUnavailable: 503,
  LedgerSecretUnavailable: 503,
  HistoricalDataUnavailable: 404,
  InvalidConfiguration: 400,
  TooManySnapshotRequests: 429,
  TooManyJoinRequests: 429,
  TooManyPendingNodes: 503,
};

test('every node error code has its HTTP status, and an error of each code carries it in its body', () => {
  assert.deepEqual(NODE_ERROR_STATUS, EXPECTED);
  for (const [code, status] of Object.entries(EXPECTED) as [NodeErrorCode, number][]) {
    const e = nodeError(code, 'why');
    assert.equal(e.status, status, code);
    assert.deepEqual(e.toBody(), { error: { code, message: 'why' } });
    assert.ok(isNodeError(e, code) && isNodeError(e) && !isNodeError(e, code === 'NotPrimary' ? 'JoinFailed' : 'NotPrimary'));
  }
});

test('NotPrimary means the same from the node and from the consensus core; predicates do not match look-alikes', () => {
  assert.equal(notPrimary('x').status, consensusNotPrimary(undefined).status);
  assert.equal(notPrimary('x').code, consensusNotPrimary(undefined).code);
  assert.equal(transactionInvalid('2.5').code, 'TransactionInvalid');
  const lookalike = new CovenantError('NotPrimary', 'hand-built', 503);
  assert.equal(isNodeError(lookalike), false);
  assert.equal(isNodeError({ code: 'NotPrimary' }), false);
  const missing = new LedgerError('LedgerEntryNotFound', 'no entry', { seqno: 3 });
  assert.ok(isLedgerError(missing, 'LedgerEntryNotFound') && !isLedgerError(missing, 'LedgerCorrupted'));
  assert.equal(isLedgerError({ code: 'LedgerEntryNotFound' }), false);
});

test('a refusal by rate or capacity carries Retry-After in whole seconds, rounded up, at least 1', () => {
  assert.equal(retryLater('TooManySnapshotRequests', 'later', 2500).retryAfterSeconds, 3);
  assert.equal(retryLater('TooManyJoinRequests', 'later', 1).retryAfterSeconds, 1);
  assert.equal(retryLater('TooManyJoinRequests', 'later', 0).retryAfterSeconds, 1);
  assert.equal(retryLater('TooManyPendingNodes', 'later', 1000).status, 503);
  assert.equal(nodeError('NotPrimary', 'x').retryAfterSeconds, undefined);
});
