/**
 * The operator reports served under /node (GET /node/state, /node/consensus, /node/network,
 * /node/network/nodes, /node/commit, /app/tx, ...), computed from the replica and the consensus
 * core without a transaction of their own.
 */
import type { TxId } from '../../base/ids.js';
import type { Tx } from '../../kv/index.js';
import type { Raft } from '../../consensus/index.js';
import type { NodeLifecycleState } from '../lifecycle.js';
import type { Replica } from '../replica.js';
import { certificateValidity } from '../../crypto/index.js';
import { isoSeconds, type ConsensusReport, type NetworkReport, type NodeStateReport, type NodeSummary, type ServiceEndorsementsReport, type VersionReport } from '../reports.js';
import { SINGLETON_KEY, TableDefs, type OpenKindRecord, type ServiceEndorsementRecord, type ServiceInfo, type ServiceStatus } from '../tables.js';
import { txStatus, viewOfSeqno, type TxStatus } from '../tx-status.js';

export interface OperatorQueriesHost {
  readonly replica: Replica;
  readonly version: string;
  nodeId(): string;
  state(): NodeLifecycleState;
  raft(): Raft | undefined;
  /** The service status a join answer reported, until the service record is replicated. */
  joinReportedServiceStatus(): ServiceStatus | undefined;
  serviceCertificatePem(): string;
  /** The recovery decision protocol's status line, while one runs. */
  recoveryDecision(): string | undefined;
}

export class OperatorQueries {
  constructor(private readonly host: OperatorQueriesHost) {}

  private read<T>(fn: (tx: Tx) => T): T {
    return fn(this.host.replica.store.beginTx());
  }

  private viewStarts(): { view: number; seqno: number }[] {
    const history = this.host.raft()?.status().viewHistory ?? [];
    return history.map((seqno, i) => ({ view: i + 1, seqno }));
  }

  viewOf(seqno: number): number {
    return viewOfSeqno({ viewStarts: this.viewStarts() }, seqno) ?? 0;
  }

  commitTxId(): TxId {
    const commitSeqno = this.host.replica.commitSeqno;
    return { view: this.viewOf(commitSeqno), seqno: commitSeqno };
  }

  /**
   * The id of the last transaction applied to this node's store: what a read now reads. It may
   * not be committed yet (a backup applies entries before they commit; a primary's are still in
   * flight): a client that needs committed state waits until GET /app/tx says Committed.
   * Asked on every read, so it avoids the view history unless the entry has left the log.
   */
  appliedTxId(): TxId {
    const seqno = this.host.replica.store.version;
    const raft = this.host.raft();
    if (raft === undefined || seqno === 0) return { view: 0, seqno };
    const inLog = raft.entry(seqno)?.view;
    if (inLog !== undefined) return { view: inLog, seqno };
    const summary = raft.summary();
    // Beyond the log: a primary's transaction still being framed, proposed in its current view.
    return { view: seqno > summary.lastSeqno ? summary.view : this.viewOf(seqno), seqno };
  }

  viewHistory(since = 0): string[] {
    return this.viewStarts()
      .filter((s) => s.view >= since)
      .map((s) => `${s.view}.${s.seqno}`);
  }

  statusOf(txId: TxId): TxStatus {
    const status = this.host.raft()?.status();
    return txStatus(txId, {
      currentView: status?.view ?? 0,
      lastSeqno: this.host.replica.store.version,
      commitSeqno: this.host.replica.commitSeqno,
      history: { viewStarts: this.viewStarts() },
    });
  }

  stateReport(): NodeStateReport {
    const replica = this.host.replica;
    const decision = this.host.recoveryDecision();
    return {
      node_id: this.host.nodeId(),
      state: this.host.state(),
      last_signed_seqno: replica.lastSignedSeqno,
      startup_seqno: replica.startupSeqno,
      ...(decision !== undefined ? { recovery_decision: decision } : {}),
    };
  }

  consensusReport(): ConsensusReport {
    const status = this.host.raft()?.status();
    const addressOf = new Map<string, string>();
    this.read((tx) =>
      tx.table(TableDefs.nodesInfo).forEach((info, id) => {
        addressOf.set(id, info.node_to_node_interface?.published_address ?? '');
      }),
    );
    const configs = (status?.configs ?? []).map((c) => {
      const nodes: Record<string, { address: string }> = {};
      for (const id of c.nodes) nodes[id] = { address: addressOf.get(id) ?? '' };
      return { seqno: c.seqno, nodes };
    });
    const acks: Record<string, { seqno: number; needs_snapshot: boolean }> = {};
    for (const peer of status?.peers ?? []) acks[peer.id] = { seqno: peer.matchSeqno, needs_snapshot: peer.needsSnapshot };
    const role = status?.role;
    const replica = this.host.replica;
    const verified = replica.signaturesVerified;
    return {
      current_view: status?.view ?? 0,
      primary_id: status?.primaryId,
      role: role === 'Primary' ? 'Primary' : role === 'Backup' ? 'Backup' : role ? 'Candidate' : 'None',
      commit_seqno: replica.commitSeqno,
      last_seqno: replica.store.version,
      configs,
      acks,
      private_write_sets_applied: { in_clear: replica.appliedInClear, decrypted: replica.appliedDecrypted },
      signatures_verified: { while_syncing: verified.whileSyncing, when_applied: verified.whenApplied },
    };
  }

  serviceInfo(): ServiceInfo | undefined {
    return this.read((tx) => tx.table(TableDefs.serviceInfo).get(SINGLETON_KEY));
  }

  networkReport(): NetworkReport {
    const info = this.serviceInfo();
    const certificate = info?.cert ?? this.host.serviceCertificatePem();
    const validity = validityOf(certificate);
    return {
      service_status: info?.status ?? this.host.joinReportedServiceStatus() ?? 'Opening',
      service_certificate: certificate,
      service_certificate_valid_from: validity?.valid_from ?? '',
      service_certificate_valid_to: validity?.valid_to ?? '',
      recovery_count: info?.recovery_count ?? 0,
      service_data: info?.service_data ?? null,
      current_view: this.host.raft()?.status().view ?? 0,
      primary_id: this.host.raft()?.summary().primaryId,
      current_service_create_txid: info?.current_service_create_txid,
      ...openKindOf(this.read((tx) => tx.table(TableDefs.recoveryDecisionOpenKind).get(SINGLETON_KEY))),
    };
  }

  listNodes(): NodeSummary[] {
    const primary = this.host.raft()?.summary().primaryId;
    return this.read((tx) => {
      const out: NodeSummary[] = [];
      const endorsed = tx.table(TableDefs.nodesEndorsedCertificates);
      tx.table(TableDefs.nodesInfo).forEach((info, id) => {
        const validity = validityOf(endorsed.get(id));
        out.push({
          node_id: id,
          status: info.status,
          primary: id === primary,
          rpc_interfaces: info.rpc_interfaces,
          node_data: info.node_data,
          last_written: 0,
          ...(info.retired_committed !== undefined ? { retired_committed: info.retired_committed } : {}),
          ...(validity ? { certificate_valid_from: validity.valid_from, certificate_valid_to: validity.valid_to } : {}),
        });
      });
      return out;
    });
  }

  serviceConfiguration(): unknown {
    return this.read((tx) => tx.table(TableDefs.serviceConfig).get(SINGLETON_KEY));
  }

  previousServiceIdentity(): string | undefined {
    return this.read((tx) => tx.table(TableDefs.previousServiceIdentity).get(SINGLETON_KEY));
  }

  /** GET /node/service/endorsements: every recovery's endorsement of the identity before it, oldest first. */
  serviceEndorsements(): ServiceEndorsementsReport {
    const endorsements = this.read((tx) => {
      const out: ServiceEndorsementRecord[] = [];
      tx.table(TableDefs.serviceEndorsements).forEach((record) => void out.push(record));
      return out;
    });
    endorsements.sort((a, b) => a.endorsing_service_created_seqno - b.endorsing_service_created_seqno);
    return { service_certificate: this.host.serviceCertificatePem(), endorsements };
  }

  versionReport(): VersionReport {
    return { version: this.host.version, unsafe: true, quote_format: 'Insecure_Virtual', runtime: `node ${process.versions.node}` };
  }
}

/**
 * The validity period of a certificate (ISO 8601 to the second), parsed once per certificate: the
 * reports are asked often, the certificates change only when members renew them.
 */
const validityCache = new Map<string, { valid_from: string; valid_to: string }>();
const VALIDITY_CACHE_ENTRIES_MAX = 256;
function validityOf(pem: string | undefined): { valid_from: string; valid_to: string } | undefined {
  if (pem === undefined || pem === '') return undefined;
  let found = validityCache.get(pem);
  if (found === undefined) {
    const { notBefore, notAfter } = certificateValidity(pem);
    found = { valid_from: isoSeconds(notBefore), valid_to: isoSeconds(notAfter) };
    if (validityCache.size >= VALIDITY_CACHE_ENTRIES_MAX) validityCache.delete(validityCache.keys().next().value!);
    validityCache.set(pem, found);
  }
  return found;
}

/** How the recovery decision protocol opened this service, when it did (GET /node/network). */
function openKindOf(record: OpenKindRecord | undefined): Pick<NetworkReport, 'recovery_decision'> {
  return record === undefined ? {} : { recovery_decision: { open_kind: record.open_kind, location: record.location } };
}
