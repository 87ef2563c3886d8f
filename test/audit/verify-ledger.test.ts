/**
 * Offline verification over ledgers written with the ledger library: a clean ledger passes, and
 * each kind of damage is found and pointed at (file, offset, seqno).
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { createHash } from 'node:crypto';
import { LedgerEncryptor, stringCodec, Store } from '../../src/kv/index.js';
import { SIGNATURES_TABLE, SNAPSHOT_EVIDENCE_TABLE, verifyLedger } from '../../src/audit/verify-ledger.js';
import { CHUNK_HEADER_BYTES, encodeSnapshotFile, ENTRY_HEADER_BYTES } from '../../src/ledger/index.js';
import { Tables } from '../../src/node/tables.js';
import { FsDisk } from '../../src/platform/fs-disk.js';
import { generateSigningIdentities, writeSignedLedger, type SigningIdentities } from '../../src/testing/signed-ledger.js';

const disk = new FsDisk();
let root: string;
let identities: SigningIdentities;
let clean: string;

function committed(dir: string): string[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.committed'))
    .sort((a, b) => Number(/_(\d+)-/.exec(a)![1]) - Number(/_(\d+)-/.exec(b)![1]));
}

function copyOf(dir: string, name: string): string {
  const to = join(root, name);
  cpSync(dir, to, { recursive: true });
  return to;
}

before(async () => {
  root = mkdtempSync(join(tmpdir(), 'covenant-verify-'));
  identities = await generateSigningIdentities();
  clean = join(root, 'clean');
  writeSignedLedger({ disk, directory: clean, identities, entries: 300, signatureEveryEntries: 10, chunkSizeBytes: 8 * 1024, commitSeqno: 250 });
});

after(() => rmSync(root, { recursive: true, force: true }));

test('the audit layer names the tables as the node does', () => {
  assert.equal(SIGNATURES_TABLE, Tables.signatures);
  assert.equal(SNAPSHOT_EVIDENCE_TABLE, Tables.snapshotEvidence);
});

test('a clean ledger verifies: every entry, every signature, roots and the service endorsement', () => {
  const progress: number[] = [];
  const report = verifyLedger(disk, [clean], { serviceCertificatePem: identities.service.certificatePem, onProgress: (p) => progress.push(p.bytesDone) });
  assert.equal(report.problem, undefined);
  assert.equal(report.entries, 300);
  assert.equal(report.signatures, 30);
  assert.equal(report.firstSeqno, 1);
  assert.equal(report.lastSeqno, 300);
  assert.equal(report.lastSignedSeqno, 300);
  assert.ok(report.files.length >= 4);
  assert.equal(report.files[0]!.first, 1);
  assert.equal(report.files.at(-1)!.last, 300);
  assert.ok(committed(clean).length >= 3 && committed(clean).length < report.files.length, 'committed and completed chunks');
  assert.equal(progress.length, report.files.length);
  assert.equal(progress.at(-1), report.bytes);
});

test('a flipped byte is found by the crc, with the file and the offset of its frame', () => {
  const dir = copyOf(clean, 'flipped');
  const name = committed(dir)[1]!;
  const bytes = readFileSync(join(dir, name));
  const at = CHUNK_HEADER_BYTES + ENTRY_HEADER_BYTES + 20;
  bytes[at]! ^= 0x01;
  writeFileSync(join(dir, name), bytes);
  const report = verifyLedger(disk, [dir]);
  assert.equal(report.problem?.code, 'LedgerCorrupted');
  assert.equal(report.problem?.file, join(dir, name));
  assert.equal(report.problem?.offsetBytes, CHUNK_HEADER_BYTES, 'the first frame of the file holds the byte');
  assert.deepEqual(report.files.map((f) => f.file), [join(dir, committed(dir)[0]!)], 'the files before the damage verified');
});

test('a changed write set with a recomputed crc is found by the Merkle root of the next signature', () => {
  const dir = copyOf(clean, 'rewritten');
  const name = committed(dir)[0]!;
  const bytes = readFileSync(join(dir, name));
  // The second frame of the first chunk (seqno 2): change a payload byte and fix its crc.
  const firstFrame = CHUNK_HEADER_BYTES;
  const second = firstFrame + 4 + bytes.readUInt32LE(firstFrame);
  const frameEnd = second + 4 + bytes.readUInt32LE(second);
  bytes[frameEnd - 10]! ^= 0xff;
  bytes.writeUInt32LE(crc32(bytes.subarray(second + 4, frameEnd - 4)), frameEnd - 4);
  writeFileSync(join(dir, name), bytes);
  const report = verifyLedger(disk, [dir]);
  assert.equal(report.problem?.code, 'MerkleRootMismatch');
  assert.equal(report.problem?.seqno, 10, 'the first signature after seqno 2');
  assert.equal(report.problem?.file, join(dir, name));
  assert.ok(report.problem!.offsetBytes! > second);
});

test('a truncated chunk is reported with its file and where the cut frame starts', () => {
  const dir = copyOf(clean, 'truncated');
  const name = committed(dir)[2]!;
  const path = join(dir, name);
  truncateSync(path, readFileSync(path).length - 7);
  const report = verifyLedger(disk, [dir]);
  assert.equal(report.problem?.code, 'LedgerCorrupted');
  assert.equal(report.problem?.file, path);
  assert.ok(report.problem!.offsetBytes! > 0);
  assert.match(report.problem!.message, new RegExp(name.replace('.', '\\.')));
});

test('a forged signature and an unendorsed node certificate are refused', async () => {
  const forged = join(root, 'forged');
  writeSignedLedger({ disk, directory: forged, identities, entries: 60, signatureEveryEntries: 10, chunkSizeBytes: 4096, forgeSignatureAt: 40 });
  const report = verifyLedger(disk, [forged]);
  assert.equal(report.problem?.code, 'InvalidSignature');
  assert.equal(report.problem?.seqno, 40);
  assert.equal(report.lastSignedSeqno, 30);

  const other = await generateSigningIdentities();
  const foreign = verifyLedger(disk, [clean], { serviceCertificatePem: other.service.certificatePem });
  assert.equal(foreign.problem?.code, 'UntrustedNodeCertificate');
  assert.equal(foreign.problem?.seqno, 10);
});

test('missing files: a gap between chunks and a ledger not starting at 1', () => {
  const gap = copyOf(clean, 'gap');
  rmSync(join(gap, committed(gap)[1]!));
  assert.equal(verifyLedger(disk, [gap]).problem?.code, 'LedgerFilesInconsistent');
  const headless = copyOf(clean, 'headless');
  rmSync(join(headless, committed(headless)[0]!));
  const report = verifyLedger(disk, [headless]);
  assert.equal(report.problem?.code, 'MissingEntries');
  assert.match(report.problem!.message, /does not start at seqno 1/);
});

test('a ledger that starts after a snapshot verifies with it: signatures and the recorded evidence', () => {
  const store = new Store();
  const tx = store.beginTx();
  tx.map('public:records', stringCodec).put('k', 'v');
  tx.apply();
  while (store.version < 20) {
    const pad = store.beginTx();
    pad.map('public:records', stringCodec).put('k', `v${store.version}`);
    pad.apply();
  }
  const kv = store.serializeSnapshot(new LedgerEncryptor(new Uint8Array(32).fill(1)), 2);
  const snapshot = encodeSnapshotFile(kv, {
    seqno: 20,
    view: 2,
    view_history: [1, 1],
    configurations: [{ seqno: 0, nodes: ['n'] }],
    service_certificate: '',
    tree: { size: 20, compaction_point: 0, block_hashes: '', leaves: '' },
  });
  const sha256Hex = createHash('sha256').update(snapshot).digest('hex');
  const full = join(root, 'after-snapshot');
  writeSignedLedger({ disk, directory: full, identities, entries: 80, signatureEveryEntries: 10, chunkSizeBytes: 1, snapshotEvidence: { seqno: 23, sha256Hex, snapshotSeqno: 20 } });
  // Chunks end on every signature: drop those before the snapshot, as a node started from it has.
  for (const name of committed(full)) if (Number(/-(\d+)\./.exec(name)![1]) <= 20) rmSync(join(full, name));
  const good = verifyLedger(disk, [full], { snapshot: { name: 'snapshot_20_23.committed', bytes: snapshot } });
  assert.equal(good.problem, undefined, good.problem?.message);
  assert.equal(good.firstSeqno, 21);
  assert.equal(good.rootsChecked, false);
  assert.equal(good.signatures, 6);

  const wrongEvidence = verifyLedger(disk, [full], { snapshot: { name: 'snapshot_20_24.committed', bytes: snapshot } });
  assert.equal(wrongEvidence.problem?.code, 'SnapshotMismatch');
  assert.equal(wrongEvidence.problem?.seqno, 24);
  assert.ok(wrongEvidence.problem?.file?.endsWith('ledger_21-30.committed'));

  const wrongName = verifyLedger(disk, [full], { snapshot: { name: 'snapshot_19_23.committed', bytes: snapshot } });
  assert.equal(wrongName.problem?.code, 'SnapshotMismatch');
  const damaged = Buffer.from(snapshot);
  damaged[damaged.length - 1]! ^= 1;
  assert.equal(verifyLedger(disk, [full], { snapshot: { name: 'snapshot_20_23.committed', bytes: damaged } }).problem?.code, 'SnapshotMismatch');
  assert.equal(verifyLedger(disk, [full]).problem?.code, 'MissingEntries', 'without the snapshot the start is missing');
});
