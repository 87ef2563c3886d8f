/**
 * Receipts of compacted transactions (src/node/queries/receipts.ts, rebuilt-blocks.ts): the
 * block's leaves are re-read through the injected reader, never on the calling thread; a second
 * receipt in the block is served from the cache; re-reads beyond the bound are refused with 503
 * and Retry-After. And which receipt requests are 202 (known, not committed) or 404 (beyond
 * every seqno the node knows of).
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { TxId } from '../../src/base/ids.js';
import { decodeEntry, entryLeaf, Ledger, leavesOfEntries, type EntryLeafReader, type EntryLeavesRequest } from '../../src/ledger/index.js';
import { HistoryTree, type Receipt, type SignatureReceipt } from '../../src/merkle/index.js';
import { isNodeError } from '../../src/node/errors.js';
import type { LedgerSecrets } from '../../src/node/identity/ledger-secrets.js';
import type { ServiceIdentity } from '../../src/node/identity/service-identity.js';
import { Receipts } from '../../src/node/queries/receipts.js';
import { RebuiltBlocks } from '../../src/node/queries/rebuilt-blocks.js';
import { endorsementsForSignature } from '../../src/node/queries/service-endorsements.js';
import type { ServiceEndorsementRecord } from '../../src/node/tables.js';
import type { Replica } from '../../src/node/replica.js';
import { txStatus } from '../../src/node/tx-status.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { generateSigningIdentities, writeSignedLedger } from '../../src/testing/signed-ledger.js';

/** A memory disk that counts the reads made through it (all of them synchronous). */
class CountingDisk extends MemoryDisk {
  reads = 0;
  override read(path: string, positionBytes: number, lengthBytes: number): Uint8Array {
    this.reads++;
    return super.read(path, positionBytes, lengthBytes);
  }
  override readAll(path: string): Uint8Array {
    this.reads++;
    return super.readAll(path);
  }
}

/** A reader whose re-reads complete only when the test releases them. */
class HeldReader implements EntryLeafReader {
  readonly requests: { request: EntryLeavesRequest; release: () => void }[] = [];
  constructor(private readonly disk: MemoryDisk) {}
  leavesOf(request: EntryLeavesRequest): Promise<Uint8Array> {
    return new Promise((resolve) => {
      this.requests.push({ request, release: () => resolve(leavesOfEntries(request, (p, at, length) => this.disk.read(p, at, length))) });
    });
  }
  close(): void {}
}

const ENTRIES = 3300;
const commitEvidenceOf = (seqno: number) => `ce:${seqno}`;
const VIEW = 2;
let disk: CountingDisk;
let ledger: Ledger;
/** Never compacted: the proofs a receipt must carry. */
const full = new HistoryTree();

before(async () => {
  disk = new CountingDisk();
  const identities = await generateSigningIdentities();
  writeSignedLedger({ disk, directory: 'ledger', identities, entries: ENTRIES, signatureEveryEntries: 100, chunkSizeBytes: 64 * 1024, payloadBytes: 1000, commitEvidenceOf });
  ledger = new Ledger({ disk, directory: 'ledger' });
  ledger.open();
  for (let s = 1; s <= ENTRIES; s++) full.append(entryLeaf(decodeEntry(ledger.getEntry(s))));
});

/** `endorsementRecords`: the service endorsements table, ascending (none by default). */
function setUp(endorsementRecords: readonly ServiceEndorsementRecord[] = []) {
  // A fresh ledger reader each time, so no chunk index is cached from an earlier test.
  const fresh = new Ledger({ disk, directory: 'ledger' });
  fresh.open();
  const tree = HistoryTree.fromState(full.exportState());
  tree.compactBefore(ENTRIES - 1);
  assert.equal(tree.compactionPoint, 3072, 'blocks 0, 1 and 2 are compacted');
  const replica = {
    tree,
    store: { version: ENTRIES },
    commitSeqno: ENTRIES,
    readEntryFrame: (seqno: number) => decodeEntry(fresh.getEntry(seqno)),
    commitEvidence: (_view: number, seqno: number) => commitEvidenceOf(seqno),
    locateEntries: (first: number, last: number) => fresh.locateEntries(first, last),
  };
  const reader = new HeldReader(disk);
  const rebuiltBlocks = new RebuiltBlocks({ reader, locate: replica.locateEntries, cachedMax: 4, concurrentMax: 2 });
  const receipts = new Receipts({
    replica: replica as unknown as Replica,
    service: { holdsKey: false } as ServiceIdentity,
    secrets: {} as LedgerSecrets,
    rebuiltBlocks,
    serviceEndorsementsFor: (signatureSeqno) => endorsementsForSignature(endorsementRecords, signatureSeqno),
    statusOf: (txId) =>
      txStatus(txId, { currentView: VIEW, lastSeqno: replica.store.version, commitSeqno: replica.commitSeqno, history: { viewStarts: [{ view: VIEW, seqno: 1 }] } }),
    viewOf: () => VIEW,
  });
  return { replica, reader, rebuiltBlocks, receipts };
}

/** Every 100th seqno is a signature (its receipt has no proof): the tests ask for others. */
const tx = (seqno: number): TxId => ({ view: VIEW, seqno });

/** Whether a promise is still unsettled once the event loop has turned. */
async function unsettled(promise: Promise<unknown>): Promise<boolean> {
  const marker = Symbol('unsettled');
  const winner = await Promise.race([promise.then(() => 'settled', () => 'settled'), new Promise((r) => setImmediate(() => r(marker)))]);
  return winner === marker;
}

function proofOf(receipt: unknown, seqno: number): void {
  assert.deepEqual((receipt as Receipt).proof, full.inclusionProof(seqno - 1, ENTRIES - 1).path, `the proof of seqno ${seqno} under the committed root`);
}

test('a receipt needing an uncached block does not read it on the calling thread; a second receipt in the block is served from the cache', async () => {
  const { reader, rebuiltBlocks, receipts } = setUp();
  disk.reads = 0;
  const first = receipts.receipt(tx(5));
  // Synchronously: the entry itself (its chunk's index, then the entry), nothing of the other 1023.
  assert.ok(disk.reads <= 3, `${disk.reads} synchronous reads`);
  assert.equal(reader.requests.length, 1, 'the block goes to the reader');
  assert.deepEqual([reader.requests[0]!.request.firstSeqno, reader.requests[0]!.request.lastSeqno], [1, 1024]);
  assert.ok(await unsettled(first), 'the receipt waits for the re-read');
  reader.requests[0]!.release();
  proofOf(await first, 5);

  disk.reads = 0;
  const second = await receipts.receipt(tx(701));
  proofOf(second, 701);
  assert.equal(reader.requests.length, 1, 'no second re-read');
  assert.equal(rebuiltBlocks.rebuilds, 1);
  assert.equal(rebuiltBlocks.cachedCount, 1);
  // A transaction the tree still holds needs no re-read.
  proofOf(await receipts.receipt(tx(3101)), 3101);
  assert.equal(reader.requests.length, 1);
});

test('re-reads beyond the bound are refused with 503 and Retry-After; a receipt in a block being re-read waits for that re-read', async () => {
  const { reader, rebuiltBlocks, receipts } = setUp();
  const inBlock0 = receipts.receipt(tx(10));
  const inBlock1 = receipts.receipt(tx(1101));
  const alsoBlock0 = receipts.receipt(tx(20));
  const inBlock2 = receipts.receipt(tx(2101));
  await assert.rejects(inBlock2, (e: unknown) => {
    assert.ok(isNodeError(e, 'ReceiptRebuildsBusy'));
    assert.equal(e.status, 503);
    assert.equal(e.retryAfterSeconds, 1, 'answered with Retry-After: 1');
    assert.deepEqual(Object.keys(e.toBody().error).sort(), ['code', 'message']);
    return true;
  });
  assert.equal(reader.requests.length, 2, 'two re-reads at once, the third refused, the joiner joined');
  assert.equal(rebuiltBlocks.runningCount, 2);
  for (const r of reader.requests) r.release();
  proofOf(await inBlock0, 10);
  proofOf(await alsoBlock0, 20);
  proofOf(await inBlock1, 1101);
  assert.equal(rebuiltBlocks.runningCount, 0, 'the slots are free again');
  const retried = receipts.receipt(tx(2101));
  assert.equal(reader.requests.length, 3);
  reader.requests[2]!.release();
  proofOf(await retried, 2101);
});

test('a receipt beyond the last seqno the node knows of is TransactionUnknown (404); one known but not committed is pending (202)', async () => {
  const { replica, receipts } = setUp();
  replica.store.version = ENTRIES + 5;
  assert.equal(await receipts.receipt(tx(ENTRIES + 3)), 'pending');
  assert.equal(await receipts.receipt(tx(ENTRIES + 5)), 'pending');
  assert.equal(await receipts.coseReceipt(tx(ENTRIES + 5)), 'pending');
  for (const txId of [tx(ENTRIES + 6), { view: VIEW, seqno: 999_999_999_999_999 }, { view: VIEW + 1, seqno: 1_000_000 }]) {
    for (const ask of [() => receipts.receipt(txId), () => receipts.coseReceipt(txId)]) {
      await assert.rejects(ask(), (e: unknown) => isNodeError(e, 'TransactionUnknown') && e.status === 404 && /Unknown/.test(e.message));
    }
  }
  await assert.rejects(receipts.receipt(tx(0)), (e: unknown) => isNodeError(e, 'TransactionInvalid'));
});

test('a receipt carries the service endorsements for the seqno of the signature that signed it, not of the transaction it proves', async () => {
  const record = (seqno: number): ServiceEndorsementRecord => ({ endorsing_service_created_seqno: seqno, previous_service_certificate: `cert before ${seqno}`, endorsement: `endorsement at ${seqno}` });
  // Services began at 3200 and 3400 (made up: the receipts are only built here, not verified).
  const { receipts } = setUp([record(3200), record(3400)]);
  // Transaction 3101 is proven under the committed root, signed at 3300: only the later service's endorsement.
  const proven = (await receipts.receipt(tx(3101))) as Receipt;
  proofOf(proven, 3101);
  assert.deepEqual(proven.service_endorsements, ['endorsement at 3400']);
  // Signature receipts: each carries those above its own seqno.
  const signedAt = async (seqno: number) => ((await receipts.receipt(tx(seqno))) as SignatureReceipt).service_endorsements;
  assert.deepEqual(await signedAt(3100), ['endorsement at 3200', 'endorsement at 3400']);
  assert.deepEqual(await signedAt(3200), ['endorsement at 3400'], 'a signature at the seqno a service began is that service\'s');
  assert.deepEqual(await signedAt(3300), ['endorsement at 3400']);

  // Signed under the current identity: the field is absent, not empty.
  const current = setUp([record(3200)]).receipts;
  assert.ok(!('service_endorsements' in ((await current.receipt(tx(3101))) as Receipt)));
  assert.ok(!('service_endorsements' in ((await current.receipt(tx(3300))) as SignatureReceipt)));
});
