// A restarting node replays its ledger and checks its startup snapshot's file one bounded slice
// per turn (src/node/restart-slices.ts): other work runs between slices, any slice size gives the
// store, tree and commit of the one-call replay, the file check gives the one-call verdict, and the
// same damage fails the same way.
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Clock } from '../../src/base/clock.js';
import { toHex } from '../../src/base/bytes.js';
import { MemoryLogger } from '../../src/base/log.js';
import { sha256 } from '../../src/crypto/index.js';
import { LedgerEncryptor, Store, stringCodec } from '../../src/kv/index.js';
import { Ledger } from '../../src/ledger/index.js';
import { LedgerSecrets } from '../../src/node/identity/ledger-secrets.js';
import { ServiceIdentity } from '../../src/node/identity/service-identity.js';
import { replaySliceEntriesMax, snapshotDigestSliceBytes, snapshotFileReadSliceBytes } from '../../src/node/limits.js';
import { Replica } from '../../src/node/replica.js';
import { findStartupSnapshotInSlices, replayInSlices, startupSnapshotAtOnce, verifySnapshotFileInSlices } from '../../src/node/restart-slices.js';
import { verifySnapshotFile } from '../../src/node/snapshots.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { generateSigningIdentities, writeSignedLedger, type SigningIdentities } from '../../src/testing/signed-ledger.js';
import { TurnClock } from './turn-clock.js';
import { committedSnapshotOf } from './committed-snapshot.js';

/** Runs `work` on `clock` to its end; its outcome (or the error it failed with) and the turns it took. */
async function settle<T>(clock: TurnClock, work: Promise<T>, turnsMax = 100_000): Promise<{ value?: T; error?: unknown; turns: number }> {
  let outcome: { value?: T; error?: unknown } | undefined;
  work.then(
    (value) => (outcome = { value }),
    (error: unknown) => (outcome = { error }),
  );
  const turns = await clock.runUntil(() => outcome !== undefined, turnsMax);
  return { ...outcome!, turns };
}

const ENTRIES = 2 * replaySliceEntriesMax + 321;
let identities: SigningIdentities;

let ledgerFiles: Map<string, Uint8Array>;

before(async () => {
  identities = await generateSigningIdentities();
  const disk = new MemoryDisk();
  writeSignedLedger({ disk, directory: 'ledger', identities, entries: ENTRIES, signatureEveryEntries: 100, chunkSizeBytes: 64 * 1024 });
  ledgerFiles = new Map(disk.listDirectory('ledger').map((name) => [name, disk.readAll(disk.join('ledger', name))]));
});

/** A disk holding the one ledger of these tests (its signatures differ from one writing to the next). */
function ledgerDisk(): MemoryDisk {
  const disk = new MemoryDisk();
  disk.ensureDirectory('ledger');
  for (const [name, bytes] of ledgerFiles) {
    const file = disk.createFile(disk.join('ledger', name));
    file.append([bytes]);
    file.sync();
    file.close();
  }
  return disk;
}

function replicaOn(disk: MemoryDisk, clock: Clock): Replica {
  const replica = new Replica({ disk, logger: new MemoryLogger(), clock, ledgerDirectory: 'ledger', readOnlyLedgerDirectories: [], secrets: new LedgerSecrets(), durability: 'Replicated' });
  replica.openLedger(undefined);
  return replica;
}

/** What a replay leaves: the store's snapshot bytes, the tree's root and the commit. */
function outcomeOf(replica: Replica): { snapshot: string; root: string; commit: number; version: number } {
  const snapshot = toHex(sha256(replica.store.serializeSnapshot(new LedgerEncryptor(new Uint8Array(32).fill(3)), 1)));
  return { snapshot, root: toHex(replica.tree.root()), commit: replica.commitSeqno, version: replica.store.version };
}

/** Flips a byte in the middle of entry `seqno`'s frame. */
function damageEntry(disk: MemoryDisk, seqno: number): void {
  const ledger = new Ledger({ disk, directory: 'ledger' });
  ledger.open();
  const span = ledger.locateEntries(seqno, seqno).spans[0]!;
  ledger.close();
  const bytes = new Uint8Array(disk.readAll(span.path));
  bytes[Math.floor((span.startBytes + span.endBytes) / 2)]! ^= 0xff;
  rewrite(disk, span.path, bytes);
}

function rewrite(disk: MemoryDisk, path: string, bytes: Uint8Array): void {
  disk.remove(path);
  const file = disk.createFile(path);
  file.append([bytes]);
  file.sync();
  file.close();
}

test('a ledger replayed in slices gives the store, tree and commit of the one-call replay, whatever the slice size', async () => {
  const oneCall = replicaOn(ledgerDisk(), new TurnClock());
  oneCall.replay(0);
  const expected = outcomeOf(oneCall);
  assert.equal(expected.version, ENTRIES);
  for (const entriesMax of [1, 7, 1000, replaySliceEntriesMax]) {
    const clock = new TurnClock();
    const replica = replicaOn(ledgerDisk(), clock);
    const { value, turns } = await settle(clock, replayInSlices(clock, replica, 0, () => false, entriesMax));
    assert.equal(value, true);
    assert.equal(turns, Math.ceil(ENTRIES / entriesMax), `${entriesMax} entries a turn`);
    assert.deepEqual(outcomeOf(replica), expected, `${entriesMax} entries a turn`);
  }
});

test('a replay slice ends once it has spent snapshotSliceMs, and other work runs between slices', async () => {
  // Every look at the clock moves it 1 ms: a slice ends after about snapshotSliceMs entries.
  const clock = new TurnClock(1);
  const replica = replicaOn(ledgerDisk(), clock);
  let handled = 0;
  let done = false;
  const peer = (): void => {
    if (!done) handled++;
    clock.defer(peer);
  };
  clock.defer(peer);
  const { value, turns } = await settle(
    clock,
    replayInSlices(clock, replica, 0).then((v) => {
      done = true;
      return v;
    }),
  );
  assert.equal(value, true);
  assert.ok(turns > 2 * Math.ceil(ENTRIES / replaySliceEntriesMax) * 10, `${turns} turns: time, not the entry bound, ended the slices`);
  assert.ok(handled >= turns / 2 - 1, `${handled} messages handled over ${turns} turns`);
  assert.equal(replica.store.version, ENTRIES);
});

test('a damaged entry fails the sliced replay as it fails the one-call replay, and a stop between slices ends it', async () => {
  const damagedAt = replaySliceEntriesMax + 17;
  const disk = ledgerDisk();
  damageEntry(disk, damagedAt);
  let oneCallError: unknown;
  const oneCall = replicaOn(disk, new TurnClock());
  try {
    oneCall.replay(0);
  } catch (e) {
    oneCallError = e;
  }
  assert.ok(oneCallError instanceof Error, 'the one-call replay fails');
  const clock = new TurnClock();
  const replica = replicaOn(disk, clock);
  const { error } = await settle(clock, replayInSlices(clock, replica, 0));
  assert.ok(error instanceof Error);
  assert.equal(error.message, oneCallError.message);
  assert.ok(oneCall.store.version < damagedAt);
  assert.equal(replica.store.version, oneCall.store.version, 'the same entries were applied before the failure');

  const stopClock = new TurnClock();
  const stopping = replicaOn(ledgerDisk(), stopClock);
  let turns = 0;
  const { value } = await settle(stopClock, replayInSlices(stopClock, stopping, 0, () => ++turns > 2, 100));
  assert.equal(value, false);
  assert.equal(stopping.store.version, 200, 'two slices of 100, then the stop');
  assert.equal(stopClock.queue.length, 0, 'no slice is scheduled after the stop');
});

// ---------------------------------------------------------------- the startup snapshot's file

const SEQNO = 20;
const EVIDENCE = SEQNO + 1;
const NAME = `snapshot_${SEQNO}_${EVIDENCE}.committed`;
const RECORDS = 45_000;
let service: ServiceIdentity;
let fileBytes: Uint8Array;

/** A committed snapshot at SEQNO (more than one read slice: RECORDS records of 200 bytes) whose receipt a node of `service` signed. */
async function committedSnapshot(): Promise<Uint8Array> {
  const store = new Store();
  const tx = store.beginTx();
  for (let i = 0; i < RECORDS; i++) tx.map(i % 2 === 0 ? 'records' : 'public:records', stringCodec).put(`k${i}`, 'x'.repeat(200));
  tx.apply();
  while (store.version < SEQNO) {
    const next = store.beginTx();
    next.map('public:records', stringCodec).put('last', `v${store.version}`);
    next.apply();
  }
  return committedSnapshotOf(store, service);
}

before(async () => {
  service = new ServiceIdentity();
  await service.create(30);
  fileBytes = await committedSnapshot();
});

function diskWith(bytes: Uint8Array, name = NAME): MemoryDisk {
  const disk = new MemoryDisk();
  disk.ensureDirectory('snapshots');
  const file = disk.createFile(disk.join('snapshots', name));
  file.append([bytes]);
  file.sync();
  file.close();
  return disk;
}

function oneCallVerdict(bytes: Uint8Array): string {
  try {
    const found = verifySnapshotFile(NAME, bytes, service.certificatePem);
    return `ok ${found.seqno} ${found.evidenceSeqno} ${toHex(found.parts.digest)} ${found.parts.kv.byteLength}`;
  } catch (e) {
    return `failed: ${(e as Error).message}`;
  }
}

async function slicedVerdict(bytes: Uint8Array): Promise<{ verdict: string; turns: number }> {
  const clock = new TurnClock();
  const disk = diskWith(bytes);
  const { value, error, turns } = await settle(clock, verifySnapshotFileInSlices(clock, disk, NAME, disk.join('snapshots', NAME), service.certificatePem));
  const verdict = error === undefined ? `ok ${value!.seqno} ${value!.evidenceSeqno} ${toHex(value!.parts.digest)} ${value!.parts.kv.byteLength}` : `failed: ${(error as Error).message}`;
  return { verdict, turns };
}

test('a startup snapshot read and hashed over several turns gets the one-call verdict, valid or damaged anywhere', async () => {
  assert.ok(fileBytes.byteLength > snapshotFileReadSliceBytes, `${fileBytes.byteLength} bytes: more than one read slice`);
  const valid = await slicedVerdict(fileBytes);
  assert.match(valid.verdict, /^ok 20 21 /);
  assert.equal(valid.verdict, oneCallVerdict(fileBytes));
  assert.ok(valid.turns > Math.ceil(fileBytes.byteLength / snapshotFileReadSliceBytes), `${valid.turns} turns`);
  // A byte flipped in the file header, the store section, the metadata and the receipt.
  for (const at of [9, 40, Math.floor(fileBytes.byteLength / 2), fileBytes.byteLength - 900, fileBytes.byteLength - 3]) {
    const damaged = new Uint8Array(fileBytes);
    damaged[at]! ^= 0x40;
    const expected = oneCallVerdict(damaged);
    assert.match(expected, /^failed: /, `a flip at ${at} is found`);
    assert.equal((await slicedVerdict(damaged)).verdict, expected, `a flip at ${at}`);
  }
  // Cut short.
  const cut = fileBytes.subarray(0, fileBytes.byteLength - 5000);
  assert.equal((await slicedVerdict(cut)).verdict, oneCallVerdict(cut));
});

test('the startup snapshot search skips and deletes an invalid newer file, and finds the valid one over several turns', async () => {
  const disk = diskWith(fileBytes);
  const newer = 'snapshot_30_31.committed';
  const file = disk.createFile(disk.join('snapshots', newer));
  file.append([fileBytes.subarray(0, 1000)]);
  file.close();
  const clock = new TurnClock();
  const logger = new MemoryLogger();
  const search = { clock, disk, logger, directory: 'snapshots', readOnlyDirectory: undefined, stopped: () => false };
  const { value } = await settle(clock, findStartupSnapshotInSlices(search, service.certificatePem));
  assert.equal(value?.name, NAME);
  assert.equal(value?.path, disk.join('snapshots', NAME));
  assert.equal(disk.exists(disk.join('snapshots', newer)), false, 'the invalid file in snapshots.directory is deleted');
  assert.ok(logger.entries.some((e) => e.msg.includes('invalid snapshot') && e.msg.includes(newer)));
});

test('a search whose candidates are all small is done in this turn; one that must read a large file is left to the slices', () => {
  const disk = diskWith(fileBytes);
  const search = { clock: new TurnClock(), disk, logger: new MemoryLogger(), directory: 'snapshots', readOnlyDirectory: undefined, stopped: () => false };
  assert.ok(fileBytes.byteLength > snapshotDigestSliceBytes);
  assert.equal(startupSnapshotAtOnce(search, service.certificatePem), undefined, 'a large candidate: searched in slices');
  // A small invalid newer file is dropped at once; the large valid one still needs slices.
  const small = disk.createFile(disk.join('snapshots', 'snapshot_30_31.committed'));
  small.append([fileBytes.subarray(0, 1000)]);
  small.close();
  assert.equal(startupSnapshotAtOnce(search, service.certificatePem), undefined);
  assert.equal(disk.exists(disk.join('snapshots', 'snapshot_30_31.committed')), false);
  // Only small files, none valid: the outcome (none) at once.
  assert.deepEqual(startupSnapshotAtOnce(search, service.certificatePem, { accept: (seqno) => seqno > SEQNO }), { snapshot: undefined });
});

test('consensus builds its log from what the replay recorded: the entries a fresh read of the ledger gives', async () => {
  const metadata = (replica: Replica) => [...replica.entriesFromLedger(1, ENTRIES)].map((e) => `${e.seqno}.${e.view}.${e.kind}`);
  const fresh = metadata(replicaOn(ledgerDisk(), new TurnClock()));
  assert.equal(fresh.length, ENTRIES);
  assert.ok(fresh.some((m) => m.endsWith('.signature')) && fresh.some((m) => m.endsWith('.normal')));
  const clock = new TurnClock();
  const disk = ledgerDisk();
  const replica = replicaOn(disk, clock);
  await settle(clock, replayInSlices(clock, replica, 0, () => false, 1000));
  // The ledger's files are gone: only what the replay recorded can answer.
  for (const name of disk.listDirectory('ledger')) if (name.startsWith('ledger_')) disk.remove(disk.join('ledger', name));
  assert.deepEqual(metadata(replica), fresh);
});
