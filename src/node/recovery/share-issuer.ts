/**
 * Issuing recovery shares (docs/recovery.md, "Issuing shares"): a primary task that keeps the
 * recorded issue of shares (Tables.recoveryShares) in step with what it must cover — the recovery
 * members (members with an encryption key) and their keys, recovery_threshold, the latest ledger
 * secret, and trigger_recovery_shares_refresh requests. What an issue covers is summed up in one
 * digest (`issued_for`); whenever the digest of the current state differs from the recorded one,
 * the primary prepares new shares outside any transaction (the library is async) and records
 * them in one, if nothing they cover changed meanwhile (otherwise it prepares them again).
 *
 * While the service is recovering (Recovering, WaitingForRecoveryShares) the recorded issue is
 * the previous service's, which members need to recover it: nothing is issued until it opens.
 */
import { toHex, utf8 } from '../../base/bytes.js';
import { errorMessage } from '../../base/errors.js';
import type { Logger } from '../../base/log.js';
import { sha256 } from '../../crypto/index.js';
import { jsonCodec, type Tx } from '../../kv/index.js';
import { issueRecoveryShares, type RecoveryMember, type RandomBytes } from '../../recovery/index.js';
import type { LedgerSecrets } from '../identity/ledger-secrets.js';
import { SINGLETON_KEY, Tables, type RecoverySharesRecord, type ServiceInfo } from '../tables.js';
import type { PrimaryTask } from '../tasks/primary-tasks.js';

const json = jsonCodec<any>();

export interface ShareIssuerHost {
  readonly logger: Logger;
  readonly secrets: LedgerSecrets;
  readonly randomBytes: RandomBytes;
  executeRead<T>(fn: (tx: Tx) => T): T;
  executeWrite(fn: (tx: Tx) => void): unknown;
  /** Runs `fn` soon, outside the current call (a store listener must not write). */
  defer(fn: () => void): void;
}

/** What an issue of shares covers, read in one transaction. */
interface ShareInputs {
  readonly members: RecoveryMember[];
  readonly threshold: number;
  readonly latestFromSeqno: number;
  readonly issuedFor: string;
  readonly recorded: string | undefined;
  readonly issuing: boolean;
}

export class ShareIssuer implements PrimaryTask {
  readonly name = 'recovery share issuer';
  private running = false;
  private busy = false;
  private again = false;
  /** Issues recorded by this node (for tests and logs). */
  issued = 0;

  constructor(private readonly host: ShareIssuerHost) {}

  start(): void {
    this.running = true;
    this.trigger();
  }

  stop(): void {
    this.running = false;
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
    try {
      for (let attempt = 0; attempt < 3 && this.running; attempt++) {
        const inputs = this.host.executeRead((tx) => this.inputsOf(tx));
        if (!inputs.issuing || inputs.recorded === inputs.issuedFor) break;
        if (inputs.members.length === 0 || inputs.threshold > inputs.members.length) {
          this.host.logger.info(`recovery shares not issued: ${inputs.members.length} recovery member(s) for a recovery_threshold of ${inputs.threshold}`);
          break;
        }
        const sharing = await issueRecoveryShares(
          { fromSeqno: inputs.latestFromSeqno, secret: this.host.secrets.latest.secret },
          inputs.members,
          inputs.threshold,
          this.host.randomBytes,
        );
        if (!this.running) break;
        let recorded = false;
        this.host.executeWrite((tx) => {
          // Recorded only if it still covers the state as it is now.
          if (this.inputsOf(tx).issuedFor !== inputs.issuedFor) return;
          const record: RecoverySharesRecord = {
            issued_for: inputs.issuedFor,
            threshold: sharing.threshold,
            sharing_id: toHex(sharing.sharingId),
            wrapped_latest_secret: Buffer.from(sharing.wrappedLatestSecret).toString('base64'),
            latest_secret_from_seqno: inputs.latestFromSeqno,
            encrypted_shares: Object.fromEntries(sharing.encryptedShares.map((s) => [s.memberId, Buffer.from(s.encryptedShare).toString('base64')])),
          };
          tx.map(Tables.recoveryShares, json).put(SINGLETON_KEY, record);
          recorded = true;
        });
        if (recorded) {
          this.issued++;
          this.host.logger.info(`recovery shares issued to ${inputs.members.length} member(s), threshold ${inputs.threshold}, for the ledger secret from seqno ${inputs.latestFromSeqno}`);
          break;
        }
      }
    } catch (e) {
      this.host.logger.fail(`issuing recovery shares failed: ${errorMessage(e)}`);
    } finally {
      this.busy = false;
      if (this.again) {
        this.again = false;
        this.trigger();
      }
    }
  }

  private inputsOf(tx: Tx): ShareInputs {
    const members: RecoveryMember[] = [];
    tx.map(Tables.membersEncryptionPublicKeys, json).forEach((pem: string, id: string) => {
      members.push({ memberId: id, encryptionPublicKeyPem: pem });
    });
    members.sort((a, b) => (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0));
    const config = (tx.map(Tables.serviceConfig, json).get(SINGLETON_KEY) ?? {}) as { recovery_threshold?: number };
    const threshold = config.recovery_threshold ?? 1;
    const refresh = (tx.map(Tables.recoverySharesRefresh, json).get(SINGLETON_KEY) as number | undefined) ?? 0;
    const service = tx.map(Tables.serviceInfo, json).get(SINGLETON_KEY) as ServiceInfo | undefined;
    const latestFromSeqno = this.host.secrets.latest.fromSeqno;
    const covered = {
      members: members.map((m) => [m.memberId, toHex(sha256(utf8.encode(m.encryptionPublicKeyPem)))]),
      threshold,
      latest_from_seqno: latestFromSeqno,
      refresh,
      service: service?.current_service_create_txid ?? null,
    };
    const recorded = tx.map(Tables.recoveryShares, json).get(SINGLETON_KEY) as RecoverySharesRecord | undefined;
    return {
      members,
      threshold,
      latestFromSeqno,
      issuedFor: toHex(sha256(utf8.encode(JSON.stringify(covered)))),
      recorded: recorded?.issued_for,
      issuing: service !== undefined && (service.status === 'Opening' || service.status === 'Open'),
    };
  }
}
