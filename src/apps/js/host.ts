/**
 * The host side of the application's `covenant` object: map access within the request's
 * transaction, converters, crypto, the last committed transaction, and the two switches of the
 * request (apply writes on an error answer, the claims digest). Everything reaches the node
 * through the scope of the request being handled; outside a request, these functions refuse.
 */
import { createPublicKey, verify as verifySignature, type KeyObject } from 'node:crypto';
import type { QuickJSContext, QuickJSHandle } from 'quickjs-emscripten-core';
import { sha256 } from '../../crypto/index.js';
import { bytesCodec, stringKeyCodec, type MapReader, type StoreView, type Tx, type TxMap } from '../../kv/index.js';
import type { HostFunctions, InterpreterHost } from './interpreter.js';
import { ScriptFailure, toArrayBuffer } from './interpreter.js';
import { FOR_EACH_ENTRIES_MAX, RANDOM_BYTES_MAX } from './limits.js';
import { READONLY_WRITE, refusal, SERVICE_PRIVATE_PREFIX, SERVICE_PUBLIC_PREFIX, SERVICE_TABLE_WRITE } from './map-rules.js';

const CLAIMS_DIGEST_BYTES = 32;
/** Marks a key the prelude sent as hex (it holds a zero byte, which a string cannot carry across). */
const HEX_KEY_MARK = 0x100;

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

/** A key as the prelude sends it: its bytes as Latin-1, or U+0100 and their hex when one is zero. */
function keyOfText(s: string): string {
  return s.charCodeAt(0) === HEX_KEY_MARK ? Buffer.from(s.slice(1), 'hex').toString('latin1') : s;
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
        map.remove(keyOfText(key));
        continue;
      }
      if (at + length > bytes.byteLength) throw malformed('the values are shorter than their lengths');
      map.put(keyOfText(key), bytes.slice(at, at + length));
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
  const bytes = (c: QuickJSContext, h: QuickJSHandle | undefined): Uint8Array => {
    if (h === undefined) throw new HostError('an ArrayBuffer argument is missing');
    const view = c.getArrayBuffer(h);
    try {
      return new Uint8Array(view.value);
    } finally {
      view.dispose();
    }
  };
  const text = (c: QuickJSContext, h: QuickJSHandle | undefined): string => {
    if (h === undefined || c.typeof(h) !== 'string') throw new HostError('a string argument is missing');
    return c.getString(h);
  };
  // A map name from the prelude, which always passes a string: one call, no type check.
  const name = (c: QuickJSContext, h: QuickJSHandle | undefined): string => {
    if (h === undefined) throw new HostError('a string argument is missing');
    return c.getString(h);
  };
  // A key from the prelude: its bytes as Latin-1, or U+0100 and their hex when one is zero.
  const key = (c: QuickJSContext, h: QuickJSHandle | undefined): string => keyOfText(name(c, h));
  const buffer = (c: QuickJSContext, value: Uint8Array) => c.newArrayBuffer(toArrayBuffer(value));
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
  const integer = (c: QuickJSContext, h: QuickJSHandle | undefined, what: string): number => {
    const n = h === undefined || c.typeof(h) !== 'number' ? Number.NaN : c.getNumber(h);
    if (!Number.isSafeInteger(n) || n < 0) throw new HostError(`${what} must be a non-negative integer`);
    return n;
  };
  const writer = (name: string): TxMap<string, Uint8Array> => {
    checkWritable(name);
    const s = scope();
    if (s.tx === undefined) throw new HostError(refusal(READONLY_WRITE, name));
    return s.tx.map(name, stringKeyCodec, bytesCodec) as TxMap<string, Uint8Array>;
  };
  const functions: HostFunctions = {
    __kv_get: (c, [map, k]) => {
      const value = reader(name(c, map)).get(key(c, k));
      return value === undefined ? c.undefined : buffer(c, value);
    },
    __kv_has: (c, [map, k]) => (reader(name(c, map)).has(key(c, k)) ? c.true : c.false),
    __kv_apply: (c, [writes, values]) => {
      const list = text(c, writes);
      const data = bytes(c, values);
      let parsed: unknown;
      try {
        parsed = JSON.parse(list);
      } catch {
        throw new HostError("the handler's pending writes are not JSON");
      }
      applyPendingWrites(writer, parsed, data, 0);
      return undefined;
    },
    __kv_clear: (c, [map]) => {
      const target = writer(text(c, map));
      const keys: string[] = [];
      target.forEach((_v, k) => {
        keys.push(k);
      });
      for (const k of keys) target.remove(k);
      return undefined;
    },
    __kv_size: (c, [map]) => c.newNumber(reader(name(c, map)).size),
    __kv_entries: (c, [map]) => {
      const mapName = name(c, map);
      const source = reader(mapName);
      if (source.size > FOR_EACH_ENTRIES_MAX) throw new HostError(`forEach visits at most ${FOR_EACH_ENTRIES_MAX} entries; map "${mapName}" has ${source.size}`);
      const array = c.newArray();
      let i = 0;
      source.forEach((value, key) => {
        const k = buffer(c, bytesOfKey(key));
        const v = buffer(c, value);
        c.setProp(array, i++, k);
        c.setProp(array, i++, v);
        k.dispose();
        v.dispose();
      });
      return array;
    },
    // The prelude checked the argument is a string; the encoder's array is exactly the bytes (no copy).
    __utf8_encode: (c, [s]) => c.newArrayBuffer(utf8Encoder.encode(name(c, s)).buffer),
    __utf8_decode: (c, [b]) => {
      const data = bytes(c, b);
      return c.newString(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('utf8'));
    },
    __crypto_sha256: (c, [data]) => buffer(c, sha256(bytes(c, data))),
    __crypto_verify: (c, [alg, key, signature, data]) => (verifyWith(text(c, alg), text(c, key), bytes(c, signature), bytes(c, data)) ? c.true : c.false),
    __crypto_random: (c, [length]) => {
      const n = length === undefined || c.typeof(length) !== 'number' ? Number.NaN : c.getNumber(length);
      if (!Number.isInteger(n) || n < 0 || n > RANDOM_BYTES_MAX) throw new HostError(`randomBytes takes an integer length in [0, ${RANDOM_BYTES_MAX}]`);
      return buffer(c, scope().randomBytes(n));
    },
    __commit_txid: (c) => c.newString(scope().commitTxId()),
    __set_apply_writes: (c, [apply]) => {
      scope().applyWrites = apply !== undefined && c.typeof(apply) === 'boolean' && (c.dump(apply) as boolean);
      return undefined;
    },
    __set_claims_digest: (c, [digest]) => {
      const value = bytes(c, digest);
      if (value.byteLength !== CLAIMS_DIGEST_BYTES) throw new HostError(`a claims digest has ${CLAIMS_DIGEST_BYTES} bytes, not ${value.byteLength}`);
      const s = scope();
      if (s.tx === undefined) throw new HostError('a claims digest is set only by a readwrite endpoint');
      s.claimsDigest = value;
      return undefined;
    },
    __host_time: (c) => c.newNumber(scope().nowMs()),
    __historical_state: (c) => {
      const h = scope().historical;
      return h === undefined ? c.undefined : c.newString(h.stateJson);
    },
    __hkv_get: (c, [seqno, map, key]) => {
      const name = text(c, map);
      checkReadable(name);
      const value = historical().get(integer(c, seqno, 'a seqno'), name, keyOf(bytes(c, key)));
      return value === undefined ? c.undefined : buffer(c, value);
    },
    __historical_txid: (c, [seqno]) => c.newString(historical().transactionIdAt(integer(c, seqno, 'a seqno'))),
    __index_seqnos: (c, [index, key, from, to]) =>
      c.newString(JSON.stringify(historical().seqnosByKey(text(c, index), keyOf(bytes(c, key)), integer(c, from, 'from'), integer(c, to, 'to')))),
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
