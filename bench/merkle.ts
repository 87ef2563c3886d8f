/**
 * History tree throughput. Prints one JSON object per measurement (name, ops, seconds, ops_per_s).
 * Run: node --import tsx bench/merkle.ts [leafCount]
 */
import { performance } from 'node:perf_hooks';
import { HistoryTree, verifyInclusion, leafFromComponents, NO_CLAIMS_DIGEST } from '../src/merkle/index.js';
import { sha256 } from '../src/crypto/index.js';

const leafCount = Number(process.argv[2] ?? 1_000_000);

function report(name: string, ops: number, seconds: number): void {
  console.log(JSON.stringify({ name, ops, seconds: Number(seconds.toFixed(4)), ops_per_s: Math.round(ops / seconds) }));
}

function measure(name: string, ops: number, body: (i: number) => void): void {
  const start = performance.now();
  for (let i = 0; i < ops; i++) body(i);
  report(name, ops, (performance.now() - start) / 1000);
}

// Leaves are prepared up front so that only the tree is measured.
const leaves = new Uint8Array(leafCount * 32);
for (let i = 0; i < leafCount; i++) leaves.set(sha256(`leaf ${i}`), i * 32);

const tree = new HistoryTree();
measure('append', leafCount, (i) => tree.append(leaves.subarray(i * 32, i * 32 + 32)));

measure('root(size)', 20_000, () => tree.root());
// Deterministic spread of earlier sizes (a signature transaction signs the root at its own seqno).
measure('root(earlier size)', 20_000, (i) => tree.root(1 + ((i * 7919) % leafCount)));
const proofs = 20_000;
measure('inclusionProof', proofs, (i) => tree.inclusionProof((i * 104729) % leafCount));
const proof = tree.inclusionProof(leafCount >> 1);
const root = tree.root();
const leaf = leaves.subarray((leafCount >> 1) * 32, (leafCount >> 1) * 32 + 32);
measure('verifyInclusion', proofs, () => verifyInclusion(leaf, proof, root));
const wsd = sha256('ws');
measure('leafFromComponents', 200_000, (i) => leafFromComponents(wsd, `ce:2.${i}:${'ab'.repeat(32)}`, NO_CLAIMS_DIGEST));

tree.compactBefore(leafCount);
console.log(JSON.stringify({ name: 'retained bytes after compaction', leaves: leafCount, bytes: tree.retainedBytes }));
