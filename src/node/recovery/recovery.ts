/**
 * The recovering service's side of a disaster recovery, after the Recover flow read the public
 * ledger (src/node/flows/recover.ts): collecting the members' recovery shares on the primary,
 * then, on every node, reading the private domain of the previous service's entries and opening
 * the service (spec "Disaster recovery procedure" 4; docs/recovery.md).
 *
 * Its control flow is the recovery machine (recovery-machine.ts): the flows, the HTTP handlers
 * (`submitShare`), the store listeners (`watch`) and the role-change callback only post events;
 * this class runs the effects of the machine's edges:
 *
 * - Shares: a member's decrypted share is checked against the recorded issue of shares, the
 *   ledger's previous-secret records and the shares already stored (src/recovery/share-checks.ts),
 *   and recorded, encrypted (Tables.submittedShares), in the same transaction. At the threshold the
 *   key is reassembled outside any transaction (the library's `combine` is async); its end is an
 *   event, whose transaction checks everything again with the key and records the recovered chain
 *   of ledger secrets, encrypted under a key every trusted node derives from the service key
 *   (Tables.recoveredLedgerSecrets).
 * - Private domain: every node that applies that record installs the previous secrets in front of
 *   its chain and reads the private domain of the previous service's entries (private-domain.ts):
 *   PartOfPublicNetwork → ReadingPrivateLedger → PartOfNetwork.
 * - Open: the primary, once it has read its private domain, opens the service (status Open,
 *   recovery_count + 1), records the previous service's latest secret under this service's first
 *   one (so the next recovery's chain reaches back through it) and drops the recovered chain's
 *   record. The recovery node renames its `.recovery` ledger files once the Open is committed.
 */
import { assert } from '../../base/assert.js';
import { utf8 } from '../../base/bytes.js';
import type { Clock } from '../../base/clock.js';
import type { TxId } from '../../base/ids.js';
import { errorMessage } from '../../base/errors.js';
import type { Logger } from '../../base/log.js';
import type { Store, Tx } from '../../kv/index.js';
import type { EntryReplayer } from '../../ledger/index.js';
import {
  type ChainSecret,
  type RandomBytes,
  decryptSubmittedShare,
  encryptSubmittedShare,
  notWaitingForShares,
  sealPreviousSecret,
  submittedShareStorageKey,
} from '../../recovery/index.js';
import { nodeError } from '../errors.js';
import type { LedgerSecrets } from '../identity/ledger-secrets.js';
import type { ServiceIdentity } from '../identity/service-identity.js';
import type { Lifecycle, LifecycleTrigger } from '../lifecycle.js';
import type { Replica } from '../replica.js';
import type { StartupSnapshot } from '../snapshots.js';
import { SINGLETON_KEY, TableDefs, Tables, type OpenKindRecord, type RecoveredSecretsRecord } from '../tables.js';
import type { DecisionDriver } from './decision-driver.js';
import { PrivateDomainReader } from './private-domain.js';
import { phaseSummary } from './public-ledger.js';
import { RECOVERY_TRIGGERS, RecoveryMachine, type RecoveryEdge, type RecoveryEffect, type RecoveryEffects, type RecoveryState } from './recovery-machine.js';
import { ShareRecorder, type ShareSubmission, type SubmittedShare } from './share-recorder.js';

export type { ShareSubmission } from './share-recorder.js';

/** The row name under which the recovered chain is encrypted (member ids are hex digests: no clash). */
export const RECOVERED_CHAIN_ROW = ':recovered_ledger_secrets';

export interface RecoveryHost {
  readonly logger: Logger;
  readonly clock: Clock;
  readonly replica: Replica;
  readonly secrets: LedgerSecrets;
  readonly service: ServiceIdentity;
  readonly lifecycle: Lifecycle;
  readonly randomBytes: RandomBytes;
  isPrimary(): boolean;
  executeRead<T>(fn: (tx: Tx) => T): T;
  executeWrite(fn: (tx: Tx) => void): { readonly txId?: TxId | undefined };
  /** Runs `fn` soon, outside the current call (store listeners must not write). */
  defer(fn: () => void): void;
  yieldControl(): Promise<void>;
  persistState(): void;
  /** Takes a lifecycle edge (and updates what the new state allows). */
  transition(trigger: LifecycleTrigger, allowed: readonly LifecycleTrigger[]): void;
  /** Reads and decrypts the previous service's entries off this thread (NodeInit.entryReplayer); without it, on this thread. */
  readonly entryReplayer?: EntryReplayer | undefined;
}

/** The recovery machine's inputs (recovery-machine.ts names each kind). */
export type RecoveryEvent =
  | { readonly kind: 'recover' | 'public-ledger-read' | 'trusted-by-recovering-service' | 'joined-network' | 'open-proposal-applied' | 'open-committed' | 'stop' }
  | { readonly kind: 'secrets-unsealed'; readonly chain: readonly ChainSecret[]; readonly openKind: OpenKindRecord }
  | { readonly kind: 'share-submitted'; readonly submission: SubmittedShare }
  | { readonly kind: 'key-reassembled'; readonly submission: SubmittedShare; readonly key: Uint8Array | undefined; readonly error?: unknown }
  | { readonly kind: 'recovered-secrets-applied'; readonly record: RecoveredSecretsRecord }
  | { readonly kind: 'private-domain-read'; readonly record: RecoveredSecretsRecord; readonly startedMs: number }
  | { readonly kind: 'private-domain-failed'; readonly error: unknown }
  | { readonly kind: 'role-changed'; readonly primary: boolean };

type EventOf<K extends RecoveryEvent['kind']> = Extract<RecoveryEvent, { kind: K }>;

function eventOf<K extends RecoveryEvent['kind']>(event: RecoveryEvent, kind: K): EventOf<K> {
  assert(event.kind === kind, () => `recovery: an effect of "${kind}" runs on "${event.kind}"`);
  return event as EventOf<K>;
}

export class Recovery {
  readonly machine: RecoveryMachine<RecoveryEvent>;
  private readonly shares: ShareRecorder;
  private readonly privateDomain: PrivateDomainReader;
  /** The snapshot the node read the public ledger from (or joined from): the private domain is read from it too. */
  startupSnapshot: StartupSnapshot | undefined;

  /** The recovery decision protocol this node runs (sealing-based recovery), if any. */
  private decision: DecisionDriver | undefined;

  constructor(private readonly host: RecoveryHost) {
    const effects: RecoveryEffects<RecoveryEvent> = { run: (effect, event, edge) => this.runEffect(effect, event, edge), refusal: (state, event) => this.refusalOf(state, event) };
    this.machine = new RecoveryMachine(effects, host.logger);
    this.shares = new ShareRecorder({
      ...host,
      recoveredRecordOf: (chain) => this.recoveredRecordOf(chain),
      keyReassembled: (submission, key, error) => this.postFromCompletion({ kind: 'key-reassembled', submission, key, ...(error !== undefined ? { error } : {}) }),
    });
    this.privateDomain = new PrivateDomainReader({ ...host, reading: () => this.machine.state === 'ReadingPrivateLedger' });
  }

  get state(): RecoveryState {
    return this.machine.state;
  }

  /** Posts an event to the machine (a start-up flow's, or one of this class's own). */
  post(event: RecoveryEvent): void {
    this.machine.post(event);
  }

  attachDecision(driver: DecisionDriver): void {
    this.decision = driver;
  }

  /** The decision protocol's phase and what it waits for, while one runs (GET /node/state). */
  decisionStatus(): string | undefined {
    return this.decision?.status();
  }

  close(): void {
    this.post({ kind: 'stop' });
  }

  /**
   * Wires the store's listeners (on the store and any store that replaces it): each posts an
   * event, soon (outside the store's apply or commit) when its edge writes or takes a lifecycle edge.
   */
  watch(store: Store): void {
    const ofThisService = (version: number) => version >= this.host.replica.serviceStartSeqno;
    store.onMapApplied(Tables.serviceInfo, (version, writes) => {
      const raw = writes.get(SINGLETON_KEY);
      if (raw === undefined || raw === null || !ofThisService(version)) return;
      // Posted at once (its edge writes nothing): a share submitted next finds the machine waiting.
      if (TableDefs.serviceInfo.codec.decode(raw).status === 'WaitingForRecoveryShares') this.post({ kind: 'open-proposal-applied' });
    });
    // The rename must not be undone: only once consensus commits this service's Open.
    store.onMapCommitted(Tables.serviceInfo, (version) => {
      if (ofThisService(version)) this.notify({ kind: 'open-committed' });
    });
    store.onMapApplied(Tables.recoveredLedgerSecrets, (version, writes) => {
      const raw = writes.get(SINGLETON_KEY);
      // A record an earlier recovery wrote (a joiner of a second recovery replicates it with the
      // old entries) is under that service's key: only this service's record starts the phase.
      if (raw === undefined || raw === null || !ofThisService(version)) return;
      this.notify({ kind: 'recovered-secrets-applied', record: TableDefs.recoveredLedgerSecrets.codec.decode(raw) });
    });
  }

  /** A primary change (the driver's role-change callback). */
  onRoleChange(primary: boolean): void {
    this.post({ kind: 'role-changed', primary });
  }

  /** A member's encrypted share of the last issue (GET /gov/recovery/encrypted-shares/{member_id}): a read, not an event. */
  encryptedShare(memberId: string): { encrypted_share: string } {
    const record = this.host.executeRead((tx) => tx.table(TableDefs.recoveryShares).get(SINGLETON_KEY));
    const share = record?.encrypted_shares[memberId];
    if (share === undefined) throw nodeError('RecoveryShareNotFound', `member ${memberId} holds no recovery share`);
    return { encrypted_share: share };
  }

  /**
   * A member's decrypted share (POST /gov/recovery/members/{member_id}:recover). `record` runs in
   * the transaction that keeps the outcome (the governance layer's replay check and history);
   * a refused share changes nothing.
   */
  submitShare(memberId: string, share: Uint8Array, record: (tx: Tx) => void): Promise<ShareSubmission> {
    return new Promise((resolve, reject) => {
      const submission: SubmittedShare = { memberId, share, record, resolve, reject };
      try {
        this.post({ kind: 'share-submitted', submission });
      } catch (e) {
        reject(e);
      }
    });
  }

  /**
   * Sealing-based recovery: the recovery decision protocol chose this node, which unsealed the
   * chain of ledger secrets itself and opens the service with no member vote or share.
   */
  openWithUnsealedSecrets(chain: readonly ChainSecret[], openKind: OpenKindRecord): void {
    this.post({ kind: 'secrets-unsealed', chain, openKind });
  }

  // ---------------------------------------------------------------- the machine's effects

  private runEffect(effect: RecoveryEffect, event: RecoveryEvent, edge: RecoveryEdge): void {
    const { host } = this;
    switch (effect) {
      case 'take-lifecycle-edge':
        return host.transition(edge.trigger!, RECOVERY_TRIGGERS);
      case 'check-and-record-share':
        return this.shares.checkAndRecord(eventOf(event, 'share-submitted').submission);
      case 'check-key-and-record-chain': {
        const { submission, key, error } = eventOf(event, 'key-reassembled');
        return this.shares.recordChain(submission, key, error);
      }
      case 'record-unsealed-chain': {
        const { chain, openKind } = eventOf(event, 'secrets-unsealed');
        return this.recordUnsealedChain(chain, openKind);
      }
      case 'read-private-domain':
        return this.readPrivateDomain(eventOf(event, 'recovered-secrets-applied').record, edge.trigger!);
      case 'enter-network': {
        const { record, startedMs } = eventOf(event, 'private-domain-read');
        return this.enterNetwork(record, startedMs, edge.trigger!);
      }
      case 'open-if-primary':
        if (host.isPrimary()) host.defer(() => this.openIfReady());
        return;
      case 'complete-recovery':
        return this.completeRecoveryIfOpenCommitted();
      case 'fail': {
        const { error } = eventOf(event, 'private-domain-failed');
        host.logger.fatal(`reading the private ledger failed: ${errorMessage(error)}`);
        throw error;
      }
      case 'close':
        void this.decision?.close();
        return;
      case 'none':
        return;
    }
  }

  /** The typed error of a share the machine's state does not take. */
  private refusalOf(state: RecoveryState, event: RecoveryEvent): Error {
    assert(event.kind === 'share-submitted' || event.kind === 'key-reassembled', () => `recovery: "${event.kind}" is not a client's event`);
    if (!this.host.isPrimary()) return nodeError('NotPrimary', 'recovery shares are submitted to the primary');
    if (state === 'Stopped' || state === 'Failed') return notWaitingForShares(`the node is ${state}: it takes no recovery share`);
    const info = this.host.executeRead((tx) => tx.table(TableDefs.serviceInfo).get(SINGLETON_KEY));
    const recovered = state === 'ReadingPrivateLedger' || state === 'PartOfNetwork';
    if (recovered && info?.status === 'WaitingForRecoveryShares') return notWaitingForShares('the ledger secrets are already recovered: no more shares are needed');
    return notWaitingForShares(`the service is ${info?.status ?? 'not created'}, not waiting for recovery shares (members vote transition_service_to_open first)`);
  }

  /** A listener's event, posted soon (outside the store's apply or commit). */
  private notify(event: RecoveryEvent): void {
    this.host.defer(() => this.post(event));
  }

  /** The end of async work, as an event; a refused client's event goes to its client. */
  private postFromCompletion(event: RecoveryEvent): void {
    try {
      this.post(event);
    } catch (e) {
      if (event.kind !== 'key-reassembled') throw e;
      event.submission.reject(e);
    }
  }

  /** The recovered chain for every node of the service, encrypted under the storage key. */
  private recoveredRecordOf(chain: readonly ChainSecret[]): RecoveredSecretsRecord {
    const storageKey = submittedShareStorageKey(this.host.service.keyPem);
    const plain = JSON.stringify(chain.map((s) => ({ from_seqno: s.fromSeqno, secret: Buffer.from(s.secret).toString('base64') })));
    const encrypted = encryptSubmittedShare(storageKey, RECOVERED_CHAIN_ROW, utf8.encode(plain), this.host.randomBytes);
    return { encrypted_chain: Buffer.from(encrypted).toString('base64'), last_recovered_seqno: this.host.replica.serviceStartSeqno - 1 };
  }

  /**
   * The service waits for nothing: the recovered chain is recorded as at the share threshold, and
   * open_kind says how the protocol decided; every node then reads its private domain and the
   * primary opens the service.
   */
  private recordUnsealedChain(chain: readonly ChainSecret[], openKind: OpenKindRecord): void {
    this.host.executeWrite((tx) => {
      const infoMap = tx.table(TableDefs.serviceInfo);
      const info = infoMap.get(SINGLETON_KEY);
      assert(info?.status === 'Recovering', 'a service opened by the recovery decision protocol is recovering');
      infoMap.put(SINGLETON_KEY, { ...info, status: 'WaitingForRecoveryShares' });
      tx.table(TableDefs.recoveredLedgerSecrets).put(SINGLETON_KEY, this.recoveredRecordOf(chain));
      tx.table(TableDefs.recoveryDecisionOpenKind).put(SINGLETON_KEY, openKind);
    });
  }

  /**
   * The recovery node renames its `.recovery` ledger files once this service's Open is committed
   * (a view change may undo an Open only applied), and once it has read its private domain: not
   * while the previous service's records are read (they say Open too).
   */
  private completeRecoveryIfOpenCommitted(): void {
    const { replica } = this.host;
    const { ledger, store } = replica;
    if (!ledger.recoveryMode || this.machine.state !== 'PartOfNetwork' || store.committedVersion < replica.serviceStartSeqno) return;
    const info = store.readAt(store.committedVersion).table(TableDefs.serviceInfo).get(SINGLETON_KEY);
    if (info?.status !== 'Open') return;
    ledger.completeRecovery();
    this.host.persistState();
    this.host.logger.info('recovery complete: the .recovery ledger files are renamed');
  }

  // ---------------------------------------------------------------- the private domain

  /** Installs the older secrets and starts reading; the read's end comes back as an event. */
  private readPrivateDomain(record: RecoveredSecretsRecord, trigger: LifecycleTrigger): void {
    const { host } = this;
    host.transition(trigger, RECOVERY_TRIGGERS);
    const startedMs = host.clock.monotonicMs();
    void this.installChainAndRead(record).then(
      (installed) => {
        if (installed) this.post({ kind: 'private-domain-read', record, startedMs });
        else host.logger.info(`the private phase ends unfinished: the node is ${host.lifecycle.state}`);
      },
      (error: unknown) => this.post({ kind: 'private-domain-failed', error }),
    );
  }

  /** The older secrets in front of the chain (at once), then the read; false if the node stopped meanwhile. */
  private async installChainAndRead(record: RecoveredSecretsRecord): Promise<boolean> {
    const { host } = this;
    const chain = this.chainOf(record);
    const firstHeld = host.secrets.linkFor(0).fromSeqno;
    host.secrets.installOlder(chain.filter((s) => s.fromSeqno < firstHeld));
    host.persistState();
    return this.privateDomain.read(record.last_recovered_seqno, this.startupSnapshot);
  }

  private enterNetwork(record: RecoveredSecretsRecord, startedMs: number, trigger: LifecycleTrigger): void {
    const { host } = this;
    host.transition(trigger, RECOVERY_TRIGGERS);
    const entries = record.last_recovered_seqno - (this.startupSnapshot?.seqno ?? 0);
    host.logger.info(
      `the private domain of the previous service is restored; private phase: ${phaseSummary(entries, host.clock.monotonicMs() - startedMs)}, from ReadingPrivateLedger to PartOfNetwork`,
    );
    if (host.isPrimary()) host.defer(() => this.openIfReady());
    // The Open may have committed while this node read its private domain.
    host.defer(() => this.completeRecoveryIfOpenCommitted());
  }

  /** The recovered chain of ledger secrets, oldest first, from its record. */
  private chainOf(record: RecoveredSecretsRecord): ChainSecret[] {
    const storageKey = submittedShareStorageKey(this.host.service.keyPem);
    const plain = decryptSubmittedShare(storageKey, RECOVERED_CHAIN_ROW, fromBase64(record.encrypted_chain));
    return (JSON.parse(utf8.decode(plain)) as { from_seqno: number; secret: string }[]).map((s) => ({ fromSeqno: s.from_seqno, secret: fromBase64(s.secret) }));
  }

  /** The primary opens the recovered service, once it has read its own private domain. */
  private openIfReady(): void {
    const { host } = this;
    if (!host.isPrimary() || this.machine.state !== 'PartOfNetwork') return;
    const record = host.executeRead((tx) => tx.table(TableDefs.recoveredLedgerSecrets).get(SINGLETON_KEY));
    if (record === undefined) return;
    const first = host.secrets.linkFor(host.replica.serviceStartSeqno);
    try {
      const previousLatest = this.chainOf(record).at(-1)!;
      host.executeWrite((tx) => {
        const infoMap = tx.table(TableDefs.serviceInfo);
        const info = infoMap.get(SINGLETON_KEY);
        assert(info !== undefined, 'a recovering service has its service record');
        if (info.status !== 'WaitingForRecoveryShares') return;
        infoMap.put(SINGLETON_KEY, { ...info, status: 'Open', recovery_count: info.recovery_count + 1 });
        const sealed = sealPreviousSecret({ fromSeqno: first.fromSeqno, secret: first.secret }, previousLatest, host.randomBytes);
        tx.table(TableDefs.previousLedgerSecrets).put(String(previousLatest.fromSeqno), Buffer.from(sealed).toString('base64'));
        tx.table(TableDefs.recoveredLedgerSecrets).remove(SINGLETON_KEY);
      });
      host.logger.info('the recovered service is open');
    } catch (e) {
      host.logger.fail(`opening the recovered service failed: ${errorMessage(e)}; it is retried when this node is primary again`);
    }
  }
}

function fromBase64(b64: string): Uint8Array {
  return new Uint8Array(Buffer.from(b64, 'base64'));
}
