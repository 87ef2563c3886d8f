import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import fc from 'fast-check';
import { toHex, isCovenantError } from '../../src/base/index.js';
import { generateEcKeyPair, createSelfSignedCertificate, createEndorsedCertificate, nodeIdFromPublicKey, sha256 } from '../../src/crypto/index.js';
import {
  buildReceipt, buildSignatureReceipt, verifyReceipt, verifySignatureReceipt, isSignatureReceipt, signMerkleRoot, verifyMerkleRootSignature, leafFromComponents, leafDigest,
  commitEvidenceNonce, createCommitEvidenceDeriver, createCommitEvidenceFormatter, formatCommitEvidence, parseCommitEvidence, NO_CLAIMS_DIGEST, type Receipt, type SignatureReceipt,
} from '../../src/merkle/index.js';
import { treeOfTransactions } from './helpers.js';

const isInvalidReceipt = (e: unknown) => isCovenantError(e) && e.code === 'InvalidReceipt' && e.status === 400;

test('commit evidence nonces are deterministic per (secret, view, seqno) and follow the documented derivation', () => {
  const secret = new Uint8Array(32).fill(7);
  const nonce = commitEvidenceNonce(secret, 2, 15);
  assert.deepEqual(nonce, commitEvidenceNonce(secret, 2, 15));
  assert.deepEqual(createCommitEvidenceDeriver(secret)(2, 15), nonce);
  // Independent derivation: HKDF-SHA256(secret, salt empty, info "covenant commit evidence v1", 32) then HMAC over "2.15".
  const commitSecret = Buffer.from(nodeCrypto.hkdfSync('sha256', secret, new Uint8Array(0), Buffer.from('covenant commit evidence v1'), 32));
  assert.equal(toHex(nonce), nodeCrypto.createHmac('sha256', commitSecret).update('2.15').digest('hex'));
  assert.notDeepEqual(commitEvidenceNonce(secret, 2, 16), nonce);
  assert.notDeepEqual(commitEvidenceNonce(secret, 3, 15), nonce);
  assert.notDeepEqual(commitEvidenceNonce(new Uint8Array(32).fill(8), 2, 15), nonce);
  // "2.15" and "21.5" must not collide: the dot is part of the input.
  assert.notDeepEqual(commitEvidenceNonce(secret, 21, 5), nonce);
  // The formatter the sealing path uses gives the same text as formatting the nonce.
  const format = createCommitEvidenceFormatter(secret);
  for (const [view, seqno] of [[2, 15], [21, 5], [0, 0], [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER]] as const) {
    assert.equal(format(view, seqno), formatCommitEvidence(view, seqno, commitEvidenceNonce(secret, view, seqno)));
  }
});

test('commit evidence formats and parses; other text is InvalidCommitEvidence', () => {
  const nonce = new Uint8Array(32).fill(0xab);
  const ce = formatCommitEvidence(4, 1234, nonce);
  assert.equal(ce, `ce:4.1234:${'ab'.repeat(32)}`);
  assert.deepEqual(parseCommitEvidence(ce), { view: 4, seqno: 1234, nonceHex: 'ab'.repeat(32) });
  for (const bad of ['', 'ce:4.1234', `ce:4:${'ab'.repeat(32)}`, `ce:4.1234:${'AB'.repeat(32)}`, `ce:04.1:${'ab'.repeat(32)}`, `ce:4.1:${'ab'.repeat(31)}`, `xe:4.1:${'ab'.repeat(32)}`]) {
    assert.throws(() => parseCommitEvidence(bad), (e) => isCovenantError(e) && e.code === 'InvalidCommitEvidence', bad);
  }
});

test('the leaf is SHA-256(write_set_digest ‖ SHA-256(commit_evidence) ‖ claims_digest)', () => {
  const wsd = sha256('write set');
  const ce = formatCommitEvidence(1, 1, new Uint8Array(32));
  const expected = nodeCrypto.createHash('sha256').update(wsd).update(nodeCrypto.createHash('sha256').update(ce).digest()).update(NO_CLAIMS_DIGEST).digest('hex');
  assert.equal(toHex(leafFromComponents(wsd, ce, NO_CLAIMS_DIGEST)), expected);
  assert.equal(toHex(leafDigest(wsd, sha256(ce), NO_CLAIMS_DIGEST)), expected);
});

async function ledgerWithReceipts(txCount: number) {
  const serviceKeys = generateEcKeyPair('P-384');
  const serviceCertPem = await createSelfSignedCertificate({ keyPair: serviceKeys, subjectCommonName: 'service', validityDays: 30, isCa: true });
  const nodeKeys = generateEcKeyPair('P-384');
  const nodeCertPem = await createEndorsedCertificate({
    subjectPublicKey: nodeKeys.publicKey, subjectCommonName: 'node', subjectAltNames: ['iPAddress:127.0.0.1'],
    issuerCertificatePem: serviceCertPem, issuerPrivateKey: serviceKeys.privateKey, validityDays: 30,
  });
  const nodeId = nodeIdFromPublicKey(nodeKeys.publicKey);
  const { tree, components } = treeOfTransactions(txCount);
  const signedRoot = tree.root();
  const signature = signMerkleRoot(nodeKeys.privateKey, signedRoot);
  const receiptFor = (seqno: number): Receipt =>
    buildReceipt({ leafComponents: components[seqno - 1]!, proof: tree.inclusionProof(seqno - 1), signature, nodeCertificatePem: nodeCertPem, nodeId, signedRoot });
  return { serviceCertPem, serviceKeys, nodeKeys, nodeCertPem, nodeId, signedRoot, signature, receiptFor };
}

test('a receipt for every transaction verifies against the service certificate', async () => {
  const ledger = await ledgerWithReceipts(37);
  for (let seqno = 1; seqno <= 37; seqno++) {
    const receipt = ledger.receiptFor(seqno);
    const json = JSON.parse(JSON.stringify(receipt)) as Receipt;
    assert.deepEqual(Object.keys(json).sort(), ['cert', 'leaf_components', 'node_id', 'proof', 'signature']);
    const verified = verifyReceipt(json, ledger.serviceCertPem);
    assert.equal(verified.seqno, seqno);
    assert.equal(verified.view, 2);
    assert.deepEqual(verified.root, ledger.signedRoot);
    assert.equal(verified.nodeId, ledger.nodeId);
  }
});

test('the signature is ECDSA P-384 SHA-384 in DER over exactly the 32 root bytes', async () => {
  const ledger = await ledgerWithReceipts(3);
  const receipt = ledger.receiptFor(2);
  const signature = Buffer.from(receipt.signature, 'base64');
  assert.equal(signature[0], 0x30, 'DER SEQUENCE');
  assert.equal(nodeCrypto.verify('sha384', ledger.signedRoot, { key: ledger.nodeKeys.publicKey, dsaEncoding: 'der' }, signature), true);
  assert.equal(verifyMerkleRootSignature(ledger.nodeKeys.publicKey, ledger.signedRoot, signature), true);
  assert.equal(verifyMerkleRootSignature(ledger.nodeKeys.publicKey, Buffer.from(toHex(ledger.signedRoot)), signature), false);
});

test('property: any change to a receipt field makes verification fail with InvalidReceipt', async () => {
  const ledger = await ledgerWithReceipts(20);
  const otherNode = generateEcKeyPair('P-384');
  const selfSigned = await createSelfSignedCertificate({ keyPair: otherNode, subjectCommonName: 'node', validityDays: 1, isCa: false });
  const flipHex = (hex: string, bit: number) => {
    const b = Buffer.from(hex, 'hex');
    b[(bit >> 3) % b.length] = b[(bit >> 3) % b.length]! ^ (1 << (bit & 7));
    return b.toString('hex');
  };
  fc.assert(
    fc.property(fc.integer({ min: 1, max: 20 }), fc.nat(), fc.nat(1023), fc.constantFrom('wsd', 'ce', 'claims', 'proof', 'side', 'drop', 'signature', 'node_id', 'cert'), (seqno, step, bit, what) => {
      const r = JSON.parse(JSON.stringify(ledger.receiptFor(seqno))) as { -readonly [K in keyof Receipt]: any };
      const lc = r.leaf_components;
      const i = step % r.proof.length;
      const side = 'left' in r.proof[i] ? 'left' : 'right';
      switch (what) {
        case 'wsd': lc.write_set_digest = flipHex(lc.write_set_digest, bit); break;
        case 'ce': lc.commit_evidence = lc.commit_evidence.slice(0, -64) + flipHex(lc.commit_evidence.slice(-64), bit); break;
        case 'claims': lc.claims_digest = flipHex(lc.claims_digest, bit); break;
        case 'proof': r.proof[i] = { [side]: flipHex(r.proof[i][side], bit) }; break;
        case 'side': r.proof[i] = { [side === 'left' ? 'right' : 'left']: r.proof[i][side] }; break;
        case 'drop': r.proof.splice(i, 1); break;
        case 'signature': r.signature = Buffer.from(flipHex(Buffer.from(r.signature, 'base64').toString('hex'), bit), 'hex').toString('base64'); break;
        case 'node_id': r.node_id = flipHex(r.node_id, bit); break;
        case 'cert': r.cert = selfSigned; r.node_id = nodeIdFromPublicKey(otherNode.publicKey); break;
      }
      assert.throws(() => verifyReceipt(r as Receipt, ledger.serviceCertPem), isInvalidReceipt);
    }),
    { numRuns: 300 },
  );
});

test('a receipt does not verify against another service, nor when malformed', async () => {
  const ledger = await ledgerWithReceipts(4);
  const other = await ledgerWithReceipts(1);
  const receipt = ledger.receiptFor(3);
  assert.throws(() => verifyReceipt(receipt, other.serviceCertPem), (e) => isInvalidReceipt(e) && /endorsed/.test((e as Error).message));
  const malformed: unknown[] = [
    null, {}, { ...receipt, proof: 'x' }, { ...receipt, leaf_components: undefined },
    { ...receipt, leaf_components: { ...receipt.leaf_components, commit_evidence: 'ce:1' } },
    { ...receipt, leaf_components: { ...receipt.leaf_components, write_set_digest: 'AB'.repeat(32) } },
    { ...receipt, proof: [{ left: 'zz' }] }, { ...receipt, signature: '***' }, { ...receipt, cert: 'not a cert' },
  ];
  for (const r of malformed) assert.throws(() => verifyReceipt(r as Receipt, ledger.serviceCertPem), isInvalidReceipt, JSON.stringify(r)?.slice(0, 80));
});

test('building a receipt whose proof does not reach the signed root is a programmer error', async () => {
  const ledger = await ledgerWithReceipts(2);
  const receipt = ledger.receiptFor(1);
  assert.throws(() =>
    buildReceipt({
      leafComponents: { writeSetDigest: receipt.leaf_components.write_set_digest, commitEvidence: receipt.leaf_components.commit_evidence, claimsDigest: receipt.leaf_components.claims_digest },
      proof: { path: receipt.proof },
      signature: ledger.signature,
      nodeCertificatePem: ledger.nodeCertPem,
      nodeId: ledger.nodeId,
      signedRoot: new Uint8Array(32),
    }),
    /invariant/,
  );
});

test('a signature transaction\'s receipt carries the root it signed and verifies without a proof; any change breaks it', async () => {
  const ledger = await ledgerWithReceipts(9);
  const receipt = JSON.parse(
    JSON.stringify(buildSignatureReceipt({ signature: ledger.signature, nodeCertificatePem: ledger.nodeCertPem, nodeId: ledger.nodeId, signedRoot: ledger.signedRoot })),
  ) as SignatureReceipt;
  assert.deepEqual(Object.keys(receipt).sort(), ['cert', 'node_id', 'signature', 'signed_root']);
  assert.equal(receipt.signed_root, toHex(ledger.signedRoot));
  assert.ok(isSignatureReceipt(receipt));
  assert.ok(!isSignatureReceipt(ledger.receiptFor(1)));
  const verified = verifySignatureReceipt(receipt, ledger.serviceCertPem);
  assert.deepEqual(verified.root, ledger.signedRoot);
  assert.equal(verified.nodeId, ledger.nodeId);
  // The root a transaction's receipt folds to is the one the signature receipt names.
  assert.deepEqual(verifyReceipt(ledger.receiptFor(5), ledger.serviceCertPem).root, verified.root);

  const other = await ledgerWithReceipts(1);
  const flipFirst = (hex: string) => (hex[0] === '0' ? '1' : '0') + hex.slice(1);
  const bad: [string, unknown][] = [
    ['another root', { ...receipt, signed_root: flipFirst(receipt.signed_root) }],
    ['another signature', { ...receipt, signature: other.receiptFor(1).signature }],
    ['another node id', { ...receipt, node_id: flipFirst(receipt.node_id) }],
    ['upper-case root', { ...receipt, signed_root: receipt.signed_root.toUpperCase() }],
    ['no root', { ...receipt, signed_root: undefined }],
    ['not base64', { ...receipt, signature: '***' }],
    ['not an object', null],
  ];
  for (const [what, r] of bad) assert.throws(() => verifySignatureReceipt(r as SignatureReceipt, ledger.serviceCertPem), isInvalidReceipt, what);
  assert.throws(() => verifySignatureReceipt(receipt, other.serviceCertPem), (e) => isInvalidReceipt(e) && /endorsed/.test((e as Error).message));
  // Given to the transaction verifier, it is recognised and refused by name.
  assert.throws(() => verifyReceipt(receipt as unknown as Receipt, ledger.serviceCertPem), (e) => isInvalidReceipt(e) && /signature transaction/.test((e as Error).message));
});
