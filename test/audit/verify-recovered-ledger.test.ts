/**
 * Offline verification of ledgers that span disaster recoveries (src/audit/service-identities.ts):
 * three services in turn, each recovered service endorsing the key of the one before it. The
 * ledger verifies with the newest service certificate alone; a chunk may end without CHUNK_END
 * only where a recovered service begins and records it; a node certificate is trusted only
 * through the recoveries recorded after its signature.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SERVICE_ENDORSEMENTS_TABLE, ServiceIdentities } from '../../src/audit/service-identities.js';
import { verifyLedger } from '../../src/audit/verify-ledger.js';
import { createCaEndorsementCertificate } from '../../src/crypto/index.js';
import { Tables } from '../../src/node/tables.js';
import { FsDisk } from '../../src/platform/fs-disk.js';
import { generateSigningIdentities, writeRecoveredLedger, type LedgerEpoch, type SigningIdentities } from '../../src/testing/signed-ledger.js';

const disk = new FsDisk();
let gen: SigningIdentities[];
/** e[i]: service i's endorsement of service i-1's key (e[0] unused). */
let e: string[];

function endorse(by: SigningIdentities, previous: SigningIdentities): Promise<string> {
  return createCaEndorsementCertificate({
    subjectCertificatePem: previous.service.certificatePem,
    issuerCertificatePem: by.service.certificatePem,
    issuerPrivateKey: by.service.keyPair.privateKey,
    validityDays: 30,
  });
}

before(async () => {
  gen = await Promise.all([generateSigningIdentities(), generateSigningIdentities(), generateSigningIdentities(), generateSigningIdentities()]);
  e = ['', await endorse(gen[1]!, gen[0]!), await endorse(gen[2]!, gen[1]!)];
});

/** Writes the ledger of `epochs` in a fresh folder and verifies it with `serviceCertificatePem`. */
function verifyEpochs(epochs: LedgerEpoch[], serviceCertificatePem: string | undefined) {
  const dir = mkdtempSync(join(tmpdir(), 'covenant-recovered-ledger-'));
  try {
    const began = writeRecoveredLedger({ disk, directory: dir, epochs, signatureEveryEntries: 7, chunkSizeBytes: 2048 });
    return { began, report: verifyLedger(disk, [dir], serviceCertificatePem === undefined ? {} : { serviceCertificatePem }) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const threeServices = (): LedgerEpoch[] => [
  { identities: gen[0]!, entries: 40 },
  { identities: gen[1]!, entries: 30, endorsement: e[1]! },
  { identities: gen[2]!, entries: 30, endorsement: e[2]! },
];

test('the audit layer names the service endorsements table as the node does', () => {
  assert.equal(SERVICE_ENDORSEMENTS_TABLE, Tables.serviceEndorsements);
});

test('a ledger recovered twice verifies with the newest service certificate alone, roots and chunk boundaries included', () => {
  const { began, report } = verifyEpochs(threeServices(), gen[2]!.service.certificatePem);
  assert.equal(report.problem, undefined, report.problem?.message);
  assert.equal(report.entries, 100);
  assert.ok(report.rootsChecked);
  assert.deepEqual(report.recoveries, began);
  assert.deepEqual(began, [41, 71]);
  // Without a service certificate the recoveries are still what ends the old chunks.
  assert.equal(verifyEpochs(threeServices(), undefined).report.problem, undefined);
});

test('the certificate of an earlier service, or of another one, is not enough', () => {
  for (const [what, cert] of [
    ['the first service', gen[0]!.service.certificatePem],
    ['the second service', gen[1]!.service.certificatePem],
    ['an unrelated service', gen[3]!.service.certificatePem],
  ] as const) {
    const { report } = verifyEpochs(threeServices(), cert);
    assert.equal(report.problem?.code, 'UntrustedNodeCertificate', what);
  }
  // The problem names where the first untrusted certificate first signed, in ledger order.
  const { report } = verifyEpochs(threeServices(), gen[1]!.service.certificatePem);
  assert.equal(report.problem?.seqno, 7);
  assert.match(report.problem!.message, /the endorsements of the recoveries that began at seqnos 41, 71 do not chain it/);
  const newestOnly = threeServices().slice(0, 1);
  newestOnly.push({ identities: gen[1]!, entries: 30, endorsement: e[1]! });
  const { report: first } = verifyEpochs(newestOnly, gen[0]!.service.certificatePem);
  assert.equal(first.problem?.seqno, 41, "the recovered service's first signature");
  assert.match(first.problem!.message, /no recovery after it/);
});

test('a broken chain of recorded endorsements leaves the earlier signatures untrusted', async () => {
  const byUnrelated = await endorse(gen[3]!, gen[0]!);
  const cases: [string, LedgerEpoch[]][] = [
    ['an endorsement by another service', [threeServices()[0]!, { identities: gen[1]!, entries: 30, endorsement: byUnrelated }, threeServices()[2]!]],
    ['the second endorsement in the first recovery', [threeServices()[0]!, { identities: gen[1]!, entries: 30, endorsement: e[2]! }, threeServices()[2]!]],
  ];
  for (const [what, epochs] of cases) {
    const { report } = verifyEpochs(epochs, gen[2]!.service.certificatePem);
    assert.equal(report.problem?.code, 'UntrustedNodeCertificate', what);
    assert.equal(report.problem?.seqno, 7, `${what}: the first service's first signature`);
    assert.match(report.problem!.message, /recoveries that began at seqnos 41, 71/);
  }
});

test('a chunk ends without CHUNK_END only where the ledger records a recovery that began right after it', () => {
  const unrecorded = threeServices();
  unrecorded[1] = { identities: gen[1]!, entries: 30 };
  const missing = verifyEpochs(unrecorded, gen[2]!.service.certificatePem).report;
  assert.equal(missing.problem?.code, 'ChunkNotEnded');
  assert.equal(missing.problem?.seqno, 40);
  assert.match(missing.problem!.message, /began at seqno 41 records no recovery/);
  // The same when that service is the last.
  const last = verifyEpochs(unrecorded.slice(0, 2), gen[1]!.service.certificatePem).report;
  assert.equal(last.problem?.code, 'ChunkNotEnded');
  assert.match(last.problem!.message, /the ledger records no recovery that began after it/);

  // A record keyed elsewhere than where its service began is malformed.
  const misplaced = threeServices();
  misplaced[1] = { identities: gen[1]!, entries: 30, endorsement: e[1]!, endorsementKey: 30 };
  const report = verifyEpochs(misplaced, gen[2]!.service.certificatePem).report;
  assert.equal(report.problem?.code, 'MalformedServiceEndorsement');
  assert.equal(report.problem?.seqno, 42);
});

test('a node certificate of an earlier service is trusted only for signatures before the recoveries that endorse its service', () => {
  const identities = new ServiceIdentities(gen[2]!.service.certificatePem);
  const at = (seqno: number) => ({ file: 'ledger_1-100.committed', offsetBytes: 8, seqno });
  identities.signedBy(gen[0]!.node.certificatePem, gen[0]!.node.id, 2, at(7));
  identities.addRecovery({ seqno: 41, endorsement: e[1]! }, 41);
  identities.addRecovery({ seqno: 71, endorsement: e[2]! }, 71);
  assert.equal(identities.untrusted(), undefined);
  // The same certificate signing again after the last recovery, in a later view: no endorsement applies.
  identities.signedBy(gen[0]!.node.certificatePem, gen[0]!.node.id, 6, at(80));
  const untrusted = identities.untrusted();
  assert.equal(untrusted?.at.seqno, 80);
  assert.match(untrusted!.why, /no recovery after it/);
  // Recoveries are recorded once each, in order, where their view began.
  assert.throws(() => identities.addRecovery({ seqno: 71, endorsement: e[2]! }, 71), /a second service endorsement/);
  assert.throws(() => identities.addRecovery({ seqno: 90, endorsement: e[2]! }, 85), /not by a service that began there/);
});
