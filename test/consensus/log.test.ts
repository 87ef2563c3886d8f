import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { RaftLog } from '../../src/consensus/log.js';
import type { Entry } from '../../src/consensus/index.js';

const NO_STORAGE = { entryAt: () => undefined };
const bytes = new Uint8Array(0);

type Op =
  | { kind: 'append'; viewStep: number; signature: boolean }
  | { kind: 'truncate'; back: number }
  | { kind: 'commit'; back: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 8, arbitrary: fc.record({ kind: fc.constant('append' as const), viewStep: fc.oneof({ weight: 9, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 }) }), signature: fc.boolean() }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('truncate' as const), back: fc.integer({ min: 0, max: 20 }) }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('commit' as const), back: fc.integer({ min: 0, max: 20 }) }) },
);

test('the log answers views and signatures like a per-entry model, keeping metadata that does not grow per entry', () => {
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 50 }), fc.integer({ min: 1, max: 3 }), fc.array(op, { maxLength: 300 }), (startSeqno, startView, ops) => {
      const log = new RaftLog({ seqno: startSeqno, view: startView, viewHistory: [], configs: [{ seqno: 0, nodes: ['a'] }] }, NO_STORAGE, startSeqno);
      // The model: view and signature flag of every entry after the start.
      const model: { view: number; signature: boolean }[] = [];
      let view = startView;
      let commit = startSeqno;
      const last = () => startSeqno + model.length;
      const modelView = (s: number) => (s === startSeqno ? startView : model[s - startSeqno - 1]!.view);
      const modelSignatures = () => model.flatMap((e, i) => (e.signature ? [startSeqno + 1 + i] : []));
      for (const o of ops) {
        if (o.kind === 'append') {
          view += o.viewStep;
          const entry: Entry = { view, seqno: last() + 1, kind: o.signature ? 'signature' : 'normal', bytes };
          log.append(entry);
          model.push({ view, signature: o.signature });
        } else if (o.kind === 'truncate') {
          const to = Math.max(commit, last() - o.back);
          log.truncateAfter(to);
          model.length = to - startSeqno;
        } else {
          // Commit moves forward to a signature (as the consensus core only ever commits).
          const candidates = modelSignatures().filter((s) => s > commit && s <= last() - o.back);
          if (candidates.length === 0) continue;
          commit = candidates.at(-1)!;
          log.compact(commit);
        }
        assert.equal(log.lastSeqno, last());
        assert.equal(log.lastView, modelView(last()));
        for (let s = startSeqno; s <= last(); s++) assert.equal(log.viewAt(s), modelView(s), `view of ${s}`);
        assert.equal(log.viewAt(last() + 1), undefined);
        const signatures = modelSignatures();
        assert.deepEqual([...log.signaturesDescending(commit)], signatures.filter((s) => s > commit).reverse());
        assert.equal(log.lastSignatureSeqno, signatures.at(-1) ?? startSeqno);
        for (let s = commit; s <= last(); s++) {
          const expected = signatures.filter((x) => x <= s).at(-1) ?? startSeqno;
          assert.equal(log.signatureAtOrBelow(s), expected, `signature at or below ${s}`);
        }
        // Below the commit the answer may be lower, never higher.
        for (let s = startSeqno; s < commit; s++) assert.ok(log.signatureAtOrBelow(s)! <= s);
        const sizes = log.metadataSizes();
        assert.ok(sizes.signatureSeqnos <= signatures.filter((s) => s > commit).length + 1, 'signatures below the last committed one are dropped');
        assert.ok(sizes.viewStarts <= view, 'one view start per view');
      }
    }),
    { numRuns: 300 },
  );
});

test('a million entries over a few views and committed signatures leave a few numbers of metadata', () => {
  const log = new RaftLog({ seqno: 0, view: 1, viewHistory: [], configs: [{ seqno: 0, nodes: ['a'] }] }, NO_STORAGE, 0);
  for (let s = 1; s <= 1_000_000; s++) {
    const view = 1 + Math.floor(s / 250_000);
    log.append({ view, seqno: s, kind: s % 1000 === 0 ? 'signature' : 'normal', bytes });
    if (s % 1000 === 0) {
      // Persisted and committed, as the node does: only the uncommitted suffix is kept.
      log.handOut();
      log.acknowledge();
      log.compact(s);
    }
  }
  assert.deepEqual(log.metadataSizes(), { viewStarts: 5, signatureSeqnos: 1, configs: 1, unstable: 0 });
  assert.equal(log.viewAt(249_999), 1);
  assert.equal(log.viewAt(250_000), 2);
  assert.equal(log.viewAt(1_000_000), 5);
});

test('a persisted log read in one stretch (entriesBetween) is the log read entry by entry, and a short stretch is completed entry by entry', () => {
  const start = { seqno: 10, view: 2, viewHistory: [], configs: [{ seqno: 0, nodes: ['a'] }] };
  const persisted: Entry[] = [];
  for (let s = 11; s <= 500; s++) persisted.push({ view: 2 + Math.floor(s / 200), seqno: s, kind: s % 25 === 0 ? 'signature' : 'normal', bytes });
  const entryAt = (s: number) => persisted[s - 11];
  let stretches = 0;
  const oneByOne = new RaftLog(start, { entryAt }, 500);
  const inOneStretch = new RaftLog(start, { entryAt: () => assert.fail('read entry by entry'), entriesBetween: (from, to) => (stretches++, persisted.slice(from - 11, to - 10)) }, 500);
  // A storage that gives fewer entries than asked: the rest comes from entryAt.
  const completed = new RaftLog(start, { entryAt, entriesBetween: (from) => persisted.slice(from - 11, 300 - 10) }, 500);
  assert.equal(stretches, 1);
  for (const log of [inOneStretch, completed]) {
    assert.equal(log.lastSeqno, oneByOne.lastSeqno);
    assert.equal(log.lastView, oneByOne.lastView);
    assert.deepEqual(log.viewHistory(), oneByOne.viewHistory());
    assert.deepEqual([...log.signaturesDescending(0)], [...oneByOne.signaturesDescending(0)]);
  }
});
