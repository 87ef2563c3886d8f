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
import nodeCrypto from 'node:crypto';
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

/** Polls until the node answers a receipt of `txId` (JSON or COSE), then returns its bytes. */
async function receiptOf(node: StartedNode, path: '/node/receipt' | '/node/receipt/cose', txId: string): Promise<Buffer> {
  return until(`${path} of ${txId}`, async () => {
    const answer = await node.client.request('GET', `${path}?transaction_id=${txId}`);
    return answer.status === 200 ? Buffer.from(answer.bytes) : undefined;
  });
}

/** `pem` with one bit of its signature flipped (names and key identifiers still chain). */
function tamperedSignature(pem: string): string {
  const der = new Uint8Array(new nodeCrypto.X509Certificate(pem).raw);
  der[der.length - 1] ^= 0x01;
  const base64 = Buffer.from(der).toString('base64').replace(/.{64}/g, '$&\n');
  return `-----BEGIN CERTIFICATE-----\n${base64}\n-----END CERTIFICATE-----\n`;
}

/**
 * Changes one character of the public record `text` in a copy of `ledger`: re-framed (a valid frame
 * whose content differs from what was signed) or raw (the frame's crc no longer holds).
 */
function changeRecord(ledger: string, copy: string, text: string, how: 'reframed' | 'raw'): { file: string; seqno: number } {
  cpSync(ledger, copy, { recursive: true });
  const needle = Buffer.from(text);
  for (const name of readdirSync(copy)) {
    const path = join(copy, name);
    const bytes = readFileSync(path);
    for (let offset = CHUNK_HEADER_BYTES; offset < bytes.length; ) {
      const entry = decodeEntry(bytes, offset);
      const at = Buffer.from(entry.publicBytes).indexOf(needle);
      if (at >= 0) {
        const changedAt = at + needle.length - 1;
        let frame: Buffer;
        if (how === 'raw') {
          frame = Buffer.from(entry.frameBytes);
          frame[entry.publicBytes.byteOffset - entry.frameBytes.byteOffset + changedAt] ^= 0x01;
        } else {
          const publicBytes = Buffer.from(entry.publicBytes);
          publicBytes[changedAt] ^= 0x01;
          frame = Buffer.from(encodeEntry({ ...entry, publicBytes }));
        }
        writeFileSync(path, Buffer.concat([bytes.subarray(0, offset), frame, bytes.subarray(offset + entry.frameSizeBytes)]));
        return { file: path, seqno: entry.seqno };
      }
      offset += entry.frameSizeBytes;
    }
  }
  throw new Error(`no entry holds "${text}"`);
}

describe('auditing a ledger and receipts across two recoveries', () => {
  let work: string;
  let oldDir: string;
  let old: StartedNode;
  let first: StartedNode;
  let second: StartedNode;
  let members: RecoveryMember[];
  /** Service certificates as files: the first service's, the first recovered one's, the newest. */
  const certs = { old: '', first: '', newest: '' };
  /** Receipts a client kept: JSON and COSE from the first service, JSON from the second. */
  const kept = { json: '', cose: '', middleJson: '' };
  let ledger: string;

  before(async () => {
    try {
      await setUp();
    } catch (e) {
      // The nodes' side of a set-up that failed (a request refused or reset, a node that stopped).
      const sides = [old, first, second].filter((n) => n !== undefined).map((n) => `node ${n.process.pid} (exit ${n.process.exitCode ?? n.process.signalCode ?? 'none'}):\n${n.output().slice(-3000)}`);
      if (e instanceof Error) e.message += `\n${sides.join('\n')}`;
      throw e;
    }
  });

  async function setUp(): Promise<void> {
    work = mkdtempSync(join(tmpdir(), 'covenant-recovery-audit-'));
    const file = (name: string, bytes: string | Buffer) => {
      writeFileSync(join(work, name), bytes);
      return join(work, name);
    };
    oldDir = mkdtempSync(join(tmpdir(), 'covenant-old-'));
    const prepared = await prepareRecoveryMembers(oldDir, 1, 1);
    members = prepared.members;
    old = await startNode({ dir: oldDir, configPatch: { ...FAST, command: { start: prepared.startPatch } } });
    members[0]!.identity = old.member;
    const never = await old.client.request('GET', '/node/service/endorsements');
    assert.deepEqual(never.body, { service_certificate: old.serviceCertificatePem, endorsements: [] }, 'a service never recovered');
    const oldTx = await writeRecords(old, 0, 12);
    kept.json = file('old_receipt.json', await receiptOf(old, '/node/receipt', oldTx));
    kept.cose = file('old_receipt.cose', await receiptOf(old, '/node/receipt/cose', oldTx));
    assert.equal(JSON.parse(readFileSync(kept.json, 'utf8')).receipt.service_endorsements, undefined, 'signed by the first service: no endorsement');
    certs.old = file('old_service_cert.pem', old.serviceCertificatePem);
    await old.kill();

    first = await startRecoverNode({ from: oldDir, previousServiceCertificatePem: old.serviceCertificatePem, user: old.user, member: old.member, configPatch: FAST });
    await openRecoveredService(first, old.serviceCertificatePem, members);
    const firstTx = await writeRecords(first, 1, 12);
    kept.middleJson = file('middle_receipt.json', await receiptOf(first, '/node/receipt', firstTx));
    certs.first = file('first_service_cert.pem', first.serviceCertificatePem);
    await first.kill();

    second = await startRecoverNode({ from: first.dir, previousServiceCertificatePem: first.serviceCertificatePem, user: old.user, member: old.member, configPatch: FAST });
    await openRecoveredService(second, first.serviceCertificatePem, members);
    await writeRecords(second, 2, 12);
    certs.newest = file('newest_service_cert.pem', second.serviceCertificatePem);
  }

  after(async () => {
    for (const node of [old, first, second]) if (node !== undefined) await node.kill();
    if (first !== undefined) removeRecoverDir(first);
    if (second !== undefined) removeRecoverDir(second);
    removeDir(oldDir);
    rmSync(work, { recursive: true, force: true });
  });

  test('a receipt kept from before the recoveries does not verify with the newest certificate alone', async () => {
    for (const receipt of [kept.json, kept.cose, kept.middleJson]) {
      const run = await covenant(['receipt', 'verify', receipt, '--service-cert', certs.newest]);
      assert.equal(run.code, 1, `${receipt}: ${run.stdout}`);
      assert.match(run.stderr, /GET \/node\/service\/endorsements/);
    }
  });

  test('the service publishes one endorsement per recovery; with that chain the kept receipts verify, as a file or fetched from a node', async () => {
    const answer = await second.client.request('GET', '/node/service/endorsements');
    assert.equal(answer.status, 200, answer.text);
    assert.equal(answer.body.service_certificate, second.serviceCertificatePem);
    const records = answer.body.endorsements as { endorsing_service_created_seqno: number; previous_service_certificate: string; endorsement: string }[];
    assert.deepEqual(
      records.map((r) => r.previous_service_certificate),
      [old.serviceCertificatePem, first.serviceCertificatePem],
      'oldest first',
    );
    assert.ok(records[0]!.endorsing_service_created_seqno < records[1]!.endorsing_service_created_seqno);
    const chain = join(work, 'endorsements.json');
    writeFileSync(chain, answer.text);

    const cases: [string, RegExp][] = [
      [kept.json, /^receipt verifies: transaction \d+\.\d+, .*\(endorsed through 2 earlier service identities of the chain given\)/],
      [kept.cose, /^COSE receipt verifies: transaction \d+\.\d+, .* under an earlier identity, endorsed through 2 earlier service identities/],
      [kept.middleJson, /^receipt verifies: .*\(endorsed through 1 earlier service identity of the chain given\)/],
    ];
    for (const [receipt, verdict] of cases) {
      const fromFile = await covenant(['receipt', 'verify', receipt, '--service-cert', certs.newest, '--endorsements', chain]);
      assert.equal(fromFile.code, 0, `${receipt}: ${fromFile.stderr}`);
      assert.match(fromFile.stdout, verdict);
      const fromNode = await covenant(['receipt', 'verify', receipt, '--service-cert', certs.newest, '--endorsements-from', second.address]);
      assert.equal(fromNode.code, 0, `${receipt}: ${fromNode.stderr}`);
      assert.match(fromNode.stdout, verdict);
    }
  });

  test('a tampered or incomplete chain is refused', async () => {
    const records = (await second.client.request('GET', '/node/service/endorsements')).body.endorsements as { endorsement: string }[];
    const [e1, e2] = records.map((r) => r.endorsement) as [string, string];
    const chains: [string, unknown][] = [
      ['without the newest endorsement', [e1]],
      ['without the oldest endorsement', [e2]],
      ['in the wrong order', [e2, e1]],
      ['with a tampered endorsement', [tamperedSignature(e1), e2]],
    ];
    for (const [what, chain] of chains) {
      const path = join(work, 'bad_chain.json');
      writeFileSync(path, JSON.stringify(chain));
      for (const receipt of [kept.json, kept.cose]) {
        const run = await covenant(['receipt', 'verify', receipt, '--service-cert', certs.newest, '--endorsements', path]);
        assert.equal(run.code, 1, `${what}, ${receipt}: ${run.stdout}`);
        assert.match(run.stderr, /InvalidServiceEndorsements|invalid service_endorsements|not endorsed|names neither/, `${what}, ${receipt}`);
      }
    }
    // With the chain, the receipt still verifies only against the newest certificate.
    writeFileSync(join(work, 'good_chain.json'), JSON.stringify([e1, e2]));
    const older = await covenant(['receipt', 'verify', kept.json, '--service-cert', certs.first, '--endorsements', join(work, 'good_chain.json')]);
    assert.equal(older.code, 1, older.stdout);
  });

  test('ledger verify passes on the twice-recovered ledger with the newest service certificate alone', async () => {
    assert.equal(await second.stop(), 0);
    ledger = join(work, 'ledger');
    cpSync(join(second.dir, 'ledger'), ledger, { recursive: true });
    const run = await covenant(['ledger', 'verify', ledger, '--service-cert', certs.newest]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /verified \d+ entries \(seqnos 1-\d+\)/);
    assert.match(run.stdout, /the ledger spans 3 service identities: recovered services began at seqnos \d+, \d+/);
  });

  test('ledger verify refuses the certificate of an earlier service', async () => {
    for (const cert of [certs.old, certs.first]) {
      const run = await covenant(['ledger', 'verify', ledger, '--service-cert', cert]);
      assert.equal(run.code, 1, run.stdout);
      assert.match(run.stderr, /FAILED \(UntrustedNodeCertificate\)/);
    }
  });

  test('ledger verify refuses an entry changed in the first epoch and in the newest', async () => {
    const cases: [string, 'reframed' | 'raw', RegExp][] = [
      ['epoch 0 record 3', 'reframed', /FAILED \(MerkleRootMismatch\)/],
      ['epoch 2 record 3', 'reframed', /FAILED \(MerkleRootMismatch\)/],
      ['epoch 0 record 5', 'raw', /FAILED \(LedgerCorrupted\)/],
      ['epoch 2 record 5', 'raw', /FAILED \(LedgerCorrupted\)/],
    ];
    for (const [i, [text, how, verdict]] of cases.entries()) {
      const copy = join(work, `changed${i}`);
      const changed = changeRecord(ledger, copy, text, how);
      const run = await covenant(['ledger', 'verify', copy, '--service-cert', certs.newest]);
      assert.equal(run.code, 1, `${text} (${how}): ${run.stdout}`);
      assert.match(run.stderr, verdict, text);
      assert.ok(run.stderr.includes(changed.file) || how === 'reframed', run.stderr);
    }
  });
});
