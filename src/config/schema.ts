/**
 * The `node.json` schema. Every object is strict: a misspelt key is an error rather than a
 * silently ignored setting. The schema is built per base folder because relative paths are
 * resolved while parsing.
 */
import { z } from 'zod';
import { MAX_REQUEST_BODY_BYTES } from '../base/channels.js';
import { address, durationMs, isIpv4, isIpv6, pathIn, positiveDurationMs, sizeBytes } from './fields.js';

export const COMMAND_TYPES = ['Start', 'Join', 'Recover'] as const;
export const OPERATOR_FEATURES = ['LedgerChunkRead', 'SnapshotRead', 'SnapshotCreate'] as const;
export const LOG_FORMATS = ['Text', 'Json'] as const;
/** ledger.durability: when appended entries count as held (docs/configuration.md, "Durability"). */
export const DURABILITIES = ['Synced', 'Replicated'] as const;
/** node_certificate.curve_id: the curve of the node's key, hence of its signatures (CCF's names). */
export const NODE_CURVE_IDS = ['Secp384R1', 'Secp256R1'] as const;
/** consensus.election_timeout's default (member JavaScript's time budget is asserted well under it: src/node/limits.ts). */
export const ELECTION_TIMEOUT_DEFAULT_MS = 1000;
export const LOG_LEVELS = ['trace', 'debug', 'info', 'fail', 'fatal'] as const;

/** A DNS name in a certificate; a leading "*." wildcard label is allowed. */
const DNS_NAME = /^(?:\*\.)?[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$/;

function subjectAltName() {
  return z
    .string()
    .superRefine((text, ctx) => {
      const match = /^(iPAddress|dNSName):(.+)$/.exec(text);
      const ok = match !== null && (match[1] === 'iPAddress' ? isIpv4(match[2]!) || isIpv6(match[2]!) : DNS_NAME.test(match[2]!));
      if (!ok) {
        ctx.addIssue({
          code: 'custom',
          message: `"${text}" is not a subject alternative name (examples: "iPAddress:127.0.0.1", "dNSName:node0.example.com")`,
          input: text,
        });
      }
    })
    .meta({ description: '"iPAddress:<ip>" or "dNSName:<name>"' });
}

function uniqueNames(items: readonly { name: string }[], ctx: z.core.$RefinementCtx<unknown>): void {
  const seen = new Set<string>();
  items.forEach((item, i) => {
    if (seen.has(item.name)) ctx.addIssue({ code: 'custom', message: `name "${item.name}" is used twice`, path: [i, 'name'] });
    seen.add(item.name);
  });
}

const RPC_INTERFACE_DEFAULTS = { maxBodySize: '1MB', maxOpenSessions: 1000, tlsHandshakeTimeout: '10s', firstRequestTimeout: '10s' } as const;

/** An IP address (v4 or v6), as a client's source address appears. */
function ipAddress() {
  return z
    .string()
    .refine((text) => isIpv4(text) || isIpv6(text), { message: 'not an IP address (examples: "127.0.0.1", "::1")' })
    .meta({ description: 'an IPv4 or IPv6 address' });
}

/** The smallest max_waiting_work_size (waitingWorkBytesMin in src/node/limits.ts, which asserts why). */
export const WAITING_WORK_SIZE_MIN_BYTES = 1024 * 1024;
/**
 * node_to_node_interface defaults: the time an incoming connection has to complete its TLS
 * handshake and present a peer's key, and how many such connections are held at once (each
 * address holding at most half of them); connections beyond are closed (docs/configuration.md).
 */
const NODE_TO_NODE_DEFAULTS = { handshakeTimeout: '5s', maxUnauthenticatedConnections: 256 } as const;

export function nodeConfigSchema(baseDir: string) {
  const file = pathIn(baseDir);
  const validityDays = z.int().min(1);

  const member = z.strictObject({
    certificate_file: file,
    encryption_public_key_file: file.optional(),
    data_json_file: file.optional(),
  });
  const user = z.strictObject({ certificate_file: file, data_json_file: file.optional() });
  const serviceConfiguration = z.strictObject({
    recovery_threshold: z.int().min(1).optional(),
    maximum_node_certificate_validity_days: validityDays.optional(),
    maximum_service_certificate_validity_days: validityDays.optional(),
  });
  const start = z.strictObject({
    members: z.array(member).min(1, 'a new service needs at least one member'),
    users: z.array(user).default([]),
    constitution_files: z.array(file).default([]),
    service_configuration: serviceConfiguration.prefault({}),
    initial_service_certificate_validity_days: validityDays.default(1),
  });
  const join = z.strictObject({
    target_rpc_address: address(),
    retry_timeout: positiveDurationMs().prefault('1000ms'),
    fetch_recent_snapshot: z.boolean().default(true),
    host_data_transparent_statement_path: file.optional(),
  });
  const recover = z.strictObject({
    initial_service_certificate_validity_days: validityDays.default(1),
    previous_service_identity_file: file.optional(),
  });
  const command = z.strictObject({
    type: z.enum(COMMAND_TYPES),
    service_certificate_file: file.prefault('service_cert.pem'),
    start: start.optional(),
    join: join.optional(),
    recover: recover.optional(),
  });

  const rpcInterfaceFields = {
    bind_address: address(),
    published_address: address().optional(),
    enabled_operator_features: z.array(z.enum(OPERATOR_FEATURES)).default([]),
    max_body_size: sizeBytes(1, {
      bytes: MAX_REQUEST_BODY_BYTES,
      text: '32MB',
      why: 'a backup forwards a request to the primary in one node-to-node message',
    }).prefault(RPC_INTERFACE_DEFAULTS.maxBodySize),
    max_open_sessions: z.int().min(1).default(RPC_INTERFACE_DEFAULTS.maxOpenSessions),
    /** Absent: defaultMaxSessionsPerAddress(max_open_sessions), decided where the interface is built. */
    max_sessions_per_address: z.int().min(1).optional(),
    tls_handshake_timeout: positiveDurationMs().prefault(RPC_INTERFACE_DEFAULTS.tlsHandshakeTimeout),
    first_request_timeout: positiveDurationMs().prefault(RPC_INTERFACE_DEFAULTS.firstRequestTimeout),
    /** Absent: pipelinedRequestsPerSessionDefault (src/node/limits.ts). */
    max_pipelined_requests: z.int().min(1).optional(),
    /** Absent: requestsPerSecondPerAddressDefault (src/node/limits.ts). */
    max_requests_per_second_per_address: z.number().positive().max(1e9).optional(),
    /** Absent: requestBurstPerAddressFactor seconds of the rate (src/node/limits.ts). */
    max_request_burst_per_address: z.int().min(1).optional(),
    /** Absent: requestRateExemptAddressesDefault (src/node/limits.ts). */
    request_rate_exempt_addresses: z.array(ipAddress()).max(256).optional(),
  };
  const namedRpcInterfaces = z
    .record(z.string().min(1), z.strictObject(rpcInterfaceFields))
    .refine((r) => Object.keys(r).length > 0, 'at least one RPC interface is needed');
  const listedRpcInterfaces = z
    .array(z.strictObject({ name: z.string().min(1).optional(), ...rpcInterfaceFields }))
    .min(1, 'at least one RPC interface is needed')
    .superRefine((list, ctx) => uniqueNames(list.map((entry, i) => ({ name: entry.name ?? `interface_${i}` })), ctx));

  const location = z.strictObject({ name: z.string().min(1), address: address() });

  return z.strictObject({
    command,
    node_certificate: z
      .strictObject({
        subject_alt_names: z.array(subjectAltName()).optional(),
        curve_id: z.enum(NODE_CURVE_IDS).default('Secp384R1'),
        initial_validity_days: validityDays.default(1),
      })
      .prefault({}),
    node_certificate_file: file.prefault('node_cert.pem'),
    /** The spec's spelling of command.service_certificate_file (one of the two, not both). */
    service_certificate_file: file.optional(),
    node_data_json_file: file.optional(),
    service_data_json_file: file.optional(),
    rpc_interfaces: z.union([namedRpcInterfaces, listedRpcInterfaces]),
    node_to_node_interface: z
      .strictObject({
        bind_address: address().default('127.0.0.1:0'),
        published_address: address().optional(),
        handshake_timeout: positiveDurationMs().prefault(NODE_TO_NODE_DEFAULTS.handshakeTimeout),
        max_unauthenticated_connections: z.int().min(2).default(NODE_TO_NODE_DEFAULTS.maxUnauthenticatedConnections),
      })
      .prefault({}),
    /** Absent: waitingWorkBytesDefault (src/node/limits.ts). */
    max_waiting_work_size: sizeBytes(WAITING_WORK_SIZE_MIN_BYTES).optional(),
    ledger: z
      .strictObject({
        directory: file.prefault('ledger'),
        read_only_directories: z.array(file).default([]),
        chunk_size: sizeBytes().prefault('5MB'),
        durability: z.enum(DURABILITIES).default('Synced'),
      })
      .prefault({}),
    snapshots: z
      .strictObject({
        directory: file.prefault('snapshots'),
        read_only_directory: file.optional(),
        tx_count: z.int().min(1).default(10_000),
        time_interval: durationMs().prefault('0s'),
        min_tx_count: z.int().min(1).default(1),
        min_interval: durationMs().prefault('10s'),
        min_ledger_fraction: z.number().min(0).max(100).default(0.5),
      })
      .prefault({}),
    files_cleanup: z
      .strictObject({
        interval: positiveDurationMs().prefault('30s'),
        max_snapshots: z.int().min(1).default(10),
        max_committed_ledger_chunks: z.int().min(1).optional(),
      })
      .prefault({}),
    historical_cache: z
      .strictObject({
        max_entries: z.int().min(1).max(1_000_000).default(1000),
        max_size: sizeBytes(1).prefault('64MB'),
      })
      .prefault({}),
    ledger_signatures: z
      .strictObject({ tx_count: z.int().min(1).default(5000), delay: positiveDurationMs().prefault('100ms') })
      .prefault({}),
    consensus: z
      .strictObject({
        election_timeout: positiveDurationMs().prefault(`${ELECTION_TIMEOUT_DEFAULT_MS}ms`),
        message_timeout: positiveDurationMs().prefault('100ms'),
      })
      .prefault({}),
    pending_node_timeout: durationMs({ minMs: 1, zeroDisables: true }).prefault('1h'),
    jwt: z
      .strictObject({
        key_refresh_interval: positiveDurationMs().prefault('30min'),
        key_refresh_max_response_size: sizeBytes().prefault('1MB'),
        key_refresh_timeout: positiveDurationMs().prefault('30s'),
      })
      .prefault({}),
    logging: z
      .strictObject({ format: z.enum(LOG_FORMATS).default('Text'), level: z.enum(LOG_LEVELS).default('info') })
      .prefault({}),
    sealing_recovery: z
      .strictObject({
        location,
        /** The virtual CPU key (virtual mode's stand-in for the hardware's key derivation): created on first use, mode 0600. */
        virtual_cpu_key_file: file.prefault('virtual_cpu_key'),
        recovery_decision_protocol: z
          .strictObject({
            expected_locations: z.array(location).min(1).superRefine(uniqueNames),
            failover_timeout: durationMs({ minMs: 1, zeroDisables: true }).prefault('0ms'),
          })
          .optional(),
      })
      .optional(),
    output_files: z
      .strictObject({
        pid_file: file.optional(),
        node_to_node_address_file: file.optional(),
        rpc_addresses_file: file.optional(),
      })
      .prefault({}),
    worker_threads: z.int().min(0).default(0),
  });
}

export type NodeConfigSchema = ReturnType<typeof nodeConfigSchema>;
/** What the file may contain (durations and sizes as text, paths relative). */
export type NodeConfigInput = z.input<NodeConfigSchema>;
export type ParsedNodeConfigFile = z.output<NodeConfigSchema>;

/** JSON Schema (draft 2020-12) of `node.json`, for editors and for validating files elsewhere. */
export function nodeConfigJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(nodeConfigSchema('.'), { io: 'input', unrepresentable: 'any' }) as Record<string, unknown>;
}
