/**
 * A node's part in a disaster recovery as one state machine (docs/recovery.md, "The recovery
 * machine"): its states are the recovery part of the node lifecycle (src/node/lifecycle.ts) and
 * the service's wait for shares; its inputs are named events; its transitions are the table
 * below, read top to bottom: in each state, the event it accepts, the next state and the effect
 * it starts. The start-up flows, the HTTP handlers, the store listeners and the role-change
 * callback only post events (src/node/recovery/recovery.ts); async work an effect starts
 * (reassembling the key, reading the private domain) comes back as an event.
 *
 * An event a state neither accepts nor ignores is refused: a client's (a share, or the end of its
 * key's reassembly) with a typed error the effects' owner builds, any other with an assertion,
 * since only a bug can post it. `stop` leads from any state to Stopped, where every later event
 * but a client's (the end of async work, a listener's notice) is ignored.
 */
import { assert } from '../../base/assert.js';
import type { Logger } from '../../base/log.js';
import type { LifecycleTrigger } from '../lifecycle.js';

export type RecoveryState =
  /** No start-up flow has placed the node yet (Uninitialized, Initialized, Pending). */
  | 'Inactive'
  | 'ReadingPublicLedger'
  /** The public domain only; the service is Recovering (members have not voted to open it). */
  | 'PartOfPublicNetwork'
  /** The public domain only; the service is WaitingForRecoveryShares: the primary takes shares. */
  | 'WaitingForShares'
  | 'ReadingPrivateLedger'
  /** The node holds the private domain: a primary opens a recovered service that waits for it. */
  | 'PartOfNetwork'
  /** Reading the private domain failed: the node stops. */
  | 'Failed'
  | 'Stopped';

export type RecoveryEventKind =
  /** The Recover flow starts reading the previous service's ledger. */
  | 'recover'
  /** The Recover flow has read the public ledger and written the new service's first transaction. */
  | 'public-ledger-read'
  /** The Join flow was trusted by a recovering service. */
  | 'trusted-by-recovering-service'
  /** A flow made the node part of the network (start, restart, join of a service not recovering). */
  | 'joined-network'
  /** The service record of this service, WaitingForRecoveryShares, is applied (the open proposal). */
  | 'open-proposal-applied'
  /** The recovery decision protocol chose this node, which unsealed the chain itself. */
  | 'secrets-unsealed'
  /** A member submits its decrypted share (POST /gov/recovery/members/{id}:recover). */
  | 'share-submitted'
  /** The key of the shares at the threshold is reassembled (or its reassembly failed). */
  | 'key-reassembled'
  /** This service's record of the recovered chain is applied (the threshold was reached). */
  | 'recovered-secrets-applied'
  /** The private domain is read and installed in the store. */
  | 'private-domain-read'
  | 'private-domain-failed'
  /** Consensus made this node primary or backup. */
  | 'role-changed'
  /** Consensus committed this service's Open. */
  | 'open-committed'
  | 'stop';

export type RecoveryEffect =
  /** Takes the transition's lifecycle edge. */
  | 'take-lifecycle-edge'
  /** Checks the share against the store and records it in one transaction; at the threshold, starts reassembling the key. */
  | 'check-and-record-share'
  /** Checks the reassembled key and records the recovered chain in one transaction. */
  | 'check-key-and-record-chain'
  /** Records the unsealed chain as at the threshold, in one transaction. */
  | 'record-unsealed-chain'
  /** Takes the lifecycle edge, installs the older secrets and starts reading the private domain. */
  | 'read-private-domain'
  /** Takes the lifecycle edge; then the primary opens the service, and the `.recovery` files are renamed once the Open is committed. */
  | 'enter-network'
  /** A primary opens the recovered service (soon, outside the current call). */
  | 'open-if-primary'
  /** Renames the `.recovery` ledger files, if the committed Open is this service's. */
  | 'complete-recovery'
  | 'fail'
  | 'close'
  | 'none';

export interface RecoveryEdge {
  readonly from: RecoveryState;
  readonly event: RecoveryEventKind;
  readonly to: RecoveryState;
  readonly effect: RecoveryEffect;
  /** The lifecycle edge the transition takes, if any. */
  readonly trigger?: LifecycleTrigger;
  /** What takes this edge outside a recovery with members' shares (which the node simulator runs). */
  readonly only?: 'sealing-based recovery' | 'a failed read';
}

/** The machine's table, one row per edge, in the order a recovery takes them. */
export const RECOVERY_EDGES: readonly RecoveryEdge[] = [
  { from: 'Inactive', event: 'joined-network', to: 'PartOfNetwork', effect: 'open-if-primary' },
  { from: 'Inactive', event: 'recover', to: 'ReadingPublicLedger', effect: 'take-lifecycle-edge', trigger: 'recover' },
  { from: 'ReadingPublicLedger', event: 'public-ledger-read', to: 'PartOfPublicNetwork', effect: 'take-lifecycle-edge', trigger: 'public-ledger-restored' },
  { from: 'Inactive', event: 'trusted-by-recovering-service', to: 'PartOfPublicNetwork', effect: 'take-lifecycle-edge', trigger: 'trusted-by-recovered-network' },
  { from: 'PartOfPublicNetwork', event: 'open-proposal-applied', to: 'WaitingForShares', effect: 'none' },
  { from: 'PartOfPublicNetwork', event: 'secrets-unsealed', to: 'PartOfPublicNetwork', effect: 'record-unsealed-chain', only: 'sealing-based recovery' },
  { from: 'WaitingForShares', event: 'share-submitted', to: 'WaitingForShares', effect: 'check-and-record-share' },
  { from: 'WaitingForShares', event: 'key-reassembled', to: 'WaitingForShares', effect: 'check-key-and-record-chain' },
  { from: 'WaitingForShares', event: 'recovered-secrets-applied', to: 'ReadingPrivateLedger', effect: 'read-private-domain', trigger: 'shares-reassembled' },
  { from: 'PartOfPublicNetwork', event: 'recovered-secrets-applied', to: 'ReadingPrivateLedger', effect: 'read-private-domain', trigger: 'shares-reassembled', only: 'sealing-based recovery' },
  { from: 'ReadingPrivateLedger', event: 'private-domain-read', to: 'PartOfNetwork', effect: 'enter-network', trigger: 'private-ledger-restored' },
  { from: 'ReadingPrivateLedger', event: 'private-domain-failed', to: 'Failed', effect: 'fail', only: 'a failed read' },
  { from: 'PartOfNetwork', event: 'role-changed', to: 'PartOfNetwork', effect: 'open-if-primary' },
  { from: 'PartOfNetwork', event: 'open-committed', to: 'PartOfNetwork', effect: 'complete-recovery' },
];

/**
 * The events each state accepts and leaves as they are: a listener's notice that concerns another
 * state (a service record replayed with the previous service's entries, a role change before the
 * node holds the private domain, an Open committed while the private domain is read: the rename
 * waits for `private-domain-read`).
 */
export const RECOVERY_IGNORED: Readonly<Record<RecoveryState, readonly RecoveryEventKind[]>> = {
  Inactive: ['open-proposal-applied', 'recovered-secrets-applied', 'role-changed', 'open-committed'],
  ReadingPublicLedger: ['open-proposal-applied', 'recovered-secrets-applied', 'role-changed', 'open-committed'],
  PartOfPublicNetwork: ['role-changed', 'open-committed'],
  WaitingForShares: ['open-proposal-applied', 'role-changed', 'open-committed'],
  ReadingPrivateLedger: ['open-proposal-applied', 'recovered-secrets-applied', 'role-changed', 'open-committed'],
  PartOfNetwork: ['open-proposal-applied', 'recovered-secrets-applied'],
  Failed: ['open-proposal-applied', 'recovered-secrets-applied', 'role-changed', 'open-committed', 'private-domain-read', 'private-domain-failed'],
  Stopped: [],
};

/** Events a client causes: refused with a typed error, not an assertion. */
export const CLIENT_EVENTS: readonly RecoveryEventKind[] = ['share-submitted', 'key-reassembled'];

/** The lifecycle edges the machine takes (no flow takes them itself). */
export const RECOVERY_TRIGGERS: readonly LifecycleTrigger[] = RECOVERY_EDGES.flatMap((e) => (e.trigger !== undefined ? [e.trigger] : []));

/** The lifecycle edges of the flows that make a node part of the network outside a recovery (`joined-network`). */
export const JOINED_NETWORK_TRIGGERS: readonly LifecycleTrigger[] = ['start', 'restart', 'trusted', 'join-while-opening'];

/** The edge `event` takes from `from`, if the table has one (`stop` leads anywhere but Stopped to Stopped). */
export function recoveryEdgeOf(from: RecoveryState, event: RecoveryEventKind): RecoveryEdge | undefined {
  if (event === 'stop') return from === 'Stopped' ? undefined : { from, event, to: 'Stopped', effect: 'close' };
  return RECOVERY_EDGES.find((e) => e.from === from && e.event === event);
}

/** A row's name in coverage reports: `from --event--> to`. */
export function edgeName(edge: Pick<RecoveryEdge, 'from' | 'event' | 'to'>): string {
  return `${edge.from} --${edge.event}--> ${edge.to}`;
}

/** What the machine runs: each effect of the table, and the typed refusal of a client's event. */
export interface RecoveryEffects<E extends { readonly kind: RecoveryEventKind }> {
  run(effect: RecoveryEffect, event: E, edge: RecoveryEdge): void;
  /** The error a client's event gets in a state that does not accept it. */
  refusal(state: RecoveryState, event: E): Error;
}

/** Owns the recovery state: the only way to change it is an edge of the table. */
export class RecoveryMachine<E extends { readonly kind: RecoveryEventKind }> {
  private current: RecoveryState = 'Inactive';
  /** The names of the edges this machine took (edgeName), for coverage. */
  readonly taken = new Set<string>();

  constructor(
    private readonly effects: RecoveryEffects<E>,
    private readonly logger: Logger,
  ) {}

  get state(): RecoveryState {
    return this.current;
  }

  /**
   * Takes the edge of `event` from the current state and runs its effect (whose errors reach the
   * poster); an ignored event changes nothing; any other is refused.
   */
  post(event: E): void {
    const edge = recoveryEdgeOf(this.current, event.kind);
    if (edge === undefined) {
      const client = CLIENT_EVENTS.includes(event.kind);
      if ((this.current === 'Stopped' && !client) || RECOVERY_IGNORED[this.current].includes(event.kind)) return;
      if (client) throw this.effects.refusal(this.current, event);
      assert(false, `recovery: ${this.current} does not accept "${event.kind}"`);
    }
    if (edge.to !== edge.from) this.logger.debug(`recovery: ${edgeName(edge)}`);
    this.current = edge.to;
    this.taken.add(edgeName(edge));
    this.effects.run(edge.effect, event, edge);
  }
}
