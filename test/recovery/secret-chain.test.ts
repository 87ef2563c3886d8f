import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import {
  isRecoveryError,
  openPreviousSecret,
  previousSecretRecordSeqnos,
  PREVIOUS_SECRET_RECORD_BYTES,
  sealPreviousSecret,
  unwrapLatestSecret,
  unwrapSecretChain,
  wrapLatestSecret,
  wrappedLatestSecretFromSeqno,
  WRAPPED_LATEST_SECRET_BYTES,
  type ChainSecret,
  type RecoveryErrorCode,
} from '../../src/recovery/index.js';
import { seededRandomBytes } from './helpers.js';

const code = (c: RecoveryErrorCode) => (e: unknown) => isRecoveryError(e, c);

/** A chain of `count` secrets from the given seqnos, with the records a rekey writes at each step. */
function chainOf(fromSeqnos: number[], seed: string) {
  const random = seededRandomBytes(seed);
  const secrets: ChainSecret[] = fromSeqnos.map((fromSeqno) => ({ fromSeqno, secret: random(32) }));
  const previousRecords = secrets.slice(1).map((successor, i) => sealPreviousSecret(successor, secrets[i]!, random));
  const wrappingKey = random(32);
  const wrapped = wrapLatestSecret(wrappingKey, secrets.at(-1)!, random);
  return { secrets, previousRecords, wrappingKey, wrapped, random };
}

test('the latest secret wraps and unwraps, its from_seqno readable without the key', () => {
  const { secrets, wrappingKey, wrapped } = chainOf([0, 100, 5000], 'latest');
  assert.equal(wrapped.byteLength, WRAPPED_LATEST_SECRET_BYTES);
  assert.equal(wrappedLatestSecretFromSeqno(wrapped), 5000);
  assert.deepEqual(unwrapLatestSecret(wrappingKey, wrapped), secrets[2]);
});

test('the latest secret unlocks the whole chain, whatever the order of the previous records (property)', () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.integer({ min: 0, max: 2 ** 40 }), { minLength: 1, maxLength: 8 }).map((a) => a.sort((x, y) => x - y)),
      fc.string(),
      fc.infiniteStream(fc.integer()),
      (fromSeqnos, seed, order) => {
        const { secrets, previousRecords, wrappingKey, wrapped } = chainOf(fromSeqnos, seed);
        const it = order[Symbol.iterator]();
        const shuffled = previousRecords.map((r) => [it.next().value as number, r] as const).sort((a, b) => a[0] - b[0]).map(([, r]) => r);
        assert.deepEqual(unwrapSecretChain(wrappingKey, wrapped, shuffled), secrets);
      },
    ),
    { numRuns: 50 },
  );
});

test('a wrong wrapping key or any flipped byte of the wrapped record is refused', () => {
  const { wrappingKey, wrapped, random } = chainOf([0, 7], 'tamper latest');
  assert.throws(() => unwrapLatestSecret(random(32), wrapped), code('LedgerSecretUnwrapFailed'));
  for (let i = 0; i < wrapped.byteLength; i++) {
    const bad = new Uint8Array(wrapped);
    bad[i]! ^= 0x01;
    // Bytes 0-1 are the version and kind, and a flip in the top byte of from_seqno (9) puts it
    // beyond 2^53: a malformed record. Every other flip fails authentication.
    const malformed = i < 2 || i === 9;
    assert.throws(() => unwrapLatestSecret(wrappingKey, bad), malformed ? code('MalformedSecretRecord') : code('LedgerSecretUnwrapFailed'), `byte ${i}`);
  }
  assert.throws(() => unwrapLatestSecret(wrappingKey, wrapped.subarray(1)), code('MalformedSecretRecord'));
});

test('a previous-secret record opens only under its successor, and names both seqnos', () => {
  const { secrets, previousRecords } = chainOf([0, 10, 20], 'previous');
  const record = previousRecords[1]!;
  assert.equal(record.byteLength, PREVIOUS_SECRET_RECORD_BYTES);
  assert.deepEqual(previousSecretRecordSeqnos(record), { fromSeqno: 10, successorFromSeqno: 20 });
  assert.deepEqual(openPreviousSecret(secrets[2]!, record), secrets[1]);
  // Another secret claiming the same seqno: the derived key differs and GCM refuses it.
  assert.throws(() => openPreviousSecret({ fromSeqno: 20, secret: secrets[0]!.secret }, record), code('LedgerSecretUnwrapFailed'));
  assert.throws(() => openPreviousSecret(secrets[1]!, record), code('SecretChainBroken'));
  const moved = new Uint8Array(record);
  moved[2]! ^= 0x01; // from_seqno 10 -> 11: authenticated
  assert.throws(() => openPreviousSecret(secrets[2]!, moved), code('LedgerSecretUnwrapFailed'));
});

test('records that do not form one chain are refused', () => {
  const { previousRecords, wrappingKey, wrapped, secrets, random } = chainOf([0, 10, 20, 30], 'broken');
  // A record from another chain whose successor is not on this one.
  const stray = sealPreviousSecret({ fromSeqno: 15, secret: random(32) }, { fromSeqno: 12, secret: random(32) }, random);
  assert.throws(() => unwrapSecretChain(wrappingKey, wrapped, [...previousRecords, stray]), code('SecretChainBroken'));
  // A gap: without the record under 20, those under 10 is unreachable.
  assert.throws(() => unwrapSecretChain(wrappingKey, wrapped, [previousRecords[0]!, previousRecords[2]!]), code('SecretChainBroken'));
  // Two different records under one successor.
  const twin = sealPreviousSecret(secrets[3]!, { fromSeqno: 25, secret: random(32) }, random);
  assert.throws(() => unwrapSecretChain(wrappingKey, wrapped, [...previousRecords, twin]), code('SecretChainBroken'));
  // The same record read twice is the same record.
  assert.deepEqual(unwrapSecretChain(wrappingKey, wrapped, [...previousRecords, previousRecords[0]!]), secrets);
  // A record's kind is checked: a latest record is not a previous one.
  assert.throws(() => unwrapSecretChain(wrappingKey, wrapped, [wrapped]), code('MalformedSecretRecord'));
});
