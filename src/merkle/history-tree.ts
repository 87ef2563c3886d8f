/**
 * The history tree: a Merkle tree over transaction leaves (leaf i is the transaction at seqno i+1)
 * with the RFC 6962 left-balanced shape, so that roots of every earlier size can be recomputed
 * (signature transactions sign the root at their own seqno).
 *
 * Storage: one flat, growable byte array per level. Level k holds the hashes of the aligned, complete
 * subtrees of 2^k leaves, so level k has exactly floor(size / 2^k) entries (level 0 is the leaves).
 * An append writes one leaf and, amortised, one internal hash; a root or a proof reads O(log n)
 * stored hashes and computes O(log n) hashes along the right edge.
 *
 * Compaction drops levels 0..9 (everything below a block of 1024 leaves) for whole blocks below a
 * point, keeping level 10 (one hash per block) and above. Roots of sizes at or above the compaction
 * point never need the dropped entries; a proof of a compacted leaf re-reads that block's leaves.
 */
import { assert, toHex } from '../base/index.js';
import { sha256 } from '../crypto/index.js';
import { merkleError, MerkleErrorCode } from './errors.js';
import { EMPTY_TREE_ROOT, HASH_LENGTH_BYTES as H } from './hash.js';
import type { InclusionProof, ProofStep } from './proof.js';

export const BLOCK_LEVEL = 10;
export const BLOCK_LEAF_COUNT = 1 << BLOCK_LEVEL;

const INITIAL_CAPACITY_HASHES = 64;

/** Re-reads the 1024 leaves of a compacted block (from the ledger files). */
export type FetchBlockLeaves = (blockIndex: number) => readonly Uint8Array[];
export type FetchBlockLeavesAsync = (blockIndex: number) => Promise<readonly Uint8Array[]> | readonly Uint8Array[];

class Level {
  bytes: Uint8Array;
  /** Index (in this level) of the first stored hash; entries below it were compacted away. */
  first = 0;
  count = 0;

  constructor(capacityHashes: number) {
    this.bytes = new Uint8Array(capacityHashes * H);
  }

  get end(): number {
    return this.first + this.count;
  }

  has(index: number): boolean {
    return index >= this.first && index < this.first + this.count;
  }

  at(index: number): Uint8Array {
    assert(this.has(index), () => `hash ${index} not stored (stored ${this.first}..${this.end})`);
    const offset = (index - this.first) * H;
    return this.bytes.subarray(offset, offset + H);
  }

  /** Reserves the next slot and returns its byte offset. */
  reserve(): number {
    if ((this.count + 1) * H > this.bytes.byteLength) {
      const grown = new Uint8Array(Math.max(this.bytes.byteLength * 2, INITIAL_CAPACITY_HASHES * H));
      grown.set(this.bytes.subarray(0, this.count * H));
      this.bytes = grown;
    }
    return this.count++ * H;
  }

  dropBefore(index: number): void {
    if (index <= this.first) return;
    const dropped = Math.min(index - this.first, this.count);
    this.bytes.copyWithin(0, dropped * H, this.count * H);
    this.count -= dropped;
    this.first = index;
    // Give memory back once the level is much smaller than its buffer.
    if (this.bytes.byteLength > 4 * Math.max(this.count * H, INITIAL_CAPACITY_HASHES * H)) {
      const shrunk = new Uint8Array(Math.max(this.count * 2, INITIAL_CAPACITY_HASHES) * H);
      shrunk.set(this.bytes.subarray(0, this.count * H));
      this.bytes = shrunk;
    }
  }

  truncate(end: number): void {
    assert(end >= this.first, () => `cannot truncate a level to ${end} below its first stored entry ${this.first}`);
    this.count = Math.min(this.count, end - this.first);
  }
}

/** Serialisable state, for snapshots: enough to rebuild the tree exactly. */
export interface HistoryTreeState {
  readonly size: number;
  /** Leaves below this index are compacted (a multiple of 1024). */
  readonly compactionPoint: number;
  /** Hashes of the compacted blocks, 32 bytes each, in order. */
  readonly blockHashes: Uint8Array;
  /** Leaves [compactionPoint, size), 32 bytes each. */
  readonly leaves: Uint8Array;
}

export class HistoryTree {
  private readonly levels: Level[] = [new Level(INITIAL_CAPACITY_HASHES)];
  private sizeLeaves = 0;
  private compactedBlocks = 0;

  /** Number of leaves. */
  get size(): number {
    return this.sizeLeaves;
  }

  /** First leaf index whose leaf is still held; roots can be computed for sizes ≥ this. */
  get compactionPoint(): number {
    return this.compactedBlocks * BLOCK_LEAF_COUNT;
  }

  append(leaf: Uint8Array): void {
    assert(leaf.byteLength === H, () => `a leaf is ${H} bytes, got ${leaf.byteLength}`);
    this.pushAndCascade(0, leaf);
    this.sizeLeaves++;
  }

  /** The stored leaf at `index` (a view: copy it to keep it across appends). */
  leaf(index: number): Uint8Array {
    this.checkIndex(index, this.sizeLeaves);
    if (index < this.compactionPoint) throw merkleError(MerkleErrorCode.MerkleLeafCompacted, `leaf ${index} is compacted`);
    return this.levels[0]!.at(index);
  }

  /** Hash of the complete block `blockIndex` (leaves [1024·b, 1024·b + 1024)). */
  blockHash(blockIndex: number): Uint8Array {
    const level = this.levels[BLOCK_LEVEL];
    if (level === undefined || !level.has(blockIndex)) {
      throw merkleError(MerkleErrorCode.MerkleIndexOutOfRange, `block ${blockIndex} is not complete in a tree of ${this.sizeLeaves} leaves`);
    }
    return level.at(blockIndex);
  }

  /** Root of the tree made of the first `treeSize` leaves. */
  root(treeSize: number = this.sizeLeaves): Uint8Array {
    this.checkTreeSize(treeSize);
    if (treeSize === 0) return EMPTY_TREE_ROOT.slice();
    return this.rangeHash(0, treeSize, undefined).slice();
  }

  /**
   * Proof that leaf `index` is in the tree of the first `treeSize` leaves. A leaf below the
   * compaction point needs `fetchBlockLeaves` to re-read its block, which is checked against the
   * kept block hash (MerkleBlockMismatch otherwise).
   */
  inclusionProof(index: number, treeSize: number = this.sizeLeaves, fetchBlockLeaves?: FetchBlockLeaves): InclusionProof {
    this.checkTreeSize(treeSize);
    this.checkIndex(index, treeSize);
    let block: BlockLevels | undefined;
    if (index < this.compactionPoint) {
      const blockIndex = Math.floor(index / BLOCK_LEAF_COUNT);
      if (fetchBlockLeaves === undefined) {
        throw merkleError(MerkleErrorCode.MerkleLeafCompacted, `leaf ${index} is in compacted block ${blockIndex}; its leaves must be re-read`);
      }
      block = this.rebuildBlock(blockIndex, fetchBlockLeaves(blockIndex));
    }
    return this.proofWith(index, treeSize, block);
  }

  /** As inclusionProof, with an asynchronous re-read of a compacted block. */
  async inclusionProofAsync(index: number, treeSize: number, fetchBlockLeaves: FetchBlockLeavesAsync): Promise<InclusionProof> {
    this.checkTreeSize(treeSize);
    this.checkIndex(index, treeSize);
    if (index >= this.compactionPoint) return this.proofWith(index, treeSize, undefined);
    const blockIndex = Math.floor(index / BLOCK_LEAF_COUNT);
    const leaves = await fetchBlockLeaves(blockIndex);
    // The tree may have been compacted or truncated further while the leaves were read.
    this.checkTreeSize(treeSize);
    return this.proofWith(index, treeSize, this.rebuildBlock(blockIndex, leaves));
  }

  /**
   * Drops the leaves (and the hashes below block level) of every whole block below `index`.
   * Idempotent; compaction never moves backwards.
   */
  compactBefore(index: number): void {
    assert(Number.isSafeInteger(index) && index >= 0 && index <= this.sizeLeaves, () => `compaction point ${index} outside [0, ${this.sizeLeaves}]`);
    const blocks = Math.floor(index / BLOCK_LEAF_COUNT);
    if (blocks <= this.compactedBlocks) return;
    this.compactedBlocks = blocks;
    for (let k = 0; k < BLOCK_LEVEL && k < this.levels.length; k++) {
      this.levels[k]!.dropBefore(blocks << (BLOCK_LEVEL - k));
    }
  }

  /** Removes leaves so that `newSize` remain (a rollback after a view change). Not below the compaction point. */
  truncate(newSize: number): void {
    assert(Number.isSafeInteger(newSize) && newSize <= this.sizeLeaves, () => `cannot truncate ${this.sizeLeaves} leaves to ${newSize}`);
    if (newSize < this.compactionPoint) {
      throw merkleError(MerkleErrorCode.MerkleIndexOutOfRange, `cannot truncate to ${newSize}, below the compaction point ${this.compactionPoint}`);
    }
    for (let k = 0; k < this.levels.length; k++) this.levels[k]!.truncate(Math.floor(newSize / 2 ** k));
    this.sizeLeaves = newSize;
  }

  exportState(): HistoryTreeState {
    const blockHashes = new Uint8Array(this.compactedBlocks * H);
    for (let b = 0; b < this.compactedBlocks; b++) blockHashes.set(this.blockHash(b), b * H);
    const leafLevel = this.levels[0]!;
    return {
      size: this.sizeLeaves,
      compactionPoint: this.compactionPoint,
      blockHashes,
      leaves: leafLevel.bytes.slice(0, leafLevel.count * H),
    };
  }

  static fromState(state: HistoryTreeState): HistoryTree {
    const blocks = state.compactionPoint / BLOCK_LEAF_COUNT;
    assert(Number.isSafeInteger(blocks) && blocks >= 0, 'compaction point is a multiple of the block size');
    assert(state.blockHashes.byteLength === blocks * H, 'one hash per compacted block');
    assert(state.leaves.byteLength === (state.size - state.compactionPoint) * H, 'one leaf per leaf above the compaction point');
    const tree = new HistoryTree();
    for (let k = 1; k <= BLOCK_LEVEL; k++) tree.levels.push(new Level(INITIAL_CAPACITY_HASHES));
    for (let k = 0; k < BLOCK_LEVEL; k++) tree.levels[k]!.first = blocks << (BLOCK_LEVEL - k);
    for (let b = 0; b < blocks; b++) tree.pushAndCascade(BLOCK_LEVEL, state.blockHashes.subarray(b * H, (b + 1) * H));
    tree.compactedBlocks = blocks;
    tree.sizeLeaves = state.compactionPoint;
    for (let i = 0; i < state.size - state.compactionPoint; i++) tree.append(state.leaves.subarray(i * H, (i + 1) * H));
    return tree;
  }

  /** Bytes held by the tree's buffers (for memory accounting and tests of compaction). */
  get retainedBytes(): number {
    let total = 0;
    for (const level of this.levels) total += level.bytes.byteLength;
    return total;
  }

  private pushAndCascade(levelIndex: number, hash: Uint8Array): void {
    let k = levelIndex;
    let level = this.levelAt(k);
    // reserve() may replace level.bytes, so it runs before the buffer is read.
    let offset = level.reserve();
    level.bytes.set(hash, offset);
    // When a level's newest entry closes a pair, the pair's parent is complete: hash it one level up.
    while (level.end % 2 === 0) {
      const leftOffset = (level.count - 2) * H;
      const parent = sha256(level.bytes.subarray(leftOffset, leftOffset + 2 * H));
      k++;
      level = this.levelAt(k);
      offset = level.reserve();
      level.bytes.set(parent, offset);
    }
  }

  private levelAt(k: number): Level {
    while (this.levels.length <= k) this.levels.push(new Level(INITIAL_CAPACITY_HASHES));
    return this.levels[k]!;
  }

  private checkTreeSize(treeSize: number): void {
    if (!Number.isSafeInteger(treeSize) || treeSize < this.compactionPoint || treeSize > this.sizeLeaves) {
      throw merkleError(
        MerkleErrorCode.MerkleIndexOutOfRange,
        `tree size ${treeSize} outside [${this.compactionPoint}, ${this.sizeLeaves}] (compaction point, size)`,
      );
    }
  }

  private checkIndex(index: number, treeSize: number): void {
    if (!Number.isSafeInteger(index) || index < 0 || index >= treeSize) {
      throw merkleError(MerkleErrorCode.MerkleIndexOutOfRange, `leaf ${index} outside a tree of ${treeSize} leaves`);
    }
  }

  /** Hash of the aligned complete subtree at (level k, index i), from storage or a rebuilt block. */
  private perfectHash(k: number, i: number, block: BlockLevels | undefined): Uint8Array {
    if (block !== undefined && k < BLOCK_LEVEL && i >> (BLOCK_LEVEL - k) === block.blockIndex) {
      return block.levels[k]!.subarray((i - (block.blockIndex << (BLOCK_LEVEL - k))) * H, (i - (block.blockIndex << (BLOCK_LEVEL - k)) + 1) * H);
    }
    return this.levels[k]!.at(i);
  }

  /**
   * Hash of the subtree over leaves [start, start + count), where start is a multiple of the largest
   * power of two ≤ count (true of every subtree of the left-balanced shape): the perfect subtrees of
   * count's binary digits, high to low, folded from the right.
   */
  private rangeHash(start: number, count: number, block: BlockLevels | undefined): Uint8Array {
    const parts: Uint8Array[] = [];
    let offset = start;
    for (let k = Math.floor(Math.log2(count)) + 1; k >= 0; k--) {
      const width = 2 ** k;
      if (Math.floor(count / width) % 2 === 1) {
        parts.push(this.perfectHash(k, offset / width, block));
        offset += width;
      }
    }
    let acc = parts[parts.length - 1]!;
    if (parts.length === 1) return acc;
    const pair = new Uint8Array(2 * H);
    for (let p = parts.length - 2; p >= 0; p--) {
      pair.set(parts[p]!, 0);
      pair.set(acc, H);
      acc = sha256(pair);
    }
    return acc;
  }

  private proofWith(index: number, treeSize: number, block: BlockLevels | undefined): InclusionProof {
    const topDown: ProofStep[] = [];
    let start = 0;
    let n = treeSize;
    while (n > 1) {
      let k = 1;
      while (k * 2 < n) k *= 2;
      if (index - start < k) {
        topDown.push({ right: toHex(this.rangeHash(start + k, n - k, block)) });
        n = k;
      } else {
        topDown.push({ left: toHex(this.perfectHash(Math.log2(k), start / k, block)) });
        start += k;
        n -= k;
      }
    }
    return { path: topDown.reverse() };
  }

  private rebuildBlock(blockIndex: number, leaves: readonly Uint8Array[]): BlockLevels {
    const expected = this.blockHash(blockIndex);
    if (leaves.length !== BLOCK_LEAF_COUNT || leaves.some((l) => l.byteLength !== H)) {
      throw merkleError(MerkleErrorCode.MerkleBlockMismatch, `block ${blockIndex}: expected ${BLOCK_LEAF_COUNT} leaves of ${H} bytes, got ${leaves.length}`);
    }
    const levels: Uint8Array[] = [];
    let current = new Uint8Array(BLOCK_LEAF_COUNT * H);
    leaves.forEach((l, i) => current.set(l, i * H));
    for (let k = 0; k < BLOCK_LEVEL; k++) {
      levels.push(current);
      const next = new Uint8Array(current.byteLength / 2);
      for (let i = 0; i < next.byteLength / H; i++) next.set(sha256(current.subarray(2 * i * H, (2 * i + 2) * H)), i * H);
      current = next;
    }
    if (toHex(current) !== toHex(expected)) {
      throw merkleError(MerkleErrorCode.MerkleBlockMismatch, `leaves re-read for block ${blockIndex} do not hash to the kept block hash`, {
        blockIndex,
        expected: toHex(expected),
        actual: toHex(current),
      });
    }
    return { blockIndex, levels };
  }
}

/** Levels 0..9 of one compacted block, rebuilt from re-read leaves for one proof. */
interface BlockLevels {
  readonly blockIndex: number;
  readonly levels: readonly Uint8Array[];
}
