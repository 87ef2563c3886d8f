/** A history tree over `txCount` made-up transactions in view 2 (some with claims), for receipt tests. */
import { sha256 } from '../../src/crypto/index.js';
import { HistoryTree, NO_CLAIMS_DIGEST, createCommitEvidenceDeriver, formatCommitEvidence, leafFromComponents, type LeafComponents } from '../../src/merkle/index.js';

export function treeOfTransactions(txCount: number): { tree: HistoryTree; components: LeafComponents[] } {
  const derive = createCommitEvidenceDeriver(new Uint8Array(32).fill(1));
  const tree = new HistoryTree();
  const components: LeafComponents[] = [];
  for (let seqno = 1; seqno <= txCount; seqno++) {
    const c = {
      writeSetDigest: sha256(`ws ${seqno}`),
      commitEvidence: formatCommitEvidence(2, seqno, derive(2, seqno)),
      claimsDigest: seqno % 3 === 0 ? sha256(`claims ${seqno}`) : NO_CLAIMS_DIGEST,
    };
    components.push(c);
    tree.append(leafFromComponents(c.writeSetDigest, c.commitEvidence, c.claimsDigest));
  }
  return { tree, components };
}
