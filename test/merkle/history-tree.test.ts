import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { toHex, isCovenantError } from '../../src/base/index.js';
import { HistoryTree, verifyInclusion, rootFromProof, BLOCK_LEAF_COUNT, EMPTY_TREE_ROOT, type InclusionProof } from '../../src/merkle/index.js';
import { refRoot, refPath, makeLeaves } from './reference.js';

function treeOf(leaves: readonly Uint8Array[]): HistoryTree {
  const tree = new HistoryTree();
  for (const leaf of leaves) tree.append(leaf);
  return tree;
}

const hasCode = (code: string) => (e: unknown) => isCovenantError(e) && e.code === code;

test('roots of every size and proofs of every leaf match the reference, for trees up to 70 leaves', () => {
  const leaves = makeLeaves(70, 1);
  const tree = treeOf(leaves);
  assert.equal(tree.size, 70);
  assert.deepEqual(tree.root(0), EMPTY_TREE_ROOT);
  for (let n = 1; n <= leaves.length; n++) {
    const root = tree.root(n);
    assert.equal(toHex(root), toHex(refRoot(leaves.slice(0, n))), `root(${n})`);
    for (let i = 0; i < n; i++) {
      const proof = tree.inclusionProof(i, n);
      assert.deepEqual(proof.path, refPath(i, leaves.slice(0, n)), `proof(${i}, ${n})`);
      assert.equal(verifyInclusion(leaves[i]!, proof, root), true);
    }
  }
});

test('property: for random sizes, proofs verify and match the reference', () => {
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 3000 }), fc.nat(), fc.nat(), fc.integer(), (size, a, b, seed) => {
      const leaves = makeLeaves(size, seed);
      const tree = treeOf(leaves);
      const treeSize = 1 + (a % size);
      const index = b % treeSize;
      const root = tree.root(treeSize);
      assert.equal(toHex(root), toHex(refRoot(leaves.slice(0, treeSize))));
      const proof = tree.inclusionProof(index, treeSize);
      assert.deepEqual(proof.path, refPath(index, leaves.slice(0, treeSize)));
      assert.equal(verifyInclusion(leaves[index]!, proof, root), true);
      assert.equal(proof.path.length, treeSize === 1 ? 0 : proof.path.length);
      assert.ok(proof.path.length <= Math.ceil(Math.log2(treeSize)));
    }),
    { numRuns: 150 },
  );
});

function flip(hex: string, bit: number): string {
  const bytes = Buffer.from(hex, 'hex');
  bytes[(bit >> 3) % bytes.length] = bytes[(bit >> 3) % bytes.length]! ^ (1 << (bit & 7));
  return bytes.toString('hex');
}

test('property: flipping any bit of the leaf, a proof hash or the root, or a side, fails verification', () => {
  const leaves = makeLeaves(300, 2);
  const tree = treeOf(leaves);
  fc.assert(
    fc.property(fc.integer({ min: 2, max: 300 }), fc.nat(), fc.nat(), fc.nat(255), fc.constantFrom('leaf', 'proof', 'root', 'side'), (treeSize, a, s, bit, what) => {
      const index = a % treeSize;
      const root = tree.root(treeSize);
      const proof = tree.inclusionProof(index, treeSize);
      let leaf = leaves[index]!;
      let path = proof.path;
      let claimedRoot = root;
      const step = s % path.length;
      if (what === 'leaf') leaf = Buffer.from(flip(toHex(leaf), bit), 'hex');
      if (what === 'root') claimedRoot = Buffer.from(flip(toHex(root), bit), 'hex');
      if (what === 'proof' || what === 'side') {
        path = path.map((p, i) => {
          if (i !== step) return p;
          const [side, h] = 'left' in p ? ['left', p.left] : ['right', p.right];
          if (what === 'side') return side === 'left' ? { right: h } : { left: h };
          return side === 'left' ? { left: flip(h, bit) } : { right: flip(h, bit) };
        });
      }
      assert.equal(verifyInclusion(leaf, { path }, claimedRoot), false);
    }),
    { numRuns: 400 },
  );
});

test('malformed proofs do not verify and do not throw', () => {
  const leaves = makeLeaves(5);
  const tree = treeOf(leaves);
  const root = tree.root();
  const good = tree.inclusionProof(2);
  const bad: unknown[] = [
    { path: [{ left: 'zz' }] },
    { path: [{ up: good.path[0] }] },
    { path: [{ left: good.path.length ? 'A'.repeat(64) : '' }] },
    { path: [{ left: '00'.repeat(32), right: '00'.repeat(32) }] },
    { path: 'nope' },
    { path: [...good.path, ...good.path] },
    {},
  ];
  for (const proof of bad) assert.equal(verifyInclusion(leaves[2]!, proof as InclusionProof, root), false, JSON.stringify(proof));
  assert.equal(rootFromProof(new Uint8Array(31), good), undefined);
});

test('requests outside the tree are MerkleIndexOutOfRange', () => {
  const tree = treeOf(makeLeaves(10));
  assert.throws(() => tree.root(11), hasCode('MerkleIndexOutOfRange'));
  assert.throws(() => tree.inclusionProof(10, 10), hasCode('MerkleIndexOutOfRange'));
  assert.throws(() => tree.inclusionProof(5, 5), hasCode('MerkleIndexOutOfRange'));
  assert.throws(() => tree.inclusionProof(-1, 5), hasCode('MerkleIndexOutOfRange'));
  assert.throws(() => tree.inclusionProof(0.5, 5), hasCode('MerkleIndexOutOfRange'));
  assert.throws(() => tree.append(new Uint8Array(31)), /32 bytes/);
});

test('property: compaction never changes roots or proofs; compacted proofs re-read and check the block', () => {
  const leaves = makeLeaves(4 * BLOCK_LEAF_COUNT + 300, 3);
  const full = treeOf(leaves);
  fc.assert(
    fc.property(fc.integer({ min: 0, max: leaves.length }), fc.nat(), fc.nat(), (point, a, b) => {
      const tree = treeOf(leaves);
      tree.compactBefore(point);
      const c = tree.compactionPoint;
      assert.equal(c, Math.floor(point / BLOCK_LEAF_COUNT) * BLOCK_LEAF_COUNT);
      const treeSize = Math.max(c, 1) + (a % (leaves.length - Math.max(c, 1) + 1));
      assert.deepEqual(tree.root(treeSize), full.root(treeSize));
      assert.deepEqual(tree.root(), full.root());
      const index = b % treeSize;
      const fetched: number[] = [];
      const proof = tree.inclusionProof(index, treeSize, (block) => {
        fetched.push(block);
        return leaves.slice(block * BLOCK_LEAF_COUNT, (block + 1) * BLOCK_LEAF_COUNT);
      });
      assert.deepEqual(proof, full.inclusionProof(index, treeSize));
      assert.deepEqual(fetched, index < c ? [Math.floor(index / BLOCK_LEAF_COUNT)] : []);
      // Appending after compaction continues the same tree.
      const extra = makeLeaves(5, 99);
      const reference = treeOf([...leaves, ...extra]);
      for (const leaf of extra) tree.append(leaf);
      assert.deepEqual(tree.root(), reference.root());
    }),
    { numRuns: 40 },
  );
});

test('a compacted leaf needs its block re-read, and re-read leaves must hash to the kept block hash', async () => {
  const leaves = makeLeaves(3 * BLOCK_LEAF_COUNT, 4);
  const tree = treeOf(leaves);
  tree.compactBefore(2 * BLOCK_LEAF_COUNT + 5);
  assert.equal(tree.compactionPoint, 2 * BLOCK_LEAF_COUNT);
  assert.throws(() => tree.inclusionProof(5, tree.size), hasCode('MerkleLeafCompacted'));
  assert.throws(() => tree.leaf(5), hasCode('MerkleLeafCompacted'));
  assert.throws(() => tree.root(2 * BLOCK_LEAF_COUNT - 1), hasCode('MerkleIndexOutOfRange'));
  const block1 = leaves.slice(BLOCK_LEAF_COUNT, 2 * BLOCK_LEAF_COUNT);
  const tampered = block1.map((l, i) => (i === 7 ? Uint8Array.from(l, (x, j) => (j === 0 ? x ^ 1 : x)) : l));
  assert.throws(() => tree.inclusionProof(BLOCK_LEAF_COUNT + 3, tree.size, () => tampered), hasCode('MerkleBlockMismatch'));
  assert.throws(() => tree.inclusionProof(BLOCK_LEAF_COUNT + 3, tree.size, () => block1.slice(1)), hasCode('MerkleBlockMismatch'));
  assert.throws(() => tree.inclusionProof(3, tree.size, () => block1), hasCode('MerkleBlockMismatch'), 'the wrong block');
  const proof = await tree.inclusionProofAsync(BLOCK_LEAF_COUNT + 3, tree.size, async () => block1);
  assert.equal(verifyInclusion(leaves[BLOCK_LEAF_COUNT + 3]!, proof, tree.root()), true);
});

test('compaction bounds memory: compacted blocks keep a few dozen bytes each instead of 32 KiB of leaves', () => {
  const total = 256 * BLOCK_LEAF_COUNT;
  const leaf = new Uint8Array(32);
  const view = new DataView(leaf.buffer);
  const kept = new HistoryTree();
  const compacted = new HistoryTree();
  for (let i = 0; i < total; i++) {
    view.setUint32(0, i);
    kept.append(leaf);
    compacted.append(leaf);
    if (i % (16 * BLOCK_LEAF_COUNT) === 0) compacted.compactBefore(i);
  }
  compacted.compactBefore(total);
  const blocks = total / BLOCK_LEAF_COUNT;
  assert.ok(kept.retainedBytes >= total * 32 * 2, `uncompacted tree holds leaves and levels: ${kept.retainedBytes}`);
  // Level 10 and above: at most 2 × 32 bytes per block, times 2 for buffer doubling; every one of the
  // 19 levels may keep a minimum buffer of 64 hashes.
  assert.ok(compacted.retainedBytes <= blocks * 128 + 19 * 64 * 32, `retained ${compacted.retainedBytes} bytes for ${blocks} blocks`);
  assert.deepEqual(compacted.root(), kept.root());
});

test('truncate then append gives the same tree as appending the new history', () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 2500 }), fc.integer({ min: 0, max: 2500 }), fc.integer({ min: 0, max: 600 }), (n, cut, more) => {
      const leaves = makeLeaves(n, 5);
      const tree = treeOf(leaves);
      const keep = Math.min(cut, n);
      tree.truncate(keep);
      assert.equal(tree.size, keep);
      const extra = makeLeaves(more, 6);
      for (const leaf of extra) tree.append(leaf);
      const expected = treeOf([...leaves.slice(0, keep), ...extra]);
      assert.deepEqual(tree.root(), expected.root());
      if (tree.size > 0) assert.deepEqual(tree.inclusionProof(tree.size - 1), expected.inclusionProof(tree.size - 1));
    }),
    { numRuns: 60 },
  );
  const tree = treeOf(makeLeaves(2 * BLOCK_LEAF_COUNT));
  tree.compactBefore(BLOCK_LEAF_COUNT);
  assert.throws(() => tree.truncate(BLOCK_LEAF_COUNT - 1), hasCode('MerkleIndexOutOfRange'));
});

test('exported state rebuilds an identical tree, compacted or not', () => {
  for (const [n, point] of [[0, 0], [7, 0], [3000, 0], [3000, 2500], [4096, 4096]] as const) {
    const leaves = makeLeaves(n, 7);
    const tree = treeOf(leaves);
    tree.compactBefore(point);
    const state = tree.exportState();
    assert.equal(state.leaves.byteLength, (n - tree.compactionPoint) * 32);
    const rebuilt = HistoryTree.fromState(state);
    assert.equal(rebuilt.size, n);
    assert.equal(rebuilt.compactionPoint, tree.compactionPoint);
    assert.deepEqual(rebuilt.root(), tree.root());
    if (n > tree.compactionPoint) assert.deepEqual(rebuilt.inclusionProof(n - 1), treeOf(leaves).inclusionProof(n - 1));
    const extra = makeLeaves(1500, 8);
    for (const leaf of extra) rebuilt.append(leaf);
    assert.deepEqual(rebuilt.root(), refRoot([...leaves, ...extra]));
  }
});
