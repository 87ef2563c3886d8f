/**
 * The entries of a recovery's private replay, read from the chunk files and decrypted away from
 * the caller's thread: the node reads the private domain of a previous service's whole ledger
 * once its recovery shares are in (src/node/recovery/recovery.ts), and decrypting each entry's
 * private write set (AES-GCM, a cipher object per entry in Node.js) is most of that work.
 *
 * Ledger.locateEntries says where the entries are; replayedEntriesOf reads and checks the frames
 * (walkEntries, as for Merkle leaves), decrypts each private write set under the ledger secret of
 * its seqno (the tag checked: a wrong secret or altered bytes fail as LedgerDecryptionFailed), and
 * packs each entry's public write set and private plaintext into one buffer that can be handed
 * between threads. The node runs it on worker threads (src/platform/worker-entry-replayer.ts)
 * through the EntryReplayer interface; without one it replays on its own thread.
 */
import { assert } from '../base/index.js';
import { LedgerEncryptor, LedgerSecrets, type LedgerSecret } from '../kv/index.js';
import { walkEntries, type EntryLeavesRequest, type ReadFileRange } from './entry-leaves.js';

export interface EntryReplayRequest extends EntryLeavesRequest {
  /** The ledger secrets that cover the entries, oldest first (the first applies to every seqno before it too). */
  readonly secrets: readonly LedgerSecret[];
}

/**
 * The request's entries, in seqno order: entry i's public write set is
 * `packed[bounds[2i], bounds[2i + 1])` and its decrypted private write set (empty when it wrote
 * no private map) `packed[bounds[2i + 1], bounds[2i + 2])`.
 */
export interface ReplayedEntries {
  readonly packed: Uint8Array;
  readonly bounds: Float64Array;
  /** The size of the entries' frames, in bytes (for progress reports). */
  readonly frameBytes: number;
}

/** Replays the request's entries through `read` (see the file header). Errors as walkEntries, and LedgerDecryptionFailed. */
export function replayedEntriesOf(request: EntryReplayRequest, read: ReadFileRange): ReplayedEntries {
  assert(request.secrets.length > 0, 'a replay needs the ledger secrets');
  const secrets = request.secrets.map((s, i) => ({ fromSeqno: i === 0 ? 0 : s.fromSeqno, secret: s.secret }));
  const encryptor = new LedgerEncryptor(new LedgerSecrets(secrets));
  const count = request.lastSeqno - request.firstSeqno + 1;
  const parts: Uint8Array[] = [];
  let total = 0;
  let frameBytes = 0;
  walkEntries(request, read, (entry) => {
    const plain = encryptor.decryptPrivate(entry.view, entry.seqno, entry.privateBytes);
    parts.push(entry.publicBytes, plain);
    total += entry.publicBytes.byteLength + plain.byteLength;
    frameBytes += entry.frameSizeBytes;
  });
  assert(parts.length === 2 * count, () => `replayed ${parts.length / 2} of ${count} entries`);
  const packed = new Uint8Array(total);
  const bounds = new Float64Array(2 * count + 1);
  let at = 0;
  for (let i = 0; i < parts.length; i++) {
    packed.set(parts[i]!, at);
    at += parts[i]!.byteLength;
    bounds[i + 1] = at;
  }
  return { packed, bounds, frameBytes };
}

/** Replays ledger entries away from the caller's thread. */
export interface EntryReplayer {
  /** The request's entries replayed (replayedEntriesOf); rejects with what stopped it. */
  replayOf(request: EntryReplayRequest): Promise<ReplayedEntries>;
  /** Ends the threads it runs until its next request (a recovery's replay is done). */
  release(): void;
  /** Ends it for good (the node stops); later requests fail. */
  close(): void;
}
