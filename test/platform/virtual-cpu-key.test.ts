/** The virtual CPU key file (src/platform/virtual-cpu-key.ts, docs/sealing.md). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isCovenantError } from '../../src/base/index.js';
import { loadOrCreateVirtualCpuKey, VIRTUAL_CPU_KEY_LENGTH_BYTES } from '../../src/platform/virtual-cpu-key.js';
import { VIRTUAL_CPU_KEY_LENGTH_BYTES as SEALING_CPU_KEY_LENGTH_BYTES } from '../../src/recovery/index.js';

function withFolder(run: (folder: string) => void): void {
  const folder = mkdtempSync(join(tmpdir(), 'covenant-cpu-key-'));
  try {
    run(folder);
  } finally {
    rmSync(folder, { recursive: true, force: true });
  }
}

const unusable = (pattern: RegExp) => (e: unknown) => isCovenantError(e) && e.code === 'VirtualCpuKeyUnusable' && e.status === 500 && pattern.test(e.message);

test('the key file holds the length sealing expects', () => {
  assert.equal(VIRTUAL_CPU_KEY_LENGTH_BYTES, SEALING_CPU_KEY_LENGTH_BYTES);
});

test('the first use creates a 32-byte file of mode 0600 (and its folder); later uses read the same key', () => {
  withFolder((folder) => {
    const file = join(folder, 'keys', 'cpu.key');
    const first = loadOrCreateVirtualCpuKey(file);
    assert.equal(first.created, true);
    assert.equal(first.key.byteLength, 32);
    const stat = statSync(file);
    assert.equal(stat.size, 32);
    assert.equal(stat.mode & 0o777, 0o600);
    const second = loadOrCreateVirtualCpuKey(file);
    assert.equal(second.created, false);
    assert.deepEqual(second.key, first.key);
    assert.deepEqual(readdirSync(join(folder, 'keys')), ['cpu.key'], 'no temporary file is left behind');
  });
});

test('the key comes from the random source it is given; another file is another CPU', () => {
  withFolder((folder) => {
    const fixed = (n: number) => new Uint8Array(n).fill(7);
    assert.deepEqual(loadOrCreateVirtualCpuKey(join(folder, 'a.key'), fixed).key, new Uint8Array(32).fill(7));
    const other = loadOrCreateVirtualCpuKey(join(folder, 'b.key'));
    assert.notDeepEqual(other.key, new Uint8Array(32).fill(7));
  });
});

test('an existing key file is never replaced, even when the random source differs', () => {
  withFolder((folder) => {
    const file = join(folder, 'cpu.key');
    writeFileSync(file, new Uint8Array(32).fill(1), { mode: 0o600 });
    const loaded = loadOrCreateVirtualCpuKey(file, (n) => new Uint8Array(n).fill(2));
    assert.equal(loaded.created, false);
    assert.deepEqual(loaded.key, new Uint8Array(32).fill(1));
  });
});

test('a file of the wrong size is refused, naming the file', () => {
  withFolder((folder) => {
    for (const size of [0, 31, 33, 4096]) {
      const file = join(folder, `size-${size}.key`);
      writeFileSync(file, new Uint8Array(size), { mode: 0o600 });
      assert.throws(() => loadOrCreateVirtualCpuKey(file), unusable(new RegExp(`${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: is ${size} bytes, not 32`)));
    }
  });
});

test('a file group or others may read (or use at all) is refused', () => {
  withFolder((folder) => {
    const file = join(folder, 'cpu.key');
    loadOrCreateVirtualCpuKey(file);
    for (const mode of [0o640, 0o604, 0o644, 0o620, 0o601]) {
      chmodSync(file, mode);
      assert.throws(() => loadOrCreateVirtualCpuKey(file), unusable(new RegExp(`cpu\\.key: has mode 0${mode.toString(8)}: group or others`)), mode.toString(8));
    }
    chmodSync(file, 0o400);
    assert.equal(loadOrCreateVirtualCpuKey(file).key.byteLength, 32, 'read-only for its owner is fine');
  });
});

test('a folder or an unreadable path is refused, naming it', () => {
  withFolder((folder) => {
    const dir = join(folder, 'a-folder');
    loadOrCreateVirtualCpuKey(join(dir, 'k'));
    chmodSync(dir, 0o700);
    assert.throws(() => loadOrCreateVirtualCpuKey(dir), unusable(/a-folder: is not a regular file/));
    // A dangling symbolic link: the file it names does not exist, and nothing is created behind it.
    const link = join(folder, 'dangling.key');
    symlinkSync(join(folder, 'nowhere'), link);
    assert.throws(() => loadOrCreateVirtualCpuKey(link), unusable(/dangling\.key: .*ENOENT/));
    // A link to a good key file is that file.
    const target = join(folder, 'target.key');
    const key = loadOrCreateVirtualCpuKey(target).key;
    const good = join(folder, 'good-link.key');
    symlinkSync(target, good);
    assert.deepEqual(loadOrCreateVirtualCpuKey(good).key, key);
  });
});
