import { parseNodeConfig } from './load.js';
import { deepMerge, type DeepPartial } from './merge.js';
import type { NodeConfigInput } from './schema.js';
import type { NodeConfig } from './types.js';

/** The smallest valid file: a Start node with one member and one RPC interface on a free port. */
export const MINIMAL_NODE_CONFIG_INPUT: NodeConfigInput = {
  command: { type: 'Start', start: { members: [{ certificate_file: 'member0_cert.pem' }] } },
  rpc_interfaces: { primary: { bind_address: '127.0.0.1:0' } },
};

/**
 * A parsed configuration for tests: `fragment` (in the file's spelling: "2s", "5MB", relative
 * paths) is merged over MINIMAL_NODE_CONFIG_INPUT and parsed with every default applied.
 */
export function defaultNodeConfig(fragment: DeepPartial<NodeConfigInput> = {}, baseDir: string = process.cwd()): NodeConfig {
  return parseNodeConfig(deepMerge(MINIMAL_NODE_CONFIG_INPUT, fragment), baseDir);
}
