/**
 * What a start-up flow (one per command.type, plus restart) works with: the node's parts, and the
 * few steps of composition they share. The node (src/node/node.ts) provides it; each flow takes
 * only its own lifecycle edges (FLOW_TRIGGERS).
 */
import type { Logger } from '../../base/log.js';
import type { NodeInit, NodeAddresses } from '../api.js';
import type { ConsensusDriver } from '../driver.js';
import type { LedgerSecretRecord, LedgerSecrets } from '../identity/ledger-secrets.js';
import type { NodeIdentity } from '../identity/node-identity.js';
import type { ServiceIdentity } from '../identity/service-identity.js';
import type { LifecycleTrigger } from '../lifecycle.js';
import type { NodeStateFile } from '../persistence.js';
import type { Peers } from '../peers.js';
import type { Replica } from '../replica.js';
import type { SnapshotManager, StartupSnapshot } from '../snapshots.js';
import type { ServiceStatus, NodeInfo } from '../tables.js';
import type { Signatures } from '../write/signatures.js';
import type { Transactions } from '../write/transactions.js';
import type { Recovery } from '../recovery/recovery.js';
import type { SealingInputs } from '../recovery/sealing.js';

import type { RestoredConsensus } from '../consensus-start.js';
export type { RestoredConsensus };

export interface FlowContext {
  readonly init: NodeInit;
  readonly logger: Logger;
  readonly identity: NodeIdentity;
  readonly service: ServiceIdentity;
  readonly secrets: LedgerSecrets;
  readonly stateFile: NodeStateFile;
  readonly replica: Replica;
  readonly snapshots: SnapshotManager;
  readonly driver: ConsensusDriver;
  readonly peers: Peers;
  readonly transactions: Transactions;
  readonly signatures: Signatures;
  readonly recovery: Recovery;
  genesisConfiguration: { seqno: number; nodes: string[] } | undefined;
  startupSnapshot: StartupSnapshot | undefined;
  joinReportedServiceStatus: ServiceStatus | undefined;
  transition(trigger: LifecycleTrigger, allowed: readonly LifecycleTrigger[]): void;
  setAddresses(addresses: NodeAddresses): void;
  subjectAltNames(): string[];
  /** What this node's sealing key derives from, when sealing_recovery is configured (and the node can read its virtual CPU key). */
  sealingInputs(): SealingInputs | undefined;
  rpcInterfacesRecord(): NodeInfo['rpc_interfaces'];
  /** Installs ledger secrets (the chain) and frames new entries under the newest. */
  installLedgerSecrets(records: readonly LedgerSecretRecord[]): void;
  installLedgerSecret(fromSeqno: number, secret: Uint8Array): void;
  /** Creates the consensus core: from genesis, the startup snapshot, or the node's own ledger. */
  createConsensus(restored?: RestoredConsensus): void;
  persistState(): void;
  /** Starts consensus ticks and the node's timers (snapshots, files cleanup). */
  startBackgroundWork(): void;
  pump(): void;
  stopped(): boolean;
  sleep(ms: number): Promise<void>;
}
