/**
 * A startup snapshot's store section is most of its file (S, tens to hundreds of megabytes at a
 * large state). A node needs it to load its store at start, and once more only during a recovery,
 * to read the previous service's private domain from it (recovery/private-domain.ts); everything
 * else it keeps of the snapshot (the consensus start, the Merkle tree, the endorsement) comes from
 * the metadata and the receipt. So once the node has started from it, the store's bytes are
 * dropped and read again from the file where they are needed: the file is read and hashed over
 * many turns (restart-slices.ts) and must have the evidence digest the node checked at start (an
 * endorsement appended since is outside what the digest covers).
 */
import { assert } from '../base/assert.js';
import { bytesEqual } from '../base/bytes.js';
import type { Clock } from '../base/clock.js';
import { CovenantError } from '../base/errors.js';
import { parseSnapshotFile, snapshotEvidenceCoveredBytes, type Disk } from '../ledger/index.js';
import { readFileInSlices } from './restart-slices.js';
import { digestInSlices } from './snapshot-loading.js';
import type { StartupSnapshot } from './snapshots.js';

const NO_BYTES = new Uint8Array(0);

export interface StoreRereader {
  readonly clock: Clock;
  readonly disk: Disk;
  readonly stopped: () => boolean;
}

/**
 * The snapshot without its store's bytes (parts.kv empty), which storeBytesOf reads again from its
 * file. A snapshot without a path (never the case of a node's startup snapshot) is kept whole.
 */
export function withoutStoreBytes(snapshot: StartupSnapshot, reader: StoreRereader): StartupSnapshot {
  if (snapshot.rereadStore !== undefined || snapshot.path === undefined) return snapshot;
  // The closure below must not refer to `snapshot`, which would keep its store's bytes alive.
  const { name, path } = snapshot;
  const { digest, evidenceCoveredBytes } = snapshot.parts;
  const rereadStore = async (): Promise<Uint8Array | undefined> => {
    const bytes = await readFileInSlices(reader.clock, reader.disk, path, reader.stopped);
    if (bytes === undefined) return undefined;
    const changed = () => new CovenantError('InvalidSnapshot', `snapshot ${name}: ${path} changed since the node started from it`, 400);
    if (snapshotEvidenceCoveredBytes(bytes) !== evidenceCoveredBytes) throw changed();
    const read = await digestInSlices(reader.clock, bytes.subarray(0, evidenceCoveredBytes));
    if (!bytesEqual(read, digest)) throw changed();
    return parseSnapshotFile(bytes, read).kv;
  };
  return { ...snapshot, parts: { ...snapshot.parts, kv: NO_BYTES }, rereadStore };
}

/** The store section of a startup snapshot: held, or read again from its file; undefined when the node stopped meanwhile. */
export async function storeBytesOf(snapshot: StartupSnapshot): Promise<Uint8Array | undefined> {
  if (snapshot.rereadStore === undefined) return snapshot.parts.kv;
  const kv = await snapshot.rereadStore();
  assert(kv === undefined || kv.byteLength > 0, 'a snapshot file holds a store section');
  return kv;
}
