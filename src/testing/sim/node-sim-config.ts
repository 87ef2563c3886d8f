/**
 * The node simulator's configurations and files: what each simulated host's configuration file
 * would say, and text files written whole (and synced) on a simulated disk.
 */
import { utf8 } from '../../base/index.js';
import { defaultNodeConfig, type NodeConfig } from '../../config/index.js';
import type { MemoryDisk } from '../memory-disk.js';

export function writeFile(disk: MemoryDisk, path: string, text: string): void {
  disk.ensureDirectory(path.slice(0, path.lastIndexOf('/')) || '/');
  if (disk.exists(path)) disk.remove(path);
  const file = disk.createFile(path);
  file.append([utf8.encode(text)]);
  file.sync();
  file.close();
}

/** The raw configuration of host `index` (what its configuration file would say). */
export function rawConfigOf(index: number, type: 'Start' | 'Join', durability: 'Synced' | 'Replicated', snapshotTxCount = 1_000_000): Record<string, any> {
  const dir = `/sim/n${index}`;
  return {
    command: {
      type,
      service_certificate_file: `${dir}/service_cert.pem`,
      ...(type === 'Start'
        ? { start: { members: [{ certificate_file: `${dir}/member0_cert.pem` }] } }
        : { join: { target_rpc_address: '127.0.0.1:443', retry_timeout: '100ms' } }),
    },
    node_certificate_file: `${dir}/node_cert.pem`,
    rpc_interfaces: { primary: { bind_address: `127.0.0.${index + 1}:443` } },
    node_to_node_interface: { bind_address: `127.0.0.${index + 1}:444` },
    ledger: { directory: `${dir}/ledger`, chunk_size: '16KB', durability },
    snapshots: { directory: `${dir}/snapshots`, tx_count: snapshotTxCount },
    consensus: { election_timeout: '300ms', message_timeout: '50ms' },
    ledger_signatures: { tx_count: 20, delay: '30ms' },
    logging: { level: 'fail' },
  };
}

export function simConfig(raw: Record<string, any>): NodeConfig {
  return defaultNodeConfig(raw as never, '/sim');
}
