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
import type { LedgerSecretRecord } from './identity/ledger-secrets.js';

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
}
