/**
 * A recovery reading a previous service's ledger (src/node/recovery/public-ledger.ts) on a
 * replica over an in-memory disk: the same tree and signatures whether the Merkle leaves are
 * hashed on the reading thread or by an entry leaf reader, signatures verified while the read goes
 * on (a forged one stops the read there, before any later damage), and consensus built from what
 * the read saw instead of reading every entry again.
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import { toHex } from '../../src/base/bytes.js';
import { MemoryLogger } from '../../src/base/log.js';
import { inlineEntryLeafReader, Ledger, type EntryLeafReader } from '../../src/ledger/index.js';
import { LedgerSecrets } from '../../src/node/identity/ledger-secrets.js';
import { readPublicLedger } from '../../src/node/recovery/public-ledger.js';
import { Replica } from '../../src/node/replica.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { generateSigningIdentities, writeSignedLedger, type SigningIdentities } from '../../src/testing/signed-ledger.js';

const ENTRIES = 300;
let identities: SigningIdentities;

before(async () => {
  identities = await generateSigningIdentities();
});

function signedLedger(forgeSignatureAt?: number): MemoryDisk {
  const disk = new MemoryDisk();
  writeSignedLedger({ disk, directory: 'ledger', identities, entries: ENTRIES, signatureEveryEntries: 50, chunkSizeBytes: 8 * 1024, ...(forgeSignatureAt ? { forgeSignatureAt } : {}) });
  return disk;
}

/** A disk holding the same files as `disk`. */
function copyOf(disk: MemoryDisk): MemoryDisk {
  const copy = new MemoryDisk();
  copy.ensureDirectory('ledger');
  for (const name of disk.listDirectory('ledger')) {
    const file = copy.createFile(copy.join('ledger', name));
    file.append([disk.readAll(disk.join('ledger', name))]);
    file.sync();
    file.close();
  }
  return copy;
}

/** Flips a byte in the middle of entry `seqno`'s frame (its crc no longer matches). */
function damageEntry(disk: MemoryDisk, seqno: number): void {
  const ledger = new Ledger({ disk, directory: 'ledger' });
  ledger.open();
  ledger.getEntry(seqno);
  const span = ledger.locateEntries(seqno, seqno).spans[0]!;
  ledger.close();
  const bytes = new Uint8Array(disk.readAll(span.path));
  bytes[Math.floor((span.startBytes + span.endBytes) / 2)]! ^= 0xff;
  disk.remove(span.path);
  const file = disk.createFile(span.path);
  file.append([bytes]);
  file.sync();
  file.close();
}

async function read(disk: MemoryDisk, leafReader: EntryLeafReader | undefined) {
  const replica = new Replica({ disk, logger: new MemoryLogger(), clock: new ManualClock(), ledgerDirectory: 'ledger', readOnlyLedgerDirectories: [], secrets: new LedgerSecrets(), durability: 'Replicated' });
  replica.openLedger(undefined, { recovery: true });
  const result = await readPublicLedger({ replica, logger: new MemoryLogger(), clock: new ManualClock(), leafReader, yieldControl: async () => undefined }, { seqno: 0, view: 0 });
  replica.settleRecoveredPublic(result.lastSignedSeqno);
  return { replica, result };
}

/** Each way of reading, on a disk of its own (a read settles the ledger it read: it cuts what it does not keep). */
function readers(makeDisk: () => MemoryDisk): [string, MemoryDisk, EntryLeafReader | undefined][] {
  const here = makeDisk();
  const byReader = makeDisk();
  return [
    ['leaves hashed here', here, undefined],
    ['leaves from a leaf reader', byReader, inlineEntryLeafReader(byReader)],
  ];
}

test('the whole ledger is read, with the same tree either way, and consensus gets its entries without reading them again', async () => {
  const roots: string[] = [];
  const ledger = signedLedger();
  for (const [what, disk, leafReader] of readers(() => copyOf(ledger))) {
    const { replica, result } = await read(disk, leafReader);
    assert.equal(result.stopped, undefined, what);
    assert.equal(result.lastSignedSeqno, ENTRIES, what);
    assert.equal(replica.lastSignedSeqno, ENTRIES, what);
    assert.equal(replica.tree.size, ENTRIES, what);
    roots.push(toHex(replica.tree.root()));
    const fromRead = [...replica.entriesFromLedger(1, ENTRIES)].map(({ view, seqno, kind }) => ({ view, seqno, kind }));
    // Taken once: the next call reads the files.
    const fromFiles = [...replica.entriesFromLedger(1, ENTRIES)].map(({ view, seqno, kind }) => ({ view, seqno, kind }));
    assert.deepEqual(fromRead, fromFiles, what);
    assert.equal(fromRead.filter((e) => e.kind === 'signature').length, ENTRIES / 50, what);
  }
  assert.equal(roots[0], roots[1]);
});

test('a signature that does not verify stops the read at it: what follows is dropped, and consensus gets only what it kept', async () => {
  for (const [what, disk, leafReader] of readers(() => signedLedger(200))) {
    const { replica, result } = await read(disk, leafReader);
    assert.equal(result.stopped?.seqno, 200, what);
    assert.match(result.stopped!.reason, /signature at seqno 200 .* does not verify/, what);
    assert.equal(result.lastSignedSeqno, 150, what);
    assert.equal(replica.lastSignedSeqno, 150, what);
    assert.equal(replica.store.version, 150, what);
    assert.equal(replica.tree.size, 150, what);
    assert.equal(replica.ledger.lastSeqno, 150, what);
    const entries = [...replica.entriesFromLedger(1, 150)];
    assert.equal(entries.length, 150, what);
    assert.equal(entries.at(-1)!.kind, 'signature', what);
  }
});

test('a signature still being verified when a later entry cannot be read is where the read stops, if it does not verify', async () => {
  const forgedThenDamaged = () => {
    const disk = signedLedger(200);
    damageEntry(disk, 201);
    return disk;
  };
  for (const [what, disk, leafReader] of readers(forgedThenDamaged)) {
    const { result } = await read(disk, leafReader);
    assert.equal(result.stopped?.seqno, 200, what);
    assert.equal(result.lastSignedSeqno, 150, what);
  }
  // Without the forgery, the damaged entry stops it, and the signature before it is kept.
  const damaged = () => {
    const disk = signedLedger();
    damageEntry(disk, 201);
    return disk;
  };
  for (const [what, disk, leafReader] of readers(damaged)) {
    const { result } = await read(disk, leafReader);
    assert.equal(result.stopped?.seqno, 201, what);
    assert.match(result.stopped!.reason, /entry 201 cannot be read/, what);
    assert.equal(result.lastSignedSeqno, 200, what);
  }
});
