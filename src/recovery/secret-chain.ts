/**
 * How the whole chain of ledger secrets stays recoverable (docs/architecture.md, decision 15;
 * docs/recovery.md, "The ledger secrets chain"):
 *
 * - the latest secret is wrapped (AES-256-GCM) under a random 32-byte wrapping key, the key that
 *   recovery shares split;
 * - at each rekey, the secret being retired is sealed under its successor in a "previous secret"
 *   record, so that the latest secret unlocks every older one in turn.
 *
 * A previous secret is not sealed under its successor's raw bytes but under a key derived from
 * them (HKDF-SHA256): the raw secret encrypts ledger entries with IVs made of transaction ids, and
 * a random IV under the same key could meet one of those.
 *
 * Records carry the `from_seqno` of the secrets they hold in clear and authenticate it (the AAD
 * is the record's header), so a record cannot be moved to another place in the chain.
 */
import { assert, bytesEqual, isCovenantError, type Seqno } from '../base/index.js';
import { AES_GCM_IV_LENGTH_BYTES, AES_GCM_KEY_LENGTH_BYTES, AES_GCM_TAG_LENGTH_BYTES, hkdfSha256, openAesGcm, sealAesGcm } from '../crypto/index.js';
import { RecoveryError } from './errors.js';
import { draw, type RandomBytes } from './random.js';

/** A ledger secret and the seqno from which it applies (the shape of src/kv's `LedgerSecret`). */
export interface ChainSecret {
  readonly fromSeqno: Seqno;
  readonly secret: Uint8Array;
}

export const LEDGER_SECRET_LENGTH_BYTES = 32;
export const WRAPPING_KEY_LENGTH_BYTES = AES_GCM_KEY_LENGTH_BYTES;
/** The only version of both record layouts. */
export const SECRET_RECORD_VERSION = 1;

export const SecretRecordKind = { LatestWrapped: 1, Previous: 2 } as const;

/** version, kind, from_seqno (u64 LE) */
const LATEST_HEADER_BYTES = 1 + 1 + 8;
/** version, kind, from_seqno (u64 LE), successor_from_seqno (u64 LE) */
const PREVIOUS_HEADER_BYTES = 1 + 1 + 8 + 8;
const SEALED_SECRET_BYTES = AES_GCM_IV_LENGTH_BYTES + LEDGER_SECRET_LENGTH_BYTES + AES_GCM_TAG_LENGTH_BYTES;
export const WRAPPED_LATEST_SECRET_BYTES = LATEST_HEADER_BYTES + SEALED_SECRET_BYTES;
export const PREVIOUS_SECRET_RECORD_BYTES = PREVIOUS_HEADER_BYTES + SEALED_SECRET_BYTES;

const PREVIOUS_SECRET_KEY_INFO = 'covenant recovery previous secret v1';
const EMPTY = new Uint8Array(0);

// Secrets and keys come from the node's own state or from a reconstruction of fixed-length shares:
// a wrong length is a programmer error.
function checkSecret(s: ChainSecret, what: string): void {
  assert(Number.isSafeInteger(s.fromSeqno) && s.fromSeqno >= 0, () => `${what}: from_seqno ${s.fromSeqno} is a non-negative safe integer`);
  assert(s.secret.byteLength === LEDGER_SECRET_LENGTH_BYTES, () => `${what}: a ledger secret is ${LEDGER_SECRET_LENGTH_BYTES} bytes, got ${s.secret.byteLength}`);
}

function checkWrappingKey(key: Uint8Array): void {
  assert(key.byteLength === WRAPPING_KEY_LENGTH_BYTES, () => `a wrapping key is ${WRAPPING_KEY_LENGTH_BYTES} bytes, got ${key.byteLength}`);
}

function writeU64(view: DataView, offset: number, value: number): void {
  view.setBigUint64(offset, BigInt(value), true);
}

function readU64(view: DataView, offset: number, what: string): number {
  const value = view.getBigUint64(offset, true);
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new RecoveryError('MalformedSecretRecord', `${what}: seqno ${value} is beyond 2^53`);
  return Number(value);
}

function sealInto(record: Uint8Array, headerBytes: number, key: Uint8Array, secret: Uint8Array, randomBytes: RandomBytes): Uint8Array {
  const iv = draw(randomBytes, AES_GCM_IV_LENGTH_BYTES);
  record.set(iv, headerBytes);
  record.set(sealAesGcm(key, iv, secret, record.subarray(0, headerBytes)), headerBytes + AES_GCM_IV_LENGTH_BYTES);
  return record;
}

function openFrom(record: Uint8Array, headerBytes: number, key: Uint8Array, what: string): Uint8Array {
  const iv = record.subarray(headerBytes, headerBytes + AES_GCM_IV_LENGTH_BYTES);
  try {
    return new Uint8Array(openAesGcm(key, iv, record.subarray(headerBytes + AES_GCM_IV_LENGTH_BYTES), record.subarray(0, headerBytes)));
  } catch (e) {
    if (isCovenantError(e) && e.code === 'DecryptionFailed') {
      throw new RecoveryError('LedgerSecretUnwrapFailed', `${what} does not decrypt: wrong key or tampered bytes`);
    }
    throw e;
  }
}

function checkHeader(record: Uint8Array, lengthBytes: number, kind: number, what: string): DataView {
  if (record.byteLength !== lengthBytes) {
    throw new RecoveryError('MalformedSecretRecord', `${what} is ${lengthBytes} bytes, got ${record.byteLength}`);
  }
  if (record[0] !== SECRET_RECORD_VERSION) {
    throw new RecoveryError('MalformedSecretRecord', `${what}: version ${record[0]} is not ${SECRET_RECORD_VERSION}`);
  }
  if (record[1] !== kind) throw new RecoveryError('MalformedSecretRecord', `${what}: kind ${record[1]} is not ${kind}`);
  return new DataView(record.buffer, record.byteOffset, record.byteLength);
}

/** Wraps the latest ledger secret under the wrapping key that the recovery shares split. */
export function wrapLatestSecret(wrappingKey: Uint8Array, latest: ChainSecret, randomBytes: RandomBytes): Uint8Array {
  checkWrappingKey(wrappingKey);
  checkSecret(latest, 'latest ledger secret');
  const record = new Uint8Array(WRAPPED_LATEST_SECRET_BYTES);
  record[0] = SECRET_RECORD_VERSION;
  record[1] = SecretRecordKind.LatestWrapped;
  writeU64(new DataView(record.buffer), 2, latest.fromSeqno);
  return sealInto(record, LATEST_HEADER_BYTES, wrappingKey, latest.secret, randomBytes);
}

/** The from_seqno a wrapped latest secret record names, read without the key. */
export function wrappedLatestSecretFromSeqno(wrapped: Uint8Array): Seqno {
  return readU64(checkHeader(wrapped, WRAPPED_LATEST_SECRET_BYTES, SecretRecordKind.LatestWrapped, 'wrapped latest secret'), 2, 'wrapped latest secret');
}

/** Inverse of wrapLatestSecret; `LedgerSecretUnwrapFailed` under any other key. */
export function unwrapLatestSecret(wrappingKey: Uint8Array, wrapped: Uint8Array): ChainSecret {
  checkWrappingKey(wrappingKey);
  const fromSeqno = wrappedLatestSecretFromSeqno(wrapped);
  return { fromSeqno, secret: openFrom(wrapped, LATEST_HEADER_BYTES, wrappingKey, 'wrapped latest secret') };
}

function previousSecretKey(successor: ChainSecret): Uint8Array {
  return hkdfSha256(successor.secret, EMPTY, PREVIOUS_SECRET_KEY_INFO, AES_GCM_KEY_LENGTH_BYTES);
}

/** The record a rekey writes: the retired secret `previous`, sealed under its `successor`. */
export function sealPreviousSecret(successor: ChainSecret, previous: ChainSecret, randomBytes: RandomBytes): Uint8Array {
  checkSecret(successor, 'successor ledger secret');
  checkSecret(previous, 'previous ledger secret');
  assert(previous.fromSeqno < successor.fromSeqno, () => `previous secret from ${previous.fromSeqno} is before its successor from ${successor.fromSeqno}`);
  const record = new Uint8Array(PREVIOUS_SECRET_RECORD_BYTES);
  record[0] = SECRET_RECORD_VERSION;
  record[1] = SecretRecordKind.Previous;
  const view = new DataView(record.buffer);
  writeU64(view, 2, previous.fromSeqno);
  writeU64(view, 10, successor.fromSeqno);
  return sealInto(record, PREVIOUS_HEADER_BYTES, previousSecretKey(successor), previous.secret, randomBytes);
}

/** The seqnos a previous-secret record names, read without a key. */
export function previousSecretRecordSeqnos(record: Uint8Array): { fromSeqno: Seqno; successorFromSeqno: Seqno } {
  const view = checkHeader(record, PREVIOUS_SECRET_RECORD_BYTES, SecretRecordKind.Previous, 'previous secret record');
  const fromSeqno = readU64(view, 2, 'previous secret record');
  const successorFromSeqno = readU64(view, 10, 'previous secret record');
  if (fromSeqno >= successorFromSeqno) {
    throw new RecoveryError('MalformedSecretRecord', `previous secret record: from ${fromSeqno} is not before its successor's ${successorFromSeqno}`);
  }
  return { fromSeqno, successorFromSeqno };
}

/** Inverse of sealPreviousSecret, given the successor the record names. */
export function openPreviousSecret(successor: ChainSecret, record: Uint8Array): ChainSecret {
  checkSecret(successor, 'successor ledger secret');
  const { fromSeqno, successorFromSeqno } = previousSecretRecordSeqnos(record);
  if (successorFromSeqno !== successor.fromSeqno) {
    throw new RecoveryError('SecretChainBroken', `previous secret record is sealed under the secret from ${successorFromSeqno}, not ${successor.fromSeqno}`);
  }
  return { fromSeqno, secret: openFrom(record, PREVIOUS_HEADER_BYTES, previousSecretKey(successor), `previous secret from ${fromSeqno}`) };
}

/**
 * The whole chain, oldest first, down from the latest secret: each older secret from the
 * previous-secret record sealed under its successor. `previousRecords` may come in any order;
 * every one must take part in the chain.
 */
export function openSecretChain(latest: ChainSecret, previousRecords: readonly Uint8Array[]): ChainSecret[] {
  const bySuccessor = new Map<Seqno, Uint8Array>();
  for (const record of previousRecords) {
    const { successorFromSeqno } = previousSecretRecordSeqnos(record);
    const other = bySuccessor.get(successorFromSeqno);
    if (other !== undefined && !bytesEqual(other, record)) {
      throw new RecoveryError('SecretChainBroken', `two previous secret records are sealed under the secret from ${successorFromSeqno}`, { successorFromSeqno });
    }
    bySuccessor.set(successorFromSeqno, record);
  }
  const chain = [latest];
  for (;;) {
    const successor = chain.at(-1)!;
    const record = bySuccessor.get(successor.fromSeqno);
    if (record === undefined) break;
    bySuccessor.delete(successor.fromSeqno);
    chain.push(openPreviousSecret(successor, record));
  }
  if (bySuccessor.size > 0) {
    const unused = [...bySuccessor.keys()];
    throw new RecoveryError('SecretChainBroken', `previous secret records under the secrets from ${unused.join(', ')} are not on the chain down from the latest secret`, {
      unusedSuccessorFromSeqnos: unused,
    });
  }
  return chain.reverse();
}

/** The whole chain, oldest first, from the wrapping key: unwrapLatestSecret, then openSecretChain. */
export function unwrapSecretChain(wrappingKey: Uint8Array, wrappedLatest: Uint8Array, previousRecords: readonly Uint8Array[]): ChainSecret[] {
  return openSecretChain(unwrapLatestSecret(wrappingKey, wrappedLatest), previousRecords);
}
