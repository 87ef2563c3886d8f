/**
 * Declarations of what a Covenant application sees (docs/apps.md): the global `covenant` object,
 * the request a handler receives and the response it returns. Reference this file from an
 * application written in TypeScript (`/// <reference path="covenant.d.ts" />`) and compile it to
 * the ES modules the bundle holds.
 */

/** A map of the store: keys and values are bytes. */
interface CovenantKvMap {
  get(key: ArrayBuffer): ArrayBuffer | undefined;
  has(key: ArrayBuffer): boolean;
  /** Refused on a readonly endpoint and on service tables (`public:svc.*`). */
  set(key: ArrayBuffer, value: ArrayBuffer): CovenantKvMap;
  delete(key: ArrayBuffer): boolean;
  clear(): void;
  forEach(callback: (value: ArrayBuffer, key: ArrayBuffer, map: CovenantKvMap) => void): void;
  readonly size: number;
}

interface CovenantSigningAlgorithm {
  name: 'ECDSA' | 'RSASSA-PKCS1-v1_5' | 'RSA-PSS' | 'EdDSA';
  hash?: 'SHA-256' | 'SHA-384' | 'SHA-512';
  /** RSA-PSS only (default 32). */
  saltLength?: number;
}

interface CovenantTxId {
  view: number;
  seqno: number;
}

interface Covenant {
  /** `covenant.kv["name"]`: a `public:` name is in clear in the ledger; any other is encrypted with the ledger secret. */
  readonly kv: { readonly [name: string]: CovenantKvMap };
  strToBuf(text: string): ArrayBuffer;
  bufToStr(bytes: ArrayBuffer): string;
  jsonCompatibleToBuf(value: unknown): ArrayBuffer;
  bufToJsonCompatible<T = unknown>(bytes: ArrayBuffer): T;
  /** Lets Date.now() and new Date() read the node's clock for the rest of this request (0 otherwise); returns the previous setting. */
  enableUntrustedDateTime(enable: boolean): boolean;
  readonly crypto: {
    sha256(data: ArrayBuffer): ArrayBuffer;
    digest(algorithm: 'SHA-256', data: ArrayBuffer): ArrayBuffer;
    /** ECDSA signatures in IEEE P1363 form (r ‖ s), as WebCrypto makes them. `key`: a PEM public key or certificate. */
    verifySignature(algorithm: CovenantSigningAlgorithm, key: string, signature: ArrayBuffer, data: ArrayBuffer): boolean;
    /** Cryptographically random bytes (at most 65536). */
    randomBytes(length: number): ArrayBuffer;
  };
  readonly consensus: {
    getLastCommittedTxId(): CovenantTxId;
  };
  readonly rpc: {
    /** Keep this request's writes although its answer is an error (4xx/5xx). */
    setApplyWrites(apply: boolean): void;
    /** 32 bytes bound into the transaction's Merkle leaf (readwrite endpoints). */
    setClaimsDigest(digest: ArrayBuffer): void;
  };
  /**
   * Historical endpoints only: the committed transaction named by x-covenant-transaction-id, its
   * receipt (as GET /node/receipt's `receipt`) and the state right after it. Undefined elsewhere.
   */
  readonly historicalState: CovenantHistoricalState | undefined;
  readonly historical: {
    /** The state right after the committed transaction at `seqno` (historical endpoints; at most 256 per request). */
    getStateAt(seqno: number): CovenantPastState;
  };
  readonly indexing: {
    /** The committed seqnos in [from, to] that wrote `key`, by an index of app.json (strategy seqnos_by_key). */
    seqnosByKey(index: string, key: ArrayBuffer, from: number, to: number): number[];
  };
}

/** A read-only view of a past state: get and has only (a map not indexed answers only for the keys its transaction wrote). */
interface CovenantPastKvMap {
  get(key: ArrayBuffer): ArrayBuffer | undefined;
  has(key: ArrayBuffer): boolean;
}

interface CovenantPastState {
  /** `<view>.<seqno>`. */
  readonly transactionId: string;
  readonly kv: { readonly [name: string]: CovenantPastKvMap };
}

interface CovenantHistoricalState extends CovenantPastState {
  readonly receipt: unknown;
}

type CovenantCaller =
  | { policy: 'user_cert' | 'member_cert'; id: string; /** The registered certificate (PEM). */ cert: string }
  | { policy: 'any_cert'; id: string; cert: string }
  | { policy: 'jwt'; jwt: { issuer: string; subject: string | null; claims: Record<string, unknown> } }
  | { policy: 'no_auth' };

interface CovenantRequest<P extends Record<string, string> = Record<string, string>> {
  method: 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE';
  path: string;
  /** The endpoint's template, e.g. `/records/{id}`. */
  route: string;
  params: P;
  /** The query string without `?` (may be empty). */
  query: string;
  headers: Record<string, string>;
  caller: CovenantCaller;
  body: {
    text(): string;
    json<T = unknown>(): T;
    arrayBuffer(): ArrayBuffer;
  };
}

interface CovenantResponse {
  /** Default 200. */
  statusCode?: number;
  headers?: Record<string, string>;
  /** A string is sent as text, an ArrayBuffer as bytes, anything else as JSON. */
  body?: unknown;
}

declare const covenant: Covenant;
