/**
 * An exclusive lock on a node's directories (its ledger, its snapshots, the folder of its node
 * state), taken by `covenant node` before it reads or writes any of them, so that a second process
 * started on the same configuration is refused instead of taking the node over.
 *
 * Node has no flock, and a lock must survive its holder's SIGKILL without an operator's help. The
 * scheme: one lock file per directory (`covenant.lock`), created complete and at once (written to a
 * private temporary name, fsynced, then hard-linked to the lock name: link fails if the name
 * exists, so a reader never sees a half-written lock). It records the holder: its pid and the
 * process's start time (/proc/<pid>/stat, field 22), the boot id, the host name, and the
 * directory's device and inode. A lock is stale, and is broken, when its holder no longer runs
 * (no such pid, or a pid reused by a process started at another time, or another boot), or when it
 * was copied from another directory. A lock written on another host is never judged stale: the pid
 * means nothing here.
 *
 * Breaking a stale lock races with other starts that found it stale at the same time. Each breaker
 * first creates (exclusively) a break token named after the stale lock's nonce; only the token's
 * creator removes the lock, and only if it still holds that very nonce. No one else ever removes a
 * lock holding that nonce (its holder is gone), so the check and the removal cannot be separated by
 * another start's lock. A holder releases its lock on exit (`process.on('exit')`), removing it only
 * if it is still its own.
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import { hostname } from 'node:os';
import * as path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { CovenantError } from '../base/errors.js';

export const LOCK_FILE_NAME = 'covenant.lock';

/** Rounds of create / find stale / break before giving up: each round that fails saw another start's lock come and go. */
const acquireRoundsMax = 8;
/** Pause between rounds, while another start holds a break token (breaking takes a few system calls). */
const roundPauseMs = 20;

/** Who holds a lock, as its file records it. */
export interface LockHolder {
  readonly pid: number;
  /** Start time of the process, in clock ticks after boot (/proc/<pid>/stat field 22); null where /proc is absent. */
  readonly start_time: string | null;
  readonly boot_id: string | null;
  readonly hostname: string;
  /** `<dev>:<ino>` of the locked directory: a lock copied along with the directory's files is not this directory's. */
  readonly directory_id: string;
  /** Unique to one taking of the lock. */
  readonly nonce: string;
  /** ISO 8601, for the operator. */
  readonly taken_at: string;
}

/** A directory is locked by another live process (or the lock cannot be judged): the node must not start. */
export class DirectoryLockedError extends CovenantError {
  constructor(
    message: string,
    readonly lockFile: string,
    readonly holder: LockHolder | undefined,
  ) {
    super('DirectoryLocked', message, 409);
    this.name = 'DirectoryLockedError';
  }
}

function readOptional(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

/** Start time of process `pid` (clock ticks after boot); undefined if it does not run (or is a zombie); null if this system has no /proc. */
export function processStartTime(pid: number): string | null | undefined {
  if (!fs.existsSync('/proc/self/stat')) return null;
  const stat = readOptional(`/proc/${pid}/stat`);
  if (stat === undefined) return undefined;
  // The command name (field 2) is in parentheses and may hold spaces or parentheses: fields after the last ')'.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  // A zombie (killed, not yet reaped by its parent) holds nothing any more.
  if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
  return fields[19] ?? null;
}

function bootId(): string | null {
  return readOptional('/proc/sys/kernel/random/boot_id')?.trim() ?? null;
}

function directoryId(directory: string): string {
  const stat = fs.statSync(directory);
  return `${stat.dev}:${stat.ino}`;
}

function parseHolder(text: string): LockHolder | undefined {
  try {
    const value = JSON.parse(text) as Partial<LockHolder>;
    if (typeof value.pid !== 'number' || typeof value.nonce !== 'string' || typeof value.hostname !== 'string' || typeof value.directory_id !== 'string') return undefined;
    return value as LockHolder;
  } catch {
    return undefined;
  }
}

/** Whether `holder` may still hold the lock of `directory`: a reason it is stale, or undefined if it may. */
function staleReason(holder: LockHolder, directory: string): string | undefined {
  if (holder.hostname !== hostname()) return undefined;
  if (holder.directory_id !== directoryId(directory)) return 'it was copied from another directory';
  const boot = bootId();
  if (boot !== null && holder.boot_id !== null && holder.boot_id !== boot) return 'it was taken before the machine restarted';
  const started = processStartTime(holder.pid);
  if (started === undefined) return `process ${holder.pid} no longer runs`;
  if (started === null) return processRuns(holder.pid) ? undefined : `process ${holder.pid} no longer runs`;
  if (holder.start_time !== null && started !== holder.start_time) return `process ${holder.pid} is another process than the one that took it`;
  return undefined;
}

function processRuns(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** Creates `file` holding `text`, complete, or throws EEXIST if it exists. */
function createExclusive(file: string, text: string): void {
  const temporary = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = fs.openSync(temporary, 'wx', 0o644);
  try {
    fs.writeSync(fd, text);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
  try {
    fs.linkSync(temporary, file);
  } finally {
    fs.unlinkSync(temporary);
  }
}

function isCode(e: unknown, code: string): boolean {
  return (e as NodeJS.ErrnoException | undefined)?.code === code;
}

function describe(holder: LockHolder): string {
  const where = holder.hostname === hostname() ? '' : ` on host ${holder.hostname}`;
  return `process ${holder.pid}${where} (since ${holder.taken_at})`;
}

/** One directory's lock, held by this process. */
class DirectoryLock {
  constructor(
    readonly file: string,
    private readonly nonce: string,
  ) {}

  /** Removes the lock file if it is still this process's. */
  release(): void {
    const text = readOptional(this.file);
    if (text === undefined || parseHolder(text)?.nonce !== this.nonce) return;
    fs.rmSync(this.file, { force: true });
  }
}

/** Takes the lock of one existing directory, breaking a stale one. Throws DirectoryLockedError. */
async function lockDirectory(directory: string, purpose: string): Promise<DirectoryLock> {
  const file = path.join(directory, LOCK_FILE_NAME);
  const holder: LockHolder = {
    pid: process.pid,
    start_time: processStartTime(process.pid) ?? null,
    boot_id: bootId(),
    hostname: hostname(),
    directory_id: directoryId(directory),
    nonce: randomBytes(16).toString('hex'),
    taken_at: new Date().toISOString(),
  };
  const text = JSON.stringify(holder) + '\n';
  for (let round = 0; round < acquireRoundsMax; round++) {
    try {
      createExclusive(file, text);
      return new DirectoryLock(file, holder.nonce);
    } catch (e) {
      if (!isCode(e, 'EEXIST')) throw e;
    }
    const existing = readOptional(file);
    if (existing === undefined) continue; // released meanwhile
    const other = parseHolder(existing);
    if (other === undefined) {
      throw new DirectoryLockedError(`${purpose} ${directory} is locked by ${file}, which cannot be read as a lock: if no covenant node runs on it, remove that file`, file, undefined);
    }
    const stale = staleReason(other, directory);
    if (stale === undefined) {
      const advice = other.hostname === hostname() ? 'stop that process first' : `stop it there first, or if that host no longer runs it, remove ${file}`;
      throw new DirectoryLockedError(`${purpose} ${directory} is in use by another covenant node, ${describe(other)} (lock file ${file}): ${advice}`, file, other);
    }
    if (!breakStale(file, other)) await sleep(roundPauseMs);
  }
  throw new DirectoryLockedError(`${purpose} ${directory}: its lock ${file} kept changing hands while this process tried to take it; try again`, file, undefined);
}

/**
 * Removes the stale lock `file` holding `stale` if this process wins its break token; answers
 * whether the caller may try again at once (false: another start is breaking it).
 */
function breakStale(file: string, stale: LockHolder): boolean {
  const token = `${file}.break-${stale.nonce}`;
  try {
    createExclusive(token, JSON.stringify({ pid: process.pid, start_time: processStartTime(process.pid) ?? null }) + '\n');
  } catch (e) {
    if (!isCode(e, 'EEXIST')) throw e;
    // Another start is breaking it (a few system calls), unless that start died while at it.
    const breaker = readOptional(token);
    const { pid, start_time } = breaker === undefined ? { pid: 0, start_time: null } : (JSON.parse(breaker) as { pid: number; start_time: string | null });
    const started = breaker === undefined ? null : processStartTime(pid);
    if (started === undefined || (started !== null && start_time !== null && started !== start_time)) {
      throw new DirectoryLockedError(
        `the stale lock ${file} was being removed by process ${pid}, which stopped meanwhile: if no covenant node runs on this directory, remove ${file} and ${token}`,
        file,
        stale,
      );
    }
    return false;
  }
  try {
    if (parseHolder(readOptional(file) ?? '')?.nonce === stale.nonce) fs.rmSync(file, { force: true });
  } finally {
    fs.rmSync(token, { force: true });
  }
  return true;
}

/** The locks of a node's directories, held by this process until it exits or releases them. */
export class NodeDirectoryLocks {
  #released = false;
  #keepDirectories = false;
  readonly #onExit = () => this.release();

  private constructor(
    private readonly locks: readonly DirectoryLock[],
    /** Directories this process created to lock them: removed again (if still empty) when it releases them without having started. */
    private readonly created: readonly string[],
  ) {
    process.on('exit', this.#onExit);
  }

  /**
   * Takes the lock of each directory (created if missing), in a fixed order; all or none. A
   * directory named twice is locked once. Throws DirectoryLockedError naming the holder.
   */
  static async acquire(directories: readonly { directory: string; purpose: string }[]): Promise<NodeDirectoryLocks> {
    const created: string[] = [];
    const locks: DirectoryLock[] = [];
    try {
      // Named twice, or reached twice through a symbolic link: one lock (this process would otherwise refuse itself).
      const unique = new Map<string, string>();
      for (const { directory, purpose } of directories) {
        const resolved = path.resolve(directory);
        const first = fs.mkdirSync(resolved, { recursive: true });
        // mkdir made `first` and every folder below it down to `resolved`.
        for (let made = resolved; first !== undefined && made.length >= first.length; made = path.dirname(made)) created.push(made);
        const real = fs.realpathSync(resolved);
        if (!unique.has(real)) unique.set(real, purpose);
      }
      for (const [directory, purpose] of [...unique].sort(([a], [b]) => a.localeCompare(b))) {
        locks.push(await lockDirectory(directory, purpose));
      }
    } catch (e) {
      new NodeDirectoryLocks(locks, created).release();
      throw e;
    }
    return new NodeDirectoryLocks(locks, created);
  }

  /** The lock files held. */
  get files(): string[] {
    return this.locks.map((l) => l.file);
  }

  /** The node started: directories this process created stay even if they are still empty. */
  keepDirectories(): void {
    this.#keepDirectories = true;
  }

  /** Removes this process's lock files (and, before the node started, the empty directories it created). Idempotent. */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    process.off('exit', this.#onExit);
    for (const lock of this.locks) lock.release();
    if (this.#keepDirectories) return;
    // Deepest first: a created parent is empty only once its created child is gone.
    for (const directory of [...this.created].sort((a, b) => b.length - a.length)) {
      try {
        fs.rmdirSync(directory);
      } catch (e) {
        // Not empty (the node wrote there) or already gone: it stays as it is.
        if (!isCode(e, 'ENOTEMPTY') && !isCode(e, 'ENOENT') && !isCode(e, 'EEXIST')) throw e;
      }
    }
  }
}
