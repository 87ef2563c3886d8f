/**
 * The governance frontend (/gov): wires src/gov to a node. Writes are COSE_Sign1 envelopes
 * (content-type application/cose) verified and applied inside one synchronous node transaction;
 * a refused request writes nothing and leaves one log line. Every write answer carries
 * x-covenant-transaction-id (the request pipeline adds it, and waits for the commit when the
 * request asks x-covenant-consistency: committed). Reads are plain JSON and need no authentication: the governance
 * tables are public in the ledger anyway.
 *
 * The sandbox engine is loaded asynchronously once; handlers await it (and its worker's readiness)
 * *before* their transaction begins, so the transaction itself stays synchronous (docs/architecture.md, decision 2).
 */
import { CovenantError, isCovenantError } from '../../base/errors.js';
import { formatTxId } from '../../base/ids.js';
import { Governance, type GovOutcome, type GovRequest, type HostDataRecord, type JsEngine, type JwtIssuerRecord, loadJsEngine, type SandboxLimits } from '../../gov/index.js';
import type { KeyMetadata } from '../../jwt/index.js';
import type { Tx } from '../../kv/index.js';
import type { NodeGovernanceHost } from '../../node/api.js';
import { SINGLETON_KEY, TableDefs, type NodeInfo } from '../../node/tables.js';
import { isoSeconds } from '../../node/reports.js';
import { certificateValidity } from '../../crypto/index.js';
import { json, type RequestContext, type Route } from '../route.js';
import { TRANSACTION_ID_HEADER } from '../pipeline.js';

export interface GovernanceFrontendOptions {
  /** The node's clock (ms since the Unix epoch), against which created_at is checked. */
  readonly nowMs: () => number;
  readonly sandboxLimits?: SandboxLimits;
  /** Checks a set_js_app bundle (the application frontend's engine); without it such proposals are refused. */
  readonly checkAppBundle?: (bundle: unknown) => void;
  /** The sandbox engine to run the constitution in (several nodes of one process may share one); default: one loaded here. */
  readonly sandbox?: Promise<JsEngine>;
}

export function governanceRoutes(node: NodeGovernanceHost, options: GovernanceFrontendOptions): Route[] {
  // Start loading at once so that the first governance request does not wait for it.
  const governance: Promise<Governance> = (options.sandbox ?? loadJsEngine()).then(
    (engine) =>
      new Governance({
        engine,
        nowMs: options.nowMs,
        certificates: node.certificateRenewer,
        ...(options.sandboxLimits ? { sandboxLimits: options.sandboxLimits } : {}),
        ...(options.checkAppBundle ? { checkAppBundle: options.checkAppBundle } : {}),
      }),
  );
  governance.catch((e: unknown) => node.logger.fail('governance sandbox could not be loaded', { reason: (e as Error).message }));

  const request = (ctx: RequestContext): GovRequest => {
    const contentType = ctx.headers['content-type'];
    return { body: new Uint8Array(ctx.rawBody.buffer, ctx.rawBody.byteOffset, ctx.rawBody.byteLength), contentType };
  };

  /** Runs a governance write in one transaction; logs refusals. Its effects are the node's (src/node/gov-effects.ts). */
  const write = async <T>(ctx: RequestContext, fn: (gov: Governance, tx: Tx, req: GovRequest) => GovOutcome<T>) => {
    const gov = await governance;
    // A sandbox worker replaced after a previous request hit a limit is awaited here, outside the
    // transaction, rather than waited for synchronously inside it.
    await gov.ready();
    const req = request(ctx);
    let written: { result: GovOutcome<T>; txId: ReturnType<NodeGovernanceHost['executeWrite']>['txId'] };
    try {
      written = ctx.state.write((tx) => fn(gov, tx, req));
    } catch (e) {
      if (isCovenantError(e)) node.logger.info('governance request refused', { path: ctx.path, code: e.code, reason: e.message });
      throw e;
    }
    const { result, txId } = written;
    node.logger.info('governance request accepted', { path: ctx.path, member_id: result.memberId, ...(txId ? { transaction_id: formatTxId(txId) } : {}) });
    return json(200, result.body);
  };

  const read = async <T>(fn: (gov: Governance, tx: Tx) => T) => {
    const gov = await governance;
    return json(200, node.executeRead((tx) => fn(gov, tx)));
  };

  const cose = { 401: 'Not signed by a known member, or badly signed', 415: 'Not application/cose' } as const;

  return [
    {
      method: 'POST',
      path: '/gov/members/proposals:create',
      summary: 'Creates a proposal {"actions": [{"name", "args"}]} (COSE_Sign1, msg type "proposal")',
      responses: cose,
      handler: (ctx) => write(ctx, (gov, tx, req) => gov.createProposal(tx, req)),
    },
    {
      method: 'GET',
      path: '/gov/members/proposals',
      summary: 'Every proposal with its state',
      handler: () => read((gov, tx) => ({ proposals: gov.listProposals(tx) })),
    },
    {
      method: 'GET',
      path: '/gov/members/proposals/{proposal_id}',
      summary: 'One proposal: proposer, state, ballot count, votes and failures',
      handler: ({ params }) => read((gov, tx) => gov.proposal(tx, params.proposal_id!)),
    },
    {
      method: 'GET',
      path: '/gov/members/proposals/{proposal_id}/actions',
      summary: 'The actions of a proposal',
      handler: ({ params }) => read((gov, tx) => gov.proposalActions(tx, params.proposal_id!)),
    },
    {
      method: 'POST',
      path: '/gov/members/proposals/{proposal_id}/ballots/{member_id}:submit',
      summary: 'Submits a ballot {"ballot": "export function vote(proposal, proposerId) {...}"} (msg type "ballot")',
      responses: cose,
      handler: (ctx) => write(ctx, (gov, tx, req) => gov.submitBallot(tx, req, ctx.params.proposal_id!, ctx.params.member_id!)),
    },
    {
      method: 'GET',
      path: '/gov/members/proposals/{proposal_id}/ballots/{member_id}',
      summary: "A member's ballot on a proposal",
      handler: ({ params }) => read((gov, tx) => gov.ballot(tx, params.proposal_id!, params.member_id!)),
    },
    {
      method: 'POST',
      path: '/gov/members/proposals/{proposal_id}:withdraw',
      summary: 'Withdraws an open proposal (proposer only; msg type "withdrawal")',
      responses: cose,
      handler: (ctx) => write(ctx, (gov, tx, req) => gov.withdrawProposal(tx, req, ctx.params.proposal_id!)),
    },
    {
      method: 'POST',
      path: '/gov/members/state-digests/{member_id}:update',
      summary: 'Records and returns the state digest the member must acknowledge (msg type "state_digest")',
      responses: cose,
      handler: (ctx) => write(ctx, (gov, tx, req) => gov.updateStateDigest(tx, req, ctx.params.member_id!, node.treeRootHex())),
    },
    {
      method: 'POST',
      path: '/gov/members/state-digests/{member_id}:ack',
      summary: 'Acknowledges the recorded state digest {"state_digest"}; an Accepted member becomes Active (msg type "ack")',
      responses: cose,
      handler: (ctx) => write(ctx, (gov, tx, req) => gov.ackStateDigest(tx, req, ctx.params.member_id!)),
    },
    {
      method: 'GET',
      path: '/gov/members/state-digests/{member_id}',
      summary: 'The state digest recorded for a member',
      handler: ({ params }) => read((gov, tx) => gov.stateDigest(tx, params.member_id!)),
    },
    {
      method: 'GET',
      path: '/gov/members',
      summary: 'Every member: status, data, certificate, encryption key',
      handler: () => read((gov, tx) => ({ members: gov.members(tx) })),
    },
    {
      method: 'GET',
      path: '/gov/members/{member_id}',
      summary: 'One member',
      handler: ({ params }) => read((gov, tx) => gov.member(tx, params.member_id!)),
    },
    {
      method: 'GET',
      path: '/gov/service/info',
      summary: 'Service status, certificate, recovery count and data',
      handler: () => read((_gov, tx) => serviceInfoBody(tx)),
    },
    {
      method: 'GET',
      path: '/gov/service/constitution',
      summary: 'The constitution in force (JavaScript)',
      handler: () => read((gov, tx) => ({ constitution: gov.constitution(tx) })),
    },
    {
      method: 'GET',
      path: '/gov/service/members',
      summary: 'Every member of the consortium',
      handler: () => read((gov, tx) => ({ members: gov.members(tx) })),
    },
    {
      method: 'GET',
      path: '/gov/service/nodes',
      summary: 'Every node with its governance status',
      handler: () => read((_gov, tx) => ({ nodes: nodeRecords(tx) })),
    },
    {
      method: 'GET',
      path: '/gov/service/nodes/{node_id}',
      summary: 'One node with its governance status',
      handler: ({ params }) =>
        read((_gov, tx) => {
          const found = nodeRecords(tx).find((n) => n.node_id === params.node_id);
          if (!found) throw new CovenantError('ResourceNotFound', `No node with id ${params.node_id} is known to the service`, 404);
          return found;
        }),
    },
    {
      method: 'GET',
      path: '/gov/service/jwk',
      summary: 'Token issuers and their signing keys by kid (set_jwt_issuer, set_jwt_public_signing_keys, key refresh)',
      handler: () =>
        read((_gov, tx) => {
          const issuers: Record<string, JwtIssuerRecord> = {};
          tx.table(TableDefs.jwtIssuers).forEach((value, key) => {
            issuers[key] = value;
          });
          const keys: Record<string, KeyMetadata[]> = {};
          tx.table(TableDefs.jwtPublicSigningKeys).forEach((value, key) => {
            keys[key] = value;
          });
          return { issuers, keys };
        }),
    },
    {
      method: 'GET',
      path: '/gov/service/join-policy',
      summary: 'Trusted code measurements and host data, and the node join policy',
      handler: () =>
        read((_gov, tx) => {
          const hostData: Record<string, HostDataRecord> = {};
          tx.table(TableDefs.hostData).forEach((value, key) => {
            hostData[key] = value;
          });
          const measurements: string[] = [];
          tx.table(TableDefs.virtualMeasurements).forEach((_value, key) => {
            measurements.push(key);
          });
          const policy = tx.table(TableDefs.joinPolicy).get(SINGLETON_KEY) ?? null;
          return { measurements, host_data: hostData, policy };
        }),
    },
    // Disaster recovery with recovery shares (docs/recovery.md).
    {
      method: 'GET',
      path: '/gov/recovery/encrypted-shares/{member_id}',
      summary: "The member's encrypted recovery share of the last issue (RSA-OAEP-SHA256 to its encryption key, base64)",
      responses: { 404: 'The member holds no recovery share' },
      handler: ({ params }) => json(200, node.recoveryEncryptedShare(params.member_id!)),
    },
    {
      method: 'POST',
      path: '/gov/recovery/members/{member_id}:recover',
      summary: 'Submits a member\'s decrypted recovery share {"share": "<base64>"} while the service waits for shares (COSE_Sign1, msg type "recovery_share")',
      responses: { ...cose, 403: 'Not waiting for shares, or not a recovery member', 409: 'Already submitted' },
      handler: async (ctx) => {
        const gov = await governance;
        const verified = node.executeRead((tx) => gov.recoveryShareRequest(tx, request(ctx), ctx.params.member_id!));
        try {
          const { txId, ...answer } = await node.submitRecoveryShare(verified.memberId, verified.share, verified.record);
          node.logger.info('recovery share accepted', { member_id: verified.memberId, submitted: answer.submitted_count, threshold: answer.recovery_threshold });
          return json(200, answer, txId ? { [TRANSACTION_ID_HEADER]: formatTxId(txId) } : undefined);
        } catch (e) {
          if (isCovenantError(e)) node.logger.info('recovery share refused', { member_id: verified.memberId, code: e.code, reason: e.message });
          throw e;
        }
      },
    },
  ];
}

function serviceInfoBody(tx: Tx): Record<string, unknown> {
  const info = tx.table(TableDefs.serviceInfo).get(SINGLETON_KEY);
  if (!info) throw new CovenantError('ServiceNotStarted', 'the service record does not exist yet', 503);
  return {
    status: info.status,
    certificate: info.cert,
    certificate_valid_to: validToOf(info.cert),
    recovery_count: info.recovery_count,
    service_data: info.service_data ?? null,
    current_service_create_txid: info.current_service_create_txid ?? null,
    configuration: tx.table(TableDefs.serviceConfig).get(SINGLETON_KEY) ?? {},
  };
}

/** When a certificate expires (ISO 8601, UTC), as members see it before they renew it. */
function validToOf(pem: string | undefined): string | null {
  return pem ? isoSeconds(certificateValidity(pem).notAfter) : null;
}

function nodeRecords(tx: Tx): Record<string, unknown>[] & { node_id: string }[] {
  const out: ({ node_id: string } & Record<string, unknown>)[] = [];
  const certs = tx.table(TableDefs.nodesEndorsedCertificates);
  tx.table(TableDefs.nodesInfo).forEach((info: NodeInfo, id: string) => {
    out.push({
      node_id: id,
      status: info.status,
      retired_committed: info.retired_committed ?? false,
      node_data: info.node_data ?? null,
      rpc_interfaces: info.rpc_interfaces,
      certificate: certs.get(id) ?? null,
      certificate_valid_to: validToOf(certs.get(id)),
    });
  });
  return out;
}
