/**
 * Issuing recovery shares (docs/recovery.md, "Issuing shares"): a primary task that keeps the
 * recorded issue of shares (Tables.recoveryShares) in step with what it must cover — the recovery
 * members (members with an encryption key) and their keys, recovery_threshold, the latest ledger
 * secret, and trigger_recovery_shares_refresh requests. What an issue covers is summed up in one
 * digest (`issued_for`); whenever the digest of the current state differs from the recorded one,
 * the primary prepares new shares outside any transaction (the library is async) and records
 * them in one, if nothing they cover changed meanwhile (otherwise it prepares them again).
 *
 * The loop is shared with sealed shares (sealing.ts): an issuer is given the kind of share it keeps.
 *
 * While the service is recovering (Recovering, WaitingForRecoveryShares) the recorded issue is
 * the previous service's, which members need to recover it: nothing is issued until it opens.
 */
import { toHex, utf8 } from '../../base/bytes.js';
import { errorMessage } from '../../base/errors.js';
import type { Logger } from '../../base/log.js';
import { sha256 } from '../../crypto/index.js';
import type { Store, Tx } from '../../kv/index.js';
import { issueRecoveryShares, type RecoveryMember, type RandomBytes } from '../../recovery/index.js';
import type { LedgerSecrets } from '../identity/ledger-secrets.js';
import { SINGLETON_KEY, TableDefs, Tables, type RecoverySharesRecord, type ServiceInfo } from '../tables.js';
import type { PrimaryTask } from '../tasks/primary-tasks.js';

export interface ShareIssuerHost {
  readonly logger: Logger;
  readonly secrets: LedgerSecrets;
  readonly randomBytes: RandomBytes;
  executeRead<T>(fn: (tx: Tx) => T): T;
  executeWrite(fn: (tx: Tx) => void): unknown;
  /** Runs `fn` soon, outside the current call (a store listener must not write). */
  defer(fn: () => void): void;
}

/** What an issue covers, read in one transaction. */
export interface IssueInputs {
  /** Digest of what the issue covers. */
  readonly issuedFor: string;
  /** The recorded issue's digest. */
  readonly recorded: string | undefined;
  /** Whether the service issues at all now (not while it recovers). */
  readonly issuing: boolean;
  /** Why nothing can be issued for this state (logged), if so. */
  readonly cannot?: string | undefined;
}

/** One kind of share an issuer keeps in step: member recovery shares, or sealed shares (sealing.ts). */
export interface IssueKind<I extends IssueInputs, P> {
  readonly name: string;
  /** The tables whose commits may change what an issue covers (a rekey triggers the issuer itself). */
  readonly coveredTables: readonly string[];
  inputsOf(tx: Tx): I;
  /** Prepares an issue outside any transaction. */
  prepare(inputs: I): Promise<P>;
  record(tx: Tx, inputs: I, prepared: P): void;
  /** The log line of a recorded issue. */
  describe(inputs: I): string;
}

/**
 * A primary task that keeps the recorded issue of one kind of share in step with what it must
 * cover: whenever the digest of the current state differs from the recorded one, it prepares an
 * issue outside any transaction and records it in one, if nothing it covers changed meanwhile.
 */
export class ShareIssuer<I extends IssueInputs = MemberShareInputs, P = unknown> implements PrimaryTask {
  readonly name: string;
  private running = false;
  private busy = false;
  private again = false;
  /** Issues recorded by this node (for tests and logs). */
  issued = 0;

  constructor(
    private readonly host: ShareIssuerHost,
    private readonly kind: IssueKind<I, P>,
  ) {
    this.name = `${kind.name} issuer`;
  }

  start(): void {
    this.running = true;
    this.trigger();
  }

  stop(): void {
    this.running = false;
  }

  /** Triggers on every commit to a table the kind covers, on `store` (and any store that replaces it). */
  watch(store: Store): void {
    for (const table of this.kind.coveredTables) store.onMapApplied(table, () => this.trigger());
  }

  /** Something the shares cover may have changed: checks (and issues) soon. */
  trigger(): void {
    if (!this.running) return;
    if (this.busy) {
      this.again = true;
      return;
    }
    this.busy = true;
    this.host.defer(() => void this.reconcile());
  }

  private async reconcile(): Promise<void> {
    const { kind } = this;
    try {
      for (let attempt = 0; attempt < 3 && this.running; attempt++) {
        const inputs = this.host.executeRead((tx) => kind.inputsOf(tx));
        if (!inputs.issuing || inputs.recorded === inputs.issuedFor) break;
        if (inputs.cannot !== undefined) {
          this.host.logger.info(`${kind.name} not issued: ${inputs.cannot}`);
          break;
        }
        const prepared = await kind.prepare(inputs);
        if (!this.running) break;
        let recorded = false;
        this.host.executeWrite((tx) => {
          // Recorded only if it still covers the state as it is now.
          if (kind.inputsOf(tx).issuedFor !== inputs.issuedFor) return;
          kind.record(tx, inputs, prepared);
          recorded = true;
        });
        if (recorded) {
          this.issued++;
          this.host.logger.info(kind.describe(inputs));
          break;
        }
      }
    } catch (e) {
      this.host.logger.fail(`issuing ${kind.name} failed: ${errorMessage(e)}`);
    } finally {
      this.busy = false;
      if (this.again) {
        this.again = false;
        this.trigger();
      }
    }
  }
}

/** Whether a service in this state issues shares (not while it recovers: the recorded issue is the one members need). */
export function serviceIssues(service: ServiceInfo | undefined): boolean {
  return service !== undefined && (service.status === 'Opening' || service.status === 'Open');
}

export function digestOf(covered: unknown): string {
  return toHex(sha256(utf8.encode(JSON.stringify(covered))));
}

/** What an issue of member recovery shares covers. */
export interface MemberShareInputs extends IssueInputs {
  readonly members: RecoveryMember[];
  readonly threshold: number;
  readonly latestFromSeqno: number;
}

/** Member recovery shares: one per recovery member, threshold recovery_threshold. */
export function memberShares(host: ShareIssuerHost): IssueKind<MemberShareInputs, Awaited<ReturnType<typeof issueRecoveryShares>>> {
  return {
    name: 'recovery shares',
    coveredTables: [Tables.membersEncryptionPublicKeys, Tables.serviceConfig, Tables.serviceInfo, Tables.recoverySharesRefresh],
    inputsOf: (tx) => {
      const members: RecoveryMember[] = [];
      tx.table(TableDefs.membersEncryptionPublicKeys).forEach((pem, id) => {
        members.push({ memberId: id, encryptionPublicKeyPem: pem });
      });
      members.sort((a, b) => (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0));
      const config = tx.table(TableDefs.serviceConfig).get(SINGLETON_KEY) ?? {};
      const threshold = config.recovery_threshold ?? 1;
      const refresh = tx.table(TableDefs.recoverySharesRefresh).get(SINGLETON_KEY) ?? 0;
      const service = tx.table(TableDefs.serviceInfo).get(SINGLETON_KEY);
      const latestFromSeqno = host.secrets.latest.fromSeqno;
      const covered = {
        members: members.map((m) => [m.memberId, toHex(sha256(utf8.encode(m.encryptionPublicKeyPem)))]),
        threshold,
        latest_from_seqno: latestFromSeqno,
        refresh,
        service: service?.current_service_create_txid ?? null,
      };
      const recorded = tx.table(TableDefs.recoveryShares).get(SINGLETON_KEY);
      const cannot = members.length === 0 || threshold > members.length ? `${members.length} recovery member(s) for a recovery_threshold of ${threshold}` : undefined;
      return { members, threshold, latestFromSeqno, issuedFor: digestOf(covered), recorded: recorded?.issued_for, issuing: serviceIssues(service), cannot };
    },
    prepare: (inputs) => issueRecoveryShares({ fromSeqno: inputs.latestFromSeqno, secret: host.secrets.latest.secret }, inputs.members, inputs.threshold, host.randomBytes),
    record: (tx, inputs, sharing) => {
      const record: RecoverySharesRecord = {
        issued_for: inputs.issuedFor,
        threshold: sharing.threshold,
        sharing_id: toHex(sharing.sharingId),
        wrapped_latest_secret: Buffer.from(sharing.wrappedLatestSecret).toString('base64'),
        latest_secret_from_seqno: inputs.latestFromSeqno,
        encrypted_shares: Object.fromEntries(sharing.encryptedShares.map((s) => [s.memberId, Buffer.from(s.encryptedShare).toString('base64')])),
      };
      tx.table(TableDefs.recoveryShares).put(SINGLETON_KEY, record);
    },
    describe: (inputs) => `recovery shares issued to ${inputs.members.length} member(s), threshold ${inputs.threshold}, for the ledger secret from seqno ${inputs.latestFromSeqno}`,
  };
}
