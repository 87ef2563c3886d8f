import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { ConsensusMessageError, decodeMessage, encodeMessage, type Entry, type Message } from '../../src/consensus/index.js';

const nodeId = fc.string({ minLength: 1, maxLength: 20 });
const small = fc.integer({ min: 0, max: 2 ** 53 - 1 });

/** Contiguous entries after prevSeqno with non-decreasing views between prevView and view. */
const appendMessage = fc
  .record({
    from: nodeId,
    to: nodeId,
    view: fc.integer({ min: 0, max: 2 ** 40 }),
    prevSeqno: fc.integer({ min: 0, max: 2 ** 40 }),
    commitSeqno: small,
    specs: fc.array(
      fc.record({
        bump: fc.boolean(),
        kind: fc.constantFrom('normal', 'signature', 'reconfiguration'),
        nodes: fc.uniqueArray(nodeId, { minLength: 1, maxLength: 5 }),
        retired: fc.option(fc.uniqueArray(nodeId, { maxLength: 3 }), { nil: undefined }),
        bytes: fc.uint8Array({ maxLength: 40 }),
        sidecar: fc.option(fc.uint8Array({ maxLength: 40 }), { nil: undefined }),
      }),
      { maxLength: 6 },
    ),
  })
  .map(({ from, to, view, prevSeqno, commitSeqno, specs }): Message => {
    let entryView = Math.max(0, view - specs.length);
    const prevView = entryView;
    const entries = specs.map((s, i): Entry => {
      if (s.bump && entryView < view) entryView++;
      const seqno = prevSeqno + i + 1;
      const entry: { -readonly [K in keyof Entry]: Entry[K] } = { view: entryView, seqno, kind: s.kind as Entry['kind'], bytes: s.bytes };
      if (s.kind === 'reconfiguration') entry.configuration = { seqno, nodes: s.nodes };
      if (s.retired !== undefined) entry.retiredCommitted = s.retired;
      if (s.sidecar !== undefined) entry.sidecar = s.sidecar;
      return entry;
    });
    return { type: 'append', from, to, view, prevSeqno, prevView, commitSeqno, entries };
  });

const otherMessage: fc.Arbitrary<Message> = fc.oneof(
  fc.record({ type: fc.constant('append-response' as const), from: nodeId, to: nodeId, view: small, success: fc.boolean(), lastSeqno: small, commitSeqno: small }),
  fc.record({
    type: fc.constant('request-vote' as const),
    from: nodeId,
    to: nodeId,
    view: small,
    preVote: fc.boolean(),
    force: fc.boolean(),
    lastSignatureView: small,
    lastSignatureSeqno: small,
  }),
  fc.record({ type: fc.constant('vote-response' as const), from: nodeId, to: nodeId, view: small, preVote: fc.boolean(), granted: fc.boolean() }),
  fc.record({ type: fc.constant('propose-vote' as const), from: nodeId, to: nodeId, view: small }),
);

// fast-check builds records without a prototype; messages off the wire are plain objects.
const anyMessage = fc.oneof(appendMessage, otherMessage).map((m): Message => ({ ...m }));

test('every message survives encode then decode unchanged', () => {
  fc.assert(
    fc.property(anyMessage, (m) => {
      assert.deepEqual(decodeMessage(encodeMessage(m)), m);
    }),
    { numRuns: 500 },
  );
});

test('an append message is written into one buffer of about its size (no regrowth, no final copy needed)', () => {
  const entries: Entry[] = [
    { view: 3, seqno: 11, kind: 'normal', bytes: new Uint8Array(3 * 1024 * 1024).fill(7) },
    { view: 3, seqno: 12, kind: 'reconfiguration', bytes: new Uint8Array(100), configuration: { seqno: 12, nodes: ['n1', 'n2', 'n3'] }, retiredCommitted: ['n0'] },
    { view: 3, seqno: 13, kind: 'normal', bytes: new Uint8Array(300).fill(1), sidecar: new Uint8Array(2 * 1024 * 1024).fill(9) },
  ];
  const m: Message = { type: 'append', from: 'n1', to: 'n2', view: 3, prevSeqno: 10, prevView: 3, commitSeqno: 9, entries };
  const encoded = encodeMessage(m);
  assert.deepEqual(decodeMessage(encoded), m);
  assert.ok(encoded.byteLength > 5 * 1024 * 1024);
  assert.ok(encoded.buffer.byteLength - encoded.byteLength < 4096, `buffer of ${encoded.buffer.byteLength} bytes for a ${encoded.byteLength}-byte message`);
});

test('garbage and damaged messages are rejected with ConsensusMessageError, never another error', () => {
  const decodeOrTypedError = (bytes: Uint8Array): void => {
    try {
      decodeMessage(bytes);
    } catch (e) {
      assert.ok(e instanceof ConsensusMessageError, `unexpected ${String(e)}`);
      assert.equal(e.code, 'InvalidConsensusMessage');
      assert.equal(e.status, 400);
    }
  };
  fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), decodeOrTypedError), { numRuns: 1000 });
  fc.assert(
    fc.property(anyMessage, fc.nat(), fc.integer({ min: 1, max: 255 }), (m, at, flip) => {
      const bytes = encodeMessage(m);
      const damaged = bytes.slice();
      damaged[at % damaged.length] = damaged[at % damaged.length]! ^ flip;
      decodeOrTypedError(damaged);
      decodeOrTypedError(bytes.subarray(0, at % bytes.length));
    }),
    { numRuns: 1000 },
  );
});

test('specific malformations are named', () => {
  const m: Message = { type: 'propose-vote', from: 'a', to: 'b', view: 3 };
  const bytes = encodeMessage(m);
  assert.throws(() => decodeMessage(new Uint8Array([...bytes, 0])), /trailing bytes/);
  const badVersion = bytes.slice();
  badVersion[0] = 9;
  assert.throws(() => decodeMessage(badVersion), /unknown version/);
  const badType = bytes.slice();
  badType[1] = 42;
  assert.throws(() => decodeMessage(badType), /unknown message type/);
  // An append whose entries skip a seqno.
  const gap = encodeMessage({
    type: 'append',
    from: 'a',
    to: 'b',
    view: 2,
    prevSeqno: 4,
    prevView: 1,
    commitSeqno: 0,
    entries: [{ view: 2, seqno: 6, kind: 'normal', bytes: new Uint8Array([1]) }],
  });
  assert.throws(() => decodeMessage(gap), /not contiguous/);
});
