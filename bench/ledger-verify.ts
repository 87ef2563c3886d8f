/**
 * Offline ledger verification speed (what `covenant ledger verify` does): a ledger of signed
 * entries is written with the ledger library in a temporary directory, then verified.
 * Run: node --import tsx bench/ledger-verify.ts [entries] [--keep DIR]
 * Prints one JSON object. With --keep the ledger and service certificate stay in DIR.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { verifyLedger } from '../src/audit/verify-ledger.js';
import { FsDisk } from '../src/platform/fs-disk.js';
import { generateSigningIdentities, writeSignedLedger } from '../src/testing/signed-ledger.js';

const args = process.argv.slice(2);
const keepIndex = args.indexOf('--keep');
const keepDir = keepIndex === -1 ? undefined : args[keepIndex + 1];
const positional = args.filter((_, i) => i !== keepIndex && i !== keepIndex + 1);
const ENTRY_COUNT = Number(positional[0] ?? 200_000);
// The node's default signature cadence (ledger_signatures.tx_count) and a 5 MB chunk.
const SIGNATURE_EVERY_ENTRIES = 5000;
const CHUNK_SIZE_BYTES = 5 * 1024 * 1024;
const PAYLOAD_BYTES = 200;

const root = keepDir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'covenant-bench-verify-'));
try {
  const disk = new FsDisk();
  const directory = path.join(root, 'ledger');
  const identities = await generateSigningIdentities();
  fs.mkdirSync(root, { recursive: true });
  fs.writeFileSync(path.join(root, 'service_cert.pem'), identities.service.certificatePem);
  const written = writeSignedLedger({
    disk,
    directory,
    identities,
    entries: ENTRY_COUNT,
    signatureEveryEntries: SIGNATURE_EVERY_ENTRIES,
    chunkSizeBytes: CHUNK_SIZE_BYTES,
    payloadBytes: PAYLOAD_BYTES,
  });
  const start = performance.now();
  const report = verifyLedger(disk, [directory], { serviceCertificatePem: identities.service.certificatePem });
  const ms = performance.now() - start;
  if (report.problem !== undefined) throw new Error(`verification failed: ${report.problem.message}`);
  if (report.entries !== written.entries || report.signatures !== written.signatures) throw new Error('verification did not cover the ledger');
  console.log(
    JSON.stringify({
      bench: 'ledger.verify',
      entries: report.entries,
      signatures: report.signatures,
      files: report.files.length,
      bytes: report.bytes,
      ms: Math.round(ms),
      megabytesPerSecond: Number(((report.bytes / ms) * 1000 / 1024 / 1024).toFixed(1)),
      transactionsPerSecond: Math.round((report.entries / ms) * 1000),
    }),
  );
} finally {
  if (keepDir === undefined) fs.rmSync(root, { recursive: true, force: true });
}
