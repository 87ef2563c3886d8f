/**
 * Rekeying the ledger (trigger_ledger_rekey; docs/recovery.md, "The ledger secrets chain"): the
 * primary draws a new ledger secret and writes it, in a transaction at seqno R, to the private
 * table Tables.ledgerSecrets (so only holders of the current secret read it) with the seqno from
 * which it applies, R + 1; the same transaction records the retired secret sealed under the new
 * one (Tables.previousLedgerSecrets), which keeps the chain recoverable from the newest secret.
 *
 * Every node installs the new secret when it applies that transaction — the primary as it
 * executes it, a backup as it applies it — and drops it again if the transaction is rolled back.
 * The proposer seals each entry under the secret of its own seqno, so R is sealed under the old
 * secret and R + 1 on under the new one. New recovery shares follow (the share issuer covers the
 * latest secret).
 */
import type { Logger } from '../../base/log.js';
import { errorMessage } from '../../base/errors.js';
import type { Store, Tx } from '../../kv/index.js';
import { sealPreviousSecret, type RandomBytes } from '../../recovery/index.js';
import type { LedgerSecrets } from '../identity/ledger-secrets.js';
import { SINGLETON_KEY, TableDefs, Tables, type RekeyRecord } from '../tables.js';


export interface RekeyHost {
  readonly logger: Logger;
  readonly secrets: LedgerSecrets;
  readonly randomBytes: RandomBytes;
  isPrimary(): boolean;
  storeVersion(): number;
  executeWrite(fn: (tx: Tx) => void): unknown;
  defer(fn: () => void): void;
  /** The secrets changed: persist them, and let the share issuer cover the new latest. */
  secretsChanged(): void;
}

export class Rekey {
  constructor(private readonly host: RekeyHost) {}

  watch(store: Store): void {
    store.onMapApplied(Tables.ledgerRekeyRequests, () => {
      if (this.host.isPrimary()) this.host.defer(() => this.rekey());
    });
    store.onMapApplied(Tables.ledgerSecrets, (_version, writes) => {
      for (const raw of writes.values()) if (raw !== null) this.install(TableDefs.ledgerSecrets.codec.decode(raw));
    });
    store.onRollback((version) => {
      if (this.host.secrets.rollbackAfter(version)) {
        this.host.logger.info(`ledger secrets installed after seqno ${version} dropped with the rolled back entries`);
        this.host.secretsChanged();
      }
    });
  }

  /** The primary starts a new ledger secret. */
  rekey(): void {
    const { host } = this;
    if (!host.isPrimary()) return;
    const secret = host.randomBytes(32);
    try {
      host.executeWrite((tx) => {
        const info = tx.table(TableDefs.serviceInfo).get(SINGLETON_KEY);
        if (info?.status !== 'Open' && info?.status !== 'Opening') return;
        const fromSeqno = host.storeVersion() + 2;
        const retired = host.secrets.latest;
        const sealed = sealPreviousSecret({ fromSeqno, secret }, { fromSeqno: retired.fromSeqno, secret: retired.secret }, host.randomBytes);
        tx.table(TableDefs.previousLedgerSecrets).put(String(retired.fromSeqno), Buffer.from(sealed).toString('base64'));
        const record: RekeyRecord = { from_seqno: fromSeqno, secret: Buffer.from(secret).toString('base64') };
        tx.table(TableDefs.ledgerSecrets).put(String(fromSeqno), record);
      });
    } catch (e) {
      host.logger.fail(`rekeying the ledger failed: ${errorMessage(e)}`);
    }
  }

  private install(record: RekeyRecord): void {
    const { secrets } = this.host;
    // Already held: a node restarting replays what its state file holds.
    if (secrets.holds(record.from_seqno) || secrets.latest.fromSeqno > record.from_seqno) return;
    secrets.install(record.from_seqno, new Uint8Array(Buffer.from(record.secret, 'base64')));
    this.host.logger.info(`ledger rekeyed: a new ledger secret applies from seqno ${record.from_seqno}`);
    this.host.secretsChanged();
  }
}
