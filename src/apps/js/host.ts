/**
 * The host side of the application's `covenant` object: map access within the request's
 * transaction, converters, crypto, the last committed transaction, and the two switches of the
 * request (apply writes on an error answer, the claims digest). Everything reaches the node
 * through the scope of the request being handled; outside a request, these functions refuse.
 */
import { createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import { sha256 } from '../../crypto/index.js';
import { bytesCodec, stringKeyCodec, type MapReader, type StoreView, type Tx, type TxMap } from '../../kv/index.js';
import type { HostFunctions, InterpreterHost } from './interpreter.js';
import { ScriptFailure, toArrayBuffer } from './interpreter.js';
import { FOR_EACH_ENTRIES_MAX, RANDOM_BYTES_MAX } from './limits.js';
import { READONLY_WRITE, refusal, SERVICE_PRIVATE_PREFIX, SERVICE_PUBLIC_PREFIX, SERVICE_TABLE_WRITE } from './map-rules.js';

const CLAIMS_DIGEST_BYTES = 32;

/** What one request gives its handler to work with. */
export interface RequestScope {
  /** The state the handler reads: the write transaction, or the read's state. */
  readonly reader: Pick<StoreView, 'map'>;
  /** Present for a readwrite endpoint: where writes go. */
  readonly tx: Tx | undefined;
  readonly commitTxId: () => string;
  readonly randomBytes: (length: number) => Uint8Array;
  readonly nowMs: () => number;
  applyWrites: boolean;
  claimsDigest: Uint8Array | undefined;
  /** Present for a historical endpoint: the transaction it names, and reads of past states. */
  readonly historical?: HistoricalScope;
}

/** What a historical endpoint reads (historical-scope.ts). Each read may throw HistoricalNotReady. */
export interface HistoricalScope {
  /** `{transactionId, receipt}` of the transaction the request names, as JSON. */
  readonly stateJson: string;
  /** Set once a read needed what is not read yet: the request is answered 202, its handler's failure is not one. */
  readonly notReady: string | undefined;
  /** The value of `key` in `map` right after the committed transaction at `seqno`. */
  get(seqno: number, map: string, key: string): Uint8Array | undefined;
  /** The id (`view.seqno`) of the committed transaction at `seqno`, once its entry is read. */
  transactionIdAt(seqno: number): string;
  /** The seqnos in [from, to] that wrote `key`, by the index named. */
  seqnosByKey(index: string, key: string, from: number, to: number): number[];
}

class HostError extends Error {}

/** A map name as a key of the store: ArrayBuffer keys are held as Latin-1 strings (one character per byte, order kept). */
function keyOf(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1');
}

function bytesOfKey(key: string): Uint8Array {
  return new Uint8Array(Buffer.from(key, 'latin1'));
}

function checkReadable(name: string): void {
  if (name.startsWith(SERVICE_PRIVATE_PREFIX)) throw new HostError(`map "${name}" is private to the service: applications cannot read it`);
}

function checkWritable(name: string): void {
  if (name.startsWith(SERVICE_PUBLIC_PREFIX) || name.startsWith(SERVICE_PRIVATE_PREFIX)) {
    throw new HostError(refusal(SERVICE_TABLE_WRITE, name));
  }
}

const utf8Encoder = new TextEncoder();

const verifyKeys = new Map<string, KeyObject>();
const VERIFY_KEYS_CACHED_MAX = 64;

function publicKeyOf(pem: string): KeyObject {
  let key = verifyKeys.get(pem);
  if (key === undefined) {
    try {
      key = createPublicKey(pem);
    } catch (e) {
      throw new HostError(`verifySignature: the key is not a PEM public key or certificate (${(e as Error).message})`);
    }
    if (verifyKeys.size >= VERIFY_KEYS_CACHED_MAX) verifyKeys.clear();
    verifyKeys.set(pem, key);
  }
  return key;
}

interface SigningAlgorithm {
  name?: unknown;
  hash?: unknown;
  saltLength?: unknown;
}

function verifyWith(algorithmJson: string, pem: string, signature: Uint8Array, data: Uint8Array): boolean {
  const algorithm = JSON.parse(algorithmJson) as SigningAlgorithm;
  const key = publicKeyOf(pem);
  const hash = algorithm.hash === undefined ? 'SHA-256' : algorithm.hash;
  if (hash !== 'SHA-256' && hash !== 'SHA-384' && hash !== 'SHA-512') throw new HostError(`verifySignature: hash "${String(hash)}" is not SHA-256, SHA-384 or SHA-512`);
  const digest = hash.replace('-', '').toLowerCase();
  switch (algorithm.name) {
    case 'ECDSA':
      if (key.asymmetricKeyType !== 'ec') throw new HostError('verifySignature: ECDSA needs an EC key');
      return verifySignature(digest, data, { key, dsaEncoding: 'ieee-p1363' }, signature);
    case 'RSASSA-PKCS1-v1_5':
      if (key.asymmetricKeyType !== 'rsa') throw new HostError('verifySignature: RSASSA-PKCS1-v1_5 needs an RSA key');
      return verifySignature(digest, data, key, signature);
    case 'RSA-PSS': {
      if (key.asymmetricKeyType !== 'rsa') throw new HostError('verifySignature: RSA-PSS needs an RSA key');
      const saltLength = typeof algorithm.saltLength === 'number' ? algorithm.saltLength : 32;
      return verifySignature(digest, data, { key, padding: 6 /* RSA_PKCS1_PSS_PADDING */, saltLength }, signature);
    }
    case 'EdDSA':
      return verifySignature(null, data, key, signature);
    default:
      throw new HostError(`verifySignature: algorithm "${String(algorithm.name)}" is not ECDSA, RSASSA-PKCS1-v1_5, RSA-PSS or EdDSA`);
  }
}

/**
 * Applies writes a handler left pending in the sandbox (the prelude's packWrites): `writes` is
 * [[map name, [key, value length or -1 for a removal, ...]], ...] and the values are in `bytes`
 * from `offset` on, one after the other. The shape comes from the sandbox, so it is checked (a
 * script that changed the built-ins the prelude uses can send anything).
 */
function applyPendingWrites(writer: (name: string) => TxMap<string, Uint8Array>, writes: unknown, bytes: Uint8Array, offset: number): void {
  const malformed = (why: string) => new HostError(`the handler's pending writes are malformed: ${why}`);
  if (!Array.isArray(writes)) throw malformed('not a list');
  let at = offset;
  for (const item of writes as unknown[]) {
    if (!Array.isArray(item) || typeof item[0] !== 'string' || !Array.isArray(item[1]) || item[1].length % 2 !== 0) throw malformed('not [name, [key, length, ...]]');
    const map = writer(item[0]);
    const list = item[1] as unknown[];
    for (let i = 0; i < list.length; i += 2) {
      const key = list[i];
      const length = list[i + 1];
      if (typeof key !== 'string' || typeof length !== 'number' || !Number.isInteger(length) || length < -1) throw malformed('an entry is not [key, length]');
      if (length === -1) {
        map.remove(key);
        continue;
      }
      if (at + length > bytes.byteLength) throw malformed('the values are shorter than their lengths');
      map.put(key, bytes.slice(at, at + length));
      at += length;
    }
  }
  if (at !== bytes.byteLength) throw malformed('bytes are left over');
}

/** The host functions of an interpreter, reading the scope of the request being handled. */
export function createHost(currentScope: () => RequestScope | undefined): InterpreterHost {
  const scope = (): RequestScope => {
    const s = currentScope();
    if (s === undefined) throw new HostError('covenant.kv, covenant.rpc and covenant.consensus are available only while a request is handled');
    return s;
  };
  // Values cross the engine's boundary as copies: strings, numbers, booleans, ArrayBuffers.
  const bytes = (value: unknown): Uint8Array => {
    if (value instanceof ArrayBuffer) return new Uint8Array(value);
    if (ArrayBuffer.isView(value)) return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    throw new HostError('an ArrayBuffer argument is missing');
  };
  const text = (value: unknown): string => {
    if (typeof value !== 'string') throw new HostError('a string argument is missing');
    return value;
  };
  // A key from the prelude: its bytes as Latin-1 (the store's own form).
  const key = text;
  const buffer = (value: Uint8Array): ArrayBuffer => toArrayBuffer(value);
  // The application's JavaScript names any table it may use and handles its bytes: no declaration applies.
  const reader = (name: string): MapReader<string, Uint8Array> => {
    checkReadable(name);
    return scope().reader.map(name, stringKeyCodec, bytesCodec) as MapReader<string, Uint8Array>;
  };
  const historical = (): HistoricalScope => {
    const h = scope().historical;
    if (h === undefined) throw new HostError('covenant.historical and covenant.indexing are available only to a historical endpoint');
    return h;
  };
  const integer = (value: unknown, what: string): number => {
    if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) throw new HostError(`${what} must be a non-negative integer`);
    return value;
  };
  const writer = (name: string): TxMap<string, Uint8Array> => {
    checkWritable(name);
    const s = scope();
    if (s.tx === undefined) throw new HostError(refusal(READONLY_WRITE, name));
    return s.tx.map(name, stringKeyCodec, bytesCodec) as TxMap<string, Uint8Array>;
  };
  const functions: HostFunctions = {
    // A value crosses as Latin-1, as the prelude's writes do (a string is copied faster than an ArrayBuffer).
    __kv_get: (map, k) => {
      const value = reader(text(map)).get(key(k));
      return value === undefined ? undefined : Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('latin1');
    },
    __kv_has: (map, k) => reader(text(map)).has(key(k)),
    __kv_apply: (writes, values) => {
      const list = text(writes);
      const data = Buffer.from(text(values), 'latin1');
      let parsed: unknown;
      try {
        parsed = JSON.parse(list);
      } catch {
        throw new HostError("the handler's pending writes are not JSON");
      }
      applyPendingWrites(writer, parsed, data, 0);
      return undefined;
    },
    __kv_clear: (map) => {
      const target = writer(text(map));
      const keys: string[] = [];
      target.forEach((_v, k) => {
        keys.push(k);
      });
      for (const k of keys) target.remove(k);
      return undefined;
    },
    __kv_size: (map) => reader(text(map)).size,
    __kv_entries: (map) => {
      const mapName = text(map);
      const source = reader(mapName);
      if (source.size > FOR_EACH_ENTRIES_MAX) throw new HostError(`forEach visits at most ${FOR_EACH_ENTRIES_MAX} entries; map "${mapName}" has ${source.size}`);
      const entries: ArrayBuffer[] = [];
      source.forEach((value, k) => {
        entries.push(buffer(bytesOfKey(k)), buffer(value));
      });
      return entries;
    },
    // The encoder's array is exactly the bytes (no copy).
    __utf8_encode: (s) => utf8Encoder.encode(text(s)).buffer,
    __utf8_decode: (b) => {
      const data = bytes(b);
      return Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8');
    },
    __crypto_sha256: (data) => buffer(sha256(bytes(data))),
    __crypto_verify: (alg, k, signature, data) => verifyWith(text(alg), text(k), bytes(signature), bytes(data)),
    __crypto_random: (length) => {
      if (typeof length !== 'number' || !Number.isInteger(length) || length < 0 || length > RANDOM_BYTES_MAX) {
        throw new HostError(`randomBytes takes an integer length in [0, ${RANDOM_BYTES_MAX}]`);
      }
      return buffer(scope().randomBytes(length));
    },
    __commit_txid: () => scope().commitTxId(),
    __set_apply_writes: (apply) => {
      scope().applyWrites = apply === true;
      return undefined;
    },
    __set_claims_digest: (digest) => {
      const value = bytes(digest).slice();
      if (value.byteLength !== CLAIMS_DIGEST_BYTES) throw new HostError(`a claims digest has ${CLAIMS_DIGEST_BYTES} bytes, not ${value.byteLength}`);
      const s = scope();
      if (s.tx === undefined) throw new HostError('a claims digest is set only by a readwrite endpoint');
      s.claimsDigest = value;
      return undefined;
    },
    __host_time: () => scope().nowMs(),
    __historical_state: () => scope().historical?.stateJson,
    __hkv_get: (seqno, map, k) => {
      const name = text(map);
      checkReadable(name);
      const value = historical().get(integer(seqno, 'a seqno'), name, keyOf(bytes(k)));
      return value === undefined ? undefined : buffer(value);
    },
    __historical_txid: (seqno) => historical().transactionIdAt(integer(seqno, 'a seqno')),
    __index_seqnos: (index, k, from, to) => JSON.stringify(historical().seqnosByKey(text(index), keyOf(bytes(k)), integer(from, 'from'), integer(to, 'to'))),
  };
  const applyWrites = (writes: unknown, values: Uint8Array, offset: number): void => {
    try {
      applyPendingWrites(writer, writes, values, offset);
    } catch (e) {
      // As if a host function had thrown it in the handler: an exception of the script.
      if (e instanceof HostError) throw new ScriptFailure('Exception', `Error: ${e.message}`);
      throw e;
    }
  };
  return { functions, applyWrites };
}
