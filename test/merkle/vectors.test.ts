import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { toHex, fromHex } from '../../src/base/index.js';
import { sha256 } from '../../src/crypto/index.js';
import { HistoryTree, verifyInclusion, leafFromComponents, formatCommitEvidence, commitEvidenceNonce } from '../../src/merkle/index.js';
import { refRoot, refPath } from './reference.js';

interface Vectors {
  leaves: string[];
  roots: string[];
  proofs: Array<{ index: number; tree_size: number; path: Array<{ left: string } | { right: string }> }>;
  leaf_components: { ledger_secret: string; write_set_digest: string; commit_evidence: string; claims_digest: string; leaf: string };
}

function documentedVectors(): Vectors {
  // The test runs from test/ (tsx) or from dist/test/ (compiled): find docs/ above either.
  const fromSource = fileURLToPath(new URL('../../docs/merkle.md', import.meta.url));
  const path = existsSync(fromSource) ? fromSource : fileURLToPath(new URL('../../../docs/merkle.md', import.meta.url));
  const doc = readFileSync(path, 'utf8');
  const match = /<!-- test-vectors:begin -->\s*```json\n([\s\S]*?)```\s*<!-- test-vectors:end -->/.exec(doc);
  assert.ok(match, 'docs/merkle.md has a test-vectors block');
  return JSON.parse(match[1]!) as Vectors;
}

test('docs/merkle.md test vectors match the implementation and the reference model', () => {
  const v = documentedVectors();
  const leaves = v.leaves.map(fromHex);
  assert.deepEqual(leaves.map((l, i) => toHex(sha256(new Uint8Array([i])))), v.leaves);
  const tree = new HistoryTree();
  for (const leaf of leaves) tree.append(leaf);
  v.roots.forEach((root, j) => {
    assert.equal(toHex(tree.root(j + 1)), root, `root of ${j + 1}`);
    assert.equal(toHex(refRoot(leaves.slice(0, j + 1))), root, `reference root of ${j + 1}`);
  });
  assert.equal(v.proofs.length, 3);
  for (const p of v.proofs) {
    assert.deepEqual(tree.inclusionProof(p.index, p.tree_size).path, p.path);
    assert.deepEqual(refPath(p.index, leaves.slice(0, p.tree_size)), p.path);
    assert.equal(verifyInclusion(leaves[p.index]!, { path: p.path }, fromHex(v.roots[p.tree_size - 1]!)), true);
  }
  const c = v.leaf_components;
  const ce = formatCommitEvidence(2, 1, commitEvidenceNonce(fromHex(c.ledger_secret), 2, 1));
  assert.equal(ce, c.commit_evidence);
  assert.equal(c.write_set_digest, toHex(sha256('write set')));
  assert.equal(toHex(leafFromComponents(fromHex(c.write_set_digest), c.commit_evidence, fromHex(c.claims_digest))), c.leaf);
});
