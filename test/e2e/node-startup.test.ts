/**
 * End to end: starting a node the way an operator does. Bad configurations are refused with the
 * key named and nothing written; a Start node run again resumes its service, and a fresh Start
 * refuses someone else's ledger; JSON logs carry the spec's
 * fields; and the ledger the node leaves on disk verifies offline (frames, chunk boundaries,
 * Merkle roots and node signatures).
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, rmSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { utf8 } from '../../src/base/bytes.js';
import { loadPublicKey, verifyEcdsa } from '../../src/crypto/index.js';
import { decodeWriteSet } from '../../src/kv/index.js';
import { EntryFlags, hasFlag, readLedgerDirectories, writeSetDigest } from '../../src/ledger/index.js';
import { HistoryTree, leafDigest } from '../../src/merkle/index.js';
import { FsDisk } from '../../src/platform/fs-disk.js';
import { Tables, type SignatureRecord } from '../../src/node/tables.js';
import { prepareStartNode, removeDir, restartNode, spawnNode, startNode, waitForExit } from '../../src/testing/node-process.js';
import { waitCommitted } from '../../src/testing/network.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function listTree(dir: string): string[] {
  return readdirSync(dir, { recursive: true }).map(String).sort();
}

async function runToExit(configPath: string, dir: string, env?: Record<string, string>): Promise<{ code: number | null; output: string }> {
  const spawned = spawnNode(configPath, dir, env);
  const code = await waitForExit(spawned.process);
  return { code, output: spawned.output() };
}

test('a bad configuration exits non-zero, names the key, and writes nothing', async () => {
  const { dir, configPath } = await prepareStartNode();
  try {
    const good = JSON.parse(readFileSync(configPath, 'utf8'));
    // Written before the run (and before its "nothing written" baseline).
    const textFile = (name: string, text: string) => {
      writeFileSync(join(dir, name), text);
      return name;
    };
    const cases: [string, (c: any) => void, RegExp][] = [
      ['unknown key', (c) => (c.ledger.chunksize = '1MB'), /ledger\.chunksize/],
      ['wrong type', (c) => (c.ledger_signatures = { tx_count: 'many' }), /ledger_signatures\.tx_count/],
      ['bad size', (c) => (c.ledger.chunk_size = '5XB'), /ledger\.chunk_size/],
      ['bad duration', (c) => (c.ledger_signatures = { delay: 'soon' }), /ledger_signatures\.delay/],
      ['missing data file', (c) => (c.node_data_json_file = 'nowhere.json'), /node_data_json_file/],
      ['bad command', (c) => (c.command.type = 'Begin'), /command\.type/],
      ['missing member certificate', (c) => (c.command.start.members[0].certificate_file = 'nobody_cert.pem'), /command\.start\.members\[0\]\.certificate_file/],
      ['member certificate not a certificate', (c) => (c.command.start.members[0].certificate_file = textFile('not_a_cert.pem', 'notpem')), /command\.start\.members\[0\]\.certificate_file/],
      ['user certificate not a certificate', (c) => (c.command.start.users = [{ certificate_file: textFile('user.pem', 'notpem') }]), /command\.start\.users\[0\]\.certificate_file/],
      [
        'encryption key not a key',
        (c) => (c.command.start.members[0].encryption_public_key_file = textFile('enc.pem', '-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n')),
        /command\.start\.members\[0\]\.encryption_public_key_file/,
      ],
      ['constitution that does not compile', (c) => (c.command.start.constitution_files = [textFile('broken.js', 'export function validate( {')]), /command\.start\.constitution_files/],
      ['constitution without apply', (c) => (c.command.start.constitution_files = [textFile('partial.js', 'export function validate() {}\nexport function resolve() {}')]), /does not export a function "apply"/],
    ];
    for (const [name, mutate, keyPattern] of cases) {
      const config = structuredClone(good);
      mutate(config);
      writeFileSync(configPath, JSON.stringify(config));
      const before = listTree(dir);
      const { code, output } = await runToExit(configPath, dir);
      assert.equal(code, 2, `${name}: a configuration error\n${output}`);
      assert.match(output, keyPattern, name);
      assert.deepEqual(listTree(dir), before, `${name}: nothing written`);
    }
  } finally {
    removeDir(dir);
  }
});

test('the framing and entry-size variables: bad values exit 2 and write nothing; inline framing runs a node that commits', async () => {
  const { dir, configPath } = await prepareStartNode();
  try {
    const cases: [Record<string, string>, RegExp][] = [
      [{ COVENANT_FRAMING: 'threads' }, /COVENANT_FRAMING must be "worker" or "inline", not "threads"/],
      [{ COVENANT_BUGGIFY_FRAME_DELAY_MS: 'soon' }, /COVENANT_BUGGIFY_FRAME_DELAY_MS must be a number of milliseconds/],
      [{ COVENANT_BUGGIFY_MAX_ENTRY_BYTES: '1e6' }, /COVENANT_BUGGIFY_MAX_ENTRY_BYTES must be a number of bytes up to 66060288, not "1e6"/],
    ];
    for (const [env, message] of cases) {
      const before = listTree(dir);
      const { code, output } = await runToExit(configPath, dir, env);
      assert.equal(code, 2, output);
      assert.match(output, message);
      assert.deepEqual(listTree(dir), before, 'nothing written');
    }
  } finally {
    removeDir(dir);
  }
  const node = await startNode({ env: { COVENANT_FRAMING: 'inline' } });
  try {
    const write = await node.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'framed in line' }, identity: node.user });
    assert.equal(write.status, 200, write.text);
    const txId = write.headers['x-covenant-transaction-id'] as string;
    for (let i = 0; i < 200; i++) {
      if ((await node.client.request('GET', `/app/tx?transaction_id=${txId}`)).body.status === 'Committed') break;
      await sleep(25);
    }
    assert.equal((await node.client.request('GET', `/app/tx?transaction_id=${txId}`)).body.status, 'Committed');
    assert.equal((await node.client.request('GET', '/app/log/private?id=1', { identity: node.user })).body.msg, 'framed in line');
  } finally {
    await node.stop();
    removeDir(node.dir);
  }
});

test('a Start node run again with its configuration resumes its service, after a stop or a crash', async () => {
  let node = await startNode();
  try {
    const write = await node.client.request('POST', '/app/log/private', { body: { id: 1, msg: 'before the crash' }, identity: node.user });
    assert.equal(write.status, 200, write.text);
    const txId = write.headers['x-covenant-transaction-id'] as string;
    await waitCommitted(node, txId);
    const serviceCertificate = node.serviceCertificatePem;
    await node.kill();
    node = await restartNode(node);
    assert.equal(readFileSync(join(node.dir, 'service_cert.pem'), 'utf8'), serviceCertificate, 'the same service, not a new one');
    assert.equal((await node.client.request('GET', '/app/log/private?id=1', { identity: node.user })).body.msg, 'before the crash');
    // Committed again once the restarted node has been elected and signed (its commit is learnt anew).
    await waitCommitted(node, txId);
    const after = await node.client.request('POST', '/app/log/private', { body: { id: 2, msg: 'after the crash' }, identity: node.user });
    assert.equal(after.status, 200, after.text);
    await waitCommitted(node, after.headers['x-covenant-transaction-id'] as string);
    assert.equal(await node.stop(), 0);
    node = await restartNode(node);
    assert.equal((await node.client.request('GET', '/app/log/private?id=2', { identity: node.user })).body.msg, 'after the crash');
  } finally {
    await node.stop();
    removeDir(node.dir);
  }
});

test('a fresh Start on a ledger directory that holds a ledger (someone else\'s: no node state of its own) is refused', async () => {
  const node = await startNode();
  try {
    assert.equal(await node.stop(), 0);
    rmSync(join(node.dir, 'node_state.json'));
    const { code, output } = await runToExit(node.configPath, node.dir);
    assert.notEqual(code, 0);
    assert.match(output, /already holds a ledger/);
  } finally {
    removeDir(node.dir);
  }
});

test('JSON logs carry the spec fields; node and service data are recorded', async () => {
  const prepared = await prepareStartNode({
    configPatch: {
      logging: { format: 'Json' },
      node_data_json_file: 'node_data.json',
      service_data_json_file: 'service_data.json',
    },
  });
  writeFileSync(join(prepared.dir, 'node_data.json'), JSON.stringify({ correlation: 'rack-7' }));
  writeFileSync(join(prepared.dir, 'service_data.json'), JSON.stringify({ owner: 'consortium' }));
  const node = await startNode({ dir: prepared.dir, configPatch: { logging: { format: 'Json' }, node_data_json_file: 'node_data.json', service_data_json_file: 'service_data.json' } });
  try {
    const self = await node.client.request('GET', '/node/network/nodes/self');
    assert.deepEqual(self.body.node_data, { correlation: 'rack-7' });
    const network = await node.client.request('GET', '/node/network');
    assert.deepEqual(network.body.service_data, { owner: 'consortium' });
    await sleep(100);
    const lines = node.output().split('\n').filter((l) => l.trim().length > 0);
    assert.ok(lines.length >= 3);
    for (const line of lines) {
      const record = JSON.parse(line);
      assert.match(record.h_ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
      assert.equal(typeof record.file, 'string');
      assert.equal(typeof record.number, 'number');
      assert.ok(['info', 'debug', 'trace', 'fail', 'fatal'].includes(record.level));
      assert.equal(typeof record.msg, 'string');
      if ('e_ts' in record) assert.match(record.e_ts, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
    }
    // The node core's lines come from the trusted part; the command's own lines from the host.
    const records = lines.map((l) => JSON.parse(l) as { msg: string; e_ts?: string });
    assert.ok(records.some((r) => /service started/.test(r.msg) && r.e_ts !== undefined), 'node core lines carry e_ts');
    assert.ok(records.some((r) => /RPC interface .* listening/.test(r.msg) && r.e_ts === undefined), 'host-side lines have no e_ts');
  } finally {
    await node.stop();
    removeDir(node.dir);
  }
});

test('the ledger on disk verifies offline: chunk boundaries, Merkle roots and signatures', async () => {
  const node = await startNode({ configPatch: { ledger: { chunk_size: '2KB' }, ledger_signatures: { tx_count: 7, delay: '20ms' } } });
  try {
    let last = '';
    for (let i = 0; i < 80; i++) {
      const answer = await node.client.request('POST', i % 2 ? '/app/log/public' : '/app/log/private', {
        body: { id: i, msg: `message ${i}` },
        identity: node.user,
      });
      assert.equal(answer.status, 200);
      last = answer.headers['x-covenant-transaction-id'] as string;
    }
    for (;;) {
      const status = await node.client.request('GET', `/app/tx?transaction_id=${last}`);
      if (status.body.status === 'Committed') break;
      await sleep(20);
    }
  } finally {
    assert.equal(await node.stop(), 0);
  }
  try {
    const disk = new FsDisk();
    const nodeKey = loadPublicKey(readFileSync(join(node.dir, 'node_cert.pem'), 'utf8'));
    const tree = new HistoryTree();
    let signatures = 0;
    let privateSeen = false;
    let entries = 0;
    for (const { entry } of readLedgerDirectories(disk, [join(node.dir, 'ledger')])) {
      entries++;
      assert.equal(entry.seqno, entries, 'seqnos are contiguous from 1');
      if (hasFlag(entry.flags, EntryFlags.SIGNATURE)) {
        const writes = decodeWriteSet(entry.publicBytes);
        const record = JSON.parse(utf8.decode(writes.get(Tables.signatures)!.get('0')!)) as SignatureRecord;
        assert.equal(record.seqno, entry.seqno);
        // The signature covers the root of every entry before it, signed with the node key.
        assert.equal(record.root, Buffer.from(tree.root()).toString('hex'), `root at signature ${entry.seqno}`);
        assert.ok(verifyEcdsa(nodeKey, tree.root(), Buffer.from(record.sig, 'base64'), 'der'), `signature ${entry.seqno} verifies`);
        signatures++;
      }
      if (entry.privateBytes.length > 0) {
        privateSeen = true;
        // Private records are encrypted: the message text never appears in clear.
        assert.ok(!Buffer.from(entry.privateBytes).toString('latin1').includes('message'));
      }
      tree.append(leafDigest(writeSetDigest(entry), entry.commitEvidenceDigest, entry.claimsDigest));
    }
    assert.ok(entries > 80);
    assert.ok(signatures >= 10);
    assert.ok(privateSeen);
    const committed = readdirSync(join(node.dir, 'ledger')).filter((f) => f.endsWith('.committed'));
    assert.ok(committed.length >= 3, 'a 2KB chunk size cuts several committed chunks');
  } finally {
    removeDir(node.dir);
  }
});
