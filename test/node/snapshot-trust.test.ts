/**
 * Trusting snapshots (src/node/snapshot-trust.ts, docs/snapshots.md): a snapshot taken by one
 * service identity verifies, once a recovery endorsed it, with the next identities through the
 * endorsements in its receipt (and still with the identity that took it); any flipped byte makes
 * it unverifiable; a node starts from the newest valid snapshot, skipping corrupt ones with a log
 * line; and the download routes never serve a snapshot that does not verify.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MemoryLogger } from '../../src/base/log.js';
import { isCovenantError } from '../../src/base/errors.js';
import { defaultNodeConfig } from '../../src/config/index.js';
import { Store, stringCodec } from '../../src/kv/index.js';
import { parseSnapshotFile } from '../../src/ledger/index.js';
import { ServiceIdentity } from '../../src/node/identity/service-identity.js';
import { endorseStartupSnapshot, ServedSnapshotVerdicts, snapshotEndorsedBy } from '../../src/node/snapshot-trust.js';
import { SnapshotManager, verifySnapshotFile, type SnapshotHost } from '../../src/node/snapshots.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { downloadRoutes, type DownloadDeps } from '../../src/http/frontends/downloads.js';
import type { RequestContext, RouteResponse } from '../../src/http/route.js';
import { committedSnapshotOf } from './committed-snapshot.js';

const SEQNO = 20;
const EVIDENCE = SEQNO + 1;
const NAME = `snapshot_${SEQNO}_${EVIDENCE}.committed`;

/** A committed snapshot at SEQNO whose receipt a node endorsed by `service` signed (a few bytes differ with `salt`). */
async function committedSnapshot(service: ServiceIdentity, salt = ''): Promise<Uint8Array> {
  const store = new Store();
  while (store.version < SEQNO) {
    const tx = store.beginTx();
    tx.map('public:records', stringCodec).put('k', `v${store.version}${salt}`);
    tx.apply();
  }
  return committedSnapshotOf(store, service);
}

async function serviceIdentity(): Promise<ServiceIdentity> {
  const service = new ServiceIdentity();
  await service.create(30);
  return service;
}

const refused = (e: unknown) => isCovenantError(e) && e.code === 'InvalidSnapshot';

let gen0: ServiceIdentity, gen1: ServiceIdentity, gen2: ServiceIdentity, unrelated: ServiceIdentity;
/** e01: gen1's endorsement of gen0 (the first recovery); e12: gen2's of gen1 (the second). */
let e01: string, e12: string;
let snapshot0: Uint8Array;

before(async () => {
  [gen0, gen1, gen2, unrelated] = await Promise.all([serviceIdentity(), serviceIdentity(), serviceIdentity(), serviceIdentity()]);
  e01 = await gen1.endorsePreviousIdentity(gen0.certificatePem, 30);
  e12 = await gen2.endorsePreviousIdentity(gen1.certificatePem, 30);
  snapshot0 = await committedSnapshot(gen0);
});

test('a snapshot verifies with the identity that took it only, until a recovery endorses it', () => {
  const verified = verifySnapshotFile(NAME, snapshot0, gen0.certificatePem);
  assert.deepEqual(verified.serviceEndorsements, []);
  assert.throws(() => verifySnapshotFile(NAME, snapshot0, gen1.certificatePem), (e: unknown) => refused(e) && /not endorsed by the service certificate/.test((e as Error).message));
});

test('endorsed by each recovery, a snapshot verifies with every identity since the one that took it, and no other', () => {
  const parts0 = parseSnapshotFile(snapshot0);
  const once = snapshotEndorsedBy(snapshot0, parts0, verifySnapshotFile(NAME, snapshot0, gen0.certificatePem).serviceEndorsements, e01);
  const parts1 = parseSnapshotFile(once);
  // The store, the metadata and therefore the evidence digest are untouched: only the receipt grew.
  assert.ok(Buffer.from(once.subarray(0, parts0.evidenceCoveredBytes)).equals(Buffer.from(snapshot0.subarray(0, parts0.evidenceCoveredBytes))));
  assert.deepEqual(parts1.digest, parts0.digest);
  assert.deepEqual(verifySnapshotFile(NAME, once, gen1.certificatePem).serviceEndorsements, [e01]);
  assert.deepEqual(verifySnapshotFile(NAME, once, gen0.certificatePem).serviceEndorsements, [], 'a recovery started again from this copy still verifies it');

  const twice = snapshotEndorsedBy(once, parts1, verifySnapshotFile(NAME, once, gen1.certificatePem).serviceEndorsements, e12);
  assert.deepEqual(verifySnapshotFile(NAME, twice, gen2.certificatePem).serviceEndorsements, [e01, e12]);
  assert.deepEqual(verifySnapshotFile(NAME, twice, gen1.certificatePem).serviceEndorsements, [e01]);
  assert.deepEqual(verifySnapshotFile(NAME, twice, gen0.certificatePem).serviceEndorsements, []);
  assert.throws(() => verifySnapshotFile(NAME, twice, unrelated.certificatePem), refused);
  // An endorsement out of order (the second recovery's appended to a copy the first never endorsed) chains nothing.
  const skipped = snapshotEndorsedBy(snapshot0, parts0, [], e12);
  assert.throws(() => verifySnapshotFile(NAME, skipped, gen2.certificatePem), refused);
});

test('a flipped byte anywhere in a snapshot, endorsed or not, makes it unverifiable', () => {
  const parts0 = parseSnapshotFile(snapshot0);
  const endorsed = snapshotEndorsedBy(snapshot0, parts0, [], e01);
  for (const [bytes, certificate] of [
    [snapshot0, gen0.certificatePem],
    [endorsed, gen1.certificatePem],
  ] as const) {
    const step = Math.max(1, Math.floor(bytes.byteLength / 40));
    for (let at = 0; at < bytes.byteLength; at += step) {
      const tampered = Uint8Array.from(bytes);
      tampered[at]! ^= 0x01;
      assert.throws(() => verifySnapshotFile(NAME, tampered, certificate), refused, `flipped byte ${at} of ${bytes.byteLength}`);
    }
  }
});

function snapshotManager(disk: MemoryDisk, logger: MemoryLogger): SnapshotManager {
  const unused = (): never => assert.fail('not used when loading snapshots');
  const host: SnapshotHost = {
    config: defaultNodeConfig({ snapshots: { directory: '/snapshots', read_only_directory: '/read-only' } }, '/'),
    disk,
    logger,
    clock: new ManualClock(),
    store: unused,
    tree: unused,
    encryptor: unused,
    serviceCertificatePem: unused,
    genesisConfiguration: unused,
    viewHistory: () => [],
    commitEvidence: unused,
    isPrimary: () => true,
    holdsPrivateDomain: () => true,
    requestSignature: unused,
    ledgerBytesAfter: unused,
    requestEvidence: unused,
    snapshotWriter: { write: unused, close: () => {} },
    snapshotWriterKind: 'inline',
  };
  return new SnapshotManager(host);
}

test('a node starts from the newest snapshot that verifies: a corrupt newer one is skipped with a log line', async () => {
  const disk = new MemoryDisk();
  const logger = new MemoryLogger();
  disk.ensureDirectory('/snapshots');
  disk.ensureDirectory('/read-only');
  const corrupt = Uint8Array.from(await committedSnapshot(gen0, 'newer'));
  corrupt[100]! ^= 0x01;
  const write = (path: string, bytes: Uint8Array) => {
    const file = disk.createFile(path);
    file.append([bytes]);
    file.close();
  };
  // The corrupt one is newer (a later evidence seqno of the same seqno sorts first) and read-only.
  write(`/read-only/snapshot_${SEQNO}_${EVIDENCE + 5}.committed`, corrupt);
  write(`/snapshots/${NAME}`, snapshot0);
  const found = snapshotManager(disk, logger).findStartupSnapshot(gen0.certificatePem);
  assert.equal(found?.name, NAME);
  assert.equal(found?.path, `/snapshots/${NAME}`);
  assert.ok(logger.messages('fail').some((m) => m.includes(`invalid snapshot /read-only/snapshot_${SEQNO}_${EVIDENCE + 5}.committed`)), logger.messages().join('\n'));
  assert.ok(disk.exists(`/read-only/snapshot_${SEQNO}_${EVIDENCE + 5}.committed`), 'a read-only directory is never written');
});

test('a recover node writes the snapshot it started from, endorsed, into its writable directory: the new identity then starts from it', async () => {
  const disk = new MemoryDisk();
  const logger = new MemoryLogger();
  disk.ensureDirectory('/read-only');
  const file = disk.createFile(`/read-only/${NAME}`);
  file.append([snapshot0]);
  file.close();
  // The recovery: started from the read-only copy, verified with the previous identity.
  const started = snapshotManager(disk, logger).findStartupSnapshot(gen0.certificatePem, { keepInvalid: true })!;
  assert.equal(started.path, `/read-only/${NAME}`);
  assert.equal(snapshotManager(disk, logger).findStartupSnapshot(gen1.certificatePem, { keepInvalid: true }), undefined, 'not yet for the new identity');
  endorseStartupSnapshot({ disk, logger, directory: '/snapshots' }, started, e01);
  assert.ok(logger.messages('info').some((m) => m.includes(`snapshot /snapshots/${NAME}: its receipt now carries the new service's endorsement`)));
  assert.deepEqual([...disk.readAll(`/read-only/${NAME}`)], [...snapshot0], 'the read-only copy is untouched');
  const restarted = snapshotManager(disk, logger).findStartupSnapshot(gen1.certificatePem)!;
  assert.equal(restarted.path, `/snapshots/${NAME}`);
  assert.deepEqual(restarted.serviceEndorsements, [e01]);
  assert.deepEqual(disk.listDirectory('/snapshots'), [NAME], 'no temporary file is left');
});

test('served snapshots are verified once per file version and certificate; a corrupt one is logged once', async () => {
  const logger = new MemoryLogger();
  let certificate = gen0.certificatePem;
  const verdicts = new ServedSnapshotVerdicts(() => certificate, (name, bytes, cert) => void verifySnapshotFile(name, bytes, cert), logger);
  let reads = 0;
  const read = (bytes: Uint8Array) => async () => {
    reads++;
    return bytes;
  };
  const stamp = { sizeBytes: snapshot0.byteLength, modifiedMs: 1 };
  assert.equal(await verdicts.verdict('/s/a', NAME, stamp, read(snapshot0)), undefined);
  assert.equal(await verdicts.verdict('/s/a', NAME, stamp, read(snapshot0)), undefined);
  assert.equal(reads, 1, 'the second request reuses the verdict');
  const corrupt = Uint8Array.from(snapshot0);
  corrupt[50]! ^= 0x01;
  const changed = { ...stamp, modifiedMs: 2 };
  assert.match((await verdicts.verdict('/s/a', NAME, changed, read(corrupt)))!, /evidence records another digest|does not verify|InvalidSnapshot|snapshot/);
  assert.match((await verdicts.verdict('/s/a', NAME, changed, read(corrupt)))!, /snapshot/);
  assert.equal(reads, 2);
  assert.equal(logger.messages('fail').filter((m) => m.startsWith('not serving snapshot /s/a')).length, 1, 'logged once');
  // A recovery changed the service certificate: the same file is judged again.
  certificate = gen1.certificatePem;
  assert.ok((await verdicts.verdict('/s/a', NAME, stamp, read(snapshot0))) !== undefined);
  assert.equal(reads, 3);
});

function context(path: string, params: Record<string, string>, query: Record<string, unknown>): RequestContext {
  return {
    method: 'GET',
    path,
    params,
    query: query as Record<string, string>,
    body: undefined,
    rawBody: Buffer.alloc(0),
    headers: {},
    caller: { kind: 'anonymous' },
    clientCertificateDer: undefined,
    remoteAddress: undefined,
    interfaceName: 'test',
    state: { read: () => assert.fail('a download reads no store'), write: () => assert.fail('a download writes nothing') },
  };
}

async function call(deps: DownloadDeps, template: string, ctx: RequestContext): Promise<RouteResponse> {
  const route = downloadRoutes(deps).find((r) => r.path === template)!;
  try {
    return await route.handler(ctx);
  } catch (e) {
    if (isCovenantError(e)) return { status: e.status, body: e.toBody() };
    throw e;
  }
}

test('the download routes never serve a snapshot that does not verify: the newest valid one is offered, a corrupt one named is 500 SnapshotCorrupted', async () => {
  const root = mkdtempSync(join(tmpdir(), 'covenant-snapshot-trust-'));
  try {
    const logger = new MemoryLogger();
    const verdicts = new ServedSnapshotVerdicts(() => gen0.certificatePem, (name, bytes, cert) => void verifySnapshotFile(name, bytes, cert), logger);
    const { stat, readFile } = await import('node:fs/promises');
    const deps: DownloadDeps = {
      ledgerDirectories: [root],
      snapshotDirectories: [root],
      redirectBase: () => undefined,
      snapshotVerdict: async (path, name) => {
        const info = await stat(path);
        return verdicts.verdict(path, name, { sizeBytes: info.size, modifiedMs: info.mtimeMs }, async () => new Uint8Array(await readFile(path)));
      },
    };
    const newer = `snapshot_${SEQNO}_${EVIDENCE + 5}.committed`;
    const corrupt = Buffer.from(await committedSnapshot(gen0, 'newer'));
    corrupt[corrupt.byteLength - 20]! ^= 0x01;
    writeFileSync(join(root, newer), corrupt);
    writeFileSync(join(root, NAME), snapshot0);
    const offered = await call(deps, '/node/snapshot', context('/node/snapshot', {}, {}));
    assert.equal(offered.status, 308);
    assert.equal(offered.headers!['location'], `/node/snapshot/${NAME}`, 'the corrupt newer one is skipped');
    const named = await call(deps, '/node/snapshot/{snapshot_name}', context(`/node/snapshot/${newer}`, { snapshot_name: newer }, {}));
    assert.equal(named.status, 500);
    assert.equal((named.body as { error: { code: string } }).error.code, 'SnapshotCorrupted');
    const good = await call(deps, '/node/snapshot/{snapshot_name}', context(`/node/snapshot/${NAME}`, { snapshot_name: NAME }, {}));
    assert.equal(good.status, 200);
    assert.ok(logger.messages('fail').some((m) => m.includes(`not serving snapshot ${join(root, newer)}`)));
    // With no valid snapshot newer than `since`, there is none to offer.
    assert.equal((await call(deps, '/node/snapshot', context('/node/snapshot', {}, { since: SEQNO }))).status, 404);
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
