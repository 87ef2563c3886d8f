/** The node configuration file (`node.json`): schema, loading, defaults and merging. */
export { ConfigError, type ConfigIssue } from './errors.js';
export { formatHostPort, parseHostPort, type HostPort } from './fields.js';
export { loadNodeConfig, parseNodeConfig } from './load.js';
export { deepMerge, type DeepPartial } from './merge.js';
export { defaultNodeConfig, MINIMAL_NODE_CONFIG_INPUT } from './defaults.js';
export {
  COMMAND_TYPES,
  ELECTION_TIMEOUT_DEFAULT_MS,
  LOG_FORMATS,
  LOG_LEVELS,
  OPERATOR_FEATURES,
  WAITING_WORK_SIZE_MIN_BYTES,
  nodeConfigJsonSchema,
  nodeConfigSchema,
  type NodeConfigInput,
} from './schema.js';
export type * from './types.js';
