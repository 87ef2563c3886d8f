/**
 * `covenant ledger verify`, `covenant ledger download` and `covenant snapshot inspect` as an
 * operator runs them (the compiled CLI in its own process) against a real node's ledger.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateEcKeyPair, signEcdsa } from '../../src/crypto/index.js';
import { decodeWriteSet, encodeWriteSet, LedgerEncryptor, stringCodec, Store } from '../../src/kv/index.js';
import { CHUNK_HEADER_BYTES, decodeEntry, encodeEntry, EntryFlags, hasFlag } from '../../src/ledger/index.js';
import { Tables } from '../../src/node/tables.js';
import { CLI_ENTRY, removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { committedChunkNames, writeUntilCommittedChunks } from './download-helpers.js';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function covenant(args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--enable-source-maps', CLI_ENTRY, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

let node: StartedNode;
let chunks: string[];
let work: string;
let ledgerCopy: string;
let serviceCert: string;

function copyLedger(name: string): string {
  const to = join(work, name);
  cpSync(ledgerCopy, to, { recursive: true });
  return to;
}

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'covenant-ledger-tools-'));
  node = await startNode({ configPatch: { ledger: { chunk_size: '2KB' }, ledger_signatures: { tx_count: 5, delay: '20ms' } } });
  chunks = await writeUntilCommittedChunks(node, 50, 3);
  serviceCert = join(node.dir, 'service_cert.pem');
});

after(async () => {
  if ((node as StartedNode | undefined) !== undefined) {
    await node.stop();
    removeDir(node.dir);
  }
  rmSync(work, { recursive: true, force: true });
});

test('download fetches every committed chunk, checked by digest, and the result verifies', async () => {
  const to = join(work, 'downloaded');
  const run = await covenant(['ledger', 'download', '--from', node.address, '--since', '1', '--to', to, '--ca', serviceCert]);
  assert.equal(run.code, 0, run.stderr);
  const fetched = readdirSync(to).sort();
  const onNode = committedChunkNames(node);
  assert.ok(fetched.length >= chunks.length);
  // The node may commit more chunks while the download runs: the download is a prefix of them.
  for (const name of fetched) assert.deepEqual(readFileSync(join(to, name)), readFileSync(join(node.dir, 'ledger', name)), name);
  assert.ok(onNode.length >= fetched.length);
  assert.match(run.stdout, new RegExp(`downloaded ${chunks[0]!.replace('.', '\\.')}`));

  const again = await covenant(['ledger', 'download', '--from', node.address, '--since', '1', '--to', to, '--ca', serviceCert]);
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stdout, /kept ledger_1-/);

  const verify = await covenant(['ledger', 'verify', to, '--service-cert', serviceCert]);
  assert.equal(verify.code, 0, verify.stderr);
  assert.match(verify.stdout, /verified \d+ entries \(seqnos 1-\d+\)/);

  const beyond = await covenant(['ledger', 'download', '--from', node.address, '--since', '100000', '--to', join(work, 'none'), '--ca', serviceCert]);
  assert.notEqual(beyond.code, 0);
  assert.match(beyond.stderr, /404/);
});

test('verify passes on the ledger of a stopped node and prints ranges and speed', async () => {
  assert.equal(await node.stop(), 0);
  ledgerCopy = join(work, 'ledger');
  cpSync(join(node.dir, 'ledger'), ledgerCopy, { recursive: true });
  const run = await covenant(['ledger', 'verify', ledgerCopy, '--service-cert', serviceCert]);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, new RegExp(`ok .*${chunks[0]!.replace('.', '\\.')}: seqnos 1-`));
  assert.match(run.stdout, /verified \d+ entries \(seqnos 1-\d+\) in \d+ files, \d+ signatures/);
  assert.match(run.stdout, /MB\/s, \d+ transactions\/s/);
});

test('verify fails after one byte of a committed chunk is flipped, naming the file and offset', async () => {
  const dir = copyLedger('flipped');
  const path = join(dir, chunks[1]!);
  const bytes = readFileSync(path);
  bytes[Math.floor(bytes.length / 2)]! ^= 0x04;
  writeFileSync(path, bytes);
  const run = await covenant(['ledger', 'verify', dir]);
  assert.equal(run.code, 1);
  assert.match(run.stderr, new RegExp(`FAILED \\(\\w+\\): ${path.replace(/[.]/g, '\\.')} at offset \\d+`));
  assert.match(run.stderr, /offset \d+/);
});

test('verify fails on a truncated chunk, naming the file', async () => {
  const dir = copyLedger('truncated');
  const path = join(dir, chunks[0]!);
  truncateSync(path, readFileSync(path).length - 3);
  const run = await covenant(['ledger', 'verify', dir]);
  assert.equal(run.code, 1);
  assert.match(run.stderr, /FAILED \(LedgerCorrupted\)/);
  assert.ok(run.stderr.includes(path), run.stderr);
});

test('verify fails when a signature is forged, and when the certificate is not the service\'s', async () => {
  const dir = copyLedger('forged');
  const path = join(dir, chunks[0]!);
  const bytes = readFileSync(path);
  // Re-sign the first signature's root with a key of our own, keeping the node's certificate.
  const frames: Uint8Array[] = [];
  let forgedSeqno = 0;
  for (let offset = CHUNK_HEADER_BYTES; offset < bytes.length; ) {
    const entry = decodeEntry(bytes, offset);
    offset += entry.frameSizeBytes;
    if (forgedSeqno === 0 && hasFlag(entry.flags, EntryFlags.SIGNATURE)) {
      const writes = decodeWriteSet(entry.publicBytes);
      const record = JSON.parse(Buffer.from(writes.get(Tables.signatures)!.get('0')!).toString('utf8'));
      record.sig = Buffer.from(signEcdsa(generateEcKeyPair('P-384').privateKey, Buffer.from(record.root, 'hex'), 'der')).toString('base64');
      const forged = new Map([...writes].map(([name, map]) => [name, name === Tables.signatures ? new Map([['0', Buffer.from(JSON.stringify(record))]]) : map]));
      frames.push(encodeEntry({ ...entry, publicBytes: encodeWriteSet(forged).publicBytes }));
      forgedSeqno = entry.seqno;
    } else {
      frames.push(entry.frameBytes);
    }
  }
  assert.ok(forgedSeqno > 0);
  writeFileSync(path, Buffer.concat([bytes.subarray(0, CHUNK_HEADER_BYTES), ...frames]));
  const run = await covenant(['ledger', 'verify', dir]);
  assert.equal(run.code, 1);
  assert.match(run.stderr, /FAILED \(InvalidSignature\)/);
  assert.match(run.stderr, new RegExp(`seqno ${forgedSeqno}`));
  assert.ok(run.stderr.includes(path));

  const otherService = join(work, 'other_service.pem');
  writeFileSync(otherService, readFileSync(join(node.dir, 'member0_cert.pem')));
  const foreign = await covenant(['ledger', 'verify', ledgerCopy, '--service-cert', otherService]);
  assert.equal(foreign.code, 1);
  assert.match(foreign.stderr, /UntrustedNodeCertificate/);
});

test('snapshot inspect prints the header and the public maps with their key counts', async () => {
  const store = new Store();
  const tx = store.beginTx();
  tx.map('public:svc.gov.members.certs', stringCodec).put('m1', 'cert');
  tx.map('public:svc.gov.members.certs', stringCodec).put('m2', 'cert');
  tx.map('public:records', stringCodec).put('1', 'hello');
  tx.map('records', stringCodec).put('1', 'secret text');
  tx.apply();
  const path = join(work, 'snapshot_1_3.committed');
  writeFileSync(path, store.serializeSnapshot(new LedgerEncryptor(new Uint8Array(32).fill(3)), 4));
  const run = await covenant(['snapshot', 'inspect', path]);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /seqno: 1\n/);
  assert.match(run.stdout, /view: 4\n/);
  assert.match(run.stdout, /public:svc\.gov\.members\.certs: 2 keys/);
  assert.match(run.stdout, /public:records: 1 keys/);
  assert.ok(!run.stdout.includes('secret text'));

  writeFileSync(path, Buffer.from('not a snapshot at all, just text that is long enough for a header'));
  const bad = await covenant(['snapshot', 'inspect', path]);
  assert.equal(bad.code, 1);
  assert.match(bad.stderr, /not a readable snapshot/);
});
