/**
 * An in-memory Disk for tests and the simulator, with the faults the ledger claims to survive:
 *
 * - crash(): every file keeps its synced bytes plus only a prefix of the bytes appended since
 *   its last sync (a torn write). Directory operations (create, rename, remove, truncate) are
 *   modelled as durable at once, as a journaling file system makes them.
 * - failWrites(n, code): the next n writes fail, an append after writing a prefix of its bytes
 *   (as a real short write before ENOSPC would).
 * - corrupt(path, offset): flips a byte (bit rot), to test detection.
 *
 * Randomness comes only from the injected `random` (a seeded PRNG in the simulator), so a crash
 * is reproducible from the seed.
 */
import { DiskError, type Disk, type DiskErrorCode, type DiskFile } from '../ledger/index.js';

interface Inode {
  bytes: Uint8Array;
  sizeBytes: number;
  /** Bytes [0, durableBytes) survive a crash whole. */
  durableBytes: number;
}

/** A syncAsync under way: the bytes it covers (cut by a truncation meanwhile). */
interface SyncUnderWay {
  readonly inode: Inode;
  coveredBytes: number;
  cancelled: boolean;
}

/**
 * How a sync started by syncAsync completes: `complete` must run later (never within the call).
 * By default on a microtask; the simulator schedules it on the node's clock with a seeded delay.
 */
export type SyncScheduler = (path: string, complete: () => void) => void;

export interface MemoryDiskOptions {
  /** Uniform in [0, 1); decides how much of each unsynced tail a crash keeps. */
  random?: () => number;
}

/** How many of `unsyncedBytes` bytes of `path` a crash keeps. */
export type TearPolicy = (path: string, unsyncedBytes: number) => number;

class MemoryFile implements DiskFile {
  #closed = false;
  constructor(
    private readonly disk: MemoryDisk,
    private readonly inode: Inode,
    private readonly label: string,
  ) {}

  sizeBytes(): number {
    return this.inode.sizeBytes;
  }

  append(parts: readonly Uint8Array[]): void {
    this.#check();
    this.disk.appendTo(this.inode, parts, this.label);
  }

  writeAt(positionBytes: number, bytes: Uint8Array): void {
    this.#check();
    this.disk.overwrite(this.inode, positionBytes, bytes, this.label);
  }

  sync(): void {
    this.#check();
    this.disk.syncCount++;
    this.inode.durableBytes = this.inode.sizeBytes;
  }

  syncAsync(done: (error: DiskError | undefined) => void): void {
    this.#check();
    this.disk.startSync(this.inode, this.label, done);
  }

  close(): void {
    this.#closed = true;
  }

  #check(): void {
    if (this.#closed) throw new DiskError('DiskIoFailed', 'write', this.label, 'file is closed');
  }
}

export class MemoryDisk implements Disk {
  readonly #files = new Map<string, Inode>();
  readonly #directories = new Set<string>(['/', '.']);
  readonly #random: () => number;
  #failingWrites = 0;
  #failingCode: DiskErrorCode = 'DiskFull';
  /** Number of file syncs, so tests can check durability points. */
  syncCount = 0;
  /** Asynchronous syncs started (syncAsync). */
  asyncSyncCount = 0;
  syncScheduler: SyncScheduler = (_path, complete) => queueMicrotask(complete);
  readonly #syncsUnderWay = new Set<SyncUnderWay>();
  #heldSyncs: (() => void)[] | undefined;

  constructor(options: MemoryDiskOptions = {}) {
    this.#random = options.random ?? (() => 0.5);
  }

  join(directory: string, name: string): string {
    return `${normalize(directory)}/${name}`.replace(/^\/\//, '/');
  }

  exists(path: string): boolean {
    const p = normalize(path);
    return this.#files.has(p) || this.#directories.has(p);
  }

  ensureDirectory(directory: string): void {
    let p = normalize(directory);
    while (p !== '/' && p !== '.' && p !== '') {
      this.#directories.add(p);
      p = parent(p);
    }
  }

  listDirectory(directory: string): string[] {
    const dir = normalize(directory);
    if (!this.#directories.has(dir)) throw new DiskError('DiskIoFailed', 'list', dir, 'no such directory');
    const out: string[] = [];
    for (const path of this.#files.keys()) if (parent(path) === dir) out.push(path.slice(dir.length + 1));
    return out;
  }

  sizeBytes(path: string): number {
    return this.#inode(path, 'stat').sizeBytes;
  }

  read(path: string, positionBytes: number, lengthBytes: number): Uint8Array {
    const inode = this.#inode(path, 'read');
    const end = Math.min(inode.sizeBytes, positionBytes + lengthBytes);
    return inode.bytes.slice(Math.min(positionBytes, end), end);
  }

  readAll(path: string): Uint8Array {
    const inode = this.#inode(path, 'read');
    return inode.bytes.slice(0, inode.sizeBytes);
  }

  createFile(path: string): DiskFile {
    const p = normalize(path);
    if (!this.#directories.has(parent(p))) throw new DiskError('DiskIoFailed', 'create', p, 'no such directory');
    if (this.#files.has(p)) throw new DiskError('DiskIoFailed', 'create', p, 'file exists');
    const inode: Inode = { bytes: new Uint8Array(256), sizeBytes: 0, durableBytes: 0 };
    this.#files.set(p, inode);
    return new MemoryFile(this, inode, p);
  }

  openForAppend(path: string): DiskFile {
    return new MemoryFile(this, this.#inode(path, 'open'), normalize(path));
  }

  rename(fromPath: string, toPath: string): void {
    const from = normalize(fromPath);
    const inode = this.#inode(from, 'rename');
    this.#files.delete(from);
    this.#files.set(normalize(toPath), inode);
  }

  remove(path: string): void {
    this.#files.delete(normalize(path));
  }

  truncate(path: string, lengthBytes: number): void {
    const inode = this.#inode(path, 'truncate');
    if (lengthBytes > inode.sizeBytes) throw new DiskError('DiskIoFailed', 'truncate', path, 'extending truncate not supported');
    inode.sizeBytes = lengthBytes;
    inode.durableBytes = Math.min(inode.durableBytes, lengthBytes);
    // A sync under way covers the bytes it saw, not those appended after this cut.
    for (const sync of this.#syncsUnderWay) if (sync.inode === inode) sync.coveredBytes = Math.min(sync.coveredBytes, lengthBytes);
  }

  syncDirectory(_directory: string): void {
    // Directory operations are durable at once in this model.
  }

  // ---- asynchronous syncs ----

  /** From now on, asynchronous syncs wait for releaseSyncs (a test orders them against other events). */
  holdSyncs(): void {
    this.#heldSyncs ??= [];
  }

  /** Completes every sync held now, in the order they started; returns how many. Those started meanwhile stay held. */
  releaseSyncs(): number {
    const held = this.#heldSyncs ?? [];
    if (this.#heldSyncs !== undefined) this.#heldSyncs = [];
    for (const complete of held) complete();
    return held.length;
  }

  /** Syncs started and not yet completed. */
  get syncsUnderWay(): number {
    return this.#syncsUnderWay.size;
  }

  /** @internal used by MemoryFile: covers the bytes appended so far, completes as the scheduler says. */
  startSync(inode: Inode, label: string, done: (error: DiskError | undefined) => void): void {
    this.asyncSyncCount++;
    const sync: SyncUnderWay = { inode, coveredBytes: inode.sizeBytes, cancelled: false };
    this.#syncsUnderWay.add(sync);
    const complete = (): void => {
      if (sync.cancelled || !this.#syncsUnderWay.delete(sync)) return;
      this.syncCount++;
      inode.durableBytes = Math.max(inode.durableBytes, Math.min(sync.coveredBytes, inode.sizeBytes));
      done(undefined);
    };
    if (this.#heldSyncs !== undefined) this.#heldSyncs.push(complete);
    else this.syncScheduler(label, complete);
  }

  // ---- fault injection ----

  /**
   * Simulates a power loss: each file keeps its synced bytes and a prefix of the rest, chosen by
   * `tear` (default: a random length from the injected random source).
   */
  crash(tear?: TearPolicy): void {
    // Syncs under way never complete: the machine lost power before they did.
    for (const sync of this.#syncsUnderWay) sync.cancelled = true;
    this.#syncsUnderWay.clear();
    if (this.#heldSyncs !== undefined) this.#heldSyncs = [];
    const keep = tear ?? ((_path: string, unsynced: number) => Math.floor(this.#random() * (unsynced + 1)));
    for (const [path, inode] of [...this.#files].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const unsynced = inode.sizeBytes - inode.durableBytes;
      if (unsynced === 0) continue;
      const kept = Math.max(0, Math.min(unsynced, Math.floor(keep(path, unsynced))));
      inode.sizeBytes = inode.durableBytes + kept;
      inode.durableBytes = inode.sizeBytes;
    }
  }

  /** The next `count` writes fail: an append after writing a prefix (half) of its bytes, a positioned write writing none. */
  failWrites(count: number, code: DiskErrorCode = 'DiskFull'): void {
    this.#failingWrites = count;
    this.#failingCode = code;
  }

  /** Flips the bits of the byte at `offsetBytes` of `path`. */
  corrupt(path: string, offsetBytes: number): void {
    const inode = this.#inode(path, 'corrupt');
    if (offsetBytes >= inode.sizeBytes) throw new RangeError(`offset ${offsetBytes} beyond ${path} (${inode.sizeBytes} bytes)`);
    inode.bytes[offsetBytes] = inode.bytes[offsetBytes]! ^ 0xff;
  }

  /** Bytes appended to `path` since its last sync. */
  unsyncedBytes(path: string): number {
    const inode = this.#inode(path, 'stat');
    return inode.sizeBytes - inode.durableBytes;
  }

  /** @internal used by MemoryFile */
  appendTo(inode: Inode, parts: readonly Uint8Array[], label: string): void {
    let total = 0;
    for (const part of parts) total += part.byteLength;
    let writeBytes = total;
    const failing = this.#failingWrites > 0;
    if (failing) {
      this.#failingWrites--;
      writeBytes = Math.floor(total / 2);
    }
    const needed = inode.sizeBytes + writeBytes;
    if (needed > inode.bytes.byteLength) {
      const grown = new Uint8Array(Math.max(needed, inode.bytes.byteLength * 2));
      grown.set(inode.bytes.subarray(0, inode.sizeBytes));
      inode.bytes = grown;
    }
    let left = writeBytes;
    for (const part of parts) {
      if (left === 0) break;
      const n = Math.min(left, part.byteLength);
      inode.bytes.set(n === part.byteLength ? part : part.subarray(0, n), inode.sizeBytes);
      inode.sizeBytes += n;
      left -= n;
    }
    if (failing) throw new DiskError(this.#failingCode, 'append', label, 'injected failure');
  }

  /** @internal used by MemoryFile: a positioned write within the file (it fails as an append would, writing nothing). */
  overwrite(inode: Inode, positionBytes: number, bytes: Uint8Array, label: string): void {
    if (positionBytes < 0 || positionBytes + bytes.byteLength > inode.sizeBytes) throw new DiskError('DiskIoFailed', 'write', label, 'a write past the end');
    if (this.#failingWrites > 0) {
      this.#failingWrites--;
      throw new DiskError(this.#failingCode, 'write', label, 'injected failure');
    }
    inode.bytes.set(bytes, positionBytes);
    // Bytes rewritten since the last sync may be torn by a crash like appended ones.
    inode.durableBytes = Math.min(inode.durableBytes, positionBytes);
  }

  #inode(path: string, operation: string): Inode {
    const inode = this.#files.get(normalize(path));
    if (inode === undefined) throw new DiskError('DiskIoFailed', operation, path, 'no such file');
    return inode;
  }
}

function normalize(path: string): string {
  const absolute = path.startsWith('/');
  const parts: string[] = [];
  for (const part of path.split('/')) {
    if (part === '' || part === '.') continue;
    if (part === '..') parts.pop();
    else parts.push(part);
  }
  return (absolute ? '/' : '') + parts.join('/') || (absolute ? '/' : '.');
}

function parent(path: string): string {
  const i = path.lastIndexOf('/');
  if (i < 0) return '.';
  return i === 0 ? '/' : path.slice(0, i);
}
