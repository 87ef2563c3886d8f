/**
 * What the constitution sees of the service: `svc.kv`, `svc.crypto`, `svc.node` and `svc.jwt`, built by a
 * prelude over a few host functions. Table access is limited to `public:svc.gov.*` tables; writes
 * are allowed only while `apply` runs and never to the governance history.
 *
 * Writes do not go to the transaction directly: they are staged, and flushed only when the whole
 * `apply` succeeded, so a proposal whose apply throws half-way leaves nothing behind but its own
 * Failed record (docs/architecture.md, decision 11: nothing half-written). Effects outside the store (a ledger
 * chunk request) are likewise collected and run by the caller after the transaction commits.
 *
 * `svc.network` renews certificates with the service key of the node that applies the proposal
 * (the primary), in apply only: the renewed certificate is a value the constitution then writes,
 * so a proposal that fails leaves no certificate behind either.
 */
import { CovenantError } from '../base/errors.js';
import { certificateId, jwkPublicKey, loadPublicKey, parseCertificate, splitPemCertificates, type JwkPublicKey } from '../crypto/index.js';
import { bytesCodec, jsonCodec, type Codec, type TableDef, type Tx } from '../kv/index.js';
import type { HostFunctions } from './sandbox.js';
import { governanceJwksMetadata, replaceIssuerKeys, type StagedTable } from './jwt-keys.js';
import { GOV_SINGLETON_KEY, GOV_TABLES_READ_ONLY_FOR_CONSTITUTION, GovTableDefs, GovTables } from './tables.js';

const GOV_TABLE_PREFIX = 'public:svc.gov.';
const TABLE_KEYS_MAX = 100_000;
/** The constitution reads and writes any governance table by name, with untyped JSON: no declaration applies (see declared()). */
const anyJson = jsonCodec<unknown>();
/** The stored bytes themselves, for reading only (bytesCodec copies them). */
const storedBytes: Codec<Uint8Array> = { encode: (value) => bytesCodec.encode(value), decode: (bytes) => bytes };

export class StagedKv {
  private readonly staged = new Map<string, Map<string, unknown | null>>();
  /** Table work the host does when apply has returned (outside member JavaScript's time budget), in order. */
  private readonly deferred: ((kv: StagedKv) => void)[] = [];

  constructor(private readonly tx: Tx) {}

  get(table: string, key: string): unknown {
    const writes = this.staged.get(table);
    if (writes?.has(key)) return writes.get(key) ?? undefined;
    return this.tx.map(table, anyJson).get(key);
  }

  has(table: string, key: string): boolean {
    return this.get(table, key) !== undefined;
  }

  keys(table: string): string[] {
    const out = new Set<string>();
    let count = 0;
    this.tx.map(table, anyJson).forEach((_value, key) => {
      if (++count > TABLE_KEYS_MAX) throw new Error(`table ${table} has more than ${TABLE_KEYS_MAX} keys`);
      out.add(key);
    });
    for (const [key, value] of this.staged.get(table) ?? []) {
      if (value === null) out.delete(key);
      else out.add(key);
    }
    return [...out].sort();
  }

  /**
   * The entries of `table` whose JSON text contains `text` (staged writes included), found without
   * decoding the others: a governance action over one issuer's keys reads a table of thousands of
   * kids within a request's budget.
   */
  entriesMentioning(table: string, text: string): Map<string, unknown> {
    const needle = Buffer.from(text, 'utf8');
    const staged = this.staged.get(table);
    const out = new Map<string, unknown>();
    let count = 0;
    this.tx.map(table, storedBytes).forEach((raw, key) => {
      if (++count > TABLE_KEYS_MAX) throw new Error(`table ${table} has more than ${TABLE_KEYS_MAX} keys`);
      if (staged?.has(key)) return;
      const bytes = Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
      if (bytes.indexOf(needle) !== -1) out.set(key, JSON.parse(bytes.toString('utf8')) as unknown);
    });
    for (const [key, value] of staged ?? []) {
      if (value !== null && JSON.stringify(value).includes(text)) out.set(key, value);
    }
    return out;
  }

  put(table: string, key: string, value: unknown): void {
    let writes = this.staged.get(table);
    if (!writes) this.staged.set(table, (writes = new Map()));
    writes.set(key, value);
  }

  remove(table: string, key: string): boolean {
    const had = this.has(table, key);
    this.stageRemoval(table, key);
    return had;
  }

  /** remove() of a key the caller knows is there (it saw its entry), without reading it again. */
  stageRemoval(table: string, key: string): void {
    let writes = this.staged.get(table);
    if (!writes) this.staged.set(table, (writes = new Map()));
    writes.set(key, null);
  }

  /**
   * One table through its declaration, for the host's own work over it. The staged view serves the
   * constitution, which reads and writes any table with untyped JSON values: here, in one place,
   * a declared table's value type is given to what it holds, as a codec gives it to stored bytes.
   */
  declared<V>(def: TableDef<V>): StagedTable<V> {
    return {
      entriesMentioning: (text) => this.entriesMentioning(def.name, text) as Map<string, V>,
      get: (key) => this.get(def.name, key) as V | undefined,
      put: (key, value) => this.put(def.name, key, value),
      stageRemoval: (key) => this.stageRemoval(def.name, key),
    };
  }

  /** Runs `work` over these tables when apply has returned, before its writes reach the transaction. */
  defer(work: (kv: StagedKv) => void): void {
    this.deferred.push(work);
  }

  /**
   * Writes what apply staged to the transaction. The deferred work runs first, over the staged
   * view: if it throws, nothing has reached the transaction (the proposal fails whole).
   */
  flush(): void {
    for (const work of this.deferred.splice(0)) work(this);
    for (const [table, writes] of this.staged) {
      const map = this.tx.map(table, anyJson);
      for (const [key, value] of writes) {
        if (value === null) map.remove(key);
        else map.put(key, value);
      }
    }
    this.staged.clear();
  }
}

/**
 * Renews certificates with the service key (the node that applies proposals holds it). Both keep
 * the certificate's key, subject and names: only the validity period (and serial number) change.
 */
export interface CertificateRenewer {
  /** The service certificate `currentPem`, self-signed again for the period. */
  renewServiceCertificate(currentPem: string, validFrom: Date, validityDays: number): string;
  /** A node certificate the service endorsed, endorsed again by the service key for the period. */
  renewNodeCertificate(currentPem: string, validFrom: Date, validityDays: number): string;
}

export interface ConstitutionHostOptions {
  /** Without one, svc.network's renewals throw (governance that runs without a service key). */
  readonly certificates?: CertificateRenewer;
  /** The applying node's clock (ms since the Unix epoch): a renewal must be valid now. */
  readonly nowMs?: () => number;
}

export interface ConstitutionHost {
  readonly prelude: string;
  readonly functions: HostFunctions;
  readonly kv: StagedKv;
  /** Writes are refused unless apply is running. */
  setWritable(writable: boolean): void;
}

const HOST_NAMES = [
  '__svc_kv_get',
  '__svc_kv_has',
  '__svc_kv_keys',
  '__svc_kv_put',
  '__svc_kv_remove',
  '__svc_crypto_certificate',
  '__svc_crypto_rsa_public_key',
  '__svc_crypto_certificate_bundle',
  '__svc_crypto_certificate_from_base64_der',
  '__svc_crypto_jwk_public_key',
  '__svc_node_trigger_ledger_chunk',
  '__svc_network_renew_service_certificate',
  '__svc_network_renew_node_certificate',
  '__svc_jwt_check_jwks',
  '__svc_jwt_set_issuer_keys',
  '__svc_jwt_remove_issuer_keys',
] as const;

// Runs before the constitution: takes the raw host functions off the global object and exposes a
// frozen `svc` whose methods take and return plain values.
const PRELUDE = `(() => {
  const g = globalThis;
  const h = {};
  for (const name of ${JSON.stringify(HOST_NAMES)}) { h[name] = g[name]; delete g[name]; }
  const parse = JSON.parse;
  const stringify = JSON.stringify;
  const call = (name, ...args) => {
    const texts = args.map((a) => {
      const t = stringify(a);
      if (t === undefined) throw new TypeError('svc: argument has no JSON form');
      return t;
    });
    const out = h[name](...texts);
    return out === undefined ? undefined : parse(out);
  };
  g.svc = Object.freeze({
    kv: Object.freeze({
      get: (table, key) => call('__svc_kv_get', table, key),
      has: (table, key) => call('__svc_kv_has', table, key),
      keys: (table) => call('__svc_kv_keys', table),
      put: (table, key, value) => { call('__svc_kv_put', table, key, value); },
      remove: (table, key) => call('__svc_kv_remove', table, key),
    }),
    crypto: Object.freeze({
      certificate: (pem) => call('__svc_crypto_certificate', pem),
      rsaPublicKey: (pem) => call('__svc_crypto_rsa_public_key', pem),
      certificateBundle: (pem) => call('__svc_crypto_certificate_bundle', pem),
      certificateFromBase64Der: (b64) => call('__svc_crypto_certificate_from_base64_der', b64),
      jwkPublicKey: (jwk) => call('__svc_crypto_jwk_public_key', jwk),
    }),
    node: Object.freeze({
      triggerLedgerChunk: () => { call('__svc_node_trigger_ledger_chunk'); },
    }),
    network: Object.freeze({
      renewServiceCertificate: (pem, validFrom, days) => call('__svc_network_renew_service_certificate', pem, validFrom, days),
      renewNodeCertificate: (pem, validFrom, days) => call('__svc_network_renew_node_certificate', pem, validFrom, days),
    }),
    jwt: Object.freeze({
      checkJwks: (jwks, name) => { call('__svc_jwt_check_jwks', jwks, name); },
      setIssuerKeys: (issuer, jwks) => { call('__svc_jwt_set_issuer_keys', issuer, jwks); },
      removeIssuerKeys: (issuer) => { call('__svc_jwt_remove_issuer_keys', issuer); },
    }),
  });
})();`;

function text(json: string | undefined, what: string): string {
  const value = json === undefined ? undefined : (JSON.parse(json) as unknown);
  if (typeof value !== 'string') throw new TypeError(`${what} must be a string`);
  return value;
}

function checkTable(table: string): void {
  if (!table.startsWith(GOV_TABLE_PREFIX)) throw new Error(`table "${table}" is not a governance table (${GOV_TABLE_PREFIX}*)`);
}

export function createConstitutionHost(tx: Tx, options: ConstitutionHostOptions = {}): ConstitutionHost {
  const kv = new StagedKv(tx);
  let writable = false;
  const checkWrite = (table: string) => {
    checkTable(table);
    if (!writable) throw new Error('the constitution may write tables only in apply');
    if (GOV_TABLES_READ_ONLY_FOR_CONSTITUTION.has(table)) throw new Error(`table "${table}" is written only by the service`);
  };
  const functions: HostFunctions = {
    __svc_kv_get: (t, k) => {
      const table = text(t, 'table');
      checkTable(table);
      const value = kv.get(table, text(k, 'key'));
      return value === undefined ? undefined : JSON.stringify(value);
    },
    __svc_kv_has: (t, k) => {
      const table = text(t, 'table');
      checkTable(table);
      return JSON.stringify(kv.has(table, text(k, 'key')));
    },
    __svc_kv_keys: (t) => {
      const table = text(t, 'table');
      checkTable(table);
      return JSON.stringify(kv.keys(table));
    },
    __svc_kv_put: (t, k, v) => {
      const table = text(t, 'table');
      checkWrite(table);
      kv.put(table, text(k, 'key'), JSON.parse(v!) as unknown);
      return undefined;
    },
    __svc_kv_remove: (t, k) => {
      const table = text(t, 'table');
      checkWrite(table);
      return JSON.stringify(kv.remove(table, text(k, 'key')));
    },
    __svc_crypto_certificate: (p) => JSON.stringify(describeCertificate(text(p, 'certificate'))),
    __svc_crypto_rsa_public_key: (p) => {
      const pem = text(p, 'public key');
      let bits: number | undefined;
      try {
        const key = loadPublicKey(pem);
        if (key.asymmetricKeyType !== 'rsa') throw new Error(`a ${key.asymmetricKeyType ?? 'unknown'} key`);
        bits = key.asymmetricKeyDetails?.modulusLength;
      } catch (e) {
        throw new Error(`not an RSA public key PEM: ${(e as Error).message}`);
      }
      if (bits === undefined || bits < 2048) throw new Error(`RSA encryption keys need at least 2048 bits, got ${bits ?? 'unknown'}`);
      return JSON.stringify({ bits });
    },
    __svc_crypto_certificate_bundle: (p) => {
      const bundle = text(p, 'certificate bundle');
      const pems = splitPemCertificates(bundle);
      if (pems.length === 0) throw new Error('the bundle holds no PEM certificate');
      pems.forEach((pem, i) => {
        try {
          parseCertificate(pem);
        } catch (e) {
          throw new Error(`certificate ${i} of the bundle is invalid: ${(e as Error).message}`);
        }
      });
      return JSON.stringify(pems.length);
    },
    __svc_crypto_certificate_from_base64_der: (b) => {
      const b64 = text(b, 'base64 certificate');
      if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) throw new Error('x5c entries are base64 (not base64url) DER certificates');
      const pem = `-----BEGIN CERTIFICATE-----\n${b64.match(/.{1,64}/g)!.join('\n')}\n-----END CERTIFICATE-----\n`;
      describeCertificate(pem);
      return JSON.stringify(pem);
    },
    __svc_crypto_jwk_public_key: (j) => {
      const jwk = j === undefined ? undefined : (JSON.parse(j) as unknown);
      if (typeof jwk !== 'object' || jwk === null || Array.isArray(jwk)) throw new TypeError('a JWK must be an object');
      let key: JwkPublicKey;
      try {
        key = jwkPublicKey(jwk as Record<string, unknown>);
      } catch (e) {
        throw new Error((e as Error).message);
      }
      return JSON.stringify(key.certificatePem === undefined ? { public_key: key.publicKeyPem } : { public_key: key.publicKeyPem, cert: key.certificatePem });
    },
    __svc_node_trigger_ledger_chunk: () => {
      if (!writable) throw new Error('triggerLedgerChunk is available only in apply');
      // A request in the store like every other effect of governance (src/node/gov-effects.ts).
      const count = kv.get(GovTables.ledgerChunkRequests, GOV_SINGLETON_KEY);
      kv.put(GovTables.ledgerChunkRequests, GOV_SINGLETON_KEY, (typeof count === 'number' ? count : 0) + 1);
      return undefined;
    },
    __svc_network_renew_service_certificate: (p, f, d) => {
      if (!writable) throw new Error('renewServiceCertificate is available only in apply');
      const renewal = renewalOf(p, f, d, options);
      return JSON.stringify(renewal.renewer.renewServiceCertificate(renewal.pem, renewal.validFrom, renewal.days));
    },
    __svc_network_renew_node_certificate: (p, f, d) => {
      if (!writable) throw new Error('renewNodeCertificate is available only in apply');
      const renewal = renewalOf(p, f, d, options);
      return JSON.stringify(renewal.renewer.renewNodeCertificate(renewal.pem, renewal.validFrom, renewal.days));
    },
    __svc_jwt_check_jwks: (j, n) => {
      // The issuer's name counts in the stored bytes: apply checks again with it.
      governanceJwksMetadata('', j === undefined ? undefined : JSON.parse(j), text(n, 'argument name'));
      return undefined;
    },
    // The key set is checked at once (a bad one fails apply where it is called); the table work,
    // which grows with the whole key table, is done by the host when apply has returned.
    __svc_jwt_set_issuer_keys: (i, j) => {
      checkWrite(GovTables.jwtPublicSigningKeys);
      const issuer = text(i, 'issuer');
      const keys = governanceJwksMetadata(issuer, j === undefined ? undefined : JSON.parse(j), 'jwks');
      kv.defer((staged) => replaceIssuerKeys(staged.declared(GovTableDefs.jwtPublicSigningKeys), issuer, keys));
      return undefined;
    },
    __svc_jwt_remove_issuer_keys: (i) => {
      checkWrite(GovTables.jwtPublicSigningKeys);
      const issuer = text(i, 'issuer');
      kv.defer((staged) => replaceIssuerKeys(staged.declared(GovTableDefs.jwtPublicSigningKeys), issuer, new Map()));
      return undefined;
    },
  };
  return {
    prelude: PRELUDE,
    functions,
    kv,
    setWritable(value) {
      writable = value;
    },
  };
}

/**
 * The arguments of a renewal, checked: the new period must hold the applying node's present time
 * (a certificate not yet valid, or already expired, would cut the service off its clients).
 */
function renewalOf(p: string | undefined, f: string | undefined, d: string | undefined, options: ConstitutionHostOptions) {
  const pem = text(p, 'certificate');
  const validFrom = parseValidFrom(text(f, 'valid_from'));
  const days = d === undefined ? undefined : (JSON.parse(d) as unknown);
  if (typeof days !== 'number' || !Number.isInteger(days) || days < 1) throw new TypeError('the validity period is a whole number of days');
  const renewer = options.certificates;
  if (renewer === undefined) throw new Error('certificates cannot be renewed here: this node holds no service key');
  const nowMs = options.nowMs?.();
  if (nowMs !== undefined) {
    const notAfterMs = validFrom.getTime() + days * 86_400_000;
    if (validFrom.getTime() > nowMs) throw new Error(`valid_from ${validFrom.toISOString()} is in the future: the renewed certificate would not be valid yet`);
    if (notAfterMs <= nowMs) throw new Error(`the renewed certificate would have expired already (valid to ${new Date(notAfterMs).toISOString()})`);
  }
  return { pem, validFrom, days, renewer };
}

/**
 * A `valid_from` argument: an ISO 8601 date and time ("2026-01-01T00:00:00Z"), or the ASN.1 form
 * CCF's tools write ("20260101000000Z", GeneralizedTime; "260101000000Z", UTCTime).
 */
export function parseValidFrom(value: string): Date {
  const asn1 = /^(\d{2}|\d{4})(\d{2})(\d{2})(\d{2})(\d{2})(\d{2})Z$/.exec(value);
  let date = new Date(Number.NaN);
  if (asn1) {
    const [y, mo, da, h, mi, se] = asn1.slice(1).map(Number) as [number, number, number, number, number, number];
    // UTCTime's two-digit years: 50-99 are 19xx, 00-49 are 20xx (RFC 5280, 4.1.2.5.1).
    const year = asn1[1]!.length === 4 ? y : y >= 50 ? 1900 + y : 2000 + y;
    date = new Date(Date.UTC(year, mo - 1, da, h, mi, se));
    // Date.UTC carries 13 months or 61 seconds over: such a time is refused, not moved.
    if (date.getUTCMonth() !== mo - 1 || date.getUTCDate() !== da || date.getUTCHours() !== h || date.getUTCMinutes() !== mi) date = new Date(Number.NaN);
  } else if (/^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?(Z|[+-]\d{2}:\d{2}))?$/.test(value)) {
    date = new Date(Date.parse(value));
  }
  if (Number.isNaN(date.getTime())) throw new Error(`valid_from "${value}" is not a date (e.g. 2026-01-01T00:00:00Z or 20260101000000Z)`);
  return date;
}

/** Parses exactly one PEM certificate: its id and the type of its key. */
export function describeCertificate(pem: string): { id: string; key_type: string; curve: string | null } {
  const count = splitPemCertificates(pem).length;
  if (count !== 1) throw new Error(`expected exactly one PEM certificate, found ${count}`);
  try {
    const parsed = parseCertificate(pem);
    const keyType = parsed.publicKey.asymmetricKeyType ?? 'unknown';
    const namedCurve = parsed.publicKey.asymmetricKeyDetails?.namedCurve;
    const curve = namedCurve === 'secp384r1' ? 'P-384' : namedCurve === 'prime256v1' ? 'P-256' : (namedCurve ?? null);
    return { id: certificateId(pem), key_type: keyType, curve };
  } catch (e) {
    if (e instanceof CovenantError) throw new Error(`invalid certificate: ${e.message}`);
    throw new Error(`invalid certificate: ${(e as Error).message}`);
  }
}
