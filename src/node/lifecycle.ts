/** Node lifecycle states, in the PascalCase of the spec's table (DESIGN decision 13). */
export type NodeLifecycleState =
  | 'Uninitialized'
  | 'Initialized'
  | 'Pending'
  | 'PartOfNetwork'
  | 'ReadingPublicLedger'
  | 'PartOfPublicNetwork'
  | 'ReadingPrivateLedger'
  | 'Stopped';

const TRANSITIONS: Record<NodeLifecycleState, readonly NodeLifecycleState[]> = {
  Uninitialized: ['Initialized'],
  Initialized: ['PartOfNetwork', 'Pending', 'ReadingPublicLedger'],
  Pending: ['PartOfNetwork', 'PartOfPublicNetwork'],
  ReadingPublicLedger: ['PartOfPublicNetwork'],
  PartOfPublicNetwork: ['ReadingPrivateLedger'],
  ReadingPrivateLedger: ['PartOfNetwork'],
  PartOfNetwork: [],
  Stopped: [],
};

export function canTransition(from: NodeLifecycleState, to: NodeLifecycleState): boolean {
  return to === 'Stopped' || TRANSITIONS[from].includes(to);
}
