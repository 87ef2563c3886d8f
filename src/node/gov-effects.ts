/**
 * Every effect governance has on a node, registered in one place. A governance action only
 * writes tables, in the transaction of the proposal that applies it (src/gov); each node reacts
 * here when it applies that write — a view change that rolls the write back leaves no trace of a
 * reaction that only asks for work — or, for what must not be undone, when consensus commits it
 * (Store.onMapCommitted: the recovery's rename of its `.recovery` ledger files).
 */
import type { Store } from '../kv/index.js';
import { Tables } from './tables.js';

export interface GovEffectsHost {
  isPrimary(): boolean;
  /** The trusted nodes may have changed (set_node, remove_node, ...): the peers are reconciled. */
  nodesChanged(): void;
  /** An issuer or its CA bundle changed (set_jwt_issuer, set_ca_cert_bundle): the primary fetches its keys. */
  jwtIssuersChanged(): void;
  /** trigger_snapshot: the primary snapshots at its next signature. */
  requestSnapshot(): void;
  /** trigger_ledger_chunk: the primary's next signature ends the ledger chunk. */
  forceLedgerChunk(): void;
  /**
   * The owners that watch tables of their own: the recovery share issuers (the members and
   * nodes their shares cover, trigger_recovery_shares_refresh), the rekey (trigger_ledger_rekey,
   * the ledger secrets) and the recovery (the service record, the recovered secrets).
   */
  readonly owners: readonly { watch(store: Store): void }[];
}

/** Table written by governance → what the node does when it applies a write of it. */
const APPLIED_EFFECTS: readonly (readonly [string, (host: GovEffectsHost) => void])[] = [
  [Tables.nodesInfo, (host) => host.nodesChanged()],
  [Tables.jwtIssuers, (host) => host.jwtIssuersChanged()],
  [Tables.caCertBundles, (host) => host.jwtIssuersChanged()],
  [Tables.snapshotRequests, (host) => host.isPrimary() && host.requestSnapshot()],
  [Tables.ledgerChunkRequests, (host) => host.isPrimary() && host.forceLedgerChunk()],
];

/** Registers the effects on `store` (and is called again for any store that replaces it). */
export function watchGovernanceEffects(store: Store, host: GovEffectsHost): void {
  for (const [table, effect] of APPLIED_EFFECTS) store.onMapApplied(table, () => effect(host));
  for (const owner of host.owners) owner.watch(store);
}
