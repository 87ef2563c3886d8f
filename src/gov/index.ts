/**
 * Governance: signed member requests (COSE_Sign1), proposals and ballots resolved by a constitution
 * that runs in a JavaScript sandbox, and the governance tables. Wired to a node by
 * src/http/frontends/governance.ts.
 */
export { Governance, CONSTITUTION_EXPORTS, JOIN_POLICY_EXPORTS, BALLOT_EXPORTS, RECENT_PROPOSALS_MAX } from './governance.js';
export type { GovernanceInit, GovRequest, GovOutcome, ProposalSummary, MemberSummary } from './governance.js';
export { signGovRequest, verifyGovRequest, COSE_CONTENT_TYPE, CREATED_AT_WINDOW_SECONDS, GOV_MESSAGE_TYPES, GovHeader } from './cose-request.js';
export type { GovMessageType, SignGovRequestOptions, VerifiedGovRequest, VerifyGovRequestOptions } from './cose-request.js';
export { JsEngine, loadJsEngine, SandboxBudget, SandboxError, DEFAULT_SANDBOX_LIMITS, SANDBOX_REQUEST_TIME_MS_MAX, WASM_MEMORY_BYTES_MAX, WORKER_START_WAIT_MS_MAX } from './sandbox.js';
export type { SandboxLimits, SandboxFailureKind, HostFunctions, LoadedModule, RunOptions, JsEngineOptions } from './sandbox.js';
export { DEFAULT_CONSTITUTION } from './default-constitution.js';
export type { CertificateRenewer } from './constitution-host.js';
export { parseValidFrom } from './constitution-host.js';
export { GovTableDefs, GovTables, GOV_SINGLETON_KEY, PROPOSAL_STATES } from './tables.js';
export type { ProposalState, ProposalInfo, ProposalBody, ProposalAction, MemberInfoRecord, MemberAck, HistoryRecord, HostDataRecord, JwtIssuerRecord, ServiceConfigRecord, UserInfoRecord } from './tables.js';
export {
  attachReceipt,
  checkTransparentStatement,
  signStatement,
  statementDigest,
  verifySignedStatement,
  StatementError,
  StatementHeader,
  CwtClaim,
  STATEMENTS_TABLE,
  StatementsTable,
  TRANSPARENT_STATEMENT_BYTES_MAX,
} from './transparent-statement.js';
export { didX509Of, IssuerResolutionError, parseDidX509, resolveDidX509 } from './did-x509.js';
export type { ResolvedIssuer } from './did-x509.js';
export type { TransparentStatementInput, ReceiptInput, StatementRecord, SignStatementOptions, VerifiedSignedStatement } from './transparent-statement.js';
