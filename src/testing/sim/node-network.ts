/**
 * Node-to-node frames between production nodes in the simulator: each frame is delayed by a
 * number of ticks, and may be lost, duplicated or blocked by a partition, all drawn from the
 * seeded generator; due frames are delivered in random order (reordering). An endpoint accepts a
 * frame only from a node in its peer set, as mutual TLS would.
 */
import type { ChannelIdentity, ChannelStats, FrameHandler, NodeChannels, PeerAddress } from '../../base/channels.js';
import type { Prng } from '../prng.js';
import { deliveryDelays, type NetworkFaults } from './network.js';

interface Frame {
  readonly deliverAtTicks: number;
  readonly from: string;
  readonly to: string;
  readonly kind: number;
  readonly payload: Uint8Array;
}

/** Frames in flight are bounded; beyond the bound they are lost, which the protocol tolerates. */
export const FRAMES_IN_FLIGHT_MAX = 20_000;

export class SimFrameNetwork {
  private inFlight: Frame[] = [];
  private readonly endpoints = new Map<string, SimNodeChannels>();
  private readonly blocked = new Set<string>();
  nowTicks = 0;
  /**
   * Kinds of frames never duplicated: those of protocols that, like the TLS channels they run on,
   * count on each frame arriving at most once (request forwarding). Loss and delay still apply.
   */
  neverDuplicated: ReadonlySet<number> = new Set();
  droppedFrames = 0;
  deliveredFrames = 0;

  constructor(
    private readonly rng: Prng,
    public faults: NetworkFaults,
  ) {}

  /** The channels of node `nodeId` (a restarted node gets new ones: frames to its old process are lost). */
  join(nodeId: string): SimNodeChannels {
    const channels = new SimNodeChannels(this, nodeId);
    this.endpoints.set(nodeId, channels);
    return channels;
  }

  leave(channels: SimNodeChannels): void {
    if (this.endpoints.get(channels.nodeId) === channels) this.endpoints.delete(channels.nodeId);
  }

  send(from: string, to: string, kind: number, payload: Uint8Array): void {
    const drawn = deliveryDelays(this.rng, this.faults);
    const delays = this.neverDuplicated.has(kind) ? drawn.slice(0, 1) : drawn;
    if (delays.length === 0) this.droppedFrames++;
    for (const delay of delays) {
      if (this.inFlight.length >= FRAMES_IN_FLIGHT_MAX) {
        this.droppedFrames++;
        return;
      }
      // A copy: the sender may reuse its buffer, and a duplicate must not share bytes with the first.
      this.inFlight.push({ deliverAtTicks: this.nowTicks + delay, from, to, kind, payload: payload.slice() });
    }
  }

  /** Delivers the frames due by now, in random order; returns how many were delivered. */
  deliverDue(): number {
    const due: Frame[] = [];
    const later: Frame[] = [];
    for (const frame of this.inFlight) (frame.deliverAtTicks > this.nowTicks ? later : due).push(frame);
    this.inFlight = later;
    let delivered = 0;
    for (const frame of this.rng.shuffle(due)) {
      const endpoint = this.endpoints.get(frame.to);
      if (endpoint === undefined || this.blocked.has(`${frame.from}>${frame.to}`) || !endpoint.accepts(frame.from)) {
        this.droppedFrames++;
        continue;
      }
      endpoint.receive(frame.from, frame.kind, frame.payload);
      delivered++;
    }
    this.deliveredFrames += delivered;
    return delivered;
  }

  /** Cuts every link between the two groups, both ways. */
  partition(groupA: readonly string[], groupB: readonly string[]): void {
    for (const a of groupA) {
      for (const b of groupB) {
        this.blocked.add(`${a}>${b}`);
        this.blocked.add(`${b}>${a}`);
      }
    }
  }

  heal(): void {
    this.blocked.clear();
  }

  get partitioned(): boolean {
    return this.blocked.size > 0;
  }
}

export class SimNodeChannels implements NodeChannels {
  private handler: FrameHandler | undefined;
  private peers = new Set<string>();
  private closed = false;
  sent = 0;

  constructor(
    private readonly network: SimFrameNetwork,
    readonly nodeId: string,
  ) {}

  accepts(from: string): boolean {
    return !this.closed && this.peers.has(from);
  }

  receive(from: string, kind: number, payload: Uint8Array): void {
    this.handler?.(from, kind, payload);
  }

  send(to: string, kind: number, payload: Uint8Array): boolean {
    if (this.closed || !this.peers.has(to)) return false;
    this.sent++;
    this.network.send(this.nodeId, to, kind, payload);
    return true;
  }

  onFrame(handler: FrameHandler): void {
    this.handler = handler;
  }

  setPeers(peers: readonly PeerAddress[]): void {
    this.peers = new Set(peers.map((p) => p.nodeId).filter((id) => id !== this.nodeId));
  }

  setIdentity(_identity: ChannelIdentity): void {}

  stats(): ChannelStats {
    return { peers: {}, droppedUnknownPeer: 0, refused: {} };
  }

  close(): Promise<void> {
    this.closed = true;
    this.network.leave(this);
    return Promise.resolve();
  }
}
