/**
 * Reading the private domain of the previous service's entries (docs/recovery.md, "Private
 * phase"): every node of a recovering service, once the recovered chain is installed, reads the
 * old entries' public and private domains from its own ledger (from its startup snapshot when it
 * has one) into a side store, which then replays what the node committed meanwhile and hands its
 * private maps to the store at the committed version. The recovery machine
 * (recovery-machine.ts) starts this work and hears of its end as an event.
 */
import { assert } from '../../base/assert.js';
import type { Clock } from '../../base/clock.js';
import type { Logger } from '../../base/log.js';
import { copyValue, SnapshotLoader, Store } from '../../kv/index.js';
import type { EntryLeavesRequest, EntryReplayer, ReplayedEntries } from '../../ledger/index.js';
import { nodeError } from '../errors.js';
import type { LedgerSecrets } from '../identity/ledger-secrets.js';
import { recoveryReadBatchBytesMax, recoveryReadBatchEntriesMax } from '../limits.js';
import type { Replica } from '../replica.js';
import { loadSnapshotInSlices } from '../snapshot-loading.js';
import type { StartupSnapshot } from '../snapshots.js';
import { storeBytesOf } from '../startup-snapshot-store.js';
import { ledgerEntries, ReadProgress, type ReadEntry } from './public-ledger.js';

export interface PrivateDomainHost {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly replica: Replica;
  readonly secrets: LedgerSecrets;
  yieldControl(): Promise<void>;
  /** Reads and decrypts the previous service's entries off this thread (NodeInit.entryReplayer); without it, on this thread. */
  readonly entryReplayer?: EntryReplayer | undefined;
  /** Whether the node still reads its private domain (false once it stopped). */
  reading(): boolean;
}

export class PrivateDomainReader {
  constructor(private readonly host: PrivateDomainHost) {}

  /**
   * Reads the previous service's entries up to `lastSeqno` (from `snapshot` on, when there is one)
   * and installs their private maps in the store; false if the node stopped reading meanwhile.
   */
  async read(lastSeqno: number, snapshot: StartupSnapshot | undefined): Promise<boolean> {
    const replayed = await this.replayPrivate(lastSeqno, snapshot);
    if (replayed === undefined) return false;
    return this.catchUpAndInstall(replayed);
  }

  /** The previous service's entries, public and private domains, into a store of their own; undefined if the node stopped meanwhile. */
  private async replayPrivate(lastSeqno: number, snapshot: StartupSnapshot | undefined): Promise<Store | undefined> {
    const { logger, clock } = this.host;
    const from = snapshot !== undefined ? snapshot.seqno : 0;
    // Nothing reads this store's older versions: each batch is folded into its state at once and
    // compacted, so that no write set outlives its batch (few survive a young collection).
    const options = { checkpointInterval: recoveryReadBatchEntriesMax };
    const store = snapshot !== undefined ? await this.snapshotStore(snapshot, options) : new Store(options);
    if (store === undefined) return undefined;
    logger.info(`reading the private domain of the ledger: entries ${from + 1}..${lastSeqno}`);
    const progress = new ReadProgress('reading the private ledger', lastSeqno, logger, clock);
    const replayer = this.host.entryReplayer;
    if (replayer === undefined || lastSeqno <= from) await this.replayHere(store, from + 1, lastSeqno, progress);
    else await this.replayOnThreads(replayer, store, from + 1, lastSeqno, progress);
    assert(store.version === lastSeqno, `the private domain is read up to seqno ${lastSeqno} (read ${store.version})`);
    store.compact(store.version);
    logger.info(`private ledger read: ${progress.summary()}`);
    return store;
  }

  /**
   * The store of the startup snapshot, loaded over many turns (snapshot-loading.ts: the node keeps
   * serving its part of the recovered service meanwhile); undefined if the node stopped while its
   * file was read. The node dropped the snapshot's store bytes once it started: the file is read
   * again here (startup-snapshot-store.ts), and nothing refers to its bytes once this returns.
   */
  private async snapshotStore(snapshot: StartupSnapshot, options: { checkpointInterval: number }): Promise<Store | undefined> {
    const storeBytes = await storeBytesOf(snapshot);
    if (storeBytes === undefined) return undefined;
    const loader = new SnapshotLoader(storeBytes, this.host.secrets.framingFor(snapshot.seqno).encryptor, options);
    const store = await loadSnapshotInSlices(this.host.clock, loader);
    assert(store !== undefined, 'a load that is never stopped gives a store');
    return store;
  }

  /**
   * The store applied entries of the recovered service while the previous service's were read
   * (a joiner of a service that already opened applies its new private writes too): `replayed`
   * replays them as well, up to the store's committed version (never rolled back), and the store
   * then takes its private maps there, in the same turn, under the writes of any versions above.
   * False if the node left ReadingPrivateLedger meanwhile (it stopped).
   */
  private async catchUpAndInstall(replayed: Store): Promise<boolean> {
    const { replica, logger, clock } = this.host;
    const progress = new ReadProgress('catching up with the recovered service', Math.max(replayed.version, replica.store.committedVersion), logger, clock);
    for (;;) {
      if (!this.host.reading()) return false;
      const committed = replica.store.committedVersion;
      if (committed < replayed.version) {
        // The previous service's last entry is not yet committed here: wait for consensus.
        await new Promise<void>((resolve) => clock.setTimer(CATCH_UP_WAIT_MS, resolve));
        continue;
      }
      if (committed - replayed.version > recoveryReadBatchEntriesMax) {
        await this.replayHere(replayed, replayed.version + 1, committed, progress);
        continue;
      }
      // Few enough to replay in this turn: nothing commits or rolls back meanwhile.
      for (const batch of ledgerEntries(replica, replayed.version + 1, committed)) this.applyBatch(replayed, batch);
      replica.store.installPrivateMaps(replayed.current());
      return true;
    }
  }

  /** Entries first..last, read and decrypted on this thread, into `store`. */
  private async replayHere(store: Store, first: number, last: number, progress: ReadProgress): Promise<void> {
    const { replica } = this.host;
    for (const batch of ledgerEntries(replica, first, last)) {
      const bytes = this.applyBatch(store, batch);
      progress.add(batch.length, bytes, batch.at(-1)!.seqno);
      await this.host.yieldControl();
    }
  }

  /** One batch of entries read from the ledger, applied to `store` in both domains; returns their frames' bytes. */
  private applyBatch(store: Store, batch: readonly ReadEntry[]): number {
    const { replica } = this.host;
    let bytes = 0;
    for (const item of batch) {
      const decoded = item.entry;
      if (decoded === undefined) throw nodeError('LedgerEntryUnreadable', `entry ${item.seqno} cannot be read: ${item.error}`);
      store.applyWriteSet(decoded.seqno, decoded.publicBytes, replica.privatePlainOf(decoded));
      bytes += decoded.frameSizeBytes;
    }
    store.compact(store.version);
    return bytes;
  }

  /**
   * The same, read and decrypted on the entry replayer's threads a few ranges ahead of the range
   * this thread applies (decrypting is most of the work). A range they cannot replay is replayed
   * here, which reports the entry that stops it as replayHere does.
   */
  private async replayOnThreads(replayer: EntryReplayer, store: Store, first: number, last: number, progress: ReadProgress): Promise<void> {
    const { replica } = this.host;
    const secrets = this.host.secrets.records().map((r) => ({ fromSeqno: r.from_seqno, secret: fromBase64(r.secret) }));
    const inFlight: { first: number; last: number; replayed: Promise<ReplayedEntries | undefined> }[] = [];
    let next = first;
    const requestAhead = (): void => {
      while (inFlight.length < REPLAY_RANGES_AHEAD && next <= last) {
        const range = replayRange(replica, next, last);
        next = range.last + 1;
        const replayed = range.request === undefined ? Promise.resolve(undefined) : replayer.replayOf({ ...range.request, secrets }).catch(() => undefined);
        inFlight.push({ first: range.first, last: range.last, replayed });
      }
    };
    try {
      requestAhead();
      for (let range = inFlight.shift(); range !== undefined; range = inFlight.shift()) {
        requestAhead();
        const replayed = await range.replayed;
        if (replayed === undefined) {
          await this.replayHere(store, range.first, range.last, progress);
          continue;
        }
        const { packed, bounds } = replayed;
        for (let seqno = range.first, i = 0; seqno <= range.last; seqno++, i += 2) {
          // The private values the store keeps are views of a copy of their own, not of the whole range.
          store.applyWriteSet(seqno, packed.subarray(bounds[i]!, bounds[i + 1]!), copyValue(packed.subarray(bounds[i + 1]!, bounds[i + 2]!)));
        }
        store.compact(store.version);
        progress.add(range.last - range.first + 1, replayed.frameBytes, range.last);
        await this.host.yieldControl();
      }
    } finally {
      replayer.release();
    }
  }
}

/** How long the private phase waits for the previous service's last entry to commit here. */
const CATCH_UP_WAIT_MS = 50;

/** Ranges the entry replayer's threads replay at once (in turn), ahead of the one applied. */
const REPLAY_RANGES_AHEAD = 4;

/**
 * The next range of entries to replay from `first`: at most recoveryReadBatchEntriesMax entries
 * whose frames take at most about recoveryReadBatchBytesMax, as finely as the ledger locates
 * them without reading (request undefined: it cannot locate them, the range is replayed here).
 */
function replayRange(replica: Replica, first: number, last: number): { first: number; last: number; request: EntryLeavesRequest | undefined } {
  let upTo = Math.min(last, first + recoveryReadBatchEntriesMax - 1);
  let request: EntryLeavesRequest;
  try {
    request = replica.ledger.locateEntries(first, upTo);
    while (upTo > first && spanBytes(request) > recoveryReadBatchBytesMax) {
      const half = first + Math.floor((upTo - first) / 2);
      const smaller = replica.ledger.locateEntries(first, half);
      if (spanBytes(smaller) >= spanBytes(request)) break;
      upTo = half;
      request = smaller;
    }
  } catch {
    return { first, last: upTo, request: undefined };
  }
  return { first, last: upTo, request };
}

function spanBytes(request: EntryLeavesRequest): number {
  let bytes = 0;
  for (const span of request.spans) bytes += span.endBytes - span.startBytes;
  return bytes;
}

function fromBase64(b64: string): Uint8Array {
  return new Uint8Array(Buffer.from(b64, 'base64'));
}
