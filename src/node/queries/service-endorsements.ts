/**
 * The service endorsements a JSON receipt carries (docs/merkle.md "Receipts across recoveries").
 * Each recovery writes one record to Tables.serviceEndorsements: the new service's endorsement of
 * the previous service's key, keyed by the seqno where the new service began. A root signed at
 * seqno `s` was signed by a node whose certificate the service identity current at `s` issued, so
 * its receipts carry the endorsements of every record keyed above `s`, oldest first: the first
 * certifies the key that issued the node certificate, the last is issued by the current service.
 *
 * There is one record per recovery, so the whole table is read at once and kept sorted until it
 * changes (a commit that writes it, a rollback, a store replaced by a snapshot's).
 */
import { assert } from '../../base/assert.js';
import type { Store } from '../../kv/index.js';
import { TableDefs, Tables, type ServiceEndorsementRecord } from '../tables.js';


/**
 * The endorsements for a root signed at `signatureSeqno`: those of the records keyed above it, in
 * the order of `recordsAscending` (ascending by endorsing_service_created_seqno).
 */
export function endorsementsForSignature(recordsAscending: readonly ServiceEndorsementRecord[], signatureSeqno: number): string[] {
  return recordsAscending.filter((record) => record.endorsing_service_created_seqno > signatureSeqno).map((record) => record.endorsement);
}

/** The table's records, sorted by key, read again only once the table may have changed. */
export class ServiceEndorsements {
  private store: Store | undefined;
  /** Ascending by endorsing_service_created_seqno; undefined once the table may have changed. */
  private sorted: readonly ServiceEndorsementRecord[] | undefined;

  /** Follows `store`: give it the node's store and each one that replaces it (Replica.watchStore). */
  watch(store: Store): void {
    this.store = store;
    this.sorted = undefined;
    const invalidate = () => {
      if (this.store === store) this.sorted = undefined;
    };
    store.onMapApplied(Tables.serviceEndorsements, invalidate);
    store.onRollback(invalidate);
  }

  /** The endorsements a receipt signed at `signatureSeqno` carries (empty when signed under the current identity). */
  forSignature(signatureSeqno: number): string[] {
    return endorsementsForSignature(this.records(), signatureSeqno);
  }

  /** Every record, ascending by key. */
  records(): readonly ServiceEndorsementRecord[] {
    if (this.sorted !== undefined) return this.sorted;
    assert(this.store, 'service endorsements follow the node store');
    const records: ServiceEndorsementRecord[] = [];
    this.store.current().table(TableDefs.serviceEndorsements).forEach((record, key) => {
      assert(key === String(record.endorsing_service_created_seqno), () => `service endorsement keyed ${key} is that of seqno ${record.endorsing_service_created_seqno}`);
      records.push(record);
    });
    this.sorted = records.sort((a, b) => a.endorsing_service_created_seqno - b.endorsing_service_created_seqno);
    return this.sorted;
  }
}
