/**
 * Framing a transaction into its ledger entry (src/ledger/framing.ts): the entry decodes to the
 * job, its private part decrypts to the clear write set, its leaf is the leaf of the decoded
 * entry, its size is known in advance, and the same job frames to the same bytes anywhere.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { createHash } from 'node:crypto';
import { decodeEntry, entryLeaf, EntryFraming, InlineEntryFramer, framedEntryBytes, type FrameJob, type FramedEntry } from '../../src/ledger/index.js';
import { LedgerEncryptor } from '../../src/kv/index.js';
import { commitEvidenceNonce, formatCommitEvidence } from '../../src/merkle/index.js';
import { frameJobArb } from './helpers.js';

const SECRET = new Uint8Array(32).fill(7);

test('a framed entry decodes to its job, decrypts to its write set, and carries its own leaf', () => {
  const frame = new EntryFraming(SECRET);
  const encryptor = new LedgerEncryptor(SECRET);
  fc.assert(
    fc.property(frameJobArb, (job) => {
      const framed = frame.frame(job);
      assert.equal(framed.bytes.byteLength, framedEntryBytes(job.publicBytes.byteLength, job.privatePlain.byteLength));
      const entry = decodeEntry(framed.bytes);
      assert.deepEqual([entry.view, entry.seqno, entry.flags], [job.view, job.seqno, job.flags]);
      assert.deepEqual(entry.claimsDigest, job.claimsDigest);
      assert.deepEqual(entry.publicBytes, job.publicBytes);
      assert.deepEqual(new Uint8Array(encryptor.decryptPrivate(job.view, job.seqno, entry.privateBytes)), job.privatePlain);
      const evidence = formatCommitEvidence(job.view, job.seqno, commitEvidenceNonce(SECRET, job.view, job.seqno));
      assert.equal(frame.commitEvidence(job.view, job.seqno), evidence, 'the evidence receipts reveal is the one the entry commits to');
      assert.deepEqual(entry.commitEvidenceDigest, new Uint8Array(createHash('sha256').update(evidence).digest()));
      assert.deepEqual(framed.leaf, entryLeaf(entry));
      // Framed into a given view, the same frame lands there; a view of another size is refused.
      const size = framed.bytes.byteLength;
      const into = new Uint8Array(size + 2).fill(0xee).subarray(1, size + 1);
      const placed = frame.frame(job, into);
      assert.equal(placed.bytes, into);
      assert.deepEqual(into, framed.bytes);
      assert.deepEqual([new Uint8Array(into.buffer)[0], new Uint8Array(into.buffer)[size + 1]], [0xee, 0xee], 'nothing written around it');
      assert.throws(() => frame.frame(job, new Uint8Array(size + 1)), RangeError);
    }),
    { numRuns: 300 },
  );
});

test('framing is deterministic: two frames of one secret give identical bytes; another secret does not', () => {
  const other = new EntryFraming(new Uint8Array(32).fill(8));
  fc.assert(
    fc.property(frameJobArb, (job) => {
      const a = new EntryFraming(SECRET).frame(job);
      const b = new EntryFraming(SECRET).frame(job);
      assert.deepEqual(a.bytes, b.bytes);
      assert.deepEqual(a.leaf, b.leaf);
      // The commit evidence depends on the secret, so the leaf does too.
      assert.notDeepEqual(other.frame(job).leaf, a.leaf);
    }),
    { numRuns: 100 },
  );
});

test('the inline framer completes each job inside submit, in order, and refuses jobs once closed', () => {
  const completed: [FrameJob, FramedEntry][] = [];
  const framer = new InlineEntryFramer<FrameJob>(SECRET, (job, framed) => completed.push([job, framed]));
  const jobs = fc.sample(frameJobArb, { numRuns: 20, seed: 1 });
  for (const [i, job] of jobs.entries()) {
    framer.submit(job);
    assert.equal(completed.length, i + 1);
    assert.equal(completed[i]![0], job);
    assert.equal(framer.pending, 0);
  }
  framer.close();
  assert.throws(() => framer.submit(jobs[0]!), /the framer is open/);
});
