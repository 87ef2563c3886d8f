/** Shapes of the operator reports served under /node (the node computes them; src/http serves them). */
import type { NodeLifecycleState } from './lifecycle.js';
import type { NodeStatus, ServiceEndorsementRecord, ServiceStatus } from './tables.js';

export interface NodeStateReport {
  node_id: string;
  state: NodeLifecycleState;
  last_signed_seqno: number;
  startup_seqno: number;
  /** Only while recovering: the seqno up to which the public ledger has been read. */
  last_recovered_seqno?: number;
  /** Only while a Recover node runs the recovery decision protocol: its phase and what it waits for. */
  recovery_decision?: string;
}

export interface ConsensusReport {
  current_view: number;
  primary_id: string | undefined;
  role: 'Primary' | 'Backup' | 'Candidate' | 'None';
  commit_seqno: number;
  last_seqno: number;
  configs: { seqno: number; nodes: Record<string, { address: string }> }[];
  /** Per peer (on the primary): the last seqno it acknowledged, and whether it lacks entries this node no longer holds. */
  acks: Record<string, { seqno: number; needs_snapshot: boolean }>;
  /**
   * Replicated entries with a private write set that this node applied since it started: from
   * the copy in clear its primary sent beside the entry, or by decrypting the entry (entries the
   * primary read back from its ledger, as when a node catches up on older entries, and write sets
   * over 64 KiB).
   */
  private_write_sets_applied: { in_clear: number; decrypted: number };
  /** Replicated signatures this node verified while their entries synced (Synced durability), and as they were applied. */
  signatures_verified: { while_syncing: number; when_applied: number };
}

export interface NetworkReport {
  service_status: ServiceStatus;
  service_certificate: string;
  /** The service certificate's validity period (ISO 8601, UTC): members renew it before valid_to. */
  service_certificate_valid_from: string;
  service_certificate_valid_to: string;
  recovery_count: number;
  /** Set when sealing-based recovery's decision protocol opened this service: how, and by which location. */
  recovery_decision?: { open_kind: 'Election' | 'Failover'; location: string };
  service_data: unknown;
  current_view: number;
  primary_id: string | undefined;
  current_service_create_txid: string | undefined;
}

export interface NodeSummary {
  node_id: string;
  status: NodeStatus;
  primary: boolean;
  rpc_interfaces: Record<string, { bind_address: string; published_address: string; enabled_operator_features: string[] }>;
  node_data: unknown;
  last_written: number;
  retired_committed?: boolean;
  /** The validity period of the node's certificate endorsed by the service (absent before it is endorsed). */
  certificate_valid_from?: string;
  certificate_valid_to?: string;
}

/** The validity of one certificate a node serves, as GET /node/metrics shows it. */
export interface CertificateExpiry {
  valid_from: string;
  valid_to: string;
  /** Seconds from the node's clock to valid_to (negative once expired). */
  seconds_until_expiry: number;
}

export interface CertificateMetrics {
  /** The certificate the node's interfaces present: the endorsed one, or the self-signed one before it joins. */
  node?: CertificateExpiry;
  service?: CertificateExpiry;
}

/** ISO 8601 to the second (X.509 times have no fractions), as reports show validity dates. */
export function isoSeconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}

export interface VersionReport {
  version: string;
  unsafe: boolean;
  quote_format: string;
  runtime: string;
}

/** GET /node/service/endorsements (docs/merkle.md "Receipts kept from before a recovery"). */
export interface ServiceEndorsementsReport {
  /** The current service certificate, which the newest endorsement chains to. */
  service_certificate: string;
  /** One record per recovery, oldest first: the recovered service's endorsement of the identity before it. */
  endorsements: ServiceEndorsementRecord[];
}
