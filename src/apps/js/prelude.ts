/**
 * The script that builds the application's global `covenant` object (docs/apps.md) over the raw
 * host functions, which it then takes off the global object. It also removes ambient time and
 * randomness: `Date.now()` and `new Date()` give 0 unless the application enabled untrusted host
 * time, and `Math.random` is a generator seeded per transaction.
 */
import { MAP_OBJECTS_CACHED_MAX, WRITES_BUFFERED_BYTES_MAX } from './limits.js';
import { READONLY_WRITE, SERVICE_PRIVATE_PREFIX, SERVICE_PUBLIC_PREFIX, SERVICE_TABLE_WRITE } from './map-rules.js';

export const HOST_FUNCTION_NAMES = [
  '__kv_get',
  '__kv_has',
  '__kv_clear',
  '__kv_size',
  '__kv_entries',
  '__kv_apply',
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
  '__request_fields',
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
  // A handler's writes are kept here, per map (key text -> a copy of the value, or null for a
  // removal), and handed to the host once, with the answer: a call to the host costs more than the
  // write itself. A read of a key written earlier in the request is answered from here; what needs
  // a map's whole state (size, forEach) hands that map's writes over first, and so does a buffer
  // grown past its bound. The host checks every write again as it applies it.
  const pending = new Map();
  let pendingBytes = 0;
  // Whether a handler runs (writes outside one, at a module's top level, would have no request to
  // go with) and whether it may write.
  let handling = false;
  let writable = false;
  const checkWritable = (name) => {
    if (name.startsWith(${JSON.stringify(SERVICE_PUBLIC_PREFIX)}) || name.startsWith(${JSON.stringify(SERVICE_PRIVATE_PREFIX)})) {
      throw new Error(${JSON.stringify(SERVICE_TABLE_WRITE)}.replace('{map}', () => name));
    }
    if (!handling) throw new Error('map "' + name + '": covenant.kv is written only while a request is handled (not by the top level of a module)');
    if (!writable) throw new Error(${JSON.stringify(READONLY_WRITE)}.replace('{map}', () => name));
  };
  const copyOf = (x, what) => (x instanceof ArrayBuffer ? x.slice(0) : buf(x, what));
  // The pending writes of some maps as the host reads them: [[map name, [key text, value length
  // (-1: a removal), ...]], ...], and the values' bytes one after the other, after \`head\`'s.
  const packWrites = (names, head) => {
    const writes = [];
    const values = [];
    let total = head === undefined ? 0 : head.byteLength;
    for (let i = 0; i < names.length; i++) {
      const list = [];
      pending.get(names[i]).forEach((value, text) => {
        if (value === null) { list.push(text, -1); return; }
        list.push(text, value.byteLength);
        values.push(value);
        total += value.byteLength;
      });
      writes.push([names[i], list]);
      pending.delete(names[i]);
    }
    if (pending.size === 0) pendingBytes = 0;
    if (values.length === 1 && head === undefined) return { writes, bytes: values[0] };
    const bytes = new Uint8Array(total);
    let offset = 0;
    if (head !== undefined) { bytes.set(new Uint8Array(head)); offset = head.byteLength; }
    for (let i = 0; i < values.length; i++) { bytes.set(new Uint8Array(values[i]), offset); offset += values[i].byteLength; }
    return { writes, bytes: bytes.buffer };
  };
  const pendingNames = () => { const names = []; pending.forEach((_entries, name) => { names.push(name); }); return names; };
  const applyNow = (names) => { const { writes, bytes } = packWrites(names, undefined); h.__kv_apply(stringify(writes), bytes); };
  const makeMap = (name) => {
    const writesOf = () => {
      let entries = pending.get(name);
      if (entries === undefined) { entries = new Map(); pending.set(name, entries); }
      return entries;
    };
    // undefined: not written in this request; null: removed; else the value written.
    const buffered = (text) => { const entries = pending.get(name); return entries === undefined ? undefined : entries.get(text); };
    const flush = () => { if (pending.has(name)) applyNow([name]); };
    const bound = (bytes) => { pendingBytes += bytes; if (pendingBytes > ${WRITES_BUFFERED_BYTES_MAX}) applyNow(pendingNames()); };
    const map = {
      get: (k) => {
        const text = keyText(k);
        const value = buffered(text);
        if (value === undefined) return h.__kv_get(name, text);
        return value === null ? undefined : value.slice(0);
      },
      has: (k) => {
        const text = keyText(k);
        const value = buffered(text);
        return value === undefined ? h.__kv_has(name, text) : value !== null;
      },
      set: (k, v) => {
        checkWritable(name);
        const text = keyText(k);
        const value = copyOf(v, 'value');
        writesOf().set(text, value);
        bound(text.length + value.byteLength);
        return map;
      },
      delete: (k) => {
        checkWritable(name);
        const text = keyText(k);
        const value = buffered(text);
        const existed = value === undefined ? h.__kv_has(name, text) : value !== null;
        writesOf().set(text, null);
        bound(text.length);
        return existed;
      },
      clear: () => {
        checkWritable(name);
        // What the request wrote to the map goes with the rest of it.
        pending.delete(name);
        h.__kv_clear(name);
      },
      forEach: (callback) => {
        if (typeof callback !== 'function') throw new TypeError('forEach takes a function (value, key, map)');
        flush();
        const entries = h.__kv_entries(name);
        for (let i = 0; i < entries.length; i += 2) callback(entries[i + 1], entries[i], map);
      },
      get size() { flush(); return h.__kv_size(name); },
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

  // The handler's answer in a form the host reads with few calls: one JSON string, or that string
  // and one ArrayBuffer (a bytes body, then the values of the writes the request left pending).
  const encode = (res) => {
    let out;
    if (res === undefined || res === null) {
      if (pending.size === 0) return '{"s":200,"h":{},"k":"none"}';
      out = { s: 200, h: {}, k: 'none' };
    } else {
      out = answerOf(res);
    }
    const head = out.k === 'bytes' ? out.b : undefined;
    delete out.b;
    if (pending.size === 0) return head === undefined ? stringify(out) : { m: stringify(out), b: head };
    const { writes, bytes } = packWrites(pendingNames(), head);
    out.w = writes;
    if (head !== undefined) out.n = head.byteLength;
    return { m: stringify(out), b: bytes };
  };
  const answerOf = (res) => {
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
    const body = res.body;
    const out = { s: status, h: headers };
    if (body === undefined || body === null) out.k = 'none';
    else if (body instanceof ArrayBuffer || isView(body)) { out.k = 'bytes'; out.b = buf(body, 'body'); }
    else if (typeof body === 'string') { out.k = 'text'; out.t = body; }
    else {
      const text = stringify(body);
      if (text === undefined) bad('the body has no JSON form');
      out.k = 'json';
      out.t = text;
    }
    return out;
  };

  // The request being handled: its number (a request kept past its handler cannot fetch what it
  // had not read: the host hands over only the current request's fields and body).
  let requestNumber = 0;
  const fetched = (n, value, what) => {
    if (n !== requestNumber || value === undefined) throw new TypeError("the request's " + what + ' can be read only while its handler runs');
    return value;
  };
  // The host gives the body as text when it is valid UTF-8; its bytes are fetched when asked for.
  class RequestBody {
    #n; #text; #bytes;
    constructor(n, text) { this.#n = n; this.#text = text; }
    #data() { if (this.#bytes === undefined) this.#bytes = fetched(this.#n, this.#n === requestNumber ? h.__request_body() : undefined, 'body'); return this.#bytes; }
    text() { return typeof this.#text === 'string' ? this.#text : h.__utf8_decode(this.#data()); }
    json() { return parse(this.text()); }
    arrayBuffer() { return this.#data().slice(0); }
  }
  Object.freeze(RequestBody.prototype);
  // The request's other fields are fetched from the host as one JSON text on first use (a handler
  // often reads only its body); a field assigned to becomes the handler's own.
  const own = (target, name, value) => Object.defineProperty(target, name, { value, writable: true, enumerable: true, configurable: true });
  class Request {
    #n; #fields;
    constructor(n, text) { this.#n = n; this.body = Object.freeze(new RequestBody(n, text)); }
    #field(name) {
      if (this.#fields === undefined) this.#fields = parse(fetched(this.#n, this.#n === requestNumber ? h.__request_fields() : undefined, 'fields'));
      return this.#fields[name];
    }
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

  // Called by the host for each request: fresh seed, no untrusted time, no pending writes, then the handler.
  g.__covenant_dispatch = (handler, text, requestSeed, canWrite) => {
    requestNumber++;
    seed = requestSeed | 0;
    untrustedTime = false;
    writable = canWrite === true;
    handling = true;
    pending.clear();
    pendingBytes = 0;
    let res;
    try {
      res = handler(new Request(requestNumber, text));
    } catch (e) {
      handling = false;
      throw e;
    }
    if (res !== null && typeof res === 'object' && typeof res.then === 'function') {
      // A promise that settles during a later request (its resolver was kept) finishes nothing: the
      // writes pending then are that request's.
      const n = requestNumber;
      return res.then((value) => (n === requestNumber ? finish(value) : undefined), (e) => { if (n === requestNumber) handling = false; throw e; });
    }
    return finish(res);
  };
  const finish = (res) => {
    handling = false;
    return encode(res);
  };
})();`;
