/**
 * The governance tables and their record shapes. src/gov sits below src/node, so the names live
 * here and src/node/tables.ts includes them.
 */
import type { KeyMetadata } from '../jwt/index.js';
import { jsonTable } from '../kv/index.js';

export const GovTables = {
  // Written at genesis and by governance actions.
  serviceInfo: 'public:svc.gov.service.info',
  serviceConfig: 'public:svc.gov.service.config',
  constitution: 'public:svc.gov.constitution',
  nodesInfo: 'public:svc.gov.nodes.info',
  nodesEndorsedCertificates: 'public:svc.gov.nodes.endorsed_certificates',
  membersCerts: 'public:svc.gov.members.certs',
  membersInfo: 'public:svc.gov.members.info',
  membersEncryptionPublicKeys: 'public:svc.gov.members.encryption_public_keys',
  usersCerts: 'public:svc.gov.users.certs',
  usersInfo: 'public:svc.gov.users.info',
  hostData: 'public:svc.gov.nodes.snp.host_data',
  /** Code measurements trusted for joining nodes (virtual attestation): genesis records the first node's. */
  virtualMeasurements: 'public:svc.gov.nodes.virtual.measurements',
  // Governance's own tables.
  proposals: 'public:svc.gov.proposals',
  proposalsInfo: 'public:svc.gov.proposals_info',
  history: 'public:svc.gov.history',
  membersAcks: 'public:svc.gov.members.acks',
  recentProposals: 'public:svc.gov.cose_recent_proposals',
  /** Digests of recent signed requests other than proposals (ballots, withdrawals, state digests, acks). */
  recentRequests: 'public:svc.gov.cose_recent_requests',
  joinPolicy: 'public:svc.gov.nodes.join_policy',
  jwtIssuers: 'public:svc.gov.jwt.issuers',
  jwtPublicSigningKeys: 'public:svc.gov.jwt.public_signing_keys_metadata_v2',
  caCertBundles: 'public:svc.gov.tls.ca_cert_bundles',
  snapshotRequests: 'public:svc.gov.snapshot_requests',
  /** trigger_ledger_chunk (svc.node.triggerLedgerChunk): a counter; each change ends the primary's chunk at its next signature. */
  ledgerChunkRequests: 'public:svc.gov.ledger_chunk_requests',
  /** The previous service's certificate (after a disaster recovery). */
  previousServiceIdentity: 'public:svc.gov.service.previous_service_identity',
  /** trigger_recovery_shares_refresh: a counter; each change issues new recovery shares. */
  recoverySharesRefresh: 'public:svc.gov.recovery.shares_refresh_requests',
  /** trigger_ledger_rekey: the primary starts a new ledger secret once it is written. */
  ledgerRekeyRequests: 'public:svc.gov.ledger_rekey_requests',
  /** set_js_app: the application bundle {metadata: <app.json>, modules: [{name, module}]} (one record, replaced whole). */
  jsApp: 'public:svc.gov.js_app',
  /** set_js_runtime_options: the limits of application JavaScript. */
  jsRuntimeOptions: 'public:svc.gov.js_runtime_options',
} as const;

export const GOV_SINGLETON_KEY = '0';

/** Tables the constitution may not write: they are the evidence of who asked for what. */
export const GOV_TABLES_READ_ONLY_FOR_CONSTITUTION: ReadonlySet<string> = new Set([GovTables.history, GovTables.recentProposals, GovTables.recentRequests]);

export const PROPOSAL_STATES = ['Open', 'Accepted', 'Rejected', 'Withdrawn', 'Failed', 'Dropped'] as const;
export type ProposalState = (typeof PROPOSAL_STATES)[number];

export interface ProposalAction {
  name: string;
  args?: unknown;
}

export interface ProposalBody {
  actions: ProposalAction[];
}

export interface ProposalInfo {
  proposer_id: string;
  state: ProposalState;
  /** created_at of the proposal request (seconds). */
  created_at: number;
  /** member id → ballot source. */
  ballots: Record<string, string>;
  /** member id → vote, once the proposal is no longer Open (or after each evaluation). */
  final_votes?: Record<string, boolean>;
  /** member id → why that member's ballot could not be evaluated. */
  vote_failures?: Record<string, { reason: string }>;
  /** Why the proposal Failed (validation at resolution, resolve or apply threw). */
  failure?: { reason: string };
}

export interface MemberInfoRecord {
  status: 'Accepted' | 'Active';
  member_data: unknown;
}

export interface MemberAck {
  /** Hex digest the member must sign to become Active (or to acknowledge again). */
  state_digest: string;
}

export interface HistoryRecord {
  /** Base64 of the whole COSE_Sign1 request, so the ledger alone proves who asked for what. */
  cose_sign1: string;
  type: string;
  created_at: number;
  proposal_id?: string;
}

/** A remembered recent proposal request (request-replay.ts). */
export interface RecentProposalRecord {
  proposal_id: string;
}

/** A remembered recent signed request other than a proposal (request-replay.ts). */
export interface RecentRequestRecord {
  type: string;
  member_id: string;
}

/** The service's configuration (one record): set at genesis, changed by set_recovery_threshold. */
export interface ServiceConfigRecord {
  recovery_threshold?: number;
  maximum_node_certificate_validity_days?: number;
  maximum_service_certificate_validity_days?: number;
}

export interface UserInfoRecord {
  user_data: unknown;
}

/** A trusted host data value: genesis records the first node's measurement, add_snp_host_data a security policy. */
export interface HostDataRecord {
  measurement?: string;
  security_policy?: string;
}

/** set_jwt_issuer's record of an issuer. */
export interface JwtIssuerRecord {
  auto_refresh?: boolean;
  ca_cert_bundle_name?: string;
}

/**
 * The governance tables governance reads and writes, each declared once with its value type
 * (src/kv/table.ts): `tx.table(GovTableDefs.proposalsInfo)` reads and writes ProposalInfo.
 */
export const GovTableDefs = {
  constitution: jsonTable<string>(GovTables.constitution),
  membersCerts: jsonTable<string>(GovTables.membersCerts),
  membersInfo: jsonTable<MemberInfoRecord>(GovTables.membersInfo),
  membersEncryptionPublicKeys: jsonTable<string>(GovTables.membersEncryptionPublicKeys),
  membersAcks: jsonTable<MemberAck>(GovTables.membersAcks),
  proposals: jsonTable<ProposalBody>(GovTables.proposals),
  proposalsInfo: jsonTable<ProposalInfo>(GovTables.proposalsInfo),
  history: jsonTable<HistoryRecord>(GovTables.history),
  recentProposals: jsonTable<RecentProposalRecord>(GovTables.recentProposals),
  recentRequests: jsonTable<RecentRequestRecord>(GovTables.recentRequests),
  serviceConfig: jsonTable<ServiceConfigRecord>(GovTables.serviceConfig),
  /** A user's certificate (PEM), by user id. */
  usersCerts: jsonTable<string>(GovTables.usersCerts),
  usersInfo: jsonTable<UserInfoRecord>(GovTables.usersInfo),
  hostData: jsonTable<HostDataRecord>(GovTables.hostData),
  /** A trusted code measurement: the key is the measurement, the value an empty object. */
  virtualMeasurements: jsonTable<Record<string, never>>(GovTables.virtualMeasurements),
  jwtIssuers: jsonTable<JwtIssuerRecord>(GovTables.jwtIssuers),
  /** The keys of every issuer that uses a kid, by kid. */
  jwtPublicSigningKeys: jsonTable<KeyMetadata[]>(GovTables.jwtPublicSigningKeys),
  /** A CA certificate bundle (PEM), by name. */
  caCertBundles: jsonTable<string>(GovTables.caCertBundles),
} as const;
