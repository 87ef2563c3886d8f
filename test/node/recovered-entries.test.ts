// The consensus log built from a replay's summary (RecoveredEntries.stretch, RaftLog's
// stretchBetween) is the log built by appending every entry, whatever part of the persisted log the
// summary covers, and building it visits no entry the summary covers.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { RaftLog } from '../../src/consensus/log.js';
import type { Configuration, Entry, EntryStorage } from '../../src/consensus/index.js';
import { RecoveredEntries } from '../../src/node/recovered-entries.js';

const NO_BYTES = new Uint8Array(0);
const NODES = ['a', 'b', 'c', 'd'];

const recordedArb: fc.Arbitrary<{ viewStep: number; signature: boolean; nodes: string[] | undefined }> = fc.record({
  viewStep: fc.oneof({ weight: 12, arbitrary: fc.constant(0) }, { weight: 1, arbitrary: fc.integer({ min: 1, max: 3 }) }),
  signature: fc.boolean(),
  nodes: fc.oneof({ weight: 10, arbitrary: fc.constant(undefined) }, { weight: 1, arbitrary: fc.subarray(NODES, { minLength: 1 }) }),
});

/** Every observable of a log: what consensus asks of it. */
function observe(log: RaftLog, start: number, last: number): unknown {
  const seqnos = Array.from({ length: last - start + 2 }, (_, i) => start + i);
  return {
    last: log.lastSeqno,
    lastView: log.lastView,
    lastSignature: log.lastSignatureSeqno,
    viewHistory: log.viewHistory(),
    views: seqnos.map((s) => log.viewAt(s)),
    signatures: seqnos.map((s) => log.signatureAtOrBelow(s)),
    signaturesDescending: [...log.signaturesDescending(start)],
    configs: log.activeConfigs(0),
    removedAt: NODES.map((id) => log.removedAtSeqno(id)),
    sizes: log.metadataSizes(),
  };
}

test('a log built from the summary of any part of the persisted log equals the log built entry by entry', () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 0, max: 40 }),
      fc.integer({ min: 1, max: 3 }),
      fc.array(recordedArb, { minLength: 1, maxLength: 200 }),
      fc.nat(),
      fc.nat(),
      (start, startView, generated, truncateBack, coverBack) => {
        // What a replay recorded, cut once as a replay's recorded entries may be (a torn tail).
        const recorded = new RecoveredEntries(start + 1);
        const entries: Entry[] = [];
        let view = startView;
        generated.forEach((g, i) => {
          const seqno = start + 1 + i;
          view += g.viewStep;
          const configuration: Configuration | undefined = g.nodes === undefined ? undefined : { seqno, nodes: g.nodes };
          recorded.add(seqno, view, g.signature, configuration);
          entries.push(configuration !== undefined ? { view, seqno, kind: 'reconfiguration', configuration, bytes: NO_BYTES } : { view, seqno, kind: g.signature ? 'signature' : 'normal', bytes: NO_BYTES });
        });
        const last = Math.max(start + 1, start + generated.length - (truncateBack % 5 === 0 ? truncateBack % generated.length : 0));
        recorded.truncateAfter(last);
        entries.length = last - start;
        assert.deepEqual([...recorded.entries(start + 1, last)], entries, 'the recorded entries are those appended');
        const logStart = { seqno: start, view: startView, viewHistory: [], configs: [{ seqno: start, nodes: ['a', 'b'] }] };
        const entryAt = (s: number) => entries[s - start - 1];
        const oneByOne = new RaftLog(logStart, { entryAt }, last);
        // The summary covers start + 1 .. covered; the entries after it are read one by one.
        const covered = last - (coverBack % 3 === 0 ? 0 : coverBack % (last - start));
        const visited: number[] = [];
        const storage: EntryStorage = {
          entryAt: (s) => {
            visited.push(s);
            return entryAt(s);
          },
          stretchBetween: (from, to) => recorded.stretch(from, Math.min(to, covered)),
        };
        const summarised = new RaftLog(logStart, storage, last);
        assert.deepEqual(observe(summarised, start, last), observe(oneByOne, start, last));
        assert.deepEqual(visited, Array.from({ length: last - covered }, (_, i) => covered + 1 + i), 'only the entries after the summary are read');
      },
    ),
    { numRuns: 500 },
  );
});

test('a summary of a million entries holds their views, signatures and configurations, not the entries', () => {
  const recorded = new RecoveredEntries(1);
  for (let seqno = 1; seqno <= 1_000_000; seqno++) recorded.add(seqno, seqno < 400_000 ? 2 : 5, seqno % 5000 === 0, seqno === 700_001 ? { seqno, nodes: ['a'] } : undefined);
  const stretch = recorded.stretch(1, 1_000_000);
  assert.deepEqual(stretch.viewRuns, [1, 2, 400_000, 5]);
  assert.equal(stretch.signatureSeqnos.length, 200);
  assert.deepEqual(stretch.configurations, [{ seqno: 700_001, nodes: ['a'] }]);
  let reads = 0;
  const log = new RaftLog({ seqno: 0, view: 1, viewHistory: [], configs: [{ seqno: 0, nodes: ['a', 'b'] }] }, { entryAt: () => (reads++, undefined), stretchBetween: (from, to) => recorded.stretch(from, to) }, 1_000_000);
  assert.equal(reads, 0);
  assert.equal(log.lastSeqno, 1_000_000);
  assert.equal(log.viewAt(399_999), 2);
  assert.equal(log.viewAt(400_000), 5);
  assert.equal(log.signatureAtOrBelow(999_999), 995_000);
  assert.equal(log.removedAtSeqno('b'), 700_001);
});
