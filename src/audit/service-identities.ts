/**
 * The service identities a ledger spans, for offline verification across disaster recoveries
 * (docs/ledger.md "Verifying a ledger across recoveries"). A recovered service begins with a view
 * above every earlier one, at seqno `k`; in its first entries it records, in the public table of
 * service endorsements under the key `k`, its endorsement of the previous service's key. A
 * signature at seqno `s` was made by a node whose certificate the identity current at `s` issued,
 * so it is trusted when the endorsements of the recoveries keyed above `s` chain that certificate
 * to the newest service certificate: the rule receipts follow (docs/merkle.md "Receipts across
 * recoveries").
 *
 * Recovery records come later in the ledger than the signatures they vouch for, so a certificate
 * that the newest service certificate did not issue directly is kept, with where it first signed
 * in its view, and checked once the whole ledger is read. Every signature of one view has the
 * same recoveries after it (a recovery's key starts a view), so one check per certificate and
 * view is enough.
 */
import { errorMessage, isCovenantError, type Seqno } from '../base/index.js';
import { verifyCertificateSignedBy } from '../crypto/index.js';
import { decodeWriteSet } from '../kv/index.js';
import type { DecodedEntry } from '../ledger/index.js';
import { SERVICE_ENDORSEMENTS_MAX, verifyServiceEndorsements } from '../merkle/index.js';

/** The table as the node writes it (src/node/tables.ts; a test keeps the two equal). */
export const SERVICE_ENDORSEMENTS_TABLE = 'public:svc.internal.previous_service_identity_endorsements';
const TABLE_NAME_BYTES = Buffer.from(SERVICE_ENDORSEMENTS_TABLE, 'utf8');

/** A recovery recorded in the ledger: the first seqno of the new service and its endorsement. */
export interface RecordedRecovery {
  readonly seqno: Seqno;
  /** PEM: the previous service key, certified by the new service. */
  readonly endorsement: string;
}

/** Where a certificate signed, for the report of a certificate found untrusted at the end. */
export interface SignedAt {
  readonly file: string;
  readonly offsetBytes: number;
  readonly seqno: Seqno;
}

/** A record of the service endorsements table that cannot be what a recovery writes. */
export class RecordError extends Error {}

/**
 * The recoveries `entry` records (normally none; one in a recovered service's first entries).
 * The write set is decoded only when it names the table. Throws RecordError on a malformed record.
 */
export function recoveriesRecordedBy(entry: DecodedEntry): RecordedRecovery[] {
  const publicBytes = Buffer.from(entry.publicBytes.buffer, entry.publicBytes.byteOffset, entry.publicBytes.byteLength);
  if (publicBytes.indexOf(TABLE_NAME_BYTES) < 0) return [];
  let writes;
  try {
    writes = decodeWriteSet(entry.publicBytes).get(SERVICE_ENDORSEMENTS_TABLE);
  } catch (e) {
    if (isCovenantError(e)) throw new RecordError(`unreadable write set: ${e.message}`);
    throw e;
  }
  const out: RecordedRecovery[] = [];
  for (const [key, raw] of writes ?? []) {
    if (raw === null) throw new RecordError(`the service endorsement keyed ${key} is removed: recoveries are never forgotten`);
    let record: unknown;
    try {
      record = JSON.parse(Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength).toString('utf8'));
    } catch (e) {
      throw new RecordError(`unreadable service endorsement keyed ${key}: ${errorMessage(e)}`);
    }
    const r = record as { endorsing_service_created_seqno?: unknown; endorsement?: unknown } | null;
    if (r === null || typeof r !== 'object' || typeof r.endorsement !== 'string' || String(r.endorsing_service_created_seqno) !== key) {
      throw new RecordError(`the service endorsement keyed ${key} lacks an endorsement or names another seqno`);
    }
    out.push({ seqno: Number(key), endorsement: r.endorsement });
  }
  return out;
}

interface Pending {
  readonly certificatePem: string;
  readonly node: string;
  readonly at: SignedAt;
}

/** The verdict on a node certificate that is not trusted (the caller reports it). */
export interface Untrusted {
  readonly node: string;
  readonly at: SignedAt;
  readonly why: string;
}

/** Trust in the signing node certificates of one ledger, given the newest service certificate. */
export class ServiceIdentities {
  private readonly recoveries: RecordedRecovery[] = [];
  /** Certificates already judged, per view: `${view}\n${pem}`. */
  private readonly seen = new Set<string>();
  private readonly pending: Pending[] = [];

  constructor(private readonly serviceCertificatePem: string | undefined) {}

  /** Recoveries recorded so far, in seqno order. */
  get recorded(): readonly RecordedRecovery[] {
    return this.recoveries;
  }

  /**
   * A recovery read from the ledger in an entry of the view that began at `viewStartSeqno`: the
   * recovered service began with that view, so its key must be that seqno, after every earlier one.
   * (Undefined when the view began before a snapshot the ledger starts after: not checked.)
   */
  addRecovery(recovery: RecordedRecovery, viewStartSeqno: Seqno | undefined): void {
    if (viewStartSeqno !== undefined && recovery.seqno !== viewStartSeqno) {
      throw new RecordError(`the service endorsement keyed ${recovery.seqno} is recorded in the view that began at seqno ${viewStartSeqno}, not by a service that began there`);
    }
    const last = this.recoveries.at(-1);
    if (last !== undefined && last.seqno >= recovery.seqno) throw new RecordError(`a second service endorsement keyed ${recovery.seqno}`);
    this.recoveries.push(recovery);
  }

  /**
   * A node certificate that signed at `at`, in `view`. Trusted at once when the service
   * certificate issued it directly; otherwise kept for `untrusted()`. Nothing is checked without a
   * service certificate.
   */
  signedBy(certificatePem: string, node: string, view: number, at: SignedAt): void {
    if (this.serviceCertificatePem === undefined) return;
    const key = `${view}\n${certificatePem}`;
    if (this.seen.has(key)) return;
    this.seen.add(key);
    if (verifyCertificateSignedBy(certificatePem, this.serviceCertificatePem)) return;
    this.pending.push({ certificatePem, node, at });
  }

  /**
   * Once the ledger is read: the first certificate (in ledger order) that the endorsements of the
   * recoveries keyed above its signature do not chain to the service certificate.
   */
  untrusted(): Untrusted | undefined {
    const serviceCertificatePem = this.serviceCertificatePem;
    if (serviceCertificatePem === undefined) return undefined;
    for (const p of this.pending) {
      const after = this.recoveries.filter((r) => r.seqno > p.at.seqno);
      if (after.length === 0) {
        return { node: p.node, at: p.at, why: 'the service certificate did not issue it, and the ledger records no recovery after it' };
      }
      if (after.length > SERVICE_ENDORSEMENTS_MAX) {
        return { node: p.node, at: p.at, why: `the ledger records ${after.length} recoveries after it, more than the ${SERVICE_ENDORSEMENTS_MAX} a chain may hold` };
      }
      try {
        verifyServiceEndorsements(
          p.certificatePem,
          after.map((r) => r.endorsement),
          serviceCertificatePem,
        );
      } catch (e) {
        if (!isCovenantError(e)) throw e;
        const seqnos = after.map((r) => r.seqno).join(', ');
        return { node: p.node, at: p.at, why: `the endorsements of the recoveries that began at seqnos ${seqnos} do not chain it to the service certificate: ${e.message}` };
      }
    }
    return undefined;
  }
}
