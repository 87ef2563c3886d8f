/**
 * The operator frontend: every route of the spec's operator RPC table under /node. Operator RPCs
 * need no authentication (spec Authentication 1). Routes whose capability is not built yet still
 * exist and answer a JSON error naming what is missing.
 */
import { z } from 'zod';
import { CovenantError } from '../../base/errors.js';
import { parseTxId } from '../../base/ids.js';
import type { NodeOperatorQueries } from '../../node/api.js';
import type { NodeSummary } from '../../node/reports.js';
import { TableDefs, type NodeInfo } from '../../node/tables.js';
import { X509Certificate } from 'node:crypto';
import { JoinRequestSchema } from '../../node/join.js';
import { booleanQuery, integerQuery, json, noContent, type Route } from '../route.js';


/**
 * What a receipt route answers. A receipt of a transaction whose Merkle block was compacted waits
 * (asynchronously, the request thread free) for the block's leaves to be re-read from the ledger.
 */
const RECEIPT_RESPONSES = {
  200: 'Receipt',
  202: 'Not committed yet, but known to this node (see Retry-After)',
  404: 'TransactionInvalid: never committed; TransactionUnknown: beyond the last seqno this node knows of; HistoricalDataUnavailable',
  503: 'ReceiptRebuildsBusy: as many Merkle blocks as allowed are being re-read (see Retry-After)',
} as const;

function nodeNotFound(id: string): CovenantError {
  return new CovenantError('ResourceNotFound', `No node with id ${id} is known to the service`, 404);
}

export interface OperatorFrontendOptions {
  readonly node: NodeOperatorQueries;
  /** Returns the full OpenAPI document of every route the node serves. */
  readonly openApi: () => unknown;
  /** Published address of the primary's RPC interface named like the request's (else its first), for redirects. */
  readonly primaryAddress: (interfaceName?: string) => string | undefined;
  /** GET /node/js_metrics: the figures of the hosted JavaScript application, when the node hosts one. */
  readonly jsMetrics?: () => unknown;
  readonly historicalCache?: () => unknown;
  readonly indexStrategies?: () => unknown[];
}

export function operatorRoutes({ node, openApi, primaryAddress, jsMetrics, historicalCache, indexStrategies }: OperatorFrontendOptions): Route[] {
  const nodeSummaries = (): NodeSummary[] => node.listNodes();
  const routes: Route[] = [
    {
      method: 'GET',
      path: '/node/api',
      summary: 'OpenAPI document of every route this node serves',
      handler: () => json(200, openApi()),
    },
    {
      method: 'POST',
      path: '/node/join',
      summary: 'A joining node asks to be recorded (and, once trusted, receives the network secrets)',
      body: JoinRequestSchema,
      mode: 'operator',
      responses: {
        200: 'Join answer: Pending, or Trusted with the network information',
        308: 'Redirect to the primary',
        429: 'TooManyJoinRequests: this client address sent join requests beyond its rate (see Retry-After)',
        503: 'TooManyPendingNodes: the service holds its most Pending nodes (see Retry-After); NoPrimary',
      },
      handler: async ({ body, clientCertificateDer, remoteAddress, interfaceName }) => {
        if (!node.isPrimary()) {
          const address = primaryAddress(interfaceName);
          if (!address) throw new CovenantError('NoPrimary', 'no primary is known at the moment: retry the join shortly', 503);
          return { status: 308, headers: { location: `https://${address}/node/join` }, bodyKind: 'none' };
        }
        let publicKeyDer: Uint8Array | undefined;
        if (clientCertificateDer) {
          try {
            publicKeyDer = new X509Certificate(clientCertificateDer).publicKey.export({ type: 'spki', format: 'der' });
          } catch {
            publicKeyDer = undefined;
          }
        }
        return json(200, await node.handleJoin(body, publicKeyDer, remoteAddress));
      },
    },
    {
      method: 'GET',
      path: '/node/state',
      summary: 'Lifecycle state of this node',
      handler: () => json(200, node.stateReport()),
    },
    {
      method: 'GET',
      path: '/node/version',
      summary: 'Version of the running node',
      handler: () => json(200, node.versionReport()),
    },
    {
      method: 'GET',
      path: '/node/commit',
      summary: 'Latest committed transaction id',
      query: z.object({ view_history: booleanQuery.optional(), view_history_since: integerQuery.optional() }).strict(),
      handler: ({ query }) => {
        const txId = node.commitTxId();
        const body: Record<string, unknown> = { transaction_id: `${txId.view}.${txId.seqno}` };
        if (query.view_history || query.view_history_since !== undefined) body.view_history = node.viewHistory(query.view_history_since ?? 0);
        return json(200, body);
      },
    },
    {
      method: 'GET',
      path: '/node/consensus',
      summary: 'Consensus state: current view and active configurations',
      handler: () => json(200, node.consensusReport()),
    },
    {
      method: 'GET',
      path: '/node/network',
      summary: 'Service record: status, certificate, recovery count, service data',
      handler: () => json(200, node.networkReport()),
    },
    {
      method: 'GET',
      path: '/node/network/nodes',
      summary: 'Nodes of the network, filtered by host, port and status',
      query: z
        .object({
          host: z.string().optional(),
          port: integerQuery.refine((port) => port <= 65535, 'must be a port number (0 to 65535)').optional(),
          status: z.enum(['Pending', 'Trusted', 'Retired']).optional(),
        })
        .strict(),
      handler: ({ query }) => {
        const nodes = nodeSummaries().filter((n) => {
          if (query.status && n.status !== query.status) return false;
          if (query.host !== undefined || query.port !== undefined) {
            return Object.values(n.rpc_interfaces).some((i) => {
              const { host, port } = splitAddress(i.published_address);
              return (query.host === undefined || host === query.host) && (query.port === undefined || (port !== '' && Number(port) === query.port));
            });
          }
          return true;
        });
        return json(200, { nodes });
      },
    },
    {
      method: 'GET',
      path: '/node/network/nodes/self',
      summary: 'This node',
      handler: () => {
        const self = nodeSummaries().find((n) => n.node_id === node.nodeId);
        if (!self) throw nodeNotFound(node.nodeId);
        return json(200, self);
      },
    },
    {
      method: 'GET',
      path: '/node/network/nodes/primary',
      summary: 'The current primary',
      handler: () => {
        const primary = nodeSummaries().find((n) => n.primary);
        if (!primary) throw new CovenantError('PrimaryNotFound', 'No primary is known to this node', 404);
        return json(200, primary);
      },
    },
    {
      method: 'GET',
      path: '/node/network/nodes/{node_id}',
      summary: 'One node by id',
      handler: ({ params }) => {
        const found = nodeSummaries().find((n) => n.node_id === params.node_id);
        if (!found) throw nodeNotFound(params.node_id!);
        return json(200, found);
      },
    },
    {
      method: 'DELETE',
      path: '/node/network/nodes/{node_id}',
      summary: 'Deletes a retired node listed in removable_nodes',
      handler: ({ params, state }) => {
        // A direct table write, not a proposal: members already retired the node, and its
        // retirement is committed (retired_committed), so only the record is left to remove.
        const id = params.node_id!;
        state.write((tx) => {
          const nodes = tx.table(TableDefs.nodesInfo);
          const info = nodes.get(id);
          if (!info) throw nodeNotFound(id);
          if (info.status !== 'Retired' || info.retired_committed !== true) {
            throw new CovenantError(
              info.status === 'Retired' ? 'NodeNotRemovable' : 'NodeNotRetired',
              info.status === 'Retired'
                ? `Node ${id} is Retired but its retirement is not committed yet; wait until it is listed in /node/network/removable_nodes`
                : `Node ${id} is ${info.status}; only retired nodes listed in /node/network/removable_nodes can be deleted`,
              400,
            );
          }
          nodes.remove(id);
          tx.table(TableDefs.nodesEndorsedCertificates).remove(id);
        });
        return json(200, { node_id: id, deleted: true });
      },
    },
    {
      method: 'GET',
      path: '/node/network/removable_nodes',
      summary: 'Retired nodes whose retirement is committed and that can be stopped and deleted',
      handler: () => json(200, { nodes: nodeSummaries().filter((n) => n.status === 'Retired' && n.retired_committed === true) }),
    },
    {
      method: 'HEAD',
      path: '/node/primary',
      summary: 'Redirects (308) to the current primary; the primary itself answers 200',
      responses: { 200: 'This node is the primary', 308: 'Redirect to the primary' },
      handler: ({ interfaceName }) => {
        // A redirect to itself would send clients that follow redirects round in a loop.
        if (node.isPrimary()) return { status: 200, bodyKind: 'none' };
        const address = primaryAddress(interfaceName);
        if (!address) throw new CovenantError('PrimaryNotFound', 'No primary is known to this node', 404);
        return { status: 308, headers: { location: `https://${address}/node/primary` }, bodyKind: 'none' };
      },
    },
    {
      method: 'GET',
      path: '/node/ready/app',
      summary: '204 when the application frontend is ready (this node is part of the network and members opened the service), 503 otherwise',
      responses: { 204: 'Ready', 503: 'Not ready' },
      handler: () => {
        if (!node.appFrontendOpen()) throw new CovenantError('FrontendNotReady', `application frontend is not ready: ${node.appFrontendClosedReason()}`, 503);
        return noContent();
      },
    },
    {
      method: 'GET',
      path: '/node/ready/gov',
      summary: '204 when the governance frontend is ready, 503 otherwise',
      responses: { 204: 'Ready', 503: 'Not ready' },
      handler: () => {
        if (node.state !== 'PartOfNetwork' && node.state !== 'PartOfPublicNetwork') {
          throw new CovenantError('FrontendNotReady', 'governance frontend is not ready', 503);
        }
        return noContent();
      },
    },
    {
      method: 'GET',
      path: '/node/self_signed_certificate',
      summary: "This node's self-signed certificate (TLS CA for a node not yet endorsed)",
      handler: () => json(200, { self_signed_certificate: node.selfSignedCertificatePem }),
    },
    {
      method: 'GET',
      path: '/node/service/configuration',
      summary: 'Service configuration',
      handler: () => json(200, node.serviceConfiguration() ?? {}),
    },
    {
      method: 'GET',
      path: '/node/service/previous_identity',
      summary: 'Certificate of the previous service identity (after a recovery)',
      handler: () => {
        const previous = node.previousServiceIdentity();
        if (!previous) throw new CovenantError('ResourceNotFound', 'This service has not been recovered: there is no previous identity', 404);
        return json(200, { previous_service_identity: previous });
      },
    },
    {
      method: 'GET',
      path: '/node/service/endorsements',
      summary:
        'The chain of endorsements of the previous service identities (one per recovery, oldest first): with it and the current service certificate, a receipt kept from before a recovery verifies',
      handler: () => json(200, node.serviceEndorsements()),
    },
    {
      method: 'GET',
      path: '/node/quotes/self',
      summary: "This node's attestation quote (virtual mode)",
      handler: () => json(200, quoteBody(node)),
    },
    {
      method: 'GET',
      path: '/node/attestations/self',
      summary: "This node's attestation (virtual mode)",
      handler: () => json(200, quoteBody(node)),
    },
    {
      method: 'GET',
      path: '/node/attestations',
      summary: 'Attestations of every trusted node, as each presented it when it joined (virtual mode)',
      handler: () =>
        json(200, {
          attestations: node.executeRead((tx) => {
            const out: Record<string, unknown>[] = [];
            tx.table(TableDefs.nodesInfo).forEach((info, id) => {
              if (info.status === 'Trusted') out.push(quoteBodyOf(id, info.quote_info));
            });
            return out;
          }),
        }),
    },
    {
      method: 'GET',
      path: '/node/historical_cache',
      // The built-in log's historical route reads the ledger files directly; application historical endpoints use the cache.
      summary: 'The historical cache of application historical endpoints: entries and estimated bytes held, their bounds, fetches queued, done and refused, entries evicted',
      handler: () => json(200, historicalCache ? historicalCache() : { store_count: 0, entry_count: 0, estimated_size_bytes: 0 }),
    },
    {
      method: 'GET',
      path: '/node/index/strategies',
      summary: "The installed application's indexing strategies on this node, with their progress (indexed_up_to, first_seqno, state, keys, seqnos)",
      handler: () => json(200, { strategies: indexStrategies ? indexStrategies() : [] }),
    },
    {
      method: 'GET',
      path: '/node/js_metrics',
      summary: 'Metrics of the hosted JavaScript application: compiled code size, whether it is cached, the runtime options in force, executions',
      handler: () =>
        json(200, jsMetrics ? jsMetrics() : { bytecode_size: 0, bytecode_used: false, max_heap_size: 0, max_stack_size: 0, max_execution_time: 0, max_cached_interpreters: 0 }),
    },
    {
      method: 'GET',
      path: '/node/jwt_keys/refresh/metrics',
      summary: 'Token key auto-refresh on this node: attempts, successes, failures, the next delay, and per issuer its counts (timeouts included), next delay, key count, last success and last failure',
      handler: () => json(200, node.jwtRefreshMetrics()),
    },
    {
      method: 'GET',
      path: '/node/receipt',
      summary: 'Signed receipt over one transaction',
      query: z.object({ transaction_id: z.string() }).strict(),
      responses: RECEIPT_RESPONSES,
      handler: async ({ query }) => {
        const txId = parseTxId(query.transaction_id);
        if (!txId) throw new CovenantError('InvalidQueryParameterValue', `"${query.transaction_id}" is not a transaction id <view>.<seqno>`, 400);
        const receipt = await node.receipt(txId);
        if (receipt === 'pending') {
          // Not committed yet: ask again shortly.
          return json(202, { transaction_id: query.transaction_id, status: 'Pending' }, { 'retry-after': '1' });
        }
        return json(200, { transaction_id: query.transaction_id, receipt });
      },
    },
    {
      method: 'GET',
      path: '/node/receipt/cose',
      summary: 'COSE Sign1 receipt over one transaction',
      query: z.object({ transaction_id: z.string() }).strict(),
      responses: { ...RECEIPT_RESPONSES, 404: `${RECEIPT_RESPONSES[404]}; ReceiptUnavailable: a signature transaction (see /node/receipt)` },
      handler: async ({ query }) => {
        const txId = parseTxId(query.transaction_id);
        if (!txId) throw new CovenantError('InvalidQueryParameterValue', `"${query.transaction_id}" is not a transaction id <view>.<seqno>`, 400);
        const receipt = await node.coseReceipt(txId);
        if (receipt === 'pending') return json(202, { transaction_id: query.transaction_id, status: 'Pending' }, { 'retry-after': '1' });
        return { status: 200, bodyKind: 'bytes', body: receipt, headers: { 'content-type': 'application/cose' } };
      },
    },
  ];
  return routes;
}

function quoteBody(node: NodeOperatorQueries): Record<string, unknown> {
  return quoteBodyOf(node.nodeId, node.quoteInfo);
}

/** A node's quote with its virtual fields decoded (the quote was checked when the node joined). */
function quoteBodyOf(nodeId: string, info: NodeInfo['quote_info'] | undefined): Record<string, unknown> {
  let decoded: Record<string, unknown> = {};
  try {
    if (info) decoded = (JSON.parse(Buffer.from(info.quote, 'base64').toString('utf8')) as Record<string, unknown>) ?? {};
  } catch {
    // Not a virtual quote document: its fields stay absent.
  }
  return {
    node_id: nodeId,
    format: info?.format ?? 'Insecure_Virtual',
    quote: info?.quote ?? '',
    endorsements: info?.endorsements ?? '',
    measurement: decoded.measurement,
    host_data: decoded.host_data,
    report_data: decoded.report_data,
    uvm_endorsements: null,
    warning: 'virtual attestation: no hardware guarantees, never for production',
  };
}

function splitAddress(address: string): { host: string; port: string } {
  const i = address.lastIndexOf(':');
  return i === -1 ? { host: address, port: '' } : { host: address.slice(0, i), port: address.slice(i + 1) };
}
