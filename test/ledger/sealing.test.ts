/**
 * Sealing a transaction into its ledger entry (src/ledger/sealing.ts): the entry decodes to the
 * job, its private part decrypts to the clear write set, its leaf is the leaf of the decoded
 * entry, its size is known in advance, and the same job seals to the same bytes anywhere.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { decodeEntry, entryLeaf, EntrySeal, InlineEntrySealer, sealedFrameBytes, type SealJob, type SealedEntry } from '../../src/ledger/index.js';
import { LedgerEncryptor } from '../../src/kv/index.js';
import { commitEvidenceNonce, formatCommitEvidence } from '../../src/merkle/index.js';
import { sealJobArb } from './helpers.js';

const SECRET = new Uint8Array(32).fill(7);

test('a sealed entry decodes to its job, decrypts to its write set, and carries its own leaf', () => {
  const seal = new EntrySeal(SECRET);
  const encryptor = new LedgerEncryptor(SECRET);
  fc.assert(
    fc.property(sealJobArb, (job) => {
      const sealed = seal.seal(job);
      assert.equal(sealed.bytes.byteLength, sealedFrameBytes(job.publicBytes.byteLength, job.privatePlain.byteLength));
      const entry = decodeEntry(sealed.bytes);
      assert.deepEqual([entry.view, entry.seqno, entry.flags], [job.view, job.seqno, job.flags]);
      assert.deepEqual(entry.claimsDigest, job.claimsDigest);
      assert.deepEqual(entry.publicBytes, job.publicBytes);
      assert.deepEqual(new Uint8Array(encryptor.decryptPrivate(job.view, job.seqno, entry.privateBytes)), job.privatePlain);
      const evidence = formatCommitEvidence(job.view, job.seqno, commitEvidenceNonce(SECRET, job.view, job.seqno));
      assert.equal(seal.commitEvidence(job.view, job.seqno), evidence, 'the evidence receipts reveal is the one the entry commits to');
      assert.deepEqual(entry.commitEvidenceDigest, new Uint8Array(createHash('sha256').update(evidence).digest()));
      assert.deepEqual(sealed.leaf, entryLeaf(entry));
      // Sealed into a given view, the same frame lands there; a view of another size is refused.
      const size = sealed.bytes.byteLength;
      const into = new Uint8Array(size + 2).fill(0xee).subarray(1, size + 1);
      const placed = seal.seal(job, into);
      assert.equal(placed.bytes, into);
      assert.deepEqual(into, sealed.bytes);
      assert.deepEqual([new Uint8Array(into.buffer)[0], new Uint8Array(into.buffer)[size + 1]], [0xee, 0xee], 'nothing written around it');
      assert.throws(() => seal.seal(job, new Uint8Array(size + 1)), RangeError);
    }),
    { numRuns: 300 },
  );
});

test('sealing is deterministic: two seals of one secret give identical bytes; another secret does not', () => {
  const other = new EntrySeal(new Uint8Array(32).fill(8));
  fc.assert(
    fc.property(sealJobArb, (job) => {
      const a = new EntrySeal(SECRET).seal(job);
      const b = new EntrySeal(SECRET).seal(job);
      assert.deepEqual(a.bytes, b.bytes);
      assert.deepEqual(a.leaf, b.leaf);
      // The commit evidence depends on the secret, so the leaf does too.
      assert.notDeepEqual(other.seal(job).leaf, a.leaf);
    }),
    { numRuns: 100 },
  );
});

test('the inline sealer completes each job inside submit, in order, and refuses jobs once closed', () => {
  const completed: [SealJob, SealedEntry][] = [];
  const sealer = new InlineEntrySealer<SealJob>(SECRET, (job, sealed) => completed.push([job, sealed]));
  const jobs = fc.sample(sealJobArb, { numRuns: 20, seed: 1 });
  for (const [i, job] of jobs.entries()) {
    sealer.submit(job);
    assert.equal(completed.length, i + 1);
    assert.equal(completed[i]![0], job);
    assert.equal(sealer.pending, 0);
  }
  sealer.close();
  assert.throws(() => sealer.submit(jobs[0]!), /the sealer is open/);
});
