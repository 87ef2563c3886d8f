/**
 * Whether a committed snapshot can be trusted, and making a previous identity's snapshot
 * trustable by a recovered service (docs/snapshots.md "Snapshots across recoveries").
 *
 * A snapshot's receipt is signed by a node of the service that took it. After a disaster recovery
 * the service has a new identity, which endorses the previous one (Tables.serviceEndorsements): the
 * receipt of a snapshot taken before the recovery verifies with the new certificate only through
 * that endorsement. The recover node therefore rewrites the snapshot it started from with the
 * chain of endorsements in its receipt's `service_endorsements` (the evidence digest covers the
 * file without its receipt, so the store and its evidence are untouched): its joiners, and every
 * node that later restarts from it, verify it with the current service certificate alone.
 *
 * A snapshot verifies against a certificate when its receipt does through its whole chain of
 * endorsements or a prefix of it: a snapshot rewritten for the service recovered from `C` still
 * verifies with `C` (a recovery started again from the same copy), and with every later identity
 * whose endorsement it carries.
 */
import { assert } from '../base/assert.js';
import { CovenantError, errorMessage } from '../base/errors.js';
import type { Logger } from '../base/log.js';
import { serviceEndorsementsOf, verifyReceipt, type Receipt, type VerifiedReceipt } from '../merkle/index.js';
import { encodeSnapshotReceipt, parseSnapshotFile, parseSnapshotFileName, snapshotEvidenceCoveredBytes, type Disk, type SnapshotFileParts } from '../ledger/index.js';
import { servedSnapshotVerdictsMax } from './limits.js';

/** A snapshot receipt verified against a service certificate, and the endorsements that made it so. */
export interface VerifiedSnapshotReceipt {
  readonly verified: VerifiedReceipt;
  /** The endorsements (oldest first) that chain the receipt's node certificate to the certificate; empty when it issued it. */
  readonly serviceEndorsements: readonly string[];
}

/**
 * Verifies a snapshot's receipt against `serviceCertificatePem` through the longest prefix of its
 * endorsements that chains to it. Throws the error of the whole chain when no prefix does.
 */
export function verifySnapshotReceipt(receipt: Receipt, serviceCertificatePem: string): VerifiedSnapshotReceipt {
  const endorsements = serviceEndorsementsOf(receipt) ?? [];
  let firstError: unknown;
  for (let length = endorsements.length; length >= 0; length--) {
    const used = endorsements.slice(0, length);
    const { service_endorsements: _ignored, ...bare } = receipt;
    const candidate: Receipt = used.length > 0 ? { ...bare, service_endorsements: used } : bare;
    try {
      return { verified: verifyReceipt(candidate, serviceCertificatePem), serviceEndorsements: used };
    } catch (e) {
      firstError ??= e;
    }
  }
  throw firstError;
}

/**
 * The bytes of a committed snapshot whose receipt also carries `endorsement` (the new service's
 * endorsement of the identity the snapshot verified against, after the endorsements it used).
 * The evidence-covered prefix is kept byte for byte.
 */
export function snapshotEndorsedBy(bytes: Uint8Array, parts: SnapshotFileParts, usedEndorsements: readonly string[], endorsement: string): Uint8Array {
  assert(parts.receipt !== undefined, 'only a committed snapshot is endorsed for a recovered service');
  const receipt = { ...(parts.receipt as Receipt), service_endorsements: [...usedEndorsements, endorsement] };
  const section = encodeSnapshotReceipt(receipt);
  const out = new Uint8Array(parts.evidenceCoveredBytes + section.byteLength);
  out.set(bytes.subarray(0, parts.evidenceCoveredBytes), 0);
  out.set(section, parts.evidenceCoveredBytes);
  return out;
}

/**
 * Writes `bytes` as `directory/name` through a temporary file (`name` + `tmpSuffix`) and a rename:
 * a crash leaves the old file or the new, never a part.
 */
export function replaceSnapshotFile(disk: Disk, directory: string, name: string, bytes: Uint8Array, tmpSuffix = '.endorsing'): string {
  disk.ensureDirectory(directory);
  const path = disk.join(directory, name);
  const tmp = disk.join(directory, `${name}${tmpSuffix}`);
  if (disk.exists(tmp)) disk.remove(tmp);
  const file = disk.createFile(tmp);
  try {
    file.append([bytes]);
    file.sync();
  } finally {
    file.close();
  }
  disk.rename(tmp, path);
  disk.syncDirectory(directory);
  return path;
}

/** What endorseStartupSnapshot needs of a verified snapshot (a StartupSnapshot of snapshots.ts). */
export interface TrustedSnapshot {
  readonly name: string;
  readonly path?: string;
  readonly parts: SnapshotFileParts;
  readonly serviceEndorsements: readonly string[];
}

/**
 * A recover node, once the new service endorsed the previous identity: rewrites the snapshot it
 * started from into snapshots.directory (same name) with `endorsement` after the endorsements it
 * was verified with, so that joiners and restarting nodes of the recovered service verify it with
 * the new certificate. A read-only copy is left alone; the writable directory takes precedence.
 */
export function endorseStartupSnapshot(host: { disk: Disk; logger: Logger; directory: string }, snapshot: TrustedSnapshot, endorsement: string): void {
  assert(snapshot.path !== undefined, 'a startup snapshot was found on disk');
  const { disk, logger } = host;
  const bytes = snapshotEndorsedBy(disk.readAll(snapshot.path), snapshot.parts, snapshot.serviceEndorsements, endorsement);
  assert(parseSnapshotFile(bytes).evidenceCoveredBytes === snapshot.parts.evidenceCoveredBytes, 'endorsing a snapshot keeps its evidence-covered bytes');
  const path = replaceSnapshotFile(disk, host.directory, snapshot.name, bytes);
  logger.info(
    `snapshot ${path}: its receipt now carries the new service's endorsement of the previous identity ` +
      `(${snapshot.serviceEndorsements.length + 1} endorsement(s)); nodes of the recovered service verify it with the new certificate`,
  );
}

/** What a served snapshot's check found: undefined when it verifies, otherwise why not. */
export type SnapshotVerdict = string | undefined;

/**
 * Verdicts on the committed snapshots a node serves (GET /node/snapshot, /node/snapshot/{name}):
 * each file is verified once per (path, size, modification time, service certificate), and a
 * corrupt one is logged once. Bounded: the oldest verdict is dropped first.
 */
export class ServedSnapshotVerdicts {
  readonly #verdicts = new Map<string, SnapshotVerdict>();

  constructor(
    /** The service certificate of the moment (a recovery changes it). */
    private readonly serviceCertificatePem: () => string,
    /** Verifies a file; `evidenceDigest`, when given, is the SHA-256 of the part its evidence covers. */
    private readonly verify: (name: string, bytes: Uint8Array, serviceCertificatePem: string, evidenceDigest?: Uint8Array) => void,
    private readonly logger: Logger,
    /**
     * Hashes bytes over several turns (snapshot-loading.ts): a large snapshot's digest, hundreds of
     * megabytes, would otherwise hold the serving node's event loop for a second or more. Without
     * it verify hashes in one call.
     */
    private readonly digestInTurns?: (bytes: Uint8Array) => Promise<Uint8Array>,
  ) {}

  /** The verdict on the committed snapshot `name` at `path` of this size and time; `read` gives its bytes when they must be checked. */
  async verdict(path: string, name: string, stamp: { sizeBytes: number; modifiedMs: number }, read: () => Promise<Uint8Array>): Promise<SnapshotVerdict> {
    const certificate = this.serviceCertificatePem();
    const key = `${path}\u0000${stamp.sizeBytes}\u0000${stamp.modifiedMs}\u0000${certificate}`;
    if (this.#verdicts.has(key)) return this.#verdicts.get(key);
    let verdict: SnapshotVerdict;
    try {
      if (parseSnapshotFileName(name)?.committed !== true) throw new CovenantError('InvalidSnapshot', `${name} is not a committed snapshot name`, 400);
      const bytes = await read();
      const digest = this.digestInTurns === undefined ? undefined : await this.digestInTurns(bytes.subarray(0, snapshotEvidenceCoveredBytes(bytes)));
      this.verify(name, bytes, certificate, digest);
    } catch (e) {
      verdict = errorMessage(e);
      this.logger.fail(`not serving snapshot ${path}: it does not verify against the service certificate: ${verdict}`);
    }
    if (this.#verdicts.size >= servedSnapshotVerdictsMax) this.#verdicts.delete(this.#verdicts.keys().next().value!);
    this.#verdicts.set(key, verdict);
    return verdict;
  }
}
