/**
 * The real Disk: node:fs, synchronous calls except syncAsync. The node batches appends so each
 * batch costs a writev; the write path's durability point is an fdatasync on libuv's thread pool
 * that covers every append since the one before (src/node/grouped-sync.ts).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DiskError, type Disk, type DiskFile } from '../ledger/index.js';

/** writev takes at most IOV_MAX buffers per call on Linux. */
const IOV_MAX = 1024;

function wrap(operation: string, target: string, e: unknown): DiskError {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  const message = e instanceof Error ? e.message : String(e);
  return new DiskError(code === 'ENOSPC' || code === 'EDQUOT' ? 'DiskFull' : 'DiskIoFailed', operation, target, message);
}

function io<T>(operation: string, target: string, run: () => T): T {
  try {
    return run();
  } catch (e) {
    throw wrap(operation, target, e);
  }
}

/** What the files report as they are written (metrics: src/http/prometheus.ts). */
export interface DiskTimings {
  append(seconds: number, bytes: number): void;
  sync(seconds: number): void;
}

class FsFile implements DiskFile {
  readonly #fd: number;
  readonly #path: string;
  readonly #timings: DiskTimings | undefined;
  #sizeBytes: number;
  #closed = false;
  /** Asynchronous syncs under way: the descriptor is closed once none is (close waits for them). */
  #syncsUnderWay = 0;
  #closeWanted = false;

  constructor(fd: number, filePath: string, sizeBytes: number, timings: DiskTimings | undefined) {
    this.#fd = fd;
    this.#path = filePath;
    this.#sizeBytes = sizeBytes;
    this.#timings = timings;
  }

  sizeBytes(): number {
    return this.#sizeBytes;
  }

  append(parts: readonly Uint8Array[]): void {
    this.#checkOpen();
    const startedMs = this.#timings === undefined ? 0 : performance.now();
    const before = this.#sizeBytes;
    io('append', this.#path, () => {
      for (let i = 0; i < parts.length; i += IOV_MAX) {
        const group = parts.slice(i, i + IOV_MAX);
        let wanted = 0;
        for (const part of group) wanted += part.byteLength;
        let written = fs.writevSync(this.#fd, group, this.#sizeBytes);
        // A short write is legal: finish the group byte by byte range, never skipping any.
        while (written < wanted) {
          let skip = written;
          for (const part of group) {
            if (skip >= part.byteLength) {
              skip -= part.byteLength;
              continue;
            }
            const done = fs.writeSync(this.#fd, part, skip, part.byteLength - skip, this.#sizeBytes + written);
            written += done;
            break;
          }
        }
        this.#sizeBytes += wanted;
      }
    });
    this.#timings?.append((performance.now() - startedMs) / 1000, this.#sizeBytes - before);
  }

  writeAt(positionBytes: number, bytes: Uint8Array): void {
    this.#checkOpen();
    if (positionBytes < 0 || positionBytes + bytes.byteLength > this.#sizeBytes) {
      throw new DiskError('DiskIoFailed', 'write', this.#path, `a write at ${positionBytes} of ${bytes.byteLength} bytes goes past the end (${this.#sizeBytes} bytes)`);
    }
    io('write', this.#path, () => {
      let written = 0;
      // A short write is legal: continue where it stopped.
      while (written < bytes.byteLength) written += fs.writeSync(this.#fd, bytes, written, bytes.byteLength - written, positionBytes + written);
    });
  }

  sync(): void {
    this.#checkOpen();
    const startedMs = this.#timings === undefined ? 0 : performance.now();
    io('sync', this.#path, () => fs.fdatasyncSync(this.#fd));
    this.#timings?.sync((performance.now() - startedMs) / 1000);
  }

  syncAsync(done: (error: DiskError | undefined) => void): void {
    this.#checkOpen();
    const startedMs = this.#timings === undefined ? 0 : performance.now();
    this.#syncsUnderWay++;
    fs.fdatasync(this.#fd, (e) => {
      this.#syncsUnderWay--;
      if (e === null) this.#timings?.sync((performance.now() - startedMs) / 1000);
      if (this.#closeWanted && this.#syncsUnderWay === 0) this.#closeDescriptor();
      done(e === null ? undefined : wrap('sync', this.#path, e));
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    // A sync on the thread pool still uses the descriptor: it must not be closed (or reused) under it.
    if (this.#syncsUnderWay > 0) this.#closeWanted = true;
    else this.#closeDescriptor();
  }

  #closeDescriptor(): void {
    this.#closeWanted = false;
    io('close', this.#path, () => fs.closeSync(this.#fd));
  }

  #checkOpen(): void {
    if (this.#closed) throw new DiskError('DiskIoFailed', 'write', this.#path, 'file is closed');
  }
}

/** Read descriptors kept open: random reads of a few hot chunks should not pay an open each. */
const READ_DESCRIPTORS_MAX = 16;

export class FsDisk implements Disk {
  readonly #timings: DiskTimings | undefined;

  /** `timings`: told of every append and sync of a file this disk opens for writing. */
  constructor(options: { timings?: DiskTimings } = {}) {
    this.#timings = options.timings;
  }

  /** path → read-only descriptor, least recently used first. Dropped on rename and remove. */
  readonly #readDescriptors = new Map<string, number>();

  #readDescriptor(target: string): number {
    const cached = this.#readDescriptors.get(target);
    if (cached !== undefined) {
      this.#readDescriptors.delete(target);
      this.#readDescriptors.set(target, cached);
      return cached;
    }
    const fd = fs.openSync(target, 'r');
    this.#readDescriptors.set(target, fd);
    if (this.#readDescriptors.size > READ_DESCRIPTORS_MAX) {
      const [oldestPath, oldestFd] = this.#readDescriptors.entries().next().value!;
      this.#readDescriptors.delete(oldestPath);
      fs.closeSync(oldestFd);
    }
    return fd;
  }

  #forget(target: string): void {
    const fd = this.#readDescriptors.get(target);
    if (fd === undefined) return;
    this.#readDescriptors.delete(target);
    io('close', target, () => fs.closeSync(fd));
  }

  /** Closes the cached read descriptors. */
  close(): void {
    for (const target of [...this.#readDescriptors.keys()]) this.#forget(target);
  }

  join(directory: string, name: string): string {
    return path.join(directory, name);
  }

  exists(target: string): boolean {
    return fs.existsSync(target);
  }

  ensureDirectory(directory: string): void {
    io('mkdir', directory, () => fs.mkdirSync(directory, { recursive: true }));
  }

  listDirectory(directory: string): string[] {
    return io('list', directory, () =>
      fs
        .readdirSync(directory, { withFileTypes: true })
        .filter((d) => d.isFile())
        .map((d) => d.name),
    );
  }

  sizeBytes(target: string): number {
    return io('stat', target, () => fs.statSync(target).size);
  }

  read(target: string, positionBytes: number, lengthBytes: number): Uint8Array {
    return io('read', target, () => {
      const fd = this.#readDescriptor(target);
      const out = new Uint8Array(lengthBytes);
      let got = 0;
      while (got < lengthBytes) {
        const n = fs.readSync(fd, out, got, lengthBytes - got, positionBytes + got);
        if (n === 0) break;
        got += n;
      }
      return got === lengthBytes ? out : out.subarray(0, got);
    });
  }

  readAll(target: string): Uint8Array {
    return io('read', target, () => {
      const buffer = fs.readFileSync(target);
      return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
    });
  }

  createFile(target: string): DiskFile {
    const fd = io('create', target, () => fs.openSync(target, 'wx'));
    return new FsFile(fd, target, 0, this.#timings);
  }

  openForAppend(target: string): DiskFile {
    return io('open', target, () => {
      // 'r+' rather than 'a': positioned writes at the tracked end keep the offsets we index exact.
      const fd = fs.openSync(target, 'r+');
      return new FsFile(fd, target, fs.fstatSync(fd).size, this.#timings);
    });
  }

  rename(fromPath: string, toPath: string): void {
    this.#forget(fromPath);
    this.#forget(toPath);
    io('rename', fromPath, () => fs.renameSync(fromPath, toPath));
  }

  remove(target: string): void {
    this.#forget(target);
    io('remove', target, () => fs.rmSync(target, { force: true }));
  }

  truncate(target: string, lengthBytes: number): void {
    io('truncate', target, () => fs.truncateSync(target, lengthBytes));
  }

  syncDirectory(directory: string): void {
    io('sync', directory, () => {
      const fd = fs.openSync(directory, 'r');
      try {
        fs.fsyncSync(fd);
      } finally {
        fs.closeSync(fd);
      }
    });
  }
}
