/** Signed statements and transparent statements: the structure checks that run before any join policy. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSelfSignedCertificate, decodeCoseSign1, encodeCoseSign1, generateEcKeyPair, loadPrivateKey, sha256, signCoseSign1 } from '../../src/crypto/index.js';
import { toHex } from '../../src/base/bytes.js';
import {
  attachReceipt,
  checkTransparentStatement,
  signStatement,
  StatementError,
  StatementHeader,
  statementDigest,
  TRANSPARENT_STATEMENT_BYTES_MAX,
  verifySignedStatement,
} from '../../src/gov/transparent-statement.js';
import { makeIssuer, makeService } from './statement-helpers.js';

const HOST_DATA = 'c'.repeat(64);

function refusedWith(pattern: RegExp) {
  return (e: unknown) => e instanceof StatementError && e.code === 'InvalidSignedStatement' && pattern.test(e.message);
}

test('a transparent statement passes the checks and reads as the input table', async () => {
  const issuer = await makeIssuer();
  const service = await makeService();
  const statement = signStatement({
    privateKeyPem: issuer.keys.privateKeyPem,
    x5chainPem: issuer.chainPem,
    issuer: issuer.did,
    subject: 'covenant-node',
    payload: Buffer.from(HOST_DATA),
    issuedAtSeconds: 1_700_000_000,
    svn: 3,
    contentType: 'text/plain',
  });
  const digestBefore = statementDigest(statement);
  const transparent = attachReceipt(statement, service.receiptOf(statement));
  assert.deepEqual(statementDigest(transparent), digestBefore, 'attaching receipts does not change the digest');
  const input = checkTransparentStatement(transparent, [service.certificatePem]);
  assert.equal(input.phdr.alg, -35);
  assert.equal(input.phdr.cty, 'text/plain');
  assert.equal(input.phdr.x5chain.length, 2);
  assert.match(input.phdr.x5chain[0]!, /^-----BEGIN CERTIFICATE-----\n/);
  assert.deepEqual(input.phdr.cwt, { iss: issuer.did, sub: 'covenant-node', iat: 1_700_000_000, svn: 3 });
  assert.equal(input.resolved_issuer.did, issuer.did);
  assert.equal(input.resolved_issuer.ca_index, 1);
  assert.equal(input.resolved_issuer.ca_certificate, input.phdr.x5chain[1]);
  assert.deepEqual(input.resolved_issuer.policies, [{ name: 'subject', value: 'CN:issuer' }]);
  assert.equal(input.receipts.length, 1);
  const [receipt] = input.receipts;
  assert.equal(receipt!.alg, -35);
  assert.equal(receipt!.vds, 1);
  assert.match(receipt!.kid!, /^[0-9a-f]{64}$/);
  assert.equal(receipt!.cwt.sub, 'ledger.signature');
  assert.deepEqual(receipt!.ccf, { txid: '2.8' });
  assert.deepEqual(receipt!.leaves, [
    { claims_digest: toHex(digestBefore), commit_evidence: `ce:2.7:${'ab'.repeat(32)}`, write_set_digest: toHex(sha256('write set')) },
  ]);
  // A receipt from a previous service identity is accepted when the service still names it.
  const other = await makeService();
  assert.equal(checkTransparentStatement(transparent, [other.certificatePem, service.certificatePem]).receipts.length, 1);
});

test('a statement signed by a key that is not its x5chain\'s is refused', async () => {
  const issuer = await makeIssuer();
  const intruder = generateEcKeyPair('P-384');
  const statement = signStatement({ privateKeyPem: intruder.privateKeyPem, x5chainPem: issuer.chainPem, issuer: issuer.did, subject: 's', payload: Buffer.from(HOST_DATA) });
  assert.throws(() => verifySignedStatement(statement), refusedWith(/signature does not verify with the key of its x5chain/));
  // A chain whose links do not sign each other.
  const stranger = await createSelfSignedCertificate({ keyPair: generateEcKeyPair('P-384'), subjectCommonName: 'other ca', validityDays: 30, isCa: true });
  const leafOnly = issuer.chainPem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n/)![0];
  const broken = signStatement({ privateKeyPem: issuer.keys.privateKeyPem, x5chainPem: leafOnly + stranger, issuer: issuer.did, subject: 's', payload: Buffer.from(HOST_DATA) });
  assert.throws(() => verifySignedStatement(broken), refusedWith(/x5chain\[0\] is not signed by phdr.x5chain\[1\]/));
});

test('each structure failure is refused with its reason', async () => {
  const issuer = await makeIssuer();
  const service = await makeService();
  const sign = (overrides: Partial<Parameters<typeof signStatement>[0]> = {}) =>
    signStatement({ privateKeyPem: issuer.keys.privateKeyPem, x5chainPem: issuer.chainPem, issuer: issuer.did, subject: 'covenant-node', payload: Buffer.from(HOST_DATA), ...overrides });
  const statement = sign();
  const check = (bytes: Uint8Array) => checkTransparentStatement(bytes, [service.certificatePem]);

  // A receipt from another service.
  const other = await makeService();
  assert.throws(() => check(attachReceipt(statement, other.receiptOf(statement))), refusedWith(/receipts\[0\] is not a receipt of this service: .*kid/));
  // A receipt for a different statement: the claims digest does not bind.
  const different = sign({ svn: 9 });
  assert.throws(() => check(attachReceipt(statement, service.receiptOf(different))), refusedWith(/receipts\[0\] does not bind this statement/));
  // Missing and empty fields.
  assert.throws(() => check(attachReceipt(sign({ subject: '' }), service.receiptFor(new Uint8Array(32)))), refusedWith(/phdr.cwt.sub must be a non-empty string/));
  const withoutSub = resign(statement, (claims) => claims.delete(2), issuer.keys.privateKeyPem);
  assert.throws(() => check(attachReceipt(withoutSub, service.receiptOf(withoutSub))), refusedWith(/phdr.cwt.sub is missing/));
  assert.throws(() => check(withReceipts(statement, [])), refusedWith(/receipts must be a non-empty array/));
  assert.throws(() => check(statement), refusedWith(/receipts \(unprotected header label 394\) are missing/));
  assert.throws(() => check(withReceipts(statement, ['not bytes'])), refusedWith(/receipts\[0\] must be a COSE receipt/));
  assert.throws(() => check(attachReceipt(statement, new Uint8Array([1, 2, 3]))), refusedWith(/receipts\[0\] is not a receipt of this service/));
  assert.throws(() => check(attachReceipt(sign({ svn: 1.5 as number }), service.receiptFor(new Uint8Array(32)))), refusedWith(/svn must be an integer/));
  assert.throws(() => check(new Uint8Array([0xa0])), refusedWith(/not a COSE_Sign1/));
  assert.throws(() => check(new Uint8Array(TRANSPARENT_STATEMENT_BYTES_MAX + 1)), refusedWith(/more than 65536/));
});

/** The statement with its CWT claims changed, signed again by `privateKeyPem` (same x5chain and payload). */
function resign(statement: Uint8Array, change: (claims: Map<unknown, unknown>) => void, privateKeyPem: string): Uint8Array {
  const decoded = decodeCoseSign1(statement);
  const claims = new Map(decoded.protectedHeader.get(StatementHeader.cwtClaims) as Map<unknown, unknown>);
  change(claims);
  const protectedHeader = new Map(decoded.protectedHeader);
  protectedHeader.delete(1);
  protectedHeader.set(StatementHeader.cwtClaims, claims);
  return signCoseSign1({ protectedHeader, payload: decoded.payload!, privateKey: loadPrivateKey(privateKeyPem) });
}

function withReceipts(statement: Uint8Array, receipts: unknown[]): Uint8Array {
  const decoded = decodeCoseSign1(statement);
  return encodeCoseSign1({ ...decoded, unprotectedHeader: new Map([[StatementHeader.receipts, receipts]]) });
}
