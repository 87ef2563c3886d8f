/**
 * A committed snapshot file for tests: `store` (at `seqno`) written as a snapshot whose receipt —
 * the commit evidence at seqno + 1 recording the file's digest as its claims digest — a node
 * endorsed by `service` signed.
 */
import { generateEcKeyPair, nodeIdFromPublicKey, sha256 } from '../../src/crypto/index.js';
import { LedgerEncryptor, type Store } from '../../src/kv/index.js';
import { encodeSnapshotFile, encodeSnapshotReceipt } from '../../src/ledger/index.js';
import { buildReceipt, createCommitEvidenceDeriver, formatCommitEvidence, HistoryTree, leafFromComponents, signMerkleRoot } from '../../src/merkle/index.js';
import type { ServiceIdentity } from '../../src/node/identity/service-identity.js';

export async function committedSnapshotOf(store: Store, service: ServiceIdentity): Promise<Uint8Array> {
  const seqno = store.version;
  const evidenceSeqno = seqno + 1;
  const kv = store.serializeSnapshot(new LedgerEncryptor(new Uint8Array(32).fill(1)), 2);
  const file = encodeSnapshotFile(kv, {
    seqno,
    view: 2,
    view_history: [1, 1],
    configurations: [{ seqno: 0, nodes: ['n'] }],
    service_certificate: service.certificatePem,
    tree: { size: seqno, compaction_point: 0, block_hashes: '', leaves: '' },
  });
  const derive = createCommitEvidenceDeriver(new Uint8Array(32).fill(2));
  const tree = new HistoryTree();
  for (let s = 1; s < evidenceSeqno; s++) tree.append(sha256(`leaf ${s}`));
  const evidence = { writeSetDigest: sha256('evidence'), commitEvidence: formatCommitEvidence(2, evidenceSeqno, derive(2, evidenceSeqno)), claimsDigest: sha256(file) };
  tree.append(leafFromComponents(evidence.writeSetDigest, evidence.commitEvidence, evidence.claimsDigest));
  const node = generateEcKeyPair('P-384');
  const root = tree.root();
  const receipt = buildReceipt({
    leafComponents: evidence,
    proof: tree.inclusionProof(evidenceSeqno - 1),
    signature: signMerkleRoot(node.privateKey, root),
    nodeCertificatePem: await service.endorse(node.publicKeyPem, ['iPAddress:127.0.0.1'], 30),
    nodeId: nodeIdFromPublicKey(node.publicKey),
    signedRoot: root,
  });
  return new Uint8Array(Buffer.concat([file, encodeSnapshotReceipt(JSON.parse(JSON.stringify(receipt)))]));
}
