/**
 * Which service endorsements a receipt carries (src/node/queries/service-endorsements.ts): those of
 * every record keyed above the seqno of the signature that signed it, oldest first; and the table's
 * records, read from the store once and again only after the table changed.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsonCodec, Store } from '../../src/kv/index.js';
import { endorsementsForSignature, ServiceEndorsements } from '../../src/node/queries/service-endorsements.js';
import { Tables, type ServiceEndorsementRecord } from '../../src/node/tables.js';

const record = (seqno: number): ServiceEndorsementRecord => ({
  endorsing_service_created_seqno: seqno,
  previous_service_certificate: `certificate of the service before ${seqno}`,
  endorsement: `endorsement by the service of ${seqno}`,
});

/** Commits one transaction writing `records` to the endorsements table (and, with `other`, another table). */
function write(store: Store, records: readonly ServiceEndorsementRecord[], other = false): void {
  const tx = store.beginTx();
  const map = tx.map(Tables.serviceEndorsements, jsonCodec<ServiceEndorsementRecord>());
  for (const r of records) map.put(String(r.endorsing_service_created_seqno), r);
  if (other) tx.map(Tables.appPublicLog, jsonCodec<string>()).put('1', 'unrelated');
  assert.ok(tx.apply());
}

test('a signature at seqno s needs the endorsements of every service that began after s, oldest first', () => {
  const records = [record(100), record(250)];
  const both = ['endorsement by the service of 100', 'endorsement by the service of 250'];
  assert.deepEqual(endorsementsForSignature(records, 50), both);
  assert.deepEqual(endorsementsForSignature(records, 99), both);
  // The first transaction of a service is that service's: the records of services begun at or before it do not apply.
  assert.deepEqual(endorsementsForSignature(records, 100), ['endorsement by the service of 250']);
  assert.deepEqual(endorsementsForSignature(records, 150), ['endorsement by the service of 250']);
  assert.deepEqual(endorsementsForSignature(records, 250), []);
  assert.deepEqual(endorsementsForSignature(records, 300), []);
  assert.deepEqual(endorsementsForSignature([], 1), []);
});

test('the records come from the store in ascending seqno (not key text) order, and are read again only after the table changes', () => {
  const store = new Store();
  const endorsements = new ServiceEndorsements();
  endorsements.watch(store);
  assert.deepEqual(endorsements.forSignature(1), []);

  // Keys "1000" < "250" as text: the order is by seqno.
  write(store, [record(1000), record(250)]);
  assert.deepEqual(endorsements.forSignature(50), ['endorsement by the service of 250', 'endorsement by the service of 1000']);
  assert.deepEqual(endorsements.forSignature(300), ['endorsement by the service of 1000']);
  const cached = endorsements.records();
  write(store, [], true);
  assert.equal(endorsements.records(), cached, 'a commit that does not write the table keeps the cache');

  write(store, [record(2000)]);
  assert.notEqual(endorsements.records(), cached, 'a commit that writes the table refreshes it');
  assert.deepEqual(endorsements.forSignature(1500), ['endorsement by the service of 2000']);

  // A rollback that undoes the write: the record is gone.
  store.rollback(store.version - 1);
  assert.deepEqual(endorsements.forSignature(1500), []);

  // A replaced store (a snapshot installed) is followed; the old one no longer is.
  const replacement = new Store();
  write(replacement, [record(700)]);
  endorsements.watch(replacement);
  assert.deepEqual(endorsements.forSignature(1), ['endorsement by the service of 700']);
  const followed = endorsements.records();
  write(store, [record(5000)]);
  assert.equal(endorsements.records(), followed);
  assert.deepEqual(endorsements.forSignature(1), ['endorsement by the service of 700']);
});

test('a record whose key is not its seqno is a broken invariant', () => {
  const store = new Store();
  const tx = store.beginTx();
  tx.map(Tables.serviceEndorsements, jsonCodec<ServiceEndorsementRecord>()).put('7', record(8));
  tx.apply();
  const endorsements = new ServiceEndorsements();
  endorsements.watch(store);
  assert.throws(() => endorsements.forSignature(1), /invariant/);
});
