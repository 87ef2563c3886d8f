/**
 * The join protocol between a joining node and the service (spec "States and transitions",
 * "Authentication" 2-3): the joiner POSTs /node/join to the target's RPC interface, presenting
 * its self-signed identity certificate as TLS client certificate. The primary checks the quote
 * and records the node; once the node is trusted the answer carries what it needs to become
 * part of the network (ledger secrets, service key, its endorsed certificate).
 */
import { z } from 'zod';
import { TRANSPARENT_STATEMENT_BYTES_MAX } from '../gov/transparent-statement.js';
import { SERVICE_STATUSES, type ServiceStatus } from './tables.js';
import {
  joinAddressCharsMax,
  joinNameCharsMax,
  joinNodeDataBytesMax,
  joinOperatorFeaturesMax,
  joinRpcInterfacesMax,
  joinSubjectAltNameCharsMax,
} from './limits.js';

const address = z.string().max(joinAddressCharsMax);

/** Bytes of a value as JSON (node_data is recorded as JSON). */
function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

/**
 * A join request, with every part bounded (src/node/limits.ts): what a Pending node has recorded
 * in the node table is whatever it sent, and in virtual mode anyone can send one.
 */
export const JoinRequestSchema = z
  .object({
    public_key: z.string().min(1).max(4096),
    quote_info: z.object({ format: z.string().max(joinNameCharsMax), quote: z.string().max(65536), endorsements: z.string().max(65536) }).strict(),
    node_data: z
      .unknown()
      .optional()
      .refine((value) => value === undefined || jsonBytes(value) <= joinNodeDataBytesMax, {
        message: `node_data must be at most ${joinNodeDataBytesMax} bytes as JSON`,
      }),
    rpc_interfaces: z
      .record(
        z.string().min(1).max(joinNameCharsMax),
        z
          .object({
            bind_address: address,
            published_address: address,
            enabled_operator_features: z.array(z.string().max(joinNameCharsMax)).max(joinOperatorFeaturesMax),
          })
          .strict(),
      )
      .refine((interfaces) => Object.keys(interfaces).length <= joinRpcInterfacesMax, {
        message: `at most ${joinRpcInterfacesMax} RPC interfaces`,
      }),
    node_to_node_interface: z.object({ bind_address: address, published_address: address }).strict(),
    startup_seqno: z.number().int().nonnegative(),
    subject_alt_names: z.array(z.string().max(joinSubjectAltNameCharsMax)).max(64),
    /** Base64 of a transparent statement about the node's code, for the join policy (command.join.host_data_transparent_statement_path). */
    host_data_transparent_statement: z
      .string()
      .max(Math.ceil(TRANSPARENT_STATEMENT_BYTES_MAX / 3) * 4, { message: `host_data_transparent_statement must be at most ${TRANSPARENT_STATEMENT_BYTES_MAX} bytes (base64)` })
      .regex(/^[A-Za-z0-9+/]*={0,2}$/, { message: 'host_data_transparent_statement must be base64' })
      .optional(),
    /** The node's recovery key for sealing-based recovery (sealing_recovery configured): recorded with the node. */
    sealed_recovery_key: z
      .object({
        location_name: z.string().min(1).max(joinNameCharsMax),
        recovery_public_key: z.string().min(1).max(4096),
        sealed_recovery_key: z.string().min(1).max(8192).regex(/^[A-Za-z0-9+/]*={0,2}$/, { message: 'sealed_recovery_key must be base64' }),
      })
      .strict()
      .optional(),
  })
  .strict();

export type JoinRequest = z.infer<typeof JoinRequestSchema>;

export interface NetworkInfo {
  /** PEM of the service certificate (the joiner's trust anchor from now on). */
  service_certificate: string;
  /** PEM of the service private key (a trusted node endorses later joiners with it). */
  service_key: string;
  /** Ledger secrets, base64, with the seqno from which each applies. */
  ledger_secrets: { from_seqno: number; secret: string }[];
  /** The joiner's identity certificate, endorsed by the service key. */
  endorsed_certificate: string;
  /** The configuration in force at seqno 0 (the genesis node), where replication starts. */
  genesis_configuration: { seqno: number; nodes: string[] };
  /** Trusted nodes and their node-to-node addresses, to talk to before the node table is replicated. */
  peers: { node_id: string; address: string }[];
  /** The first seqno of this service (after a disaster recovery: entries before it are the previous service's). */
  service_start_seqno?: number;
}

export interface JoinResponse {
  node_id: string;
  node_status: 'Pending' | 'Trusted';
  /**
   * The service's status as the target sees it. A Pending joiner holds no service record yet, and
   * reports this one in GET /node/network until it has replicated its own.
   */
  service_status?: ServiceStatus;
  network_info?: NetworkInfo;
}

/** The service status a join response carries, if it carries a known one. */
export function joinResponseServiceStatus(response: unknown): ServiceStatus | undefined {
  const status = (response as { service_status?: unknown } | null)?.service_status;
  return SERVICE_STATUSES.find((s) => s === status);
}

/** How a joining node reaches the target: one POST, answered (30x answers are followed by the caller). */
export interface JoinClient {
  postJoin(targetAddress: string, request: JoinRequest): Promise<{ status: number; body: unknown; location?: string; retryAfterMs?: number }>;
  /**
   * GET /node/snapshot?since=<seqno> on the target, following redirects, then the snapshot it
   * names (spec "Join from a snapshot" 3). Undefined when no newer committed snapshot exists.
   */
  fetchSnapshot?(targetAddress: string, since: number): Promise<{ name: string; bytes: Uint8Array } | undefined>;
}
