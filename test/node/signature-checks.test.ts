/**
 * A backup verifies its primary's signatures while their entries sync (src/node/signature-checks.ts):
 * a Synced replica with a verifier counts no entry from a signature still being verified on as
 * durable, whatever its sync did, so consensus acknowledges a signature only once it is both
 * verified and synced; a forged one stops the node and is never counted; a rolled-back one's
 * late verdict changes nothing. The entries are a real signed ledger's (src/testing/signed-ledger.ts).
 */
import { before, test } from 'node:test';
import assert from 'node:assert/strict';
import type { KeyObject } from 'node:crypto';
import { InvariantError } from '../../src/base/assert.js';
import { MemoryLogger } from '../../src/base/log.js';
import type { Entry } from '../../src/consensus/index.js';
import { verifyEcdsa, type SignatureVerifier } from '../../src/crypto/index.js';
import { decodeEntry, EntryFlags, hasFlag, Ledger } from '../../src/ledger/index.js';
import { LedgerSecrets } from '../../src/node/identity/ledger-secrets.js';
import { signatureChecksInFlightMax } from '../../src/node/limits.js';
import { Replica } from '../../src/node/replica.js';
import { ManualClock } from '../../src/testing/manual-clock.js';
import { MemoryDisk } from '../../src/testing/memory-disk.js';
import { generateSigningIdentities, writeSignedLedger, type SigningIdentities } from '../../src/testing/signed-ledger.js';

let identities: SigningIdentities;

before(async () => {
  identities = await generateSigningIdentities();
});

/** The entries of a ledger signed every `every` entries, as a primary would replicate them. */
function signedEntries(count: number, every: number, forgeSignatureAt?: number): Entry[] {
  const disk = new MemoryDisk();
  writeSignedLedger({ disk, directory: 'ledger', identities, entries: count, signatureEveryEntries: every, chunkSizeBytes: 1 << 20, ...(forgeSignatureAt ? { forgeSignatureAt } : {}) });
  const ledger = new Ledger({ disk, directory: 'ledger' });
  ledger.open();
  const entries: Entry[] = [];
  for (let seqno = 1; seqno <= count; seqno++) {
    const bytes = ledger.getEntry(seqno);
    const decoded = decodeEntry(bytes);
    entries.push({ seqno, view: decoded.view, kind: hasFlag(decoded.flags, EntryFlags.SIGNATURE) ? 'signature' : 'normal', bytes });
  }
  ledger.close();
  return entries;
}

/** Verifies at once, hands the verdicts out when the test says. */
class HeldVerifier implements SignatureVerifier {
  readonly held = new Map<number, () => void>();

  verify(seqno: number, key: KeyObject, root: Uint8Array, signature: Uint8Array, done: (outcome: boolean | Error) => void): void {
    const outcome = verifyEcdsa(key, root, signature, 'der');
    this.held.set(seqno, () => done(outcome));
  }

  /** Hands out the verdict for the signature at `seqno`. */
  end(seqno: number): void {
    const done = this.held.get(seqno);
    assert.ok(done, `a verification of ${seqno} under way`);
    this.held.delete(seqno);
    done();
  }
}

function backup(verifier: SignatureVerifier | undefined, durability: 'Synced' | 'Replicated' = 'Synced') {
  const disk = new MemoryDisk();
  disk.holdSyncs();
  const logger = new MemoryLogger();
  const replica = new Replica({ disk, logger, clock: new ManualClock(), ledgerDirectory: '/ledger', readOnlyLedgerDirectories: [], secrets: new LedgerSecrets(), durability, signatureVerifier: verifier });
  replica.openLedger(undefined);
  let told = 0;
  replica.whenDurable(() => told++);
  /** Applies and persists entries as the driver does for one Ready. */
  const receive = (entries: readonly Entry[]) => {
    for (const entry of entries) replica.applyReplicated(entry);
    replica.persist(
      entries.map((e) => e.bytes),
      undefined,
    );
  };
  return { disk, logger, replica, receive, told: () => told };
}

test('a backup counts no entry from a signature on as durable until it verified it, however far its sync went', () => {
  const entries = signedEntries(12, 5);
  const verifier = new HeldVerifier();
  const { disk, replica, receive, told } = backup(verifier);
  receive(entries.slice(0, 7));
  assert.deepEqual([...verifier.held.keys()], [5], 'the signature at 5 is being verified, not checked on the request thread');
  disk.releaseSyncs();
  assert.equal(replica.durableSeqno, 4, 'synced up to 7, but the signature at 5 is not verified yet');
  const toldBefore = told();
  verifier.end(5);
  assert.equal(replica.durableSeqno, 7, 'verified and synced');
  assert.equal(told(), toldBefore + 1, 'the driver is told the durable seqno moved');
  assert.deepEqual(replica.signaturesVerified, { whileSyncing: 1, whenApplied: 0 });
});

test('a verification that ends before the sync: the entries count when the sync ends', () => {
  const entries = signedEntries(6, 5);
  const verifier = new HeldVerifier();
  const { disk, replica, receive } = backup(verifier);
  receive(entries);
  // The last entry of a signed ledger is a signature too.
  verifier.end(5);
  verifier.end(6);
  assert.equal(replica.durableSeqno, 0, 'nothing synced yet');
  disk.releaseSyncs();
  assert.equal(replica.durableSeqno, 6);
});

test('verifications that end out of order: the limit moves only when the earliest ends', () => {
  const entries = signedEntries(16, 5);
  const verifier = new HeldVerifier();
  const { disk, replica, receive } = backup(verifier);
  receive(entries);
  disk.releaseSyncs();
  assert.deepEqual([...verifier.held.keys()], [5, 10, 15, 16]);
  verifier.end(10);
  verifier.end(16);
  assert.equal(replica.durableSeqno, 4, 'the signature at 5 still waits');
  verifier.end(5);
  assert.equal(replica.durableSeqno, 14, 'up to the one at 15');
  verifier.end(15);
  assert.equal(replica.durableSeqno, 16);
});

test('a signature that does not verify stops the node, and nothing from it on is ever counted', () => {
  const entries = signedEntries(8, 5, 5);
  const verifier = new HeldVerifier();
  const { disk, logger, replica, receive } = backup(verifier);
  receive(entries);
  disk.releaseSyncs();
  assert.throws(() => verifier.end(5), (e: unknown) => e instanceof InvariantError && e.message.includes('signature at seqno 5') && e.message.includes('does not verify'));
  assert.ok(logger.entries.some((e) => e.level === 'fatal' && e.msg.includes('does not verify')));
  assert.equal(replica.durableSeqno, 4);
});

test('a signature rolled back while being verified: its late verdict changes nothing', () => {
  const entries = signedEntries(8, 5, 5);
  const verifier = new HeldVerifier();
  const { disk, logger, replica, receive } = backup(verifier);
  receive(entries.slice(0, 6));
  // A new primary's log replaces entries 5 and 6 (the forged signature among them).
  replica.rollbackTo(4);
  replica.persist([], 4);
  disk.releaseSyncs();
  assert.equal(replica.durableSeqno, 4, 'nothing is held for the rolled-back signature');
  verifier.end(5);
  assert.ok(!logger.entries.some((e) => e.level === 'fatal'), 'the verdict on a rolled-back entry is not acted on');
  assert.deepEqual(replica.signaturesVerified, { whileSyncing: 0, whenApplied: 0 });
});

test('the root is still checked as the entry is applied: a signature over another tree stops the node at once', () => {
  const signedAtThree = signedEntries(5, 3).slice(0, 4);
  const signedAtFive = signedEntries(5, 5);
  const verifier = new HeldVerifier();
  const { logger, receive } = backup(verifier);
  // Entry 3 here is a signature, not the record the signature at 5 covers: its root differs.
  assert.throws(() => receive([...signedAtThree, signedAtFive[4]!]), (e: unknown) => e instanceof InvariantError && e.message.includes('but this node\'s tree root is'));
  assert.ok(logger.entries.some((e) => e.level === 'fatal'));
  assert.deepEqual([...verifier.held.keys()], [3], 'only the signature that matched its root went to the verifier');
});

test('Replicated durability, or no verifier: each signature is verified on the request thread as it is applied', () => {
  for (const [verifier, durability] of [
    [new HeldVerifier(), 'Replicated'],
    [undefined, 'Synced'],
  ] as const) {
    const entries = signedEntries(11, 5);
    const { disk, replica, receive } = backup(verifier, durability);
    receive(entries);
    disk.releaseSyncs();
    assert.equal(verifier?.held.size ?? 0, 0);
    assert.deepEqual(replica.signaturesVerified, { whileSyncing: 0, whenApplied: 3 });
    assert.equal(replica.durableSeqno, 11);
  }
});

test(`beyond ${signatureChecksInFlightMax} verifications under way, the next signature is verified as it is applied`, () => {
  const count = signatureChecksInFlightMax + 2;
  const entries = signedEntries(2 * count, 2);
  const verifier = new HeldVerifier();
  const { disk, replica, receive } = backup(verifier);
  receive(entries);
  disk.releaseSyncs();
  assert.equal(verifier.held.size, signatureChecksInFlightMax);
  assert.deepEqual(replica.signaturesVerified, { whileSyncing: 0, whenApplied: 2 });
  for (const seqno of [...verifier.held.keys()]) verifier.end(seqno);
  assert.equal(replica.durableSeqno, 2 * count);
});
