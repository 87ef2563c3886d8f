/**
 * The node lifecycle as a table mirroring the spec's ("States and transitions", node lifecycle),
 * state names in its PascalCase (docs/architecture.md, decision 13). Each row is one edge with the
 * trigger that takes it; `Lifecycle.transition` fails an assertion on any edge the table does not
 * hold, so an undefined transition can never happen silently. Each start-up flow (src/node/flows)
 * names the triggers it may use, and may take no other edge.
 *
 * The table also says what each state allows: running consensus, holding the private domain (the
 * ledger secret and private maps), serving the application frontend, and running primary-only
 * background tasks (src/node/tasks) when this node is primary.
 */
import { assert } from '../base/assert.js';
import type { Logger } from '../base/log.js';

export type NodeLifecycleState =
  | 'Uninitialized'
  | 'Initialized'
  | 'Pending'
  | 'PartOfNetwork'
  | 'ReadingPublicLedger'
  | 'PartOfPublicNetwork'
  | 'ReadingPrivateLedger'
  | 'Stopped';

export type LifecycleTrigger =
  | 'config'
  | 'start'
  | 'join'
  | 'join-while-opening'
  | 'trusted'
  | 'trusted-by-recovered-network'
  | 'restart'
  | 'recover'
  | 'public-ledger-restored'
  | 'shares-reassembled'
  | 'private-ledger-restored'
  | 'stop';

export interface LifecycleEdge {
  readonly from: NodeLifecycleState;
  readonly trigger: LifecycleTrigger;
  readonly to: NodeLifecycleState;
}

/** The spec's node lifecycle table, one row per edge (plus restart from the node's own ledger, and stop). */
export const LIFECYCLE_EDGES: readonly LifecycleEdge[] = [
  { from: 'Uninitialized', trigger: 'config', to: 'Initialized' },
  { from: 'Initialized', trigger: 'start', to: 'PartOfNetwork' },
  { from: 'Initialized', trigger: 'join', to: 'Pending' },
  { from: 'Initialized', trigger: 'join-while-opening', to: 'PartOfNetwork' },
  { from: 'Pending', trigger: 'trusted', to: 'PartOfNetwork' },
  { from: 'Initialized', trigger: 'recover', to: 'ReadingPublicLedger' },
  { from: 'ReadingPublicLedger', trigger: 'public-ledger-restored', to: 'PartOfPublicNetwork' },
  { from: 'PartOfPublicNetwork', trigger: 'shares-reassembled', to: 'ReadingPrivateLedger' },
  { from: 'ReadingPrivateLedger', trigger: 'private-ledger-restored', to: 'PartOfNetwork' },
  { from: 'Pending', trigger: 'trusted-by-recovered-network', to: 'PartOfPublicNetwork' },
  // Not a row of the spec's table: a node restarted on its own ledger and state resumes as itself.
  { from: 'Initialized', trigger: 'restart', to: 'PartOfNetwork' },
];

/** What a node may do in a state. */
export interface StateAllowances {
  /** Runs the consensus core (ticks, messages, replication). */
  readonly consensus: boolean;
  /** Holds the ledger secret and applies the private domain. */
  readonly privateDomain: boolean;
  /** The application frontend may serve users (once members opened the service). */
  readonly applicationFrontend: boolean;
  /** Primary-only background tasks run while this node is primary. */
  readonly primaryTasks: boolean;
}

const none: StateAllowances = { consensus: false, privateDomain: false, applicationFrontend: false, primaryTasks: false };

export const STATE_ALLOWANCES: Readonly<Record<NodeLifecycleState, StateAllowances>> = {
  Uninitialized: none,
  Initialized: none,
  Pending: none,
  ReadingPublicLedger: none,
  PartOfPublicNetwork: { consensus: true, privateDomain: false, applicationFrontend: false, primaryTasks: true },
  ReadingPrivateLedger: { consensus: true, privateDomain: false, applicationFrontend: false, primaryTasks: true },
  PartOfNetwork: { consensus: true, privateDomain: true, applicationFrontend: true, primaryTasks: true },
  Stopped: none,
};

/** The edge `trigger` takes from `from`, if the table has one. */
export function edgeOf(from: NodeLifecycleState, trigger: LifecycleTrigger): LifecycleEdge | undefined {
  if (trigger === 'stop') return from === 'Stopped' ? undefined : { from, trigger, to: 'Stopped' };
  return LIFECYCLE_EDGES.find((e) => e.from === from && e.trigger === trigger);
}

/** Owns the node's lifecycle state: the only way to change it is an edge of the table. */
export class Lifecycle {
  private current: NodeLifecycleState = 'Uninitialized';

  constructor(private readonly logger: Logger) {}

  get state(): NodeLifecycleState {
    return this.current;
  }

  get allows(): StateAllowances {
    return STATE_ALLOWANCES[this.current];
  }

  /**
   * Takes the edge `trigger` from the current state. `allowed` are the triggers of the flow asking
   * (a flow may take only its own edges); an edge outside the table, or outside the flow, fails an
   * assertion.
   */
  transition(trigger: LifecycleTrigger, allowed: readonly LifecycleTrigger[]): NodeLifecycleState {
    assert(allowed.includes(trigger) || trigger === 'stop', `this flow may not take the edge "${trigger}"`);
    const edge = edgeOf(this.current, trigger);
    assert(edge, `node cannot take "${trigger}" from ${this.current}`);
    if (trigger !== 'stop') this.logger.info(`node state ${edge.from} -> ${edge.to}`);
    this.current = edge.to;
    return edge.to;
  }
}

/**
 * The triggers each start-up flow may take (src/node/flows): one flow per command.type, plus
 * restart. The recovery edges are the recovery machine's (src/node/recovery/recovery-machine.ts,
 * RECOVERY_TRIGGERS): the recover and join flows post events to it.
 */
export const FLOW_TRIGGERS = {
  start: ['config', 'start'],
  join: ['config', 'join', 'join-while-opening', 'trusted'],
  restart: ['config', 'restart'],
  recover: ['config'],
} as const satisfies Record<string, readonly LifecycleTrigger[]>;
