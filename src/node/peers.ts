/**
 * The node's peers on the node-to-node channels: the channels themselves, the handlers of each
 * frame kind, and the peer set, kept current from the node table (every non-Pending node with its
 * published node-to-node address) plus, until replication brings the node table, the peers a
 * joiner learnt from its join answer.
 */
import type { Logger } from '../base/log.js';
import type { Tx } from '../kv/index.js';
import type { NodeChannels } from './channels.js';
import { TableDefs, type NodeInfo } from './tables.js';

/** Frame kinds on the node-to-node channels. */
export const FrameKind = {
  Consensus: 1,
  ForwardedRequest: 2,
  ForwardedResponse: 3,
} as const;

export type FrameHandler = (from: string, payload: Uint8Array) => void;

export class Peers {
  private channels: NodeChannels | undefined;
  private readonly handlers = new Map<number, FrameHandler>();
  private dirty = true;
  /** Peers learnt from the join answer, used until the replicated node table names them. */
  private bootstrap: { nodeId: string; address: string }[] = [];
  private stopped = false;

  constructor(
    private readonly selfId: () => string,
    private readonly logger: Logger,
  ) {}

  attach(channels: NodeChannels): void {
    this.channels = channels;
    channels.onFrame((from: string, kind: number, payload: Uint8Array) => {
      if (this.stopped) return;
      const handler = this.handlers.get(kind);
      if (handler) handler(from, payload);
      else this.logger.debug(`dropping node-to-node frame of unknown kind ${kind} from ${from}`);
    });
  }

  /** Registers the handler of one frame kind (consensus here; request forwarding lives in the HTTP layer). */
  onFrame(kind: number, handler: FrameHandler): void {
    this.handlers.set(kind, handler);
  }

  send(to: string, kind: number, payload: Uint8Array): boolean {
    return this.channels?.send(to, kind, payload) ?? false;
  }

  /** The node table changed (or was rolled back): the peer set is recomputed at the next refresh. */
  markDirty(): void {
    this.dirty = true;
  }

  /** The peers learnt from a join answer, as the node state file keeps them (a restart knows them before its ledger does). */
  bootstrapRecords(): { node_id: string; address: string }[] {
    return this.bootstrap.map((p) => ({ node_id: p.nodeId, address: p.address }));
  }

  setBootstrap(peers: readonly { node_id: string; address: string }[]): void {
    const self = this.selfId();
    this.bootstrap = peers.filter((p) => p.node_id !== self).map((p) => ({ nodeId: p.node_id, address: p.address }));
    this.dirty = true;
  }

  /** Recomputes the channels' peer set from the node table, if it changed. */
  refreshIfDirty(read: <T>(fn: (tx: Tx) => T) => T): void {
    // Asked after every pump: the common case returns here.
    if (!this.dirty) return;
    this.dirty = false;
    if (!this.channels) return;
    const self = this.selfId();
    const peers: { nodeId: string; address: string }[] = [];
    read((tx) =>
      tx.table(TableDefs.nodesInfo).forEach((info: NodeInfo, id: string) => {
        if (id !== self && info.node_to_node_interface && info.status !== 'Pending') {
          peers.push({ nodeId: id, address: info.node_to_node_interface.published_address });
        }
      }),
    );
    // Until replication brings the node table, a joiner knows the network from its join answer.
    for (const p of this.bootstrap) if (!peers.some((q) => q.nodeId === p.nodeId)) peers.push(p);
    this.channels.setPeers(peers);
  }

  stop(): void {
    this.stopped = true;
  }
}

/** Trusted nodes and their node-to-node addresses (a joiner's first peers). */
export function trustedPeersOf(tx: Tx): { node_id: string; address: string }[] {
  const out: { node_id: string; address: string }[] = [];
  tx.table(TableDefs.nodesInfo).forEach((info: NodeInfo, id: string) => {
    if (info.status === 'Trusted' && info.node_to_node_interface) out.push({ node_id: id, address: info.node_to_node_interface.published_address });
  });
  return out;
}
