/**
 * The effects of governance on a node, registered in one place (src/node/gov-effects.ts): each
 * governance table's write reaches its effect when the store applies it, on the primary only where
 * the effect is the primary's, and every owner watching tables of its own is given the store.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { jsonCodec, Store } from '../../src/kv/index.js';
import { watchGovernanceEffects, type GovEffectsHost } from '../../src/node/gov-effects.js';
import { Tables } from '../../src/node/tables.js';

const json = jsonCodec<unknown>();

function recordingHost(primary: { value: boolean }, calls: string[], watched: Store[]): GovEffectsHost {
  return {
    isPrimary: () => primary.value,
    nodesChanged: () => calls.push('nodes'),
    jwtIssuersChanged: () => calls.push('jwt'),
    requestSnapshot: () => calls.push('snapshot'),
    forceLedgerChunk: () => calls.push('chunk'),
    owners: [{ watch: (store) => watched.push(store) }],
  };
}

function write(store: Store, table: string): void {
  const tx = store.beginTx();
  tx.map(table, json).put('0', 1);
  tx.apply();
}

test('each governance table reaches its effect when applied; the primary-only ones only on the primary', () => {
  const store = new Store();
  const calls: string[] = [];
  const watched: Store[] = [];
  const primary = { value: true };
  watchGovernanceEffects(store, recordingHost(primary, calls, watched));
  assert.deepEqual(watched, [store], 'the owners watch the same store');
  for (const table of [Tables.nodesInfo, Tables.jwtIssuers, Tables.caCertBundles, Tables.snapshotRequests, Tables.ledgerChunkRequests]) write(store, table);
  assert.deepEqual(calls, ['nodes', 'jwt', 'jwt', 'snapshot', 'chunk']);
  calls.length = 0;
  primary.value = false;
  for (const table of [Tables.nodesInfo, Tables.snapshotRequests, Tables.ledgerChunkRequests]) write(store, table);
  assert.deepEqual(calls, ['nodes'], 'a backup neither snapshots nor ends a chunk on request');
  write(store, 'records');
  assert.deepEqual(calls, ['nodes'], 'other tables have no effect');
});
