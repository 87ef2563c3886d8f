/**
 * Governance over one KV transaction: signed requests in, table writes out. Every method runs
 * synchronously inside the caller's transaction (docs/architecture.md, decision 2); a method that throws leaves
 * the transaction to be discarded, so a refused request writes nothing.
 *
 * Flow of a proposal: the request is verified (signature, type, created_at, replay); the
 * constitution's `validate` checks it; it is stored Open; then, at creation and after each ballot,
 * every ballot is evaluated (each in a fresh sandbox context), the constitution's `resolve` turns
 * the votes into a state and, when Accepted, its `apply` writes the tables (staged, flushed only
 * if the whole apply succeeds). A ballot or constitution function that throws, loops or exhausts
 * memory makes the proposal Failed with the reason recorded (at most `REASON_BYTES_MAX` of it).
 *
 * All member JavaScript of one request (the constitution's functions, every ballot, code carried by
 * actions) shares one `SandboxBudget` of wall-clock time, so a request blocks the node for that
 * long at most however many ballots it evaluates.
 */
import { isUtf8 } from 'node:buffer';
import { CovenantError } from '../base/errors.js';
import { toHex, utf8 } from '../base/bytes.js';
import { parseExternalJson } from '../base/json.js';
import { sha256 } from '../crypto/index.js';
import type { Tx } from '../kv/index.js';
import { createConstitutionHost, type CertificateRenewer } from './constitution-host.js';
import { unauthenticated, verifyGovRequest, type GovMessageType, type VerifiedGovRequest } from './cose-request.js';
import { DEFAULT_CONSTITUTION } from './default-constitution.js';
import { refuseProposalReplay, refuseRequestReplay, rememberProposal } from './request-replay.js';
import { DEFAULT_SANDBOX_LIMITS, type JsEngine, type LoadedModule, SandboxBudget, SandboxError, type SandboxLimits } from './sandbox.js';
import {
  GOV_SINGLETON_KEY,
  GovTableDefs,
  type HistoryRecord,
  type MemberAck,
  type MemberInfoRecord,
  type ProposalBody,
  type ProposalInfo,
  type ProposalState,
} from './tables.js';

export interface GovernanceInit {
  readonly engine: JsEngine;
  /** The node's clock (ms since the Unix epoch), for created_at checks. */
  readonly nowMs: () => number;
  readonly sandboxLimits?: SandboxLimits;
  readonly createdAtWindowSeconds?: number;
  /** How many recent proposal requests are remembered to refuse replays. */
  readonly recentProposalsMax?: number;
  /** How many recent other signed requests are remembered to refuse replays (RECENT_REQUESTS_MAX). */
  readonly recentRequestsMax?: number;
  /** The service key's renewals of certificates (svc.network), for the *_certificate_validity actions. */
  readonly certificates?: CertificateRenewer;
  /**
   * Checks the bundle of a set_js_app action (its app.json, that every module compiles, that every
   * endpoint names a module and function that exist); throws an Error whose message says what is
   * wrong. The application engine lives above governance, so the node's composition passes it in.
   */
  readonly checkAppBundle?: (bundle: unknown) => void;
}

/** A governance write as it arrives: the raw body and its content type. */
export interface GovRequest {
  readonly body: Uint8Array;
  readonly contentType: string | undefined;
}

export interface GovOutcome<T> {
  readonly body: T;
  /** Who signed the request (for logs). */
  readonly memberId: string;
}

export interface ProposalSummary {
  proposal_id: string;
  proposer_id: string;
  state: ProposalState;
  ballot_count: number;
  final_votes?: Record<string, boolean>;
  vote_failures?: Record<string, { reason: string }>;
  failure?: { reason: string };
}

export interface MemberSummary {
  member_id: string;
  status: MemberInfoRecord['status'];
  member_data: unknown;
  certificate: string;
  public_encryption_key?: string;
}

/** Function names the stored constitution must export. */
export const CONSTITUTION_EXPORTS = ['validate', 'resolve', 'apply'] as const;
/** A join policy exports `policy(transparentStatements)`. */
export const JOIN_POLICY_EXPORTS = ['policy'] as const;
export const BALLOT_EXPORTS = ['vote'] as const;

export const RECENT_PROPOSALS_MAX = 100;
/**
 * Signed requests other than proposals remembered to refuse their replays: more than proposals,
 * as every proposal draws a ballot from each member; a request signed within the created_at
 * window is refused once this many newer ones have been remembered.
 */
export const RECENT_REQUESTS_MAX = 1000;
/**
 * Longest failure reason stored in a proposal record (and answered): a script's result or error
 * can be megabytes, the member needs its beginning.
 */
export const REASON_BYTES_MAX = 1024;

function notFound(message: string): CovenantError {
  return new CovenantError('ResourceNotFound', message, 404);
}

function badRequest(code: string, message: string): CovenantError {
  return new CovenantError(code, message, 400);
}

function parseJsonPayload(payload: Uint8Array, what: string): unknown {
  if (!isUtf8(payload)) throw badRequest('InvalidInput', `${what} payload is not JSON: it is not valid UTF-8`);
  try {
    return parseExternalJson(utf8.decode(payload));
  } catch (e) {
    throw badRequest('InvalidInput', `${what} payload is not JSON: ${(e as Error).message}`);
  }
}

function failureReason(e: unknown): string {
  if (e instanceof SandboxError) return boundedReason(`${e.kind}: ${e.message}`);
  if (e instanceof Error) return boundedReason(e.message);
  return boundedReason(String(e));
}

/** `text` if it fits in REASON_BYTES_MAX bytes of UTF-8, else its beginning marked as truncated. */
export function boundedReason(text: string): string {
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes <= REASON_BYTES_MAX) return text;
  const marker = `… (truncated, ${bytes} bytes)`;
  const room = REASON_BYTES_MAX - Buffer.byteLength(marker, 'utf8');
  // Every character takes at least one byte: the first `room` characters hold all that is kept.
  const head = Buffer.from(text.slice(0, room), 'utf8');
  let end = Math.min(room, head.length);
  // Cut before a character, never inside its UTF-8 sequence (continuation bytes are 10xxxxxx).
  while (end > 0 && ((head[end] ?? 0) & 0xc0) === 0x80) end--;
  return `${head.subarray(0, end).toString('utf8')}${marker}`;
}

/** JSON of a value a script returned, for a message: never more than the reason can hold. */
function preview(value: unknown): string {
  const text = JSON.stringify(value) ?? 'undefined';
  return text.length > REASON_BYTES_MAX ? `${text.slice(0, REASON_BYTES_MAX)}…` : text;
}

export class Governance {
  private readonly engine: JsEngine;
  private readonly init: GovernanceInit;

  constructor(init: GovernanceInit) {
    this.init = init;
    this.engine = init.engine;
  }

  /** Resolves once the sandbox can evaluate: await it before a transaction, so none waits inside. */
  ready(): Promise<void> {
    return this.engine.ready();
  }

  /** The time budget of one request's member JavaScript. */
  private newBudget(): SandboxBudget {
    return new SandboxBudget((this.init.sandboxLimits ?? DEFAULT_SANDBOX_LIMITS).executionTimeMsMax);
  }

  // ------------------------------------------------------------------ writes

  createProposal(tx: Tx, request: GovRequest): GovOutcome<ProposalSummary> {
    const verified = this.verify(tx, request, 'proposal', {});
    this.requireActive(tx, verified.memberId, 'propose');
    const requestDigest = toHex(sha256(request.body));
    refuseProposalReplay(tx, this.recentMax(), requestDigest, verified.createdAtSeconds);

    const proposalText = utf8.decode(verified.payload);
    const parsed = parseJsonPayload(verified.payload, 'proposal');
    const budget = this.newBudget();
    this.checkCodeCarryingActions(parsed, budget);

    // The id binds the request (with its randomised signature) to the state it was made in.
    const proposalId = toHex(sha256(utf8.encode(`${requestDigest}:${tx.startVersion}`)));
    if (tx.table(GovTableDefs.proposalsInfo).has(proposalId)) throw badRequest('ProposalReplay', `proposal ${proposalId} already exists`);

    const info: ProposalInfo = { proposer_id: verified.memberId, state: 'Open', created_at: verified.createdAtSeconds, ballots: {} };
    const constitution = this.ensureConstitution(tx);
    this.withConstitution(tx, constitution, budget, (module, host) => {
      let verdict: unknown;
      try {
        verdict = module.call('validate', [proposalText]);
      } catch (e) {
        throw badRequest('ProposalFailedToValidate', `the constitution's validate failed: ${failureReason(e)}`);
      }
      const v = verdict as { valid?: unknown; description?: unknown } | null;
      if (typeof v !== 'object' || v === null || typeof v.valid !== 'boolean') {
        throw badRequest('ProposalFailedToValidate', "the constitution's validate did not answer {valid, description}");
      }
      if (!v.valid) throw badRequest('ProposalFailedToValidate', boundedReason(`proposal is invalid: ${typeof v.description === 'string' ? v.description : 'no reason given'}`));

      tx.table(GovTableDefs.proposals).put(proposalId, parsed as ProposalBody); // its shape checked by validate
      tx.table(GovTableDefs.proposalsInfo).put(proposalId, info);
      this.resolveWith(module, host, tx, proposalId, info, proposalText, []);
    });
    rememberProposal(tx, this.recentMax(), requestDigest, verified.createdAtSeconds, proposalId);
    this.recordHistory(tx, verified, request.body, proposalId);
    return { body: summary(proposalId, this.proposalInfo(tx, proposalId)), memberId: verified.memberId };
  }

  submitBallot(tx: Tx, request: GovRequest, proposalId: string, memberIdInPath: string): GovOutcome<ProposalSummary> {
    const verified = this.verify(tx, request, 'ballot', { proposalId, memberIdInPath });
    this.refuseRequestReplay(tx, request, verified);
    this.requireActive(tx, verified.memberId, 'vote');
    const info = this.openProposal(tx, proposalId);
    if (info.ballots[verified.memberId] !== undefined) {
      throw badRequest('VoteAlreadyExists', `member ${verified.memberId} has already submitted a ballot for proposal ${proposalId}`);
    }
    const body = parseJsonPayload(verified.payload, 'ballot') as { ballot?: unknown } | null;
    if (typeof body !== 'object' || body === null || typeof body.ballot !== 'string' || Object.keys(body).length !== 1) {
      throw badRequest('InvalidBallot', 'a ballot request is {"ballot": "export function vote(proposal, proposerId) { ... }"}');
    }
    const budget = this.newBudget();
    try {
      this.engine.checkModule(body.ballot, 'ballot', BALLOT_EXPORTS, this.init.sandboxLimits, budget);
    } catch (e) {
      if (e instanceof SandboxError && e.kind === 'Unavailable') throw e;
      throw badRequest('InvalidBallot', `ballot cannot be used: ${failureReason(e)}`);
    }
    info.ballots[verified.memberId] = body.ballot;
    tx.table(GovTableDefs.proposalsInfo).put(proposalId, info);
    const proposalText = JSON.stringify(tx.table(GovTableDefs.proposals).get(proposalId));
    this.evaluate(tx, proposalId, info, proposalText, budget);
    this.recordHistory(tx, verified, request.body, proposalId);
    return { body: summary(proposalId, this.proposalInfo(tx, proposalId)), memberId: verified.memberId };
  }

  withdrawProposal(tx: Tx, request: GovRequest, proposalId: string): GovOutcome<ProposalSummary> {
    const verified = this.verify(tx, request, 'withdrawal', { proposalId });
    this.refuseRequestReplay(tx, request, verified);
    const info = this.openProposal(tx, proposalId);
    if (info.proposer_id !== verified.memberId) {
      throw new CovenantError('Forbidden', `only the proposer (${info.proposer_id}) may withdraw proposal ${proposalId}`, 403);
    }
    info.state = 'Withdrawn';
    tx.table(GovTableDefs.proposalsInfo).put(proposalId, info);
    this.recordHistory(tx, verified, request.body, proposalId);
    return { body: summary(proposalId, info), memberId: verified.memberId };
  }

  /** Records the digest a member must acknowledge (`:update`); answers it. */
  updateStateDigest(tx: Tx, request: GovRequest, memberIdInPath: string, stateDigestHex: string): GovOutcome<MemberAck> {
    const verified = this.verify(tx, request, 'state_digest', { memberIdInPath });
    this.refuseRequestReplay(tx, request, verified);
    const ack: MemberAck = { state_digest: stateDigestHex };
    tx.table(GovTableDefs.membersAcks).put(verified.memberId, ack);
    this.recordHistory(tx, verified, request.body, undefined);
    return { body: ack, memberId: verified.memberId };
  }

  /** Acknowledges the recorded digest (`:ack`): an Accepted member becomes Active. */
  ackStateDigest(tx: Tx, request: GovRequest, memberIdInPath: string): GovOutcome<MemberSummary> {
    const verified = this.verify(tx, request, 'ack', { memberIdInPath });
    this.refuseRequestReplay(tx, request, verified);
    const body = parseJsonPayload(verified.payload, 'ack') as { state_digest?: unknown } | null;
    if (typeof body !== 'object' || body === null || typeof body.state_digest !== 'string') {
      throw badRequest('InvalidInput', 'an ack request is {"state_digest": "<hex digest from :update>"}');
    }
    const recorded = tx.table(GovTableDefs.membersAcks).get(verified.memberId);
    if (recorded === undefined) {
      throw badRequest('StateDigestNotRequested', `member ${verified.memberId} has no state digest to acknowledge; call state-digests/{member_id}:update first`);
    }
    if (recorded.state_digest !== body.state_digest) {
      throw badRequest('StateDigestMismatch', `acknowledged digest ${body.state_digest} is not the recorded ${recorded.state_digest}; update and ack again`);
    }
    const infoMap = tx.table(GovTableDefs.membersInfo);
    const info = infoMap.get(verified.memberId);
    if (info?.status === 'Accepted') infoMap.put(verified.memberId, { ...info, status: 'Active' });
    this.recordHistory(tx, verified, request.body, undefined);
    return { body: this.member(tx, verified.memberId), memberId: verified.memberId };
  }

  /**
   * A member's recovery share request (POST /gov/recovery/members/{member_id}:recover, msg type
   * "recovery_share", payload {"share": "<base64 of the decrypted share>"}): verified here without
   * writing anything; `record` then keeps it (the replay digest and the history) in the transaction
   * that stores what the share led to, so that a refused share leaves nothing behind. That
   * transaction is verified as well: the member's certificate that verified the request must still
   * be the member's there (the share is checked asynchronously in between).
   */
  recoveryShareRequest(tx: Tx, request: GovRequest, memberIdInPath: string): { memberId: string; share: Uint8Array; record(tx: Tx): void } {
    const verified = this.verify(tx, request, 'recovery_share', { memberIdInPath });
    const body = parseJsonPayload(verified.payload, 'recovery_share') as { share?: unknown } | null;
    if (typeof body !== 'object' || body === null || typeof body.share !== 'string' || Object.keys(body).length !== 1 || !/^[A-Za-z0-9+/]*={0,2}$/.test(body.share)) {
      throw badRequest('InvalidInput', 'a recovery share request is {"share": "<base64 of the decrypted share>"}');
    }
    const certificate = tx.table(GovTableDefs.membersCerts).get(verified.memberId);
    return {
      memberId: verified.memberId,
      share: new Uint8Array(Buffer.from(body.share, 'base64')),
      record: (writeTx) => {
        if (writeTx.table(GovTableDefs.membersCerts).get(verified.memberId) !== certificate) {
          throw unauthenticated(`member ${verified.memberId} changed while the share was checked: sign the request again`);
        }
        this.refuseRequestReplay(writeTx, request, verified);
        this.recordHistory(writeTx, verified, request.body, undefined);
      },
    };
  }

  // ------------------------------------------------------------------ reads

  listProposals(tx: Tx): ProposalSummary[] {
    const out: ProposalSummary[] = [];
    tx.table(GovTableDefs.proposalsInfo).forEach((info: ProposalInfo, id: string) => {
      out.push(summary(id, info));
    });
    return out;
  }

  proposal(tx: Tx, proposalId: string): ProposalSummary {
    return summary(proposalId, this.proposalInfo(tx, proposalId));
  }

  proposalActions(tx: Tx, proposalId: string): ProposalBody {
    const body = tx.table(GovTableDefs.proposals).get(proposalId);
    if (body === undefined) throw notFound(`no proposal with id ${proposalId}`);
    return body;
  }

  ballot(tx: Tx, proposalId: string, memberId: string): { ballot: string } {
    const info = this.proposalInfo(tx, proposalId);
    const ballot = info.ballots[memberId];
    if (ballot === undefined) throw notFound(`member ${memberId} has no ballot for proposal ${proposalId}`);
    return { ballot };
  }

  members(tx: Tx): MemberSummary[] {
    const out: MemberSummary[] = [];
    tx.table(GovTableDefs.membersInfo).forEach((_info: MemberInfoRecord, id: string) => {
      out.push(this.member(tx, id));
    });
    return out;
  }

  member(tx: Tx, memberId: string): MemberSummary {
    const info = tx.table(GovTableDefs.membersInfo).get(memberId);
    if (info === undefined) throw notFound(`no member with id ${memberId}`);
    const out: MemberSummary = {
      member_id: memberId,
      status: info.status,
      member_data: info.member_data ?? null,
      // Every member recorded has its certificate (set_member writes both).
      certificate: tx.table(GovTableDefs.membersCerts).get(memberId)!,
    };
    const encryptionKey = tx.table(GovTableDefs.membersEncryptionPublicKeys).get(memberId);
    if (encryptionKey !== undefined) out.public_encryption_key = encryptionKey;
    return out;
  }

  stateDigest(tx: Tx, memberId: string): MemberAck {
    const ack = tx.table(GovTableDefs.membersAcks).get(memberId);
    if (ack === undefined) throw notFound(`member ${memberId} has no recorded state digest`);
    return ack;
  }

  /** The constitution in force (the built-in default until one is stored). */
  constitution(tx: Tx): string {
    return (tx.table(GovTableDefs.constitution).get(GOV_SINGLETON_KEY)) ?? DEFAULT_CONSTITUTION;
  }

  // ------------------------------------------------------------------ internals

  private verify(tx: Tx, request: GovRequest, type: GovMessageType, opts: { proposalId?: string; memberIdInPath?: string }): VerifiedGovRequest {
    const certs = tx.table(GovTableDefs.membersCerts);
    return verifyGovRequest(request.body, {
      contentType: request.contentType,
      expectedType: type,
      nowMs: this.init.nowMs(),
      memberCertificate: (id) => certs.get(id) as string | undefined,
      ...(opts.proposalId !== undefined ? { proposalId: opts.proposalId } : {}),
      ...(opts.memberIdInPath !== undefined ? { memberIdInPath: opts.memberIdInPath } : {}),
      ...(this.init.createdAtWindowSeconds !== undefined ? { createdAtWindowSeconds: this.init.createdAtWindowSeconds } : {}),
    });
  }

  private requireActive(tx: Tx, memberId: string, what: string): void {
    const info = tx.table(GovTableDefs.membersInfo).get(memberId);
    if (info?.status !== 'Active') {
      throw new CovenantError(
        'MemberNotActive',
        `member ${memberId} is ${info?.status ?? 'unknown'}; only Active members ${what} (acknowledge the state digest first)`,
        403,
      );
    }
  }

  private proposalInfo(tx: Tx, proposalId: string): ProposalInfo {
    const info = tx.table(GovTableDefs.proposalsInfo).get(proposalId);
    if (info === undefined) throw notFound(`no proposal with id ${proposalId}`);
    return info;
  }

  private openProposal(tx: Tx, proposalId: string): ProposalInfo {
    const info = this.proposalInfo(tx, proposalId);
    if (info.state !== 'Open') throw badRequest('ProposalNotOpen', `proposal ${proposalId} is ${info.state}, not Open`);
    return info;
  }

  private refuseRequestReplay(tx: Tx, request: GovRequest, verified: VerifiedGovRequest): void {
    refuseRequestReplay(tx, this.init.recentRequestsMax ?? RECENT_REQUESTS_MAX, request.body, verified);
  }

  private recentMax(): number {
    return this.init.recentProposalsMax ?? RECENT_PROPOSALS_MAX;
  }

  private recordHistory(tx: Tx, verified: VerifiedGovRequest, body: Uint8Array, proposalId: string | undefined): void {
    const record: HistoryRecord = {
      cose_sign1: Buffer.from(body).toString('base64'),
      type: verified.type,
      created_at: verified.createdAtSeconds,
      ...(proposalId !== undefined ? { proposal_id: proposalId } : {}),
    };
    tx.table(GovTableDefs.history).put(verified.memberId, record);
  }

  /** The first governance write stores the default constitution, so the ledger shows the rules used. */
  private ensureConstitution(tx: Tx): string {
    const map = tx.table(GovTableDefs.constitution);
    const stored = map.get(GOV_SINGLETON_KEY) as string | undefined;
    if (stored !== undefined) return stored;
    map.put(GOV_SINGLETON_KEY, DEFAULT_CONSTITUTION);
    return DEFAULT_CONSTITUTION;
  }

  /** Code carried by actions must compile in the sandbox and export what its users call. */
  private checkCodeCarryingActions(parsed: unknown, budget: SandboxBudget): void {
    const actions = (parsed as { actions?: unknown } | null)?.actions;
    if (!Array.isArray(actions)) return; // the constitution's validate explains the shape
    actions.forEach((action: unknown, i) => {
      const a = action as { name?: unknown; args?: Record<string, unknown> } | null;
      const check = (source: unknown, filename: string, exports: readonly string[]) => {
        if (typeof source !== 'string') return; // validate reports the type
        try {
          this.engine.checkModule(source, filename, exports, this.init.sandboxLimits, budget);
        } catch (e) {
          if (e instanceof SandboxError && e.kind === 'Unavailable') throw e;
          throw badRequest('ProposalFailedToValidate', `actions[${i}] (${String(a?.name)}): ${failureReason(e)}`);
        }
      };
      if (a?.name === 'set_constitution') check(a.args?.constitution, 'constitution', CONSTITUTION_EXPORTS);
      if (a?.name === 'set_node_join_policy') check(a.args?.policy, 'join_policy', JOIN_POLICY_EXPORTS);
      if (a?.name === 'set_js_app' && typeof a.args === 'object' && a.args !== null && a.args.bundle !== undefined) this.checkBundle(a.args.bundle, i);
    });
  }

  private checkBundle(bundle: unknown, index: number): void {
    const check = this.init.checkAppBundle;
    if (check === undefined) throw badRequest('ProposalFailedToValidate', `actions[${index}] (set_js_app): this node has no application engine to check the bundle with`);
    try {
      check(bundle);
    } catch (e) {
      if (e instanceof CovenantError && e.status >= 500) throw e;
      throw badRequest('ProposalFailedToValidate', boundedReason(`actions[${index}] (set_js_app): ${(e as Error).message}`));
    }
  }

  private withConstitution(
    tx: Tx,
    constitution: string,
    budget: SandboxBudget,
    body: (module: LoadedModule, host: ReturnType<typeof createConstitutionHost>) => void,
  ): void {
    const host = createConstitutionHost(tx, { nowMs: this.init.nowMs, ...(this.init.certificates ? { certificates: this.init.certificates } : {}) });
    try {
      this.engine.run(
        { source: constitution, filename: 'constitution', prelude: host.prelude, host: host.functions, budget, ...(this.init.sandboxLimits ? { limits: this.init.sandboxLimits } : {}) },
        (module) => body(module, host),
      );
    } catch (e) {
      if (e instanceof SandboxError && e.kind !== 'Unavailable') {
        throw new CovenantError('ConstitutionFailure', `the constitution could not be loaded: ${failureReason(e)}`, 500);
      }
      throw e;
    }
  }

  /**
   * Evaluates every ballot, then resolves (and maybe applies) with the constitution. A ballot that
   * hits a sandbox limit ends the evaluation: the proposal fails with it, and the ballots after it
   * (which the spent budget could not run) are not blamed.
   */
  private evaluate(tx: Tx, proposalId: string, info: ProposalInfo, proposalText: string, budget: SandboxBudget): void {
    const votes: { member_id: string; vote: boolean }[] = [];
    const failures: Record<string, { reason: string }> = {};
    for (const [memberId, ballot] of Object.entries(info.ballots)) {
      try {
        const vote = this.engine.run(
          { source: ballot, filename: `ballot of ${memberId.slice(0, 12)}`, budget, ...(this.init.sandboxLimits ? { limits: this.init.sandboxLimits } : {}) },
          (m) => m.call('vote', [proposalText, info.proposer_id]),
        );
        if (typeof vote !== 'boolean') throw new Error(`vote returned ${preview(vote)}, not a boolean`);
        votes.push({ member_id: memberId, vote });
      } catch (e) {
        if (e instanceof SandboxError && e.kind === 'Unavailable') throw e;
        failures[memberId] = { reason: failureReason(e) };
        if (e instanceof SandboxError && (e.kind === 'Timeout' || e.kind === 'OutOfMemory' || e.kind === 'StackOverflow')) break;
      }
    }
    if (Object.keys(failures).length > 0) {
      const first = Object.entries(failures)[0]!;
      const failed: ProposalInfo = {
        ...info,
        state: 'Failed',
        final_votes: Object.fromEntries(votes.map((v) => [v.member_id, v.vote])),
        vote_failures: failures,
        failure: { reason: boundedReason(`ballot of member ${first[0]} failed: ${first[1].reason}`) },
      };
      tx.table(GovTableDefs.proposalsInfo).put(proposalId, failed);
      return;
    }
    this.withConstitution(tx, this.constitution(tx), budget, (module, host) => this.resolveWith(module, host, tx, proposalId, info, proposalText, votes));
  }

  private resolveWith(
    module: LoadedModule,
    host: ReturnType<typeof createConstitutionHost>,
    tx: Tx,
    proposalId: string,
    info: ProposalInfo,
    proposalText: string,
    votes: { member_id: string; vote: boolean }[],
  ): void {
    const next: ProposalInfo = { ...info, final_votes: Object.fromEntries(votes.map((v) => [v.member_id, v.vote])) };
    delete next.failure;
    delete next.vote_failures;
    let state: unknown;
    try {
      state = module.call('resolve', [proposalText, info.proposer_id, votes]);
    } catch (e) {
      if (e instanceof SandboxError && e.kind === 'Unavailable') throw e;
      next.state = 'Failed';
      next.failure = { reason: boundedReason(`resolve failed: ${failureReason(e)}`) };
      tx.table(GovTableDefs.proposalsInfo).put(proposalId, next);
      return;
    }
    if (state !== 'Open' && state !== 'Accepted' && state !== 'Rejected') {
      next.state = 'Failed';
      next.failure = { reason: boundedReason(`resolve returned ${preview(state)}; expected "Open", "Accepted" or "Rejected"`) };
      tx.table(GovTableDefs.proposalsInfo).put(proposalId, next);
      return;
    }
    next.state = state;
    if (state === 'Accepted') {
      host.setWritable(true);
      try {
        module.call('apply', [proposalText, proposalId]);
        host.kv.flush();
      } catch (e) {
        if (e instanceof SandboxError && e.kind === 'Unavailable') throw e;
        next.state = 'Failed';
        next.failure = { reason: boundedReason(`apply failed: ${failureReason(e)}`) };
      } finally {
        host.setWritable(false);
      }
    }
    tx.table(GovTableDefs.proposalsInfo).put(proposalId, next);
  }
}

function summary(proposalId: string, info: ProposalInfo): ProposalSummary {
  const out: ProposalSummary = {
    proposal_id: proposalId,
    proposer_id: info.proposer_id,
    state: info.state,
    ballot_count: Object.keys(info.ballots).length,
  };
  if (info.final_votes !== undefined) out.final_votes = info.final_votes;
  if (info.vote_failures !== undefined) out.vote_failures = info.vote_failures;
  if (info.failure !== undefined) out.failure = info.failure;
  return out;
}
