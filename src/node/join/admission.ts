/**
 * The primary's side of joining (POST /node/join): a join request passes a chain of checks, each
 * of which refuses with its own error, then the node is recorded (Trusted at once while the
 * service is opening, Pending otherwise) and, once trusted, given what it needs to become part of
 * the network. The chain is data (`ADMISSION_CHECKS`): the code-trust check (`checkHostData`)
 * admits registered host data, and otherwise judges the joiner's transparent statement by the
 * members' join policy (docs/join-policy.md), which it reaches through `AdmissionContext.joinPolicy`.
 */
import type { Logger } from '../../base/log.js';
import { fromBase64, toHex, utf8 } from '../../base/bytes.js';
import { errorMessage } from '../../base/errors.js';
import { decodeCoseSign1, loadPublicKey, nodeIdFromPublicKey, publicKeyDer } from '../../crypto/index.js';
import type { Tx } from '../../kv/index.js';
import { verifyVirtualQuote, type QuoteInfo, type VirtualQuote } from '../../attestation/virtual.js';
import type { JoinPolicyVerdict } from '../../gov/join-policy.js';
import { checkTransparentStatement, type TransparentStatementInput } from '../../gov/transparent-statement.js';
import { nodeError, notPrimary, retryLater } from '../errors.js';
import { pendingCleanupIntervalMsMax } from '../limits.js';
import type { JoinRequest, JoinResponse, NetworkInfo } from '../join.js';
import { SINGLETON_KEY, TableDefs, type NodeInfo, type ServiceStatus } from '../tables.js';
import type { JoinRateLimiter } from './rate.js';

/** A join request after its key and quote were checked: what the checks of the chain look at. */
export interface JoinCandidate {
  readonly request: JoinRequest;
  readonly nodeId: string;
  readonly quote: VirtualQuote;
  /** The node's record, when it is known already (a node polling, or restarting). */
  readonly existing: NodeInfo | undefined;
}

/** What the checks need to know about this node and service. */
export interface AdmissionContext {
  readonly logger: Logger;
  /** The measurement this node runs (trusted by a service whose genesis predates the measurement table). */
  readonly ownMeasurement: string;
  /** This node holds no entries before its startup snapshot. */
  readonly startupSeqno: number;
  /** Pending nodes the service holds at most (limits.ts pendingNodesMax). */
  readonly pendingNodesMax: number;
  serviceStatus(): ServiceStatus | undefined;
  /** The service certificates whose receipts are accepted: the current one first, then previous identities it endorsed. */
  serviceIdentities(): readonly string[];
  /** Runs the members' join policy (the sandbox); absent, a policy cannot admit anyone. */
  readonly joinPolicy?: JoinPolicyEvaluator;
}

/** The sandbox, as admission sees it (injected, so that admission is tested without it). */
export interface JoinPolicyEvaluator {
  /** Resolves once the sandbox can run a policy; awaited before the checks' transaction. */
  ready(): Promise<void>;
  /** Runs the policy over the statements, synchronously, within one request's sandbox budget. */
  evaluate(source: string, statements: readonly TransparentStatementInput[]): JoinPolicyVerdict;
}

/** One check of the chain: throws a NodeError to refuse the join. */
export type AdmissionCheck = (candidate: JoinCandidate, tx: Tx, context: AdmissionContext) => void;

function refuse(context: AdmissionContext, code: Parameters<typeof nodeError>[0], message: string): never {
  context.logger.info(`join refused: ${message}`);
  throw nodeError(code, message);
}

export const checkMeasurement: AdmissionCheck = ({ quote }, tx, context) => {
  const measurements = tx.table(TableDefs.virtualMeasurements);
  // A service whose genesis predates the table trusts the code the primary runs.
  const trusted = measurements.has(quote.measurement) || (measurements.size === 0 && quote.measurement === context.ownMeasurement);
  if (!trusted) refuse(context, 'UntrustedMeasurement', `measurement ${quote.measurement} is not trusted by the service (add_virtual_measurement)`);
};

/**
 * The code-trust check, the spec's "Join policy decision" table: registered host data
 * (add_snp_host_data) joins and no policy runs. Otherwise the joiner's transparent statement is
 * checked (structure, signatures, receipts, binding, and that it speaks for the joiner's host data)
 * and judged by the join policy: `true` admits, a string refuses with that reason, anything else
 * is an error that refuses. No statement, or no policy, refuses as untrusted host data.
 */
export const checkHostData: AdmissionCheck = ({ quote, request, nodeId, existing }, tx, context) => {
  if (tx.table(TableDefs.hostData).has(quote.host_data)) return;
  // A node already recorded with this very quote passed this check when it was recorded: its
  // polls (a Pending node asks every join.retry_timeout) and re-announcements do not run the
  // policy again, so that polling never costs the primary a sandbox evaluation each time.
  if (existing !== undefined && existing.quote_info.quote === request.quote_info.quote) return;
  const untrusted = `host data ${quote.host_data} is not trusted by the service (add_snp_host_data)`;
  const encoded = request.host_data_transparent_statement;
  if (encoded === undefined) refuse(context, 'UntrustedHostData', `${untrusted}, and the joiner sent no transparent statement for the join policy`);
  let input: TransparentStatementInput;
  try {
    const bytes = fromBase64(encoded);
    input = checkTransparentStatement(bytes, context.serviceIdentities());
    const payload = statementPayload(bytes);
    if (payload !== quote.host_data) throw new Error(`the statement speaks for ${payload.slice(0, 64)}, not for the joiner's host data ${quote.host_data}`);
  } catch (e) {
    refuse(context, 'InvalidTransparentStatement', `the transparent statement is refused: ${errorMessage(e)}`);
  }
  const policy = tx.table(TableDefs.joinPolicy).get(SINGLETON_KEY);
  if (policy === undefined) refuse(context, 'UntrustedHostData', `${untrusted}, and no join policy is set (set_node_join_policy)`);
  if (context.joinPolicy === undefined) refuse(context, 'JoinPolicyFailed', 'the join policy cannot run on this node (no sandbox)');
  const verdict = context.joinPolicy.evaluate(policy, [input]);
  if (verdict.kind === 'refused') refuse(context, 'JoinPolicyRefused', `the join policy refused node ${nodeId}: ${verdict.reason}`);
  if (verdict.kind === 'error') refuse(context, 'JoinPolicyFailed', `the join policy could not decide on node ${nodeId}: ${verdict.reason}`);
  context.logger.info(`the join policy admits node ${nodeId} (host data ${quote.host_data}, statement by ${input.phdr.cwt.iss})`);
};

/** The statement's payload as host data: its text (64 hex digits), or the hex of 32 raw bytes. */
function statementPayload(statement: Uint8Array): string {
  const payload = decodeCoseSign1(statement).payload ?? new Uint8Array(0);
  if (payload.byteLength === 32) return toHex(payload);
  return utf8.decode(payload).trim().toLowerCase();
}

export const checkStartupSeqno: AdmissionCheck = ({ request, existing }, _tx, context) => {
  // This node holds no entries before its own startup snapshot: a new node must start at or after it.
  if (existing === undefined && request.startup_seqno < context.startupSeqno) {
    throw nodeError(
      'StartupSeqnoIsOld',
      `the joining node starts at seqno ${request.startup_seqno}, older than this node's startup snapshot at ${context.startupSeqno}: join with a recent snapshot`,
    );
  }
};

export const checkNotRetired: AdmissionCheck = ({ nodeId, existing }) => {
  if (existing?.status === 'Retired') throw nodeError('NodeRetired', `node ${nodeId} is retired and cannot join again`);
};

/**
 * A new node that would be Pending while the service already holds pendingNodesMax of them is
 * refused (503, retry later): in virtual mode anyone can have a node recorded, and each stays until
 * members act or the pending-node cleanup finds it silent. Known nodes (a Pending node polling, a
 * node restarting) and joins while the service opens (Trusted at once) are not counted against it.
 */
export const checkPendingCapacity: AdmissionCheck = ({ nodeId, existing }, tx, context) => {
  if (existing !== undefined || context.serviceStatus() !== 'Open') return;
  let pending = 0;
  tx.table(TableDefs.nodesInfo).forEach((info) => {
    if (info.status === 'Pending') pending++;
  });
  if (pending < context.pendingNodesMax) return;
  context.logger.info(`join refused: node ${nodeId} would be Pending, and ${pending} nodes are Pending already (at most ${context.pendingNodesMax})`);
  throw retryLater(
    'TooManyPendingNodes',
    `the service holds ${pending} Pending nodes, its most: members trust or remove some, or silent ones are dropped; retry later`,
    pendingCleanupIntervalMsMax,
  );
};

/** The checks a join request passes after its key and quote, in order. */
export const ADMISSION_CHECKS: readonly AdmissionCheck[] = [checkMeasurement, checkHostData, checkStartupSeqno, checkNotRetired, checkPendingCapacity];

/**
 * Checks that the request's key is the TLS client certificate's (the joiner proves it holds the
 * key it asks to be recorded with) and that its quote binds that key.
 */
export function candidateOf(request: JoinRequest, clientPublicKeyDer: Uint8Array | undefined, context: AdmissionContext, tx: Tx): JoinCandidate {
  let der: Uint8Array;
  let nodeId: string;
  try {
    const publicKey = loadPublicKey(request.public_key);
    der = publicKeyDer(publicKey);
    nodeId = nodeIdFromPublicKey(publicKey);
  } catch {
    throw nodeError('InvalidNodeKey', 'public_key is not a PEM public key');
  }
  if (!clientPublicKeyDer || Buffer.compare(Buffer.from(der), Buffer.from(clientPublicKeyDer)) !== 0) {
    throw nodeError('InvalidAuthenticationInfo', 'the TLS client certificate of a join request must carry the public key being joined');
  }
  const verdict = verifyVirtualQuote(request.quote_info as QuoteInfo, der);
  if (!verdict.ok) refuse(context, 'InvalidQuote', `quote verification failed: ${verdict.reason}`);
  return { request, nodeId, quote: verdict.quote, existing: tx.table(TableDefs.nodesInfo).get(nodeId) };
}

/** What admission needs from the node. */
export interface AdmissionHost extends AdmissionContext {
  readonly checks: readonly AdmissionCheck[];
  isPrimary(): boolean;
  executeRead<T>(fn: (tx: Tx) => T): T;
  executeWrite(fn: (tx: Tx) => void): unknown;
  /** The rate of join requests per client address (before any other work). */
  readonly joinRate: JoinRateLimiter;
  /** `trusted`: the period members gave the node when they trusted it (transition_node_to_trusted), if any. */
  endorse(publicKeyPem: string, subjectAltNames: string[], trusted?: Pick<NodeInfo, 'certificate_valid_from' | 'certificate_validity_period_days'>): Promise<string>;
  /** What a trusted joiner is given (service identity, secrets, genesis configuration, peers). */
  networkInfoFor(endorsedCertificatePem: string): NetworkInfo;
  /** A join request from `nodeId` was seen (pending-node cleanup). */
  seen(nodeId: string): void;
}


/**
 * Handles a join request on the primary. `clientAddress` is the remote address of the connection
 * the request came on (the HTTP layer's), whose rate of join requests is bounded.
 */
export async function admit(
  host: AdmissionHost,
  request: JoinRequest,
  clientPublicKeyDer: Uint8Array | undefined,
  clientAddress: string | undefined,
): Promise<JoinResponse> {
  if (!host.isPrimary()) throw notPrimary('join requests are handled by the primary');
  // First, before the key and quote are checked: a flood must cost the primary as little as possible.
  host.joinRate.take(clientAddress);
  // The sandbox worker is awaited here, outside the transaction, rather than inside it.
  if (request.host_data_transparent_statement !== undefined) await host.joinPolicy?.ready();
  const candidate = host.executeRead((tx) => {
    const c = candidateOf(request, clientPublicKeyDer, host, tx);
    for (const check of host.checks) check(c, tx, host);
    // Only a request that passed every check counts as a sign of life (pending-node cleanup): the
    // record of refused requests would grow with whatever anyone sends.
    host.seen(c.nodeId);
    return c;
  });
  const { nodeId, existing } = candidate;
  const opening = host.serviceStatus() !== 'Open';
  const willBeTrusted = existing?.status === 'Trusted' || (existing === undefined && (opening || host.executeRead((tx) => rejoiningLocation(tx, request))));
  let endorsed = host.executeRead((tx) => tx.table(TableDefs.nodesEndorsedCertificates).get(nodeId));
  if (willBeTrusted && !endorsed) endorsed = await host.endorse(request.public_key, request.subject_alt_names, existing);
  if (!host.isPrimary()) throw notPrimary('this node stopped being primary while handling the join');
  host.executeWrite((tx) => record(tx, candidate, willBeTrusted, endorsed, host.logger));
  const serviceStatus = host.serviceStatus();
  const status = serviceStatus !== undefined ? { service_status: serviceStatus } : {};
  if (!willBeTrusted) return { node_id: nodeId, node_status: 'Pending', ...status };
  return { node_id: nodeId, node_status: 'Trusted', ...status, network_info: host.networkInfoFor(endorsed!) };
}

/**
 * Sealing-based recovery: the locations the recovery decision protocol did not choose restart as
 * joiners of the service it opened, with no member to trust them. A joiner is trusted at once if
 * the protocol opened this service, its recovery key names one of the protocol's expected
 * locations, and no trusted node holds that location already.
 */
function rejoiningLocation(tx: Tx, request: JoinRequest): boolean {
  const location = request.sealed_recovery_key?.location_name;
  const opened = tx.table(TableDefs.recoveryDecisionOpenKind).get(SINGLETON_KEY);
  if (location === undefined || opened === undefined || !opened.expected_locations.includes(location)) return false;
  const nodes = tx.table(TableDefs.nodesInfo);
  let taken = false;
  tx.table(TableDefs.sealedRecoveryKeys).forEach((record, nodeId) => {
    if (record.location_name === location && nodes.get(nodeId)?.status === 'Trusted') taken = true;
  });
  return !taken;
}

/** Records a new node, or the new addresses of a known one, and a trusted node's endorsed certificate. */
function record(tx: Tx, { request, nodeId }: JoinCandidate, willBeTrusted: boolean, endorsed: string | undefined, logger: Logger): void {
  const nodes = tx.table(TableDefs.nodesInfo);
  const current = nodes.get(nodeId);
  if (current && !sameAddresses(current, request)) {
    // A node restarted from its ledger with new addresses (node-to-node or RPC): record where it is now.
    nodes.put(nodeId, { ...current, rpc_interfaces: request.rpc_interfaces, node_to_node_interface: request.node_to_node_interface });
    logger.info(`node ${nodeId} rejoined from ${request.node_to_node_interface.published_address}`);
  }
  if (!current) {
    const info: NodeInfo = {
      status: willBeTrusted ? 'Trusted' : 'Pending',
      public_key: request.public_key,
      node_data: request.node_data ?? null,
      rpc_interfaces: request.rpc_interfaces,
      node_to_node_interface: request.node_to_node_interface,
      quote_info: request.quote_info as QuoteInfo,
      retired_committed: false,
    };
    nodes.put(nodeId, info);
    if (request.sealed_recovery_key !== undefined) tx.table(TableDefs.sealedRecoveryKeys).put(nodeId, request.sealed_recovery_key);
    logger.info(`node ${nodeId} joins as ${info.status}`);
  }
  if (willBeTrusted && endorsed && !tx.table(TableDefs.nodesEndorsedCertificates).has(nodeId)) {
    tx.table(TableDefs.nodesEndorsedCertificates).put(nodeId, endorsed);
  }
}

/** Whether a node's record already holds the addresses its join request announces. */
function sameAddresses(current: NodeInfo, request: Pick<NodeInfo, 'rpc_interfaces' | 'node_to_node_interface'>): boolean {
  if (current.node_to_node_interface?.published_address !== request.node_to_node_interface?.published_address) return false;
  const published = (interfaces: NodeInfo['rpc_interfaces']) =>
    JSON.stringify(Object.entries(interfaces ?? {}).map(([name, i]) => [name, i.published_address, i.bind_address]).sort());
  return published(current.rpc_interfaces) === published(request.rpc_interfaces);
}
