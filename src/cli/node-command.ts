/**
 * `covenant node --config node.json`: runs one node in this process until SIGTERM/SIGINT.
 * A bad configuration exits with status 2 and a message naming the key, having written nothing.
 */
import { randomBytes } from 'node:crypto';
import { mkdirSync, renameSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { errorMessage, isCovenantError } from '../base/errors.js';
import { loadNodeConfig, type NodeConfig } from '../config/index.js';
import { FsDisk } from '../platform/fs-disk.js';
import { createLogger } from '../platform/logger.js';
import { systemClock } from '../platform/clock.js';
import { CovenantNode, type RpcInterfaceAddress } from '../node/node.js';
import { NodeServer } from '../http/service.js';
import { loggingAppRoutes } from '../apps/logging.js';
import { COVENANT_VERSION } from './version.js';

export function writeFileAtomic(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text, { mode: 0o644 });
  renameSync(tmp, path);
}

export async function runNodeCommand(configPath: string): Promise<void> {
  let config: NodeConfig;
  try {
    config = loadNodeConfig(configPath);
  } catch (e) {
    process.stderr.write(`covenant node: ${errorMessage(e)}\n`);
    process.exit(2);
  }
  const logger = createLogger({ format: config.logging.format, level: config.logging.level });
  if (config.command.type !== 'Start') {
    logger.fatal(`command.type ${config.command.type} is not supported by this version of the node yet`);
    process.exit(2);
  }

  const node = new CovenantNode({
    config,
    disk: new FsDisk(),
    logger,
    clock: systemClock,
    randomBytes: (n) => new Uint8Array(randomBytes(n)),
    version: COVENANT_VERSION,
    readTextFile: (path) => readFileSync(path, 'utf8'),
    writeTextFile: writeFileAtomic,
  });

  let server: NodeServer | undefined;
  const shutdown = async (signal: string) => {
    logger.info(`received ${signal}, stopping`);
    try {
      await server?.close();
      node.stop();
    } finally {
      process.exit(0);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  try {
    await node.prepareIdentity();
    server = new NodeServer({
      node,
      config,
      logger,
      appRoutes: loggingAppRoutes,
      tls: { keyPem: node.nodePrivateKeyPem, certificatePem: node.selfSignedCertificatePem },
    });
    const bound = await server.listen();
    const addresses: RpcInterfaceAddress[] = Object.entries(config.rpc_interfaces).map(([name, iface]) => {
      const actual = bound.get(name)!;
      const published = iface.published_address.endsWith(':0') ? actual : iface.published_address;
      return { name, bindAddress: actual, publishedAddress: published, enabledOperatorFeatures: iface.enabled_operator_features };
    });
    await node.startNewService(addresses);
    server.setTlsIdentity({ keyPem: node.nodePrivateKeyPem, certificatePem: node.nodeCertificatePem });
    const outputs = config.output_files;
    if (outputs?.rpc_addresses_file) {
      const record: Record<string, string> = {};
      for (const a of addresses) record[a.name] = a.publishedAddress;
      writeFileAtomic(outputs.rpc_addresses_file, JSON.stringify(record, null, 2) + '\n');
    }
    for (const a of addresses) logger.info(`RPC interface ${a.name} listening on ${a.bindAddress} (published ${a.publishedAddress})`);
  } catch (e) {
    const message = isCovenantError(e) ? `${e.code}: ${e.message}` : errorMessage(e);
    logger.fatal(`node failed to start: ${message}`);
    if (!isCovenantError(e) && e instanceof Error && e.stack) process.stderr.write(e.stack + '\n');
    await server?.close();
    process.exit(1);
  }
}
