/**
 * The lock on a node's directories: a live holder refuses another taker (naming its pid), a stale
 * lock (its process gone, its pid reused, copied from another directory) is broken, a lock of
 * another host is never judged stale, and processes started at the same moment on one directory,
 * with or without a stale lock in it, end with exactly one holder.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DirectoryLockedError, LOCK_FILE_NAME, NodeDirectoryLocks, processStartTime, type LockHolder } from '../../src/platform/directory-lock.js';
import { removeDir } from '../../src/testing/node-process.js';

const LOCK_MODULE = new URL('../../src/platform/directory-lock.js', import.meta.url).href;

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'covenant-lock-'));
}

function holderIn(directory: string): LockHolder {
  return JSON.parse(readFileSync(join(directory, LOCK_FILE_NAME), 'utf8')) as LockHolder;
}

/** A lock file as another process would have written it, with `overrides`. */
function plantLock(directory: string, overrides: Partial<LockHolder>): LockHolder {
  const stat = statSync(directory);
  const holder: LockHolder = {
    pid: process.pid,
    start_time: processStartTime(process.pid) ?? null,
    boot_id: readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim(),
    hostname: hostname(),
    directory_id: `${stat.dev}:${stat.ino}`,
    nonce: 'planted',
    taken_at: '2026-01-01T00:00:00.000Z',
    ...overrides,
  };
  writeFileSync(join(directory, LOCK_FILE_NAME), JSON.stringify(holder));
  return holder;
}

/** The pid of a process that ran and was reaped. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

const locked = (pattern: RegExp) => (e: unknown) => e instanceof DirectoryLockedError && e.code === 'DirectoryLocked' && pattern.test(e.message);

test('a held lock refuses another taker, naming the holder; released, it can be taken again, and created folders go with it', async () => {
  const root = tempDir();
  try {
    const ledger = join(root, 'new', 'ledger');
    const locks = await NodeDirectoryLocks.acquire([
      { directory: ledger, purpose: 'the ledger directory' },
      { directory: root, purpose: 'the node state folder' },
      { directory: ledger, purpose: 'the snapshots directory' },
    ]);
    assert.deepEqual(locks.files.sort(), [join(ledger, LOCK_FILE_NAME), join(root, LOCK_FILE_NAME)].sort(), 'one lock per distinct directory');
    assert.equal(holderIn(ledger).pid, process.pid);
    await assert.rejects(
      NodeDirectoryLocks.acquire([{ directory: root, purpose: 'the node state folder' }]),
      locked(new RegExp(`the node state folder .* is in use by another covenant node, process ${process.pid} `)),
    );
    // All or none: the free directory's lock taken on the way is given back.
    const other = join(root, 'free');
    await assert.rejects(NodeDirectoryLocks.acquire([{ directory: other, purpose: 'a' }, { directory: ledger, purpose: 'b' }]), DirectoryLockedError);
    assert.equal(existsSync(other), false, 'a folder created for a refused lock is removed');

    locks.release();
    assert.equal(existsSync(join(root, LOCK_FILE_NAME)), false);
    assert.equal(existsSync(join(root, 'new')), false, 'folders created by the lock, still empty, are removed when the node did not start');
    const again = await NodeDirectoryLocks.acquire([{ directory: ledger, purpose: 'the ledger directory' }]);
    again.keepDirectories();
    again.release();
    assert.deepEqual(readdirSync(ledger), [], 'kept once the node started; the lock file is gone');
  } finally {
    removeDir(root);
  }
});

test('a stale lock is broken: its process gone, its pid reused by another process, copied from another directory, or from a previous boot', async () => {
  const root = tempDir();
  try {
    const cases: [string, Partial<LockHolder>][] = [
      ['process gone', { pid: deadPid() }],
      ['pid reused', { start_time: '1' }],
      ['copied', { directory_id: '0:0' }],
      ['previous boot', { boot_id: 'another-boot' }],
    ];
    for (const [name, overrides] of cases) {
      plantLock(root, overrides);
      const locks = await NodeDirectoryLocks.acquire([{ directory: root, purpose: 'the ledger directory' }]);
      const holder = holderIn(root);
      assert.equal(holder.pid, process.pid, name);
      assert.notEqual(holder.nonce, 'planted', name);
      assert.deepEqual(readdirSync(root), [LOCK_FILE_NAME], `${name}: no break token or temporary file left`);
      locks.release();
    }
    // A live lock, and one of another host (whose pid means nothing here), are not stale.
    plantLock(root, {});
    await assert.rejects(NodeDirectoryLocks.acquire([{ directory: root, purpose: 'the ledger directory' }]), locked(/in use by another covenant node/));
    plantLock(root, { hostname: 'elsewhere.example', pid: deadPid() });
    await assert.rejects(NodeDirectoryLocks.acquire([{ directory: root, purpose: 'the ledger directory' }]), locked(/process \d+ on host elsewhere\.example/));
    writeFileSync(join(root, LOCK_FILE_NAME), '');
    await assert.rejects(NodeDirectoryLocks.acquire([{ directory: root, purpose: 'the ledger directory' }]), locked(/cannot be read as a lock: if no covenant node runs on it, remove that file/));
  } finally {
    removeDir(root);
  }
});

/** Processes that each try to take the lock of `directory` at one signal and hold what they took until their stdin closes. */
async function contend(directory: string, count: number): Promise<string[]> {
  const script = `
    const { NodeDirectoryLocks } = await import(${JSON.stringify(LOCK_MODULE)});
    const go = ${Date.now() + 1000};
    while (Date.now() < go) {}
    let answer;
    try {
      await NodeDirectoryLocks.acquire([{ directory: ${JSON.stringify(directory)}, purpose: 'the ledger directory' }]);
      answer = 'held';
    } catch (e) {
      answer = e.code ?? String(e);
    }
    process.stdout.write(answer + '\\n');
    process.stdin.resume();
    process.stdin.on('end', () => process.exit(0));
  `;
  const children = Array.from({ length: count }, () => spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['pipe', 'pipe', 'inherit'] }));
  const answers = await Promise.all(
    children.map(
      (child) =>
        new Promise<string>((resolve) => {
          let out = '';
          child.stdout!.on('data', (chunk: Buffer) => {
            out += chunk.toString();
            if (out.endsWith('\n')) resolve(out.trim());
          });
        }),
    ),
  );
  // Every answer is in while all of them still run: then they are released.
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          child.on('exit', () => resolve());
          child.stdin!.end();
        }),
    ),
  );
  return answers;
}

test('processes started at the same moment on one directory: exactly one holds it, fresh or over a stale lock', async () => {
  const root = tempDir();
  try {
    const fresh = join(root, 'fresh');
    mkdirSync(fresh);
    const answers = await contend(fresh, 6);
    assert.equal(answers.filter((a) => a === 'held').length, 1, answers.join(', '));
    assert.deepEqual(answers.filter((a) => a !== 'held'), Array(5).fill('DirectoryLocked'));
    assert.deepEqual(readdirSync(fresh), [], 'released on exit');

    const stale = join(root, 'stale');
    mkdirSync(stale);
    plantLock(stale, { pid: deadPid() });
    const overStale = await contend(stale, 6);
    assert.equal(overStale.filter((a) => a === 'held').length, 1, overStale.join(', '));
    assert.deepEqual(readdirSync(stale), [], 'released on exit, no break token left');
  } finally {
    removeDir(root);
  }
});
