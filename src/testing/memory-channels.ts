/**
 * An in-memory NodeChannels for tests: the same contract as the TLS implementation where it
 * applies, without sockets or certificates.
 *
 * Endpoints join a MemoryChannelNetwork under an address. A frame to a peer is routed by the
 * peer's address, as TLS would be, and delivered (copied, in order) on a later turn of the event
 * loop, if the endpoint at that address has the peer's node id and accepts the sender (the
 * sender is in its peer set). Otherwise the pair counts as not connected: frames stay queued,
 * bounded by bytes like the real queue, and flow once the peer appears; a refusal is counted and
 * logged on the refusing side (UnknownPeer) or the sending side (PeerIdMismatch), once per episode.
 *
 * `pause(address)` makes an endpoint stop reading, like a stalled process: frames to it queue up
 * to the bound and then drop, which lets tests check that a slow peer affects nobody else.
 */
import { assert } from '../base/assert.js';
import {
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_MAX_QUEUE_BYTES_PER_PEER,
  FRAME_HEADER_BYTES,
  type ChannelErrorCode,
  type ChannelIdentity,
  type ChannelStats,
  type FrameHandler,
  type NodeChannels,
  type PeerAddress,
  type PeerChannelStats,
} from '../base/channels.js';
import type { Clock } from '../base/clock.js';
import { nullLogger, type Logger } from '../base/log.js';
import { systemClock } from '../platform/clock.js';

export interface MemoryChannelsInit {
  readonly nodeId: string;
  /** Unique in the network; defaults to "mem:<nodeId>". */
  readonly address?: string;
  readonly logger?: Logger;
  readonly maxFrameBytes?: number;
  readonly maxQueueBytesPerPeer?: number;
}

interface QueuedFrame {
  readonly kind: number;
  readonly payload: Uint8Array;
}

class MemoryPeer {
  queue: QueuedFrame[] = [];
  queuedBytes = 0;
  dropped = 0;
  sent = 0;
  received = 0;
  connected = false;
  dropping = false;
  /** The refusal currently in effect, logged once. */
  refusal: ChannelErrorCode | undefined;
  constructor(public address: string) {}
}

export class MemoryNodeChannels implements NodeChannels {
  readonly address: string;
  private readonly peers = new Map<string, MemoryPeer>();
  private handler: FrameHandler | undefined;
  private closed = false;
  private droppedUnknownPeer = 0;
  private readonly refused: Partial<Record<ChannelErrorCode, number>> = {};
  private readonly log: Logger;
  private readonly maxFrameBytes: number;
  private readonly maxQueueBytesPerPeer: number;

  constructor(
    private readonly network: MemoryChannelNetwork,
    readonly nodeId: string,
    init: MemoryChannelsInit,
  ) {
    this.address = init.address ?? `mem:${nodeId}`;
    this.log = init.logger ?? nullLogger;
    this.maxFrameBytes = init.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    this.maxQueueBytesPerPeer = init.maxQueueBytesPerPeer ?? DEFAULT_MAX_QUEUE_BYTES_PER_PEER;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  send(to: string, kind: number, payload: Uint8Array): boolean {
    assert(Number.isInteger(kind) && kind >= 0 && kind <= 0xff, () => `frame kind ${kind} is not a u8`);
    const peer = this.closed ? undefined : this.peers.get(to);
    if (peer === undefined) {
      this.droppedUnknownPeer++;
      return false;
    }
    const frameBytes = FRAME_HEADER_BYTES + payload.byteLength;
    if (payload.byteLength + 1 > this.maxFrameBytes || peer.queuedBytes + frameBytes > this.maxQueueBytesPerPeer) {
      peer.dropped++;
      if (!peer.dropping) {
        peer.dropping = true;
        this.log.info('dropping node-to-node frames', { peer: to, frame_bytes: frameBytes, queued_bytes: peer.queuedBytes });
      }
      return false;
    }
    peer.dropping = false;
    peer.queue.push({ kind, payload: payload.slice() });
    peer.queuedBytes += frameBytes;
    this.network.schedule();
    return true;
  }

  onFrame(handler: FrameHandler): void {
    this.handler = handler;
  }

  setPeers(peers: readonly PeerAddress[]): void {
    if (this.closed) return;
    const next = new Map(peers.filter((p) => p.nodeId !== this.nodeId).map((p) => [p.nodeId, p.address]));
    for (const nodeId of this.peers.keys()) if (!next.has(nodeId)) this.peers.delete(nodeId);
    for (const [nodeId, address] of next) {
      const peer = this.peers.get(nodeId);
      if (peer === undefined) this.peers.set(nodeId, new MemoryPeer(address));
      else peer.address = address;
    }
    this.network.schedule();
  }

  setIdentity(identity: ChannelIdentity): void {
    assert(identity.nodeId === this.nodeId, 'a node keeps its node id when its certificate changes');
  }

  stats(): ChannelStats {
    const peers: Record<string, PeerChannelStats> = {};
    for (const [nodeId, p] of this.peers) {
      peers[nodeId] = { connected: p.connected, queuedBytes: p.queuedBytes, dropped: p.dropped, sent: p.sent, received: p.received };
    }
    return { peers, droppedUnknownPeer: this.droppedUnknownPeer, refused: { ...this.refused } };
  }

  close(): Promise<void> {
    if (!this.closed) {
      this.closed = true;
      this.peers.clear();
      this.network.leave(this);
    }
    return Promise.resolve();
  }

  /** Whether this endpoint takes frames from `from` now (it is open and `from` is a peer). */
  accepts(from: string): boolean {
    return !this.closed && this.peers.has(from);
  }

  /** Moves queued frames to their destinations; called by the network on its turn. */
  deliverQueued(): void {
    for (const [nodeId, peer] of this.peers) {
      const target = this.network.endpointAt(peer.address);
      let refusal: ChannelErrorCode | undefined;
      if (target === undefined || this.network.isPaused(peer.address)) refusal = undefined;
      else if (target.nodeId !== nodeId) refusal = 'PeerIdMismatch';
      else if (!target.accepts(this.nodeId)) refusal = 'UnknownPeer';
      peer.connected = target !== undefined && refusal === undefined && !this.network.isPaused(peer.address);
      if (refusal !== peer.refusal && refusal !== undefined) {
        // Counted and logged where the TLS implementation does: the connector sees a wrong key,
        // the listener an unknown one.
        if (refusal === 'PeerIdMismatch') this.noteRefused(refusal, 'fail', { peer: nodeId, address: peer.address, presented_node_id: target!.nodeId });
        else target!.noteRefused(refusal, 'info', { remote: this.address, presented_node_id: this.nodeId });
      }
      peer.refusal = refusal;
      if (!peer.connected) continue;
      const frames = peer.queue;
      peer.queue = [];
      peer.queuedBytes = 0;
      for (const frame of frames) {
        peer.sent++;
        target!.receive(this.nodeId, frame.kind, frame.payload);
      }
    }
  }

  private receive(from: string, kind: number, payload: Uint8Array): void {
    // The handler may have changed the peer set or closed this endpoint during this delivery.
    const peer = this.peers.get(from);
    if (peer === undefined || this.closed) return;
    peer.received++;
    this.handler?.(from, kind, payload);
  }

  private noteRefused(code: ChannelErrorCode, level: 'info' | 'fail', fields: Record<string, unknown>): void {
    this.refused[code] = (this.refused[code] ?? 0) + 1;
    this.log[level](`refused node-to-node connection: ${code}`, { reason: code, ...fields });
  }
}

/** The shared medium of a set of MemoryNodeChannels. */
export class MemoryChannelNetwork {
  private readonly endpoints = new Map<string, MemoryNodeChannels>();
  private readonly paused = new Set<string>();
  private scheduled = false;

  /** `clock.defer` decides when frames move (the simulator can pass its own). */
  constructor(private readonly clock: Pick<Clock, 'defer'> = systemClock) {}

  join(init: MemoryChannelsInit): MemoryNodeChannels {
    const channels = new MemoryNodeChannels(this, init.nodeId, init);
    assert(!this.endpoints.has(channels.address), () => `address ${channels.address} is taken`);
    this.endpoints.set(channels.address, channels);
    this.schedule();
    return channels;
  }

  /** Stops (or resumes) delivery to the endpoint at `address`, as if its process stalled. */
  pause(address: string, paused = true): void {
    if (paused) this.paused.add(address);
    else this.paused.delete(address);
    this.schedule();
  }

  endpointAt(address: string): MemoryNodeChannels | undefined {
    return this.endpoints.get(address);
  }

  isPaused(address: string): boolean {
    return this.paused.has(address);
  }

  leave(channels: MemoryNodeChannels): void {
    if (this.endpoints.get(channels.address) === channels) this.endpoints.delete(channels.address);
    this.schedule();
  }

  /** Arranges one delivery turn for every endpoint. */
  schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    this.clock.defer(() => {
      this.scheduled = false;
      for (const endpoint of [...this.endpoints.values()]) endpoint.deliverQueued();
    });
  }
}
