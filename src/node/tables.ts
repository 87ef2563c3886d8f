/**
 * Names of the service's tables (KV maps). `public:` maps are in clear in the ledger; the others
 * are encrypted with the ledger secret. Governance tables follow CCF's layout under `svc`.
 */
import { assert } from '../base/assert.js';
import { GovTableDefs, GovTables } from '../gov/tables.js';
import { decodeWriteSet, jsonTable, type TableDef, type WriteSet } from '../kv/index.js';
import type { Configuration } from '../consensus/index.js';

export const Tables = {
  // Governance-written tables (service, members, users, nodes, proposals, ...) are named once, in src/gov.
  ...GovTables,
  /** The last issue of recovery shares (docs/recovery.md): one record, RecoverySharesRecord. */
  recoveryShares: 'public:svc.internal.recovery_shares',
  /** Previous-secret records (docs/recovery.md), by the from_seqno of the secret each holds. */
  previousLedgerSecrets: 'public:svc.internal.previous_ledger_secrets',
  /** Shares members submitted during a recovery, encrypted under the storage key, by member id. */
  submittedShares: 'public:svc.internal.submitted_shares',
  /** The recovered chain of ledger secrets, for every node of the recovering service (RecoveredSecretsRecord). */
  recoveredLedgerSecrets: 'public:svc.internal.recovered_ledger_secrets',
  /** A rekey's new ledger secret (private: only holders of the current secret read it), by from_seqno. */
  ledgerSecrets: 'svc.internal.ledger_secrets',
  signatures: 'public:svc.internal.signatures',
  /** Written by every transaction that changes the set of trusted nodes: the new configuration. */
  configurations: 'public:svc.internal.configurations',
  snapshotEvidence: 'public:svc.internal.snapshot_evidence',
  /** Written by a signature transaction that is a snapshot point: the value is its own seqno. */
  snapshotMarker: 'public:svc.internal.snapshot_marker',
  /** Each node's recovery key for sealing-based recovery (docs/sealing.md), by node id: SealedRecoveryKeyRecord. */
  sealedRecoveryKeys: 'public:svc.gov.nodes.sealed_recovery_keys',
  /** The last issue of sealed shares (docs/sealing.md): one record, SealedSharesRecord. */
  sealedShares: 'public:svc.internal.sealed_shares',
  /** How the recovery decision protocol opened this service (docs/recovery-decision.md): OpenKindRecord. */
  recoveryDecisionOpenKind: 'public:svc.gov.recovery_decision_protocol.open_kind',
  /** Each recovered service's endorsement of the service before it, keyed by the endorsing service's first seqno: ServiceEndorsementRecord. */
  serviceEndorsements: 'public:svc.internal.previous_service_identity_endorsements',
  // The application's own tables.
  appPublicLog: 'public:records',
  appPrivateLog: 'records',
} as const;

/** The key under which single-value tables store their value. */
export const SINGLETON_KEY = '0';

/** The value a single-value public table holds in an entry's public write set (undefined when the entry does not write it). */
export function singletonValueIn<V>(publicBytes: Uint8Array, table: TableDef<V>): V | undefined {
  const raw = decodeWriteSet(publicBytes).get(table.name)?.get(SINGLETON_KEY);
  return raw ? table.codec.decode(raw) : undefined;
}

/** The record a signature entry carries (what it signed, with which node key). */
export function signatureRecordOf(entry: { readonly publicBytes: Uint8Array; readonly seqno: number }): SignatureRecord {
  const record = singletonValueIn(entry.publicBytes, TableDefs.signatures);
  assert(record, `signature entry ${entry.seqno} carries a signature record`);
  return record;
}

export const SERVICE_STATUSES = ['Opening', 'Open', 'WaitingForRecoveryShares', 'Recovering'] as const;
export type ServiceStatus = (typeof SERVICE_STATUSES)[number];
export type NodeStatus = 'Pending' | 'Trusted' | 'Retired';

/** The record of Tables.snapshotEvidence (under SINGLETON_KEY): the latest snapshot's digest. */
export interface SnapshotEvidenceRecord {
  seqno: number;
  /** Lower-case hex SHA-256 of the snapshot file without its receipt section. */
  sha256: string;
}

/** A rekey's new ledger secret (Tables.ledgerSecrets, private). */
export interface RekeyRecord {
  from_seqno: number;
  /** Base64 of the 32 secret bytes. */
  secret: string;
}

export interface ServiceInfo {
  status: ServiceStatus;
  cert: string;
  recovery_count: number;
  service_data: unknown;
  current_service_create_txid?: string;
  previous_service_identity_version?: number;
}

export interface RecoverySharesRecord {
  /** What the shares were issued for (members, threshold, latest secret, refresh requests), hex digest. */
  issued_for: string;
  threshold: number;
  /** Hex. */
  sharing_id: string;
  /** Base64 of the wrapped latest secret. */
  wrapped_latest_secret: string;
  latest_secret_from_seqno: number;
  /** Member id → base64 of its encrypted share, in the members' order. */
  encrypted_shares: Record<string, string>;
}

export interface RecoveredSecretsRecord {
  /** Base64 of the chain (JSON) encrypted under the key derived from the service key. */
  encrypted_chain: string;
  /** The previous service's last recovered entry: the private domain is read up to it. */
  last_recovered_seqno: number;
}

/** A node's recovery key for sealing-based recovery: made when the node joins (or starts the service). */
export interface SealedRecoveryKeyRecord {
  /** sealing_recovery.location.name of the node: how a recovering node finds its own record. */
  location_name: string;
  /** PEM of the RSA public key the primary encrypts the wrapping key to. */
  recovery_public_key: string;
  /** Base64 of the private key sealed under the node's sealing key (docs/sealing.md). */
  sealed_recovery_key: string;
}

/** The last issue of sealed shares: the latest secret wrapped once, the wrapping key once per node. */
export interface SealedSharesRecord {
  /** What the issue covers (nodes and their keys, the latest secret), hex digest. */
  issued_for: string;
  /** Base64 of the wrapped latest secret. */
  wrapped_latest_secret: string;
  latest_secret_from_seqno: number;
  /** Node id → base64 of the wrapping key encrypted to the node's recovery key. */
  encrypted_wrapping_keys: Record<string, string>;
}

/** How the recovery decision protocol opened the service. */
export interface OpenKindRecord {
  /** Election: a majority of the expected locations voted for the opener; Failover: it opened after a timeout. */
  open_kind: 'Election' | 'Failover';
  /** The location that opened the service. */
  location: string;
  /** The protocol's expected locations: the others rejoin the opened service, trusted at once. */
  expected_locations: string[];
}

export interface NodeInfo {
  status: NodeStatus;
  public_key: string;
  node_data: unknown;
  rpc_interfaces: Record<string, { bind_address: string; published_address: string; enabled_operator_features: string[] }>;
  node_to_node_interface?: { bind_address: string; published_address: string };
  quote_info: { format: string; quote: string; endorsements: string };
  retired_committed?: boolean;
  ledger_secret_seqno?: number;
  /** transition_node_to_trusted's valid_from and validity_period_days: the period of the certificate the service endorses for it. */
  certificate_valid_from?: string;
  certificate_validity_period_days?: number;
}

export interface MemberInfo {
  status: 'Accepted' | 'Active';
  member_data: unknown;
}

export interface SignatureRecord {
  view: number;
  seqno: number;
  /** Hex of the Merkle root over every entry before this one (the signature entry's own seqno is not covered). */
  root: string;
  /** Base64 DER ECDSA signature over the 32 root bytes with the node key. */
  sig: string;
  node: string;
  commit_seqno: number;
  commit_view: number;
  cert: string;
}

/**
 * A recovered service's endorsement of the service before it (docs/merkle.md "Receipts across
 * recoveries"). A signature at seqno `s` was made under the identity current at `s`; its receipts
 * need the endorsements of every record whose key is above `s`, in ascending key order.
 */
export interface ServiceEndorsementRecord {
  /** Seqno of the first transaction of the endorsing (newer) service: its recovery started there. Also the key, as a decimal string. */
  endorsing_service_created_seqno: number;
  /** PEM of the previous service's certificate. */
  previous_service_certificate: string;
  /** endorsePreviousIdentity's output: the previous service key certified by the endorsing service. */
  endorsement: string;
}

/** The configuration a reconfiguration transaction records (undefined when the write set records none). */
export function configurationOf(writeSet: WriteSet): Configuration | undefined {
  const raw = writeSet.get(Tables.configurations)?.get(SINGLETON_KEY);
  return raw ? TableDefs.configurations.codec.decode(raw) : undefined;
}

/**
 * Tables declared with their value types (src/kv/table.ts), for their readers and writers:
 * `tx.table(TableDefs.serviceInfo).get(SINGLETON_KEY)` is a ServiceInfo. Governance's own are
 * declared in src/gov.
 */
export const TableDefs = {
  ...GovTableDefs,
  serviceInfo: jsonTable<ServiceInfo>(Tables.serviceInfo),
  recoveryShares: jsonTable<RecoverySharesRecord>(Tables.recoveryShares),
  /** Base64 of a previous-secret record, by the from_seqno of the secret it holds. */
  previousLedgerSecrets: jsonTable<string>(Tables.previousLedgerSecrets),
  /** Base64 of a submitted share encrypted under the storage key, by member id. */
  submittedShares: jsonTable<string>(Tables.submittedShares),
  recoveredLedgerSecrets: jsonTable<RecoveredSecretsRecord>(Tables.recoveredLedgerSecrets),
  recoveryDecisionOpenKind: jsonTable<OpenKindRecord>(Tables.recoveryDecisionOpenKind),
  nodesInfo: jsonTable<NodeInfo>(Tables.nodesInfo),
  sealedRecoveryKeys: jsonTable<SealedRecoveryKeyRecord>(Tables.sealedRecoveryKeys),
  sealedShares: jsonTable<SealedSharesRecord>(Tables.sealedShares),
  /** trigger_recovery_shares_refresh: a counter. */
  recoverySharesRefresh: jsonTable<number>(Tables.recoverySharesRefresh),
  /** A rekey's new ledger secret, by from_seqno. */
  ledgerSecrets: jsonTable<RekeyRecord>(Tables.ledgerSecrets),
  /** The join policy's JavaScript source. */
  joinPolicy: jsonTable<string>(Tables.joinPolicy),
  /** A trusted node's certificate endorsed by the service (PEM), by node id. */
  nodesEndorsedCertificates: jsonTable<string>(Tables.nodesEndorsedCertificates),
  /** The previous service's certificate (PEM). */
  previousServiceIdentity: jsonTable<string>(Tables.previousServiceIdentity),
  serviceEndorsements: jsonTable<ServiceEndorsementRecord>(Tables.serviceEndorsements),
  /** The configuration a reconfiguration transaction starts (one record). */
  configurations: jsonTable<Configuration>(Tables.configurations),
  signatures: jsonTable<SignatureRecord>(Tables.signatures),
  snapshotEvidence: jsonTable<SnapshotEvidenceRecord>(Tables.snapshotEvidence),
  /** The seqno of the signature transaction that wrote it (a snapshot point). */
  snapshotMarker: jsonTable<number>(Tables.snapshotMarker),
} as const;
