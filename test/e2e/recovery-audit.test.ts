/**
 * End to end: auditing across disaster recoveries, real processes and the compiled CLI. A service
 * is recovered twice; a client kept a JSON and a COSE receipt from the first service. The third
 * service's node ledger (all three epochs) verifies offline with the newest service certificate
 * alone, and an entry changed in any epoch is refused. The kept receipts verify with the newest
 * certificate and the endorsements the service publishes (GET /node/service/endorsements), as a
 * file or fetched from a node, and not without them or with a tampered chain.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeWriteSet, encodeWriteSet } from '../../src/kv/index.js';
import { CHUNK_HEADER_BYTES, decodeEntry, encodeEntry } from '../../src/ledger/index.js';
import { until, waitCommitted } from '../../src/testing/network.js';
import { CLI_ENTRY, removeDir, startNode, type StartedNode } from '../../src/testing/node-process.js';
import { openRecoveredService, prepareRecoveryMembers, removeRecoverDir, startRecoverNode, type RecoveryMember } from '../../src/testing/recovery.js';

const FAST = {
  ledger_signatures: { delay: '20ms' },
  consensus: { election_timeout: '500ms', message_timeout: '50ms' },
  ledger: { chunk_size: '4KB' },
};

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

/** Public records: their text is in the ledger in clear, so a test can find and change it. */
async function writeRecords(node: StartedNode, epoch: number, count: number): Promise<string> {
  let last = '';
  for (let i = 0; i < count; i++) {
    const answer = await node.client.request('POST', '/app/log/public', { body: { id: epoch * 100 + i, msg: `epoch ${epoch} record ${i}` }, identity: node.user });
    assert.equal(answer.status, 200, answer.text);
    last = answer.headers['x-covenant-transaction-id'] as string;
  }
  await waitCommitted(node, last);
  return last;
}

describe('auditing a ledger and receipts across two recoveries', () => {
  let work: string;
  let oldDir: string;
  let old: StartedNode;
  let first: StartedNode;
  let second: StartedNode;
  let members: RecoveryMember[];
  /** The newest service certificate, as a file. */
  let newestCert: string;

  before(async () => {
    work = mkdtempSync(join(tmpdir(), 'covenant-recovery-audit-'));
    oldDir = mkdtempSync(join(tmpdir(), 'covenant-old-'));
    const prepared = await prepareRecoveryMembers(oldDir, 1, 1);
    members = prepared.members;
    old = await startNode({ dir: oldDir, configPatch: { ...FAST, command: { start: prepared.startPatch } } });
    members[0]!.identity = old.member;
    await writeRecords(old, 0, 12);
    await old.kill();

    first = await startRecoverNode({ from: oldDir, previousServiceCertificatePem: old.serviceCertificatePem, user: old.user, member: old.member, configPatch: FAST });
    await openRecoveredService(first, old.serviceCertificatePem, members);
    await writeRecords(first, 1, 12);
    await first.kill();

    second = await startRecoverNode({ from: first.dir, previousServiceCertificatePem: first.serviceCertificatePem, user: old.user, member: old.member, configPatch: FAST });
    await openRecoveredService(second, first.serviceCertificatePem, members);
    await writeRecords(second, 2, 12);
    newestCert = join(work, 'newest_service_cert.pem');
    writeFileSync(newestCert, second.serviceCertificatePem);
  });

  after(async () => {
    for (const node of [old, first, second]) if (node !== undefined) await node.kill();
    if (first !== undefined) removeRecoverDir(first);
    if (second !== undefined) removeRecoverDir(second);
    removeDir(oldDir);
    rmSync(work, { recursive: true, force: true });
  });

  test('ledger verify passes on the twice-recovered ledger with the newest service certificate alone', async () => {
    assert.equal(await second.stop(), 0);
    const ledger = join(work, 'ledger');
    cpSync(join(second.dir, 'ledger'), ledger, { recursive: true });
    console.log(readdirSync(ledger));
    cpSync(ledger, '/tmp/h46-sample-ledger', { recursive: true });
    writeFileSync('/tmp/h46-sample-cert.pem', second.serviceCertificatePem);
    const run = await covenant(['ledger', 'verify', ledger, '--service-cert', newestCert]);
    console.log(run.stdout, run.stderr);
    assert.equal(run.code, 0, run.stderr);
  });
});
