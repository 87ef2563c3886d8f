/**
 * The virtual CPU key: the per-machine secret that virtual mode's DERIVED_KEY is derived from
 * (src/recovery/sealing.ts; docs/sealing.md). Hardware keeps such a key inside the CPU; virtual mode
 * keeps it in a file, so "the same CPU" means the same file, and ANYONE WHO CAN READ THE FILE CAN
 * UNSEAL what the node sealed (with the node's measurement and host data, which are public).
 *
 *   loadOrCreateVirtualCpuKey(path) → {key, created}
 *
 * reads the 32-byte key from `path`, or creates it on first use: 32 bytes from the host's CSPRNG
 * written to a temporary file of mode 0600 in the same folder (opened with O_EXCL), synced, then
 * hard-linked to `path` and the folder synced. A link, unlike a rename, never replaces a file: of
 * two processes creating the key at once, exactly one link succeeds and both then use its key,
 * and no reader ever sees a partial file. A missing folder is created (mode 0700).
 *
 * It refuses (VirtualCpuKeyUnusable, naming the file) anything but a regular file of exactly 32
 * bytes with no permission for group or others (as ssh refuses a private key anyone else can use):
 * a key file others can read is a key others hold.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes as cryptoRandomBytes } from 'node:crypto';
import { CovenantError, errorMessage } from '../base/index.js';

/** The same length src/recovery/sealing.ts expects (VIRTUAL_CPU_KEY_LENGTH_BYTES there; a test checks they agree). */
export const VIRTUAL_CPU_KEY_LENGTH_BYTES = 32;
/** Permission bits that must be clear: none for group or others. */
const GROUP_OTHER_PERMISSIONS = 0o077;

export interface VirtualCpuKey {
  /** The 32 secret bytes. */
  readonly key: Uint8Array;
  /** Whether this call made the file: anything sealed before on this machine cannot be unsealed with it. */
  readonly created: boolean;
}

function unusable(file: string, reason: string): CovenantError {
  return new CovenantError('VirtualCpuKeyUnusable', `virtual CPU key file ${file}: ${reason}`, 500, { path: file });
}

function readKey(file: string): Uint8Array {
  const fd = fs.openSync(file, 'r');
  try {
    const stat = fs.fstatSync(fd);
    if (!stat.isFile()) throw unusable(file, 'is not a regular file');
    if ((stat.mode & GROUP_OTHER_PERMISSIONS) !== 0) {
      throw unusable(file, `has mode 0${(stat.mode & 0o777).toString(8)}: group or others may use it; it must be 0600 (chmod 600 it, or remove it to make a new key, which unseals nothing sealed before)`);
    }
    if (stat.size !== VIRTUAL_CPU_KEY_LENGTH_BYTES) {
      throw unusable(file, `is ${stat.size} bytes, not ${VIRTUAL_CPU_KEY_LENGTH_BYTES}`);
    }
    const key = new Uint8Array(VIRTUAL_CPU_KEY_LENGTH_BYTES);
    let read = 0;
    while (read < key.byteLength) {
      const n = fs.readSync(fd, key, read, key.byteLength - read, read);
      if (n === 0) throw unusable(file, `ended after ${read} bytes, not ${VIRTUAL_CPU_KEY_LENGTH_BYTES}`);
      read += n;
    }
    return key;
  } finally {
    fs.closeSync(fd);
  }
}

function syncFolder(folder: string): void {
  const fd = fs.openSync(folder, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Creates the key file, or returns false if another process created it first. */
function createKey(file: string, randomBytes: (n: number) => Uint8Array): boolean {
  const folder = path.dirname(file);
  fs.mkdirSync(folder, { recursive: true, mode: 0o700 });
  const temporary = path.join(folder, `.${path.basename(file)}.${process.pid}.${Buffer.from(randomBytes(8)).toString('hex')}.tmp`);
  const key = randomBytes(VIRTUAL_CPU_KEY_LENGTH_BYTES);
  if (key.byteLength !== VIRTUAL_CPU_KEY_LENGTH_BYTES) throw new Error(`random source returned ${key.byteLength} bytes, asked for ${VIRTUAL_CPU_KEY_LENGTH_BYTES}`);
  const fd = fs.openSync(temporary, 'wx', 0o600);
  try {
    try {
      // The mode given to open is filtered by the umask; a umask cannot add group or other bits to 0600.
      fs.writeSync(fd, key, 0, key.byteLength, 0);
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
      key.fill(0);
    }
    try {
      fs.linkSync(temporary, file);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
      throw e;
    }
    syncFolder(folder);
    return true;
  } finally {
    fs.rmSync(temporary, { force: true });
  }
}

/**
 * The machine's virtual CPU key from `file`, made there on first use. `randomBytes` is the host's
 * CSPRNG unless a test passes another. Refuses a file of the wrong size or kind, or one group or
 * others may read, with VirtualCpuKeyUnusable naming it; other I/O failures are too.
 */
export function loadOrCreateVirtualCpuKey(file: string, randomBytes: (n: number) => Uint8Array = (n) => new Uint8Array(cryptoRandomBytes(n))): VirtualCpuKey {
  try {
    let created = false;
    if (fs.lstatSync(file, { throwIfNoEntry: false }) === undefined) created = createKey(file, randomBytes);
    return { key: readKey(file), created };
  } catch (e) {
    if (e instanceof CovenantError) throw e;
    throw unusable(file, errorMessage(e));
  }
}
