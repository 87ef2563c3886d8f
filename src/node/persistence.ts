/**
 * What a node keeps beside its ledger to restart as the same node (src/node/flows/restart.ts): its
 * identity, the service identity and ledger secrets it was given, and the consensus hard state
 * (view and vote).
 *
 * Durability policy: the file is written atomically and durably (written to a temporary file,
 * fsynced, renamed) by `writeSecretFile`, every time the identity, secrets or hard state change,
 * and before any message of the consensus step that changed the hard state is sent (a node never
 * votes twice in one view, even across a crash). It lives beside the node certificate, never in
 * the ledger directory (ledger files are copied around by operators; this file holds secrets).
 * Virtual mode has no hardware sealing key, so the file is protected only by its mode (0600).
 * One process at a time: `covenant node` locks the file's folder, with the ledger and snapshots
 * directories, before anything reads them (src/platform/directory-lock.ts), so a second process
 * on the same configuration never rewrites it.
 */
import { utf8 } from '../base/bytes.js';
import type { NodeAddresses } from './api.js';
import type { Disk } from '../ledger/index.js';
import { nodeError } from './errors.js';
import type { LedgerSecretRecord, LedgerSecrets } from './identity/ledger-secrets.js';
import type { NodeIdentity } from './identity/node-identity.js';
import type { ServiceIdentity } from './identity/service-identity.js';

export const NODE_STATE_FILE = 'node_state.json';

/** The "host:port" each interface was bound to: the node-to-node interface, and RPC interfaces by name. */
export interface BoundAddresses {
  readonly node_to_node: string;
  readonly rpc: Record<string, string>;
}

export interface PersistedNodeState {
  format: 1;
  node_id: string;
  private_key: string;
  self_signed_certificate: string;
  node_certificate: string;
  service_certificate: string;
  service_key: string;
  ledger_secrets: LedgerSecretRecord[];
  genesis_configuration: { seqno: number; nodes: string[] };
  view: number;
  voted_for: string | null;
  /** Seqno of the snapshot the node started from (0: from genesis); its ledger starts after it. */
  startup_seqno?: number;
  /** The first seqno of the service (after a disaster recovery; entries before it are the previous service's). */
  service_start_seqno?: number;
  /**
   * The trusted peers the join answer named. A node that restarts before replication brought it
   * the node table (an empty or short ledger) still knows whom to accept frames from.
   */
  peers?: { node_id: string; address: string }[];
  /**
   * A Recover node's recovery is still in progress (its `.recovery` files are discarded at start:
   * it recovers again); false once the service it recovered opened (it then restarts as itself).
   */
  recovering?: boolean;
  /** Where the interfaces were bound: a restart binds the same ports again where the configuration says port 0. */
  bound_addresses?: BoundAddresses;
}

/** Where the interfaces of `addresses` are bound, as the node state records it. */
export function boundAddressesOf(addresses: NodeAddresses): BoundAddresses {
  const rpc: Record<string, string> = {};
  for (const a of addresses.rpc) rpc[a.name] = a.bindAddress;
  return { node_to_node: addresses.nodeToNode.bindAddress, rpc };
}

export class NodeStateFile {
  readonly path: string;

  constructor(
    private readonly disk: Disk,
    nodeCertificateFile: string,
    private readonly writeSecretFile: (path: string, text: string) => void,
  ) {
    const slash = nodeCertificateFile.lastIndexOf('/');
    this.path = disk.join(slash === -1 ? '.' : nodeCertificateFile.slice(0, slash), NODE_STATE_FILE);
  }

  exists(): boolean {
    return this.disk.exists(this.path);
  }

  load(): PersistedNodeState {
    const state = JSON.parse(utf8.decode(this.disk.readAll(this.path))) as PersistedNodeState;
    if (state.format !== 1) throw nodeError('InvalidNodeState', `${this.path}: unknown node state format ${String(state.format)}`);
    return state;
  }

  save(state: PersistedNodeState): void {
    this.writeSecretFile(this.path, JSON.stringify(state));
  }

  /** Writes the state the owners hold now; nothing before the node holds all of it (false then). */
  saveFrom(sources: NodeStateSources): boolean {
    const state = nodeStateOf(sources);
    if (state !== undefined) this.save(state);
    return state !== undefined;
  }
}

/** The owners of what the node state file records, as they are when it is written. */
export interface NodeStateSources {
  readonly identity: NodeIdentity;
  readonly service: ServiceIdentity;
  readonly secrets: LedgerSecrets;
  readonly genesisConfiguration: { seqno: number; nodes: string[] } | undefined;
  /** The consensus hard state last persisted (the driver's). */
  readonly hardState: { readonly view: number; readonly votedFor: string | undefined };
  /** The replica's seqnos and recovery mode. */
  readonly replica: { readonly startupSeqno: number; readonly serviceStartSeqno: number; readonly recoveryInProgress: boolean };
  readonly peers: { node_id: string; address: string }[];
  readonly addresses: NodeAddresses | undefined;
}

/** The node state of `sources`, or undefined while the node lacks its identity, the service's key, its secrets or its genesis. */
export function nodeStateOf(sources: NodeStateSources): PersistedNodeState | undefined {
  const { identity, service, secrets, genesisConfiguration, hardState, replica, addresses } = sources;
  if (!identity.exists || !secrets.held || !service.holdsKey || !genesisConfiguration) return undefined;
  return {
    format: 1,
    node_id: identity.nodeId,
    private_key: identity.privateKeyPem,
    self_signed_certificate: identity.selfSignedCertificatePem,
    node_certificate: identity.nodeCertificatePem,
    service_certificate: service.certificatePem,
    service_key: service.keyPem,
    ledger_secrets: secrets.records(),
    genesis_configuration: genesisConfiguration,
    view: hardState.view,
    voted_for: hardState.votedFor ?? null,
    startup_seqno: replica.startupSeqno,
    service_start_seqno: replica.serviceStartSeqno,
    recovering: replica.recoveryInProgress,
    peers: sources.peers,
    ...(addresses ? { bound_addresses: boundAddressesOf(addresses) } : {}),
  };
}
