/**
 * Loading a snapshot's store without holding the event loop (docs/snapshots.md, "Loading"): the
 * loader (src/kv/snapshot-loading.ts) hashes, decodes and deciphers it a bounded amount per call,
 * and this runs it one slice per turn (the clock's defer), as snapshot generation packs one, so
 * that a joining or restarting node keeps answering requests and its peers while it loads.
 */
import type { Clock } from '../base/clock.js';
import { createHasher } from '../crypto/index.js';
import type { SnapshotLoader, Store } from '../kv/index.js';
import { snapshotDigestSliceBytes, snapshotLoadCheckBytes, snapshotSliceCheckEntries, snapshotSliceEntriesMax, snapshotSliceMs } from './limits.js';

/** The loaded store, or undefined when `stopped` said so between two slices. Rejects with the loader's error (MalformedSnapshot, LedgerDecryptionFailed). */
export function loadSnapshotInSlices(clock: Clock, loader: SnapshotLoader, stopped: () => boolean = () => false): Promise<Store | undefined> {
  return new Promise((resolve, reject) => {
    const slice = (): void => {
      if (stopped()) {
        resolve(undefined);
        return;
      }
      try {
        if (loadSlice(clock, loader)) resolve(loader.result());
        else clock.defer(slice);
      } catch (e) {
        reject(e as Error);
      }
    };
    clock.defer(slice);
  });
}

/** One turn's worth of loading; true once the store is built. */
function loadSlice(clock: Clock, loader: SnapshotLoader): boolean {
  const startMs = clock.monotonicMs();
  loader.beginSlice();
  for (let entries = 0; entries < snapshotSliceEntriesMax; entries += snapshotSliceCheckEntries) {
    if (loader.load(snapshotSliceCheckEntries, snapshotLoadCheckBytes)) return true;
    if (clock.monotonicMs() - startMs >= snapshotSliceMs) return false;
  }
  return false;
}

/**
 * SHA-256 of `bytes`, snapshotDigestSliceBytes per turn: a node serving a large snapshot checks its
 * evidence digest without holding its event loop (a primary would otherwise miss its heartbeats).
 */
export function digestInSlices(clock: Clock, bytes: Uint8Array): Promise<Uint8Array> {
  const hasher = createHasher('sha-256');
  let offset = 0;
  return new Promise((resolve) => {
    const slice = (): void => {
      const end = Math.min(bytes.byteLength, offset + snapshotDigestSliceBytes);
      hasher.update(bytes.subarray(offset, end));
      offset = end;
      if (offset === bytes.byteLength) resolve(hasher.digest());
      else clock.defer(slice);
    };
    slice();
  });
}
