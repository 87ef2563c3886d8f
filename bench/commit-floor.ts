/**
 * The fixed costs under a committed write on this machine, each measured alone: an `fdatasync`
 * after a small append to a file (what one grouped ledger sync costs a node; the folder is the
 * one given, on the disk the ledger would use), and an ECDSA signature and its verification over
 * a 32-byte Merkle root on each node curve (what a signature transaction costs the primary and
 * each backup), through the node's own crypto functions.
 *
 *   node dist/bench/commit-floor.js [--dir /path/on/the/ledger/disk] [--syncs 500] [--signatures 2000]
 */
import { closeSync, fdatasyncSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { numberArg } from './args.js';
import { generateEcKeyPair, loadPrivateKey, loadPublicKey, signEcdsa, verifyEcdsa, type EcCurve } from '../src/crypto/keys.js';

const dirAt = process.argv.indexOf('--dir');
const base = dirAt === -1 ? tmpdir() : process.argv[dirAt + 1]!;
const syncs = numberArg('--syncs', 500);
const signatures = numberArg('--signatures', 2000);

function quantiles(samples: number[]): string {
  samples.sort((a, b) => a - b);
  const at = (q: number) => samples[Math.min(samples.length - 1, Math.floor(q * samples.length))]!;
  return `p50 ${at(0.5).toFixed(3)} ms, p90 ${at(0.9).toFixed(3)} ms, p99 ${at(0.99).toFixed(3)} ms`;
}

const ms = (start: bigint) => Number(process.hrtime.bigint() - start) / 1e6;

const dir = mkdtempSync(join(base, 'covenant-floor-'));
try {
  const fd = openSync(join(dir, 'ledger'), 'a');
  const entry = Buffer.alloc(4096, 7);
  const times: number[] = [];
  for (let i = 0; i < syncs; i++) {
    writeSync(fd, entry);
    const start = process.hrtime.bigint();
    fdatasyncSync(fd);
    times.push(ms(start));
  }
  closeSync(fd);
  console.log(`fdatasync after a 4 KiB append (${syncs} in ${base}): ${quantiles(times)}`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}

const root = new Uint8Array(32).fill(1);
for (const curve of ['P-384', 'P-256'] as EcCurve[]) {
  const pair = generateEcKeyPair(curve);
  const privateKey = loadPrivateKey(pair.privateKeyPem);
  const publicKey = loadPublicKey(pair.publicKeyPem);
  let signature = signEcdsa(privateKey, root);
  let start = process.hrtime.bigint();
  for (let i = 0; i < signatures; i++) signature = signEcdsa(privateKey, root);
  const signUs = (ms(start) * 1000) / signatures;
  start = process.hrtime.bigint();
  for (let i = 0; i < signatures; i++) verifyEcdsa(publicKey, root, signature);
  const verifyUs = (ms(start) * 1000) / signatures;
  console.log(`ECDSA ${curve}: sign ${signUs.toFixed(0)} µs, verify ${verifyUs.toFixed(0)} µs (mean of ${signatures})`);
}
