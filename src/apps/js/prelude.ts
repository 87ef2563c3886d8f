/**
 * The script that builds the application's global `covenant` object (docs/apps.md) over the raw
 * host functions, which it then takes off the global object. It also removes ambient time and
 * randomness: `Date.now()` and `new Date()` give 0 unless the application enabled untrusted host
 * time, and `Math.random` is a generator seeded per transaction.
 */
import { MAP_OBJECTS_CACHED_MAX } from './limits.js';

export const HOST_FUNCTION_NAMES = [
  '__kv_get',
  '__kv_has',
  '__kv_set',
  '__kv_delete',
  '__kv_clear',
  '__kv_size',
  '__kv_entries',
  '__utf8_encode',
  '__utf8_decode',
  '__crypto_sha256',
  '__crypto_verify',
  '__crypto_random',
  '__commit_txid',
  '__set_apply_writes',
  '__set_claims_digest',
  '__host_time',
  '__historical_state',
  '__hkv_get',
  '__historical_txid',
  '__index_seqnos',
  '__request_body',
] as const;

export const PRELUDE = `(() => {
  'use strict';
  const g = globalThis;
  const h = {};
  for (const name of ${JSON.stringify(HOST_FUNCTION_NAMES)}) { h[name] = g[name]; delete g[name]; }
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const isView = ArrayBuffer.isView;

  const buf = (x, what) => {
    if (x instanceof ArrayBuffer) return x;
    if (isView(x)) return x.buffer.slice(x.byteOffset, x.byteOffset + x.byteLength);
    throw new TypeError(what + ' must be an ArrayBuffer (use covenant.strToBuf or covenant.jsonCompatibleToBuf)');
  };
  const mapName = (name) => {
    if (typeof name !== 'string' || name.length === 0) throw new TypeError('covenant.kv: a map name is a non-empty string');
    return name;
  };
  // A key crosses to the host as a Latin-1 string (one character per byte, the store's own form):
  // reading a string there is one call, an ArrayBuffer's bytes several. The host reads strings up
  // to a NUL, so a key holding a zero byte crosses as U+0100 (never in Latin-1) and its hex.
  const HEX = '0123456789abcdef';
  const keyText = (k) => {
    const bytes = new Uint8Array(buf(k, 'key'));
    let s = '';
    if (bytes.indexOf(0) >= 0) {
      s = '\u0100';
      for (let i = 0; i < bytes.length; i++) s += HEX[bytes[i] >> 4] + HEX[bytes[i] & 15];
      return s;
    }
    for (let i = 0; i < bytes.length; i += 4096) s += String.fromCharCode.apply(null, bytes.subarray(i, i + 4096));
    return s;
  };
  const makeMap = (name) => {
    const map = {
      get: (k) => h.__kv_get(name, keyText(k)),
      has: (k) => h.__kv_has(name, keyText(k)),
      set: (k, v) => { h.__kv_set(name, keyText(k), buf(v, 'value')); return map; },
      delete: (k) => h.__kv_delete(name, keyText(k)),
      clear: () => { h.__kv_clear(name); },
      forEach: (callback) => {
        if (typeof callback !== 'function') throw new TypeError('forEach takes a function (value, key, map)');
        const entries = h.__kv_entries(name);
        for (let i = 0; i < entries.length; i += 2) callback(entries[i + 1], entries[i], map);
      },
      get size() { return h.__kv_size(name); },
    };
    return Object.freeze(map);
  };
  // Map objects are kept by name (a handler names the same few maps on every request), up to a bound.
  const maps = new Map();
  const mapOf = (name) => {
    let map = maps.get(name);
    if (map === undefined) {
      if (maps.size >= ${MAP_OBJECTS_CACHED_MAX}) maps.clear();
      map = makeMap(mapName(name));
      maps.set(name, map);
    }
    return map;
  };
  const kv = new Proxy(Object.freeze({}), {
    get: (_target, name) => (typeof name === 'string' ? mapOf(name) : undefined),
    set: () => false,
    defineProperty: () => false,
  });

  // A read-only view of the state right after the committed transaction at seqno: get and has.
  const historicalOnly = (what) => () => { throw new TypeError('a historical state is read-only and read key by key: ' + what + ' is not available'); };
  const makeHistoricalMap = (seqno, name) => Object.freeze({
    get: (k) => h.__hkv_get(seqno, name, buf(k, 'key')),
    has: (k) => h.__hkv_get(seqno, name, buf(k, 'key')) !== undefined,
    set: historicalOnly('set'),
    delete: historicalOnly('delete'),
    clear: historicalOnly('clear'),
    forEach: historicalOnly('forEach'),
    get size() { return historicalOnly('size')(); },
  });
  const historicalKv = (seqno) => new Proxy(Object.freeze({}), {
    get: (_target, name) => (typeof name === 'string' ? makeHistoricalMap(seqno, mapName(name)) : undefined),
    set: () => false,
    defineProperty: () => false,
  });
  const txidOf = (text) => { const [view, seqno] = text.split('.').map(Number); return { view, seqno }; };
  const historicalStateAt = (seqno) => Object.freeze({ transactionId: h.__historical_txid(seqno), kv: historicalKv(seqno) });

  // UTF-8 in the sandbox for short strings (a call to the host costs more than encoding them here).
  const SHORT = 24;
  const strToBuf = (s) => {
    if (typeof s !== 'string') throw new TypeError('strToBuf takes a string');
    if (s.length > SHORT) return h.__utf8_encode(s);
    const out = new Uint8Array(s.length * 3);
    let n = 0;
    for (let i = 0; i < s.length; i++) {
      let c = s.charCodeAt(i);
      if (c < 0x80) { out[n++] = c; continue; }
      if (c >= 0xd800 && c <= 0xdfff) return h.__utf8_encode(s);
      if (c < 0x800) { out[n++] = 0xc0 | (c >> 6); out[n++] = 0x80 | (c & 63); continue; }
      out[n++] = 0xe0 | (c >> 12); out[n++] = 0x80 | ((c >> 6) & 63); out[n++] = 0x80 | (c & 63);
    }
    return out.buffer.slice(0, n);
  };
  const bufToStr = (b) => {
    const bytes = new Uint8Array(buf(b, 'bufToStr\\'s argument'));
    if (bytes.length > SHORT) return h.__utf8_decode(bytes.buffer);
    let s = '';
    for (let i = 0; i < bytes.length; i++) {
      if (bytes[i] >= 0x80) return h.__utf8_decode(bytes.buffer);
      s += String.fromCharCode(bytes[i]);
    }
    return s;
  };
  const jsonCompatibleToBuf = (v) => {
    const text = stringify(v);
    if (text === undefined) throw new TypeError('jsonCompatibleToBuf: the value has no JSON form');
    return strToBuf(text);
  };
  const bufToJsonCompatible = (b) => parse(bufToStr(b));

  let untrustedTime = false;
  const now = () => (untrustedTime ? h.__host_time() : 0);
  const RealDate = Date;
  RealDate.now = now;
  g.Date = new Proxy(RealDate, {
    construct: (target, args, newTarget) => Reflect.construct(target, args.length === 0 ? [now()] : args, newTarget),
    apply: () => new RealDate(now()).toString(),
  });

  let seed = 0;
  Math.random = () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };

  g.covenant = Object.freeze({
    kv,
    strToBuf,
    bufToStr,
    jsonCompatibleToBuf,
    bufToJsonCompatible,
    enableUntrustedDateTime: (enable) => { const before = untrustedTime; untrustedTime = enable === true; return before; },
    crypto: Object.freeze({
      sha256: (data) => h.__crypto_sha256(buf(data, 'sha256\\'s data')),
      digest: (algorithm, data) => {
        if (algorithm !== 'SHA-256') throw new TypeError('digest supports SHA-256');
        return h.__crypto_sha256(buf(data, 'digest\\'s data'));
      },
      verifySignature: (algorithm, key, signature, data) =>
        h.__crypto_verify(stringify(algorithm), String(key), buf(signature, 'signature'), buf(data, 'data')),
      randomBytes: (length) => h.__crypto_random(length),
    }),
    consensus: Object.freeze({
      getLastCommittedTxId: () => {
        const [view, seqno] = h.__commit_txid().split('.').map(Number);
        return { view, seqno };
      },
    }),
    get historicalState() {
      const text = h.__historical_state();
      if (text === undefined) return undefined;
      const state = parse(text);
      return Object.freeze({ transactionId: state.transactionId, receipt: state.receipt, kv: historicalKv(txidOf(state.transactionId).seqno) });
    },
    historical: Object.freeze({
      getStateAt: (seqno) => historicalStateAt(seqno),
    }),
    indexing: Object.freeze({
      seqnosByKey: (index, key, from, to) => parse(h.__index_seqnos(String(index), buf(key, 'key'), from, to)),
    }),
    rpc: Object.freeze({
      setApplyWrites: (apply) => { h.__set_apply_writes(apply === true); },
      setClaimsDigest: (digest) => { h.__set_claims_digest(buf(digest, 'the claims digest')); },
    }),
  });

  class CovenantResponseError extends Error {}
  CovenantResponseError.prototype.name = 'CovenantResponseError';
  const bad = (message) => { throw new CovenantResponseError(message); };
  const HEADER_NAME = /^[!#$%&'*+.^_\`|~0-9A-Za-z-]+$/;

  // The handler's answer in a form the host reads field by field.
  const encode = (res) => {
    if (res === undefined || res === null) return '{"s":200,"h":{},"k":"none"}';
    if (typeof res !== 'object' || Array.isArray(res)) bad('a handler returns an object {statusCode?, headers?, body?}, not ' + (Array.isArray(res) ? 'an array' : typeof res));
    const status = res.statusCode === undefined ? 200 : res.statusCode;
    if (!Number.isInteger(status) || status < 100 || status > 599) bad('statusCode must be an integer in [100, 599], not ' + String(status));
    const headers = {};
    if (res.headers !== undefined) {
      if (typeof res.headers !== 'object' || res.headers === null) bad('headers must be an object of strings');
      for (const [name, value] of Object.entries(res.headers)) {
        if (!HEADER_NAME.test(name)) bad('header name "' + name + '" is not a token');
        if (typeof value !== 'string' && typeof value !== 'number') bad('header "' + name + '" must be a string');
        const text = String(value);
        if (/[\\r\\n\\0]/.test(text)) bad('header "' + name + '" holds a line break');
        headers[name.toLowerCase()] = text;
      }
    }
    // One string for the host to read (bytes beside it): each value read across costs a call.
    const body = res.body;
    const out = { s: status, h: headers };
    if (body === undefined || body === null) out.k = 'none';
    else if (body instanceof ArrayBuffer || isView(body)) { out.k = 'bytes'; return { m: stringify(out), b: buf(body, 'body') }; }
    else if (typeof body === 'string') { out.k = 'text'; out.t = body; }
    else {
      const text = stringify(body);
      if (text === undefined) bad('the body has no JSON form');
      out.k = 'json';
      out.t = text;
    }
    return stringify(out);
  };

  // The host gives the body as text when it is valid UTF-8; its bytes are fetched when asked for.
  class RequestBody {
    #text; #bytes;
    constructor(text) { this.#text = text; }
    #data() { if (this.#bytes === undefined) this.#bytes = h.__request_body(); return this.#bytes; }
    text() { return typeof this.#text === 'string' ? this.#text : h.__utf8_decode(this.#data()); }
    json() { return parse(this.text()); }
    arrayBuffer() { return this.#data().slice(0); }
  }
  Object.freeze(RequestBody.prototype);
  // The request's other fields are parsed from their JSON text on first use (a handler often reads
  // only its body); a field assigned to becomes the handler's own.
  const own = (target, name, value) => Object.defineProperty(target, name, { value, writable: true, enumerable: true, configurable: true });
  class Request {
    #meta; #fields;
    constructor(meta, text) { this.#meta = meta; this.body = Object.freeze(new RequestBody(text)); }
    #field(name) { if (this.#fields === undefined) this.#fields = parse(this.#meta); return this.#fields[name]; }
    get method() { return this.#field('method'); }
    set method(value) { own(this, 'method', value); }
    get path() { return this.#field('path'); }
    set path(value) { own(this, 'path', value); }
    get route() { return this.#field('route'); }
    set route(value) { own(this, 'route', value); }
    get params() { return this.#field('params'); }
    set params(value) { own(this, 'params', value); }
    get query() { return this.#field('query'); }
    set query(value) { own(this, 'query', value); }
    get headers() { return this.#field('headers'); }
    set headers(value) { own(this, 'headers', value); }
    get caller() { return this.#field('caller'); }
    set caller(value) { own(this, 'caller', value); }
  }
  Object.freeze(Request.prototype);
  const makeRequest = (meta, text) => new Request(meta, text);

  // Called by the host for each request: fresh seed, no untrusted time, then the handler.
  g.__covenant_dispatch = (handler, meta, text, requestSeed) => {
    seed = requestSeed | 0;
    untrustedTime = false;
    const res = handler(makeRequest(meta, text));
    if (res !== null && typeof res === 'object' && typeof res.then === 'function') return res.then(encode);
    return encode(res);
  };
})();`;
