/**
 * What the Prometheus scrape reports of the ledger and snapshot folders, without listing them and
 * stat'ing every file on every scrape: a folder is listed again only when its own modification
 * time changed (a file was created, renamed or removed in it), a committed ledger chunk's size is
 * read once (it never changes again), and only the chunks still being written are stat'ed per
 * scrape. A scrape then costs one stat per folder and one per open chunk, however long the ledger.
 */
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** A ledger chunk file: ledger_<first>[-<last>][.committed][.recovery]. */
const LEDGER_CHUNK = /^ledger_\d+/;
/** A committed snapshot's name: snapshot_<seqno>_<evidence seqno>.committed. */
const COMMITTED_SNAPSHOT = /^snapshot_(\d+)_(\d+)\.committed$/;

/** A folder's names, listed again when the folder's modification time moves. */
class FolderListing {
  private names: string[] = [];
  /** The folder's mtime and ctime when listed (undefined: never listed, or the folder is missing). */
  private stamp: string | undefined;

  constructor(readonly directory: string) {}

  /** The names, and whether they were listed again by this call. */
  current(): { names: readonly string[]; changed: boolean } {
    let stamp: string;
    try {
      const stat = statSync(this.directory, { bigint: true });
      stamp = `${stat.mtimeNs} ${stat.ctimeNs}`;
    } catch {
      // Not created yet.
      const changed = this.stamp !== undefined || this.names.length > 0;
      this.names = [];
      this.stamp = undefined;
      return { names: this.names, changed };
    }
    if (stamp === this.stamp) return { names: this.names, changed: false };
    try {
      this.names = readdirSync(this.directory);
    } catch {
      this.names = []; // removed since its stat
    }
    this.stamp = stamp;
    return { names: this.names, changed: true };
  }
}

/** The ledger chunks of ledger.directory: how many, and their bytes. */
export class LedgerFolderStats {
  private readonly listing: FolderListing;
  private chunks: string[] = [];
  /** Sizes of committed chunks, read once each. */
  private readonly committedSizes = new Map<string, number>();

  constructor(directory: string) {
    this.listing = new FolderListing(directory);
  }

  read(): { chunks: number; sizeBytes: number } {
    const { names, changed } = this.listing.current();
    if (changed) {
      this.chunks = names.filter((name) => LEDGER_CHUNK.test(name));
      const present = new Set(this.chunks);
      for (const name of this.committedSizes.keys()) if (!present.has(name)) this.committedSizes.delete(name);
    }
    let sizeBytes = 0;
    for (const name of this.chunks) {
      const known = this.committedSizes.get(name);
      if (known !== undefined) {
        sizeBytes += known;
        continue;
      }
      const size = fileSize(join(this.listing.directory, name));
      if (name.includes('.committed') && size !== undefined) this.committedSizes.set(name, size);
      sizeBytes += size ?? 0;
    }
    return { chunks: this.chunks.length, sizeBytes };
  }
}

export interface NewestSnapshot {
  readonly seqno: number;
  readonly sizeBytes: number;
  readonly mtimeMs: number;
}

/** The newest committed snapshot of snapshots.directory (a committed snapshot file is not written again, only replaced by a rename). */
export class SnapshotFolderStats {
  private readonly listing: FolderListing;
  private newestKnown: NewestSnapshot | undefined;

  constructor(directory: string) {
    this.listing = new FolderListing(directory);
  }

  newest(): NewestSnapshot | undefined {
    const { names, changed } = this.listing.current();
    if (!changed) return this.newestKnown;
    let newest: { seqno: number; name: string } | undefined;
    for (const name of names) {
      const m = COMMITTED_SNAPSHOT.exec(name);
      if (m !== null && (newest === undefined || Number(m[1]) > newest.seqno)) newest = { seqno: Number(m[1]), name };
    }
    this.newestKnown = undefined;
    if (newest !== undefined) {
      try {
        const stat = statSync(join(this.listing.directory, newest.name));
        this.newestKnown = { seqno: newest.seqno, sizeBytes: stat.size, mtimeMs: stat.mtimeMs };
      } catch {
        // Removed since it was listed: the next scrape lists the folder again (its mtime moved).
      }
    }
    return this.newestKnown;
  }
}

function fileSize(file: string): number | undefined {
  try {
    return statSync(file).size;
  } catch {
    return undefined; // renamed or removed since it was listed
  }
}
