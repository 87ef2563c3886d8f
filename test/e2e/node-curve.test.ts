/**
 * End to end: node_certificate.curve_id Secp256R1 gives the node a P-256 key; its signature
 * transactions are ECDSA with SHA-256, and receipts and `covenant ledger verify` follow the key's
 * curve (the COSE receipt, signed by the service key, verifies as before). The default stays
 * Secp384R1.
 */
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ecCurveOf, loadPublicKey } from '../../src/crypto/index.js';
import { verifyCoseReceipt, verifyReceipt } from '../../src/merkle/index.js';
import { CLI_ENTRY, removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';

function covenant(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
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
let work: string;

before(async () => {
  work = mkdtempSync(join(tmpdir(), 'covenant-node-curve-'));
  node = await startNode({ configPatch: { node_certificate: { curve_id: 'Secp256R1' }, ledger: { chunk_size: '2KB' }, ledger_signatures: { tx_count: 5, delay: '20ms' } } });
});

after(async () => {
  if ((node as StartedNode | undefined) !== undefined) {
    await node.stop();
    removeDir(node.dir);
  }
  rmSync(work, { recursive: true, force: true });
});

test('a Secp256R1 node signs with P-256: receipts (JSON and COSE) and ledger verify follow its curve', async () => {
  const nodeCert = readFileSync(join(node.dir, 'node_cert.pem'), 'utf8');
  assert.equal(ecCurveOf(loadPublicKey(nodeCert)), 'P-256');
  let txId = '';
  for (let i = 0; i < 40; i++) {
    const answer = await node.client.request('POST', '/app/log/public', {
      body: { id: i, msg: `curve ${i}` },
      identity: node.user,
      headers: { 'x-covenant-consistency': 'committed' },
      timeoutMs: 30_000,
    });
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    txId = answer.headers['x-covenant-transaction-id'] as string;
  }
  const receipt = await node.client.request('GET', `/node/receipt?transaction_id=${txId}`, { timeoutMs: 30_000 });
  assert.equal(receipt.status, 200, JSON.stringify(receipt.body));
  assert.equal(ecCurveOf(loadPublicKey(receipt.body.receipt.cert)), 'P-256', 'the receipt is signed by the P-256 node key');
  assert.equal(`${verifyReceipt(receipt.body.receipt, node.serviceCertificatePem).seqno}`, txId.split('.')[1]);
  // The COSE receipt is signed by the service key (P-384), over the same root.
  const cose = await node.client.request('GET', `/node/receipt/cose?transaction_id=${txId}`, { timeoutMs: 30_000 });
  assert.equal(cose.status, 200);
  assert.equal(`${verifyCoseReceipt(cose.bytes, node.serviceCertificatePem).seqno}`, txId.split('.')[1]);

  assert.equal(await node.stop(), 0);
  const copy = join(work, 'ledger');
  cpSync(join(node.dir, 'ledger'), copy, { recursive: true });
  const run = await covenant(['ledger', 'verify', copy, '--service-cert', join(node.dir, 'service_cert.pem')]);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /verified \d+ entries \(seqnos 1-\d+\) in \d+ files, [1-9]\d* signatures/);
});
