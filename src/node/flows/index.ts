/**
 * The start-up flows, one per command.type (and restart: a node run again, Start or Join, on its
 * own ledger and state):
 * `covenant node` picks one with `flowFor` and runs it.
 */
import type { NodeConfig } from '../../config/index.js';

export { startFlow } from './start.js';
export { joinFlow } from './join.js';
export { restartFlow } from './restart.js';
export { recoverFlow } from './recover.js';
export { checkStartInputs, startConstitution } from './genesis.js';

export type FlowName = 'start' | 'join' | 'restart' | 'recover';

/** The flow a configuration asks for: Start, Join, Recover; restart when the node has state from an earlier run to resume. */
export function flowFor(config: NodeConfig, hasPersistedState: boolean): FlowName {
  switch (config.command.type) {
    case 'Start':
      return hasPersistedState ? 'restart' : 'start';
    case 'Join':
      return hasPersistedState ? 'restart' : 'join';
    case 'Recover':
      // Once the service it recovered opened (recovering: false in its state), as itself.
      return hasPersistedState ? 'restart' : 'recover';
  }
}
