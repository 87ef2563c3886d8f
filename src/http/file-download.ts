/**
 * Serving immutable files (committed ledger chunks and snapshots) over HTTP: byte ranges,
 * digest ETags, If-None-Match and Want-Repr-Digest (spec endpoint rules 3-6, RFC 9110 and
 * RFC 9530). The header parsers are pure functions; `serveImmutableFile` does the file I/O.
 *
 * Choices where the spec is silent:
 * - A Range header naming several ranges is answered with the whole file (200): multipart
 *   answers buy nothing for ledger downloads and RFC 9110 lets a server ignore Range.
 * - A syntactically invalid Range header is ignored (200), an unsatisfiable one is 416; a first
 *   byte beyond 2^53 - 1 is unsatisfiable, a last byte there is clamped to the file's end.
 * - The ETag and If-None-Match compare the content this request would return: the range when a
 *   satisfiable Range is given, the whole file otherwise. So a 304 always echoes a tag the
 *   client sent, and a non-matching conditional range request still gets its 206.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { createHasher, type DigestAlgorithm } from '../crypto/index.js';
import { parseDictionary } from 'structured-headers';
import { json, stream, type RouteResponse } from './route.js';

/** In the server's order of preference when nothing else decides. */
export const SUPPORTED_DIGEST_ALGORITHMS: readonly DigestAlgorithm[] = ['sha-256', 'sha-384', 'sha-512'];
export const DEFAULT_DIGEST_ALGORITHM: DigestAlgorithm = 'sha-256';

function isSupportedAlgorithm(name: string): name is DigestAlgorithm {
  return (SUPPORTED_DIGEST_ALGORITHMS as readonly string[]).includes(name);
}

// ---- Range (RFC 9110 section 14) ----

/** Inclusive byte positions, as in Content-Range. */
export interface ByteRange {
  readonly start: number;
  readonly end: number;
}

export type RangeDecision =
  /** No (usable) Range: send the whole file. */
  | { readonly kind: 'full' }
  | { readonly kind: 'partial'; readonly range: ByteRange }
  | { readonly kind: 'unsatisfiable' };

const RANGE_SPEC = /^(\d*)-(\d*)$/;

export function decideRange(header: string | undefined, sizeBytes: number): RangeDecision {
  if (header === undefined) return { kind: 'full' };
  const text = header.trim();
  const eq = text.indexOf('=');
  if (eq === -1 || text.slice(0, eq).trim().toLowerCase() !== 'bytes') return { kind: 'full' };
  const specs = text.slice(eq + 1).split(',');
  if (specs.length !== 1) return { kind: 'full' };
  const m = RANGE_SPEC.exec(specs[0]!.trim());
  if (!m) return { kind: 'full' };
  const [, first, last] = m as unknown as [string, string, string];
  if (first === '' && last === '') return { kind: 'full' };
  // Digits beyond 2^53 - 1 name positions past the end of any file: a first byte there cannot be
  // served (416), a last byte or a suffix length there means "to the end" (RFC 9110 section 14.1.2).
  if (first === '') {
    // Suffix range: the last n bytes.
    const n = Number(last);
    if (n === 0 || sizeBytes === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', range: { start: Number.isSafeInteger(n) ? Math.max(0, sizeBytes - n) : 0, end: sizeBytes - 1 } };
  }
  const start = Number(first);
  if (!Number.isSafeInteger(start) || start >= sizeBytes) return { kind: 'unsatisfiable' };
  const end = last === '' ? Number.MAX_SAFE_INTEGER : Number(last);
  if (Number.isSafeInteger(end) && end < start) return { kind: 'full' };
  return { kind: 'partial', range: { start, end: Number.isSafeInteger(end) ? Math.min(end, sizeBytes - 1) : sizeBytes - 1 } };
}

// ---- Want-Repr-Digest (RFC 9530 section 4) ----

/**
 * The algorithm for Repr-Digest: the supported one with the highest preference (1-10; 0 means
 * "not acceptable"), ties broken by order in the header. A header that does not parse as a
 * Structured Field dictionary, or names only unsupported algorithms, gives sha-256 (rule 4).
 */
export function chooseReprDigestAlgorithm(header: string): DigestAlgorithm {
  let dictionary: ReturnType<typeof parseDictionary>;
  try {
    dictionary = parseDictionary(header);
  } catch (e) {
    if (e instanceof Error) return DEFAULT_DIGEST_ALGORITHM;
    throw e;
  }
  let best: DigestAlgorithm | undefined;
  let bestPreference = 0;
  for (const [name, member] of dictionary) {
    if (!isSupportedAlgorithm(name)) continue;
    const value = member[0];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > 10) continue;
    if (value > bestPreference) {
      best = name;
      bestPreference = value;
    }
  }
  return best ?? DEFAULT_DIGEST_ALGORITHM;
}

// ---- ETags and If-None-Match (RFC 9110 section 13.1.2) ----

export function formatDigestField(alg: DigestAlgorithm, digest: Uint8Array): string {
  return `${alg}=:${Buffer.from(digest).toString('base64')}:`;
}

export function formatEtag(alg: DigestAlgorithm, digest: Uint8Array): string {
  return `"${formatDigestField(alg, digest)}"`;
}

export type IfNoneMatch = { readonly kind: 'any' } | { readonly kind: 'tags'; readonly opaqueTags: readonly string[] };

/** Parses a list of entity tags; weak tags compare like strong ones (weak comparison). */
export function parseIfNoneMatch(header: string): IfNoneMatch {
  // "*" matches any current representation; in a list (not valid syntax, but sent) it still does.
  if (header.trim() === '*' || header.split(',').some((item) => item.trim() === '*')) return { kind: 'any' };
  const opaqueTags: string[] = [];
  // An entity tag is W/"..." or "..."; its opaque part holds no '"', but may hold ',' and '='.
  const tag = /\s*(?:W\/)?"([^"]*)"\s*(?:,|$)/gy;
  for (let m = tag.exec(header); m !== null; m = tag.exec(header)) {
    opaqueTags.push(m[1]!);
    if (tag.lastIndex >= header.length) break;
  }
  return { kind: 'tags', opaqueTags };
}

/** The first supported algorithm named by the tags (rule 6), else the default. */
export function etagAlgorithmFor(tags: readonly string[]): DigestAlgorithm {
  for (const tag of tags) {
    const eq = tag.indexOf('=');
    const name = eq === -1 ? '' : tag.slice(0, eq).toLowerCase();
    if (isSupportedAlgorithm(name)) return name;
  }
  return DEFAULT_DIGEST_ALGORITHM;
}

// ---- Digests of immutable files, cached ----

/**
 * A bounded LRU of digests of immutable files. The key holds the file's identity (path, size,
 * mtime, inode) so a replaced file is never answered with a stale digest.
 */
export class FileDigestCache {
  readonly #entries = new Map<string, Uint8Array>();
  readonly #entriesMax: number;
  hits = 0;
  misses = 0;

  constructor(entriesMax = 1024) {
    this.#entriesMax = entriesMax;
  }

  get(key: string): Uint8Array | undefined {
    const value = this.#entries.get(key);
    if (value === undefined) {
      this.misses++;
      return undefined;
    }
    this.hits++;
    // Re-insert so the Map's insertion order is least-recently-used first.
    this.#entries.delete(key);
    this.#entries.set(key, value);
    return value;
  }

  set(key: string, value: Uint8Array): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    while (this.#entries.size > this.#entriesMax) this.#entries.delete(this.#entries.keys().next().value!);
  }

  get size(): number {
    return this.#entries.size;
  }
}

const READ_BLOCK_BYTES = 1024 * 1024;

async function digestOfRange(handle: FileHandle, alg: DigestAlgorithm, range: ByteRange): Promise<Uint8Array> {
  const hasher = createHasher(alg);
  const buffer = Buffer.allocUnsafe(Math.min(READ_BLOCK_BYTES, Math.max(1, range.end - range.start + 1)));
  let position = range.start;
  while (position <= range.end) {
    const want = Math.min(buffer.length, range.end - position + 1);
    const { bytesRead } = await handle.read(buffer, 0, want, position);
    if (bytesRead === 0) throw new Error(`file ended at ${position}, before ${range.end + 1} bytes`);
    hasher.update(buffer.subarray(0, bytesRead));
    position += bytesRead;
  }
  return hasher.digest();
}

// ---- The answer ----

export interface ServeFileRequest {
  readonly method: 'GET' | 'HEAD';
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** Extra response headers (e.g. the chunk name header), on every answer but 416. */
  readonly nameHeaders: Readonly<Record<string, string>>;
}

function header(headers: ServeFileRequest['headers'], name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * Answers a GET or HEAD for an immutable file, or undefined when the file does not exist. The
 * file is opened once, so a concurrent move (to a read-only directory) or removal cannot mix
 * two files in one answer; GET bodies are streamed from that handle, never read whole.
 */
export async function serveImmutableFile(request: ServeFileRequest, cache: FileDigestCache): Promise<RouteResponse | undefined> {
  let handle: FileHandle;
  try {
    handle = await open(request.path, 'r');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR') return undefined;
    throw e;
  }
  let handOver = false;
  try {
    const stat = await handle.stat();
    if (!stat.isFile()) return undefined;
    const sizeBytes = stat.size;
    const identity = `${request.path}\0${sizeBytes}\0${stat.mtimeMs}\0${stat.ino}`;
    const digestOf = async (alg: DigestAlgorithm, range: ByteRange): Promise<Uint8Array> => {
      const key = `${identity}\0${alg}\0${range.start}-${range.end}`;
      let value = cache.get(key);
      if (value === undefined) {
        value = await digestOfRange(handle, alg, range);
        cache.set(key, value);
      }
      return value;
    };

    const rangeDecision = decideRange(header(request.headers, 'range'), sizeBytes);
    if (rangeDecision.kind === 'unsatisfiable') {
      return json(
        416,
        { error: { code: 'RangeNotSatisfiable', message: `the range cannot be served from ${sizeBytes} bytes` } },
        { 'content-range': `bytes */${sizeBytes}`, 'accept-ranges': 'bytes' },
      );
    }
    const whole: ByteRange = { start: 0, end: sizeBytes - 1 };
    const range = rangeDecision.kind === 'partial' ? rangeDecision.range : whole;
    const lengthBytes = range.end - range.start + 1;

    const headers: Record<string, string | number> = { ...request.nameHeaders, 'accept-ranges': 'bytes' };
    const wantReprDigest = header(request.headers, 'want-repr-digest');
    if (wantReprDigest !== undefined) {
      const alg = chooseReprDigestAlgorithm(wantReprDigest);
      headers['repr-digest'] = formatDigestField(alg, await digestOf(alg, whole));
    }

    const ifNoneMatch = header(request.headers, 'if-none-match');
    const condition = ifNoneMatch === undefined ? undefined : parseIfNoneMatch(ifNoneMatch);
    const etagAlgorithm = condition?.kind === 'tags' ? etagAlgorithmFor(condition.opaqueTags) : DEFAULT_DIGEST_ALGORITHM;
    const etagField = formatDigestField(etagAlgorithm, await digestOf(etagAlgorithm, range));
    headers['etag'] = `"${etagField}"`;
    if (condition !== undefined && (condition.kind === 'any' || condition.opaqueTags.includes(etagField))) {
      return { status: 304, headers, bodyKind: 'none' };
    }

    headers['content-type'] = 'application/octet-stream';
    headers['content-length'] = lengthBytes;
    const status = rangeDecision.kind === 'partial' ? 206 : 200;
    if (status === 206) headers['content-range'] = `bytes ${range.start}-${range.end}/${sizeBytes}`;
    if (request.method === 'HEAD' || lengthBytes === 0) return { status, headers, bodyKind: 'none' };
    handOver = true;
    return stream(status, handle.createReadStream({ start: range.start, end: range.end, autoClose: true }), headers);
  } finally {
    if (!handOver) await handle.close();
  }
}
