/**
 * A simulated network: every message is delayed, and may be lost, duplicated or blocked by a
 * partition (which may be one-way), all drawn from the seeded generator. Messages in flight are
 * bounded; beyond the bound they are lost, which the protocol tolerates.
 */
import type { NodeId } from '../../base/index.js';
import type { Message } from '../../consensus/index.js';
import type { Prng } from '../prng.js';

export interface NetworkFaults {
  lossProbability: number;
  duplicateProbability: number;
  minDelayTicks: number;
  maxDelayTicks: number;
}

export interface Envelope {
  readonly deliverAtTicks: number;
  readonly message: Message;
}

export const MAX_MESSAGES_IN_FLIGHT = 50_000;

/**
 * The fate of one message on a faulty link, drawn from the seeded generator: the delay in ticks of
 * each copy that arrives (none when it is lost, two when it is duplicated).
 */
export function deliveryDelays(rng: Prng, faults: NetworkFaults): number[] {
  if (rng.chance(faults.lossProbability)) return [];
  const copies = rng.chance(faults.duplicateProbability) ? 2 : 1;
  const delays: number[] = [];
  for (let i = 0; i < copies; i++) delays.push(rng.int(faults.minDelayTicks, faults.maxDelayTicks));
  return delays;
}

export class SimNetwork {
  private inFlight: Envelope[] = [];
  private readonly blocked = new Set<string>();
  droppedMessages = 0;

  constructor(
    private readonly rng: Prng,
    public faults: NetworkFaults,
  ) {}

  send(message: Message, nowTicks: number): void {
    const delays = deliveryDelays(this.rng, this.faults);
    if (delays.length === 0) this.droppedMessages++;
    for (const delay of delays) {
      if (this.inFlight.length >= MAX_MESSAGES_IN_FLIGHT) {
        this.droppedMessages++;
        return;
      }
      this.inFlight.push({ deliverAtTicks: nowTicks + delay, message });
    }
  }

  /** Messages due by now that no partition blocks, in random order (reordering). */
  takeDue(nowTicks: number): Message[] {
    const due: Message[] = [];
    const later: Envelope[] = [];
    for (const envelope of this.inFlight) {
      if (envelope.deliverAtTicks > nowTicks) later.push(envelope);
      else if (this.isBlocked(envelope.message.from, envelope.message.to)) this.droppedMessages++;
      else due.push(envelope.message);
    }
    this.inFlight = later;
    return this.rng.shuffle(due);
  }

  get messagesInFlight(): number {
    return this.inFlight.length;
  }

  isBlocked(from: NodeId, to: NodeId): boolean {
    return this.blocked.size > 0 && this.blocked.has(`${from}>${to}`);
  }

  block(from: NodeId, to: NodeId): void {
    this.blocked.add(`${from}>${to}`);
  }

  /** Cuts every link between the two groups, both ways. */
  partition(groupA: readonly NodeId[], groupB: readonly NodeId[]): void {
    for (const a of groupA) {
      for (const b of groupB) {
        this.block(a, b);
        this.block(b, a);
      }
    }
  }

  heal(): void {
    this.blocked.clear();
  }

  get partitioned(): boolean {
    return this.blocked.size > 0;
  }

  describeBlocked(): string {
    return [...this.blocked].sort().join(' ');
  }
}
