import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import { Encoder, Tag } from 'cbor-x';
import { isCovenantError } from '../../src/base/index.js';
import { createSelfSignedCertificate, decodeCbor, decodeCoseSign1, encodeCbor, encodeCoseSign1, generateEcKeyPair } from '../../src/crypto/index.js';
import {
  COSE_RECEIPT_HEADER, VDP_INCLUSION_PROOFS, VDS_LEDGER_SHA256, coseReceiptWithProof, leafFromComponents, serviceKeyId, signRootCose, verifyCoseReceipt,
} from '../../src/merkle/index.js';
import { treeOfTransactions } from './helpers.js';

const isInvalidReceipt = (e: unknown) => isCovenantError(e) && e.code === 'InvalidReceipt' && e.status === 400;

async function service() {
  const keys = generateEcKeyPair('P-384');
  const certificatePem = await createSelfSignedCertificate({ keyPair: keys, subjectCommonName: 'service', validityDays: 30, isCa: true });
  return { keys, certificatePem };
}

async function ledger(txCount: number) {
  const svc = await service();
  const { tree, components } = treeOfTransactions(txCount);
  const root = tree.root();
  const signedRoot = signRootCose({ servicePrivateKey: svc.keys.privateKey, servicePublicKey: svc.keys.publicKey, root, signatureTxId: `2.${txCount + 1}` });
  const receiptFor = (seqno: number) => coseReceiptWithProof(signedRoot, components[seqno - 1]!, tree.inclusionProof(seqno - 1));
  return { svc, root, signedRoot, receiptFor };
}

/** Re-encodes a receipt after `edit` changed its decoded parts (the signature is kept as it was). */
function edited(bytes: Uint8Array, edit: (parts: { protectedHeader: Map<unknown, unknown>; unprotected: Map<unknown, unknown>; proof: Map<number, any> }) => void): Uint8Array {
  const decoded = decodeCoseSign1(new Uint8Array(bytes)); // a copy: decoded byte strings may be views of it
  const vdp = decoded.unprotectedHeader.get(COSE_RECEIPT_HEADER.vdp) as Map<number, Uint8Array[]>;
  const proof = decodeCbor(vdp.get(VDP_INCLUSION_PROOFS)![0]!) as Map<number, any>;
  const protectedHeader = new Map(decoded.protectedHeader as Map<unknown, unknown>);
  const unprotected = new Map(decoded.unprotectedHeader as Map<unknown, unknown>);
  edit({ protectedHeader, unprotected, proof });
  if (unprotected.has(COSE_RECEIPT_HEADER.vdp)) unprotected.set(COSE_RECEIPT_HEADER.vdp, new Map([[VDP_INCLUSION_PROOFS, [encodeCbor(proof)]]]));
  const protectedChanged = !Buffer.from(encodeCbor(protectedHeader)).equals(Buffer.from(encodeCbor(decoded.protectedHeader)));
  return encodeCoseSign1({ ...decoded, protectedBytes: protectedChanged ? encodeCbor(protectedHeader) : decoded.protectedBytes, unprotectedHeader: unprotected as never });
}

test('a COSE receipt for every transaction verifies against the service certificate and names it', async () => {
  const { svc, root, receiptFor } = await ledger(29);
  for (let seqno = 1; seqno <= 29; seqno++) {
    const bytes = receiptFor(seqno);
    const verified = verifyCoseReceipt(bytes, svc.certificatePem);
    assert.equal(verified.view, 2);
    assert.equal(verified.seqno, seqno);
    assert.deepEqual(verified.root, root);
    assert.equal(verified.signatureTxId, '2.30');
    assert.equal(verified.issuer, `covenant:service:${serviceKeyId(svc.keys.publicKey)}`);
  }
});

test('the envelope has the documented shape: tagged Sign1, ES384, kid, vds 1, CWT claims, detached root, one proof', async () => {
  const { svc, root, receiptFor } = await ledger(5);
  const outer = new Encoder({ mapsAsObjects: false, useRecords: false }).decode(receiptFor(3)) as Tag;
  assert.ok(outer instanceof Tag && outer.tag === 18);
  const decoded = decodeCoseSign1(receiptFor(3));
  assert.equal(decoded.alg, -35);
  assert.equal(decoded.payload, null);
  assert.equal(Buffer.from(decoded.protectedHeader.get(4) as Uint8Array).toString(), serviceKeyId(svc.keys.publicKey));
  assert.equal(serviceKeyId(svc.keys.publicKey), nodeCrypto.createHash('sha256').update(svc.keys.publicKey.export({ type: 'spki', format: 'der' })).digest('hex'));
  assert.equal(decoded.protectedHeader.get(395), VDS_LEDGER_SHA256);
  assert.equal((decoded.protectedHeader.get(15) as Map<number, string>).get(2), 'ledger.signature');
  const proof = decodeCbor((decoded.unprotectedHeader.get(396) as Map<number, Uint8Array[]>).get(-1)![0]!) as Map<number, any>;
  const [wsd, ce, cd] = proof.get(1);
  assert.equal(wsd.length, 32);
  assert.match(ce, /^ce:2\.3:[0-9a-f]{64}$/);
  assert.equal(cd.length, 32);
  // Folding the path by hand (left = the sibling is on the left) reaches the signed root.
  let acc = Buffer.from(leafFromComponents(wsd, ce, cd));
  for (const [left, hash] of proof.get(2)) acc = nodeCrypto.createHash('sha256').update(left ? Buffer.concat([hash, acc]) : Buffer.concat([acc, hash])).digest();
  assert.deepEqual(new Uint8Array(acc), root);
});

test('any change to a COSE receipt, or another service certificate, is refused as InvalidReceipt', async () => {
  const { svc, receiptFor } = await ledger(12);
  const good = receiptFor(7);
  const other = await service();
  assert.throws(() => verifyCoseReceipt(good, other.certificatePem), isInvalidReceipt);
  const cases: [string, Uint8Array][] = [
    ['claims digest', edited(good, ({ proof }) => proof.get(1)[2][0] ^= 1)],
    ['write set digest', edited(good, ({ proof }) => proof.get(1)[0][5] ^= 1)],
    ['commit evidence', edited(good, ({ proof }) => (proof.get(1)[1] = proof.get(1)[1].replace(/.$/, (c: string) => (c === '0' ? '1' : '0'))))],
    ['path hash', edited(good, ({ proof }) => proof.get(2)[0][1][0] ^= 1)],
    ['path side', edited(good, ({ proof }) => (proof.get(2)[0][0] = !proof.get(2)[0][0]))],
    ['path step removed', edited(good, ({ proof }) => proof.get(2).pop())],
    ['proof removed', edited(good, ({ unprotected }) => unprotected.delete(396))],
    ['vds', edited(good, ({ protectedHeader }) => protectedHeader.set(395, 2))],
    ['not CBOR', new Uint8Array([1, 2, 3])],
  ];
  for (const [what, bytes] of cases) assert.throws(() => verifyCoseReceipt(bytes, svc.certificatePem), isInvalidReceipt, what);
  assert.equal(verifyCoseReceipt(good, svc.certificatePem).seqno, 7, 'the untouched receipt still verifies');
  const decoded = decodeCoseSign1(new Uint8Array(good));
  const flipped = new Uint8Array(decoded.signature);
  flipped[10]! ^= 1;
  assert.throws(() => verifyCoseReceipt(encodeCoseSign1({ ...decoded, signature: flipped }), svc.certificatePem), isInvalidReceipt, 'signature');
  assert.throws(() => verifyCoseReceipt(encodeCoseSign1({ ...decoded, payload: new Uint8Array(32) }), svc.certificatePem), isInvalidReceipt, 'attached payload');
});
