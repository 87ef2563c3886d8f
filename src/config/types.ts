/**
 * The parsed node configuration (`node.json`) with every default applied. Key names are those of
 * the file (a contract with operators and their tooling); durations are in milliseconds, sizes in
 * bytes, paths absolute (relative ones are resolved against the configuration file's folder) and
 * addresses checked "host:port" strings (see `parseHostPort`).
 */
import type { LogLevel } from '../base/log.js';

export type { LogLevel };
export type CommandType = 'Start' | 'Join' | 'Recover';
export type OperatorFeature = 'LedgerChunkRead' | 'SnapshotRead' | 'SnapshotCreate';
export type LogFormat = 'Text' | 'Json';
/** The curve of the node's key: secp384r1 (P-384, ES384 signatures) or secp256r1 (P-256, ES256). */
export type NodeCurveId = 'Secp384R1' | 'Secp256R1';

export interface MemberConfig {
  certificate_file: string;
  /** Needed for a recovery member (one that receives a recovery share). */
  encryption_public_key_file?: string | undefined;
  data_json_file?: string | undefined;
}

export interface UserConfig {
  certificate_file: string;
  data_json_file?: string | undefined;
}

/** Service configuration recorded at Start; absent keys take the governance defaults. */
export interface ServiceConfigurationConfig {
  recovery_threshold?: number | undefined;
  maximum_node_certificate_validity_days?: number | undefined;
  maximum_service_certificate_validity_days?: number | undefined;
}

export interface StartCommandConfig {
  /** At least one. */
  members: MemberConfig[];
  users: UserConfig[];
  constitution_files: string[];
  service_configuration: ServiceConfigurationConfig;
  initial_service_certificate_validity_days: number;
}

export interface JoinCommandConfig {
  target_rpc_address: string;
  /** Poll interval of a Pending node, in milliseconds. */
  retry_timeout: number;
  fetch_recent_snapshot: boolean;
  host_data_transparent_statement_path?: string | undefined;
}

export interface RecoverCommandConfig {
  initial_service_certificate_validity_days: number;
  previous_service_identity_file?: string | undefined;
}

interface CommandSections {
  /** Written at Start; read (as the TLS trust anchor) by a joining node. */
  service_certificate_file: string;
  start?: StartCommandConfig | undefined;
  join?: JoinCommandConfig | undefined;
  recover?: RecoverCommandConfig | undefined;
}

/** The section of the active command is always present (defaults filled in for Recover). */
export type CommandConfig =
  | (CommandSections & { type: 'Start'; start: StartCommandConfig })
  | (CommandSections & { type: 'Join'; join: JoinCommandConfig })
  | (CommandSections & { type: 'Recover'; recover: RecoverCommandConfig });

export interface NodeCertificateConfig {
  /** "iPAddress:<ip>" or "dNSName:<name>"; when absent, the hosts of the RPC interfaces' published addresses. */
  subject_alt_names?: string[];
  curve_id: NodeCurveId;
  initial_validity_days: number;
}

export interface RpcInterfaceConfig {
  bind_address: string;
  /** The address clients use; equals bind_address unless set. */
  published_address: string;
  enabled_operator_features: OperatorFeature[];
  max_body_size: number;
  max_open_sessions: number;
  /** Connections one client address may hold; absent: half of max_open_sessions, at least 100. */
  max_sessions_per_address?: number | undefined;
  /** Milliseconds from TCP accept to a completed TLS handshake. */
  tls_handshake_timeout: number;
  /** Milliseconds from the TLS handshake to the first request's headers. */
  first_request_timeout: number;
  /** Requests one connection may have in flight (pipelined); absent: the node's default (32). */
  max_pipelined_requests?: number | undefined;
  /** Requests per second one client address may send (token bucket refill); absent: the node's default. */
  max_requests_per_second_per_address?: number | undefined;
  /** Requests one client address may send at once beyond its rate (bucket size); absent: twice the rate. */
  max_request_burst_per_address?: number | undefined;
  /** Client addresses not rate-limited; absent: the loopback addresses. */
  request_rate_exempt_addresses?: string[] | undefined;
}

export interface NodeToNodeInterfaceConfig {
  bind_address: string;
  published_address: string;
  /** Milliseconds from TCP accept to a completed TLS handshake with a known peer's key. */
  handshake_timeout: number;
  /** Incoming connections held before they are known to come from a peer (each address holding at most half). */
  max_unauthenticated_connections: number;
}

export interface LedgerConfig {
  directory: string;
  read_only_directories: string[];
  /** Bytes. */
  chunk_size: number;
  /**
   * Synced: appended entries are made durable (one fdatasync per batch) before this node
   * acknowledges them or, on the primary, counts its own copy towards commit. Replicated: they
   * count once written (in the page cache), which loses committed transactions if a majority of
   * nodes loses power at once.
   */
  durability: 'Synced' | 'Replicated';
}

export interface SnapshotsConfig {
  directory: string;
  read_only_directory?: string | undefined;
  tx_count: number;
  /** Milliseconds; 0 turns time-based snapshots off. */
  time_interval: number;
  min_tx_count: number;
  /**
   * Milliseconds: POST /node/snapshot:create asks for at most one snapshot per this interval
   * (beyond: 429 with Retry-After); 0 turns the limit off.
   */
  min_interval: number;
  /** An automatic snapshot also waits for this fraction of the previous snapshot's size in new ledger bytes (0: no wait). */
  min_ledger_fraction: number;
}

export interface FilesCleanupConfig {
  /** Milliseconds. */
  interval: number;
  /** Committed snapshots kept in snapshots.directory (default 10: snapshots are large, and each is a whole state). */
  max_snapshots: number;
  max_committed_ledger_chunks?: number | undefined;
}

/** The historical cache of application historical endpoints (docs/apps.md). */
export interface HistoricalCacheConfig {
  /** Ledger entries cached (each decoded, private part in clear). */
  max_entries: number;
  /** Bytes the cached entries hold, estimated. */
  max_size: number;
}

export interface LedgerSignaturesConfig {
  tx_count: number;
  /** Milliseconds. */
  delay: number;
}

export interface ConsensusConfig {
  /** Milliseconds. */
  election_timeout: number;
  /** Milliseconds. */
  message_timeout: number;
}

export interface JwtConfig {
  /** Milliseconds. */
  key_refresh_interval: number;
  /** Bytes. */
  key_refresh_max_response_size: number;
  /** Milliseconds: the total deadline of one issuer's fetch (discovery document and JWKS). */
  key_refresh_timeout: number;
}

export interface LoggingConfig {
  format: LogFormat;
  level: LogLevel;
}

export interface SealingLocationConfig {
  name: string;
  address: string;
}

export interface RecoveryDecisionProtocolConfig {
  expected_locations: SealingLocationConfig[];
  /** Milliseconds; 0 disables failover (the default, because failover can fork the service). */
  failover_timeout: number;
}

export interface SealingRecoveryConfig {
  location: SealingLocationConfig;
  /** Virtual mode's per-machine CPU key: "the same CPU" means the same file (created with mode 0600). */
  virtual_cpu_key_file: string;
  recovery_decision_protocol?: RecoveryDecisionProtocolConfig | undefined;
}

/** Files the node writes once it runs, for scripts and test harnesses that start it. */
export interface OutputFilesConfig {
  /** The node's process id. */
  pid_file?: string | undefined;
  /** JSON string: the node-to-node address actually bound (useful with port 0). */
  node_to_node_address_file?: string | undefined;
  /** JSON object: interface name -> address actually bound (useful with port 0). */
  rpc_addresses_file?: string | undefined;
}

export interface NodeConfig {
  command: CommandConfig;
  node_certificate: NodeCertificateConfig;
  node_certificate_file: string;
  node_data_json_file?: string | undefined;
  service_data_json_file?: string | undefined;
  /** Parsed content of node_data_json_file, when set. */
  node_data?: unknown;
  /** Parsed content of service_data_json_file, when set. */
  service_data?: unknown;
  /** By name; an array in the file is named interface_0, interface_1, ... unless entries carry a name. */
  rpc_interfaces: Record<string, RpcInterfaceConfig>;
  node_to_node_interface: NodeToNodeInterfaceConfig;
  /** Bytes of waiting requests the node holds at once; absent: the node's default (64 MiB). */
  max_waiting_work_size?: number | undefined;
  ledger: LedgerConfig;
  snapshots: SnapshotsConfig;
  files_cleanup: FilesCleanupConfig;
  historical_cache: HistoricalCacheConfig;
  ledger_signatures: LedgerSignaturesConfig;
  consensus: ConsensusConfig;
  /** Milliseconds; 0 disables the removal of silent Pending nodes. */
  pending_node_timeout: number;
  jwt: JwtConfig;
  logging: LoggingConfig;
  sealing_recovery?: SealingRecoveryConfig | undefined;
  output_files: OutputFilesConfig;
  /** Accepted for compatibility with existing configurations; transactions run on one thread. */
  worker_threads: number;
}
