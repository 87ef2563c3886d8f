/**
 * `covenant node --config node.json`: runs one node in this process until SIGTERM/SIGINT.
 * A bad configuration exits with status 2 and a message naming the key, having written nothing.
 */
import { WorkerSnapshotWriter } from '../platform/worker-snapshot-writer.js';
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, readFileSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { CovenantError, errorMessage, isCovenantError } from '../base/errors.js';
import { CONSTITUTION_EXPORTS, loadJsEngine } from '../gov/index.js';
import { formatHostPort, loadNodeConfig, parseHostPort, type NodeConfig } from '../config/index.js';
import { FsDisk } from '../platform/fs-disk.js';
import { DirectoryLockedError, NodeDirectoryLocks } from '../platform/directory-lock.js';
import { createLogger } from '../platform/logger.js';
import { systemClock } from '../platform/clock.js';
import { cryptoRandom } from '../platform/crypto-random.js';
import { createTlsNodeChannels } from '../platform/node-channels.js';
import { createJoinClient } from '../platform/join-client.js';
import { fetchSnapshot } from '../platform/snapshot-fetch.js';
import { workerEntryFramer } from '../platform/worker-framer.js';
import type { EntryLeafReader, EntryFramerFactory } from '../ledger/index.js';
import { WorkerEntryLeafReader } from '../platform/worker-leaf-reader.js';
import { WorkerEntryReplayer } from '../platform/worker-entry-replayer.js';
import { threadPoolSignatureVerifier } from '../crypto/index.js';
import type { Logger } from '../base/log.js';
import type { InvariantError } from '../base/assert.js';
import { CovenantNode, RejoinRequested, type NodeAddresses, type RpcInterfaceAddress } from '../node/node.js';
import type { NodeInit } from '../node/api.js';
import { DecisionTransport } from '../platform/decision-transport.js';
import { loadOrCreateVirtualCpuKey } from '../platform/virtual-cpu-key.js';
import { MAX_ENTRY_BYTES, type NodeChannels } from '../node/channels.js';
import { listenPreferring, NodeServer } from '../http/service.js';
import { NodeMetrics } from '../http/prometheus.js';
import { loggingAppRoutes } from '../apps/logging.js';
import { createJsApplication } from '../apps/js/index.js';
import { StoreAuthenticator } from '../http/auth.js';
import { TokenValidator } from '../jwt/index.js';
import { CaPinnedJsonFetcher } from '../platform/key-fetcher.js';
import { COVENANT_VERSION } from './version.js';

/** The exit status of a node stopped by a broken invariant (EX_SOFTWARE, "internal software error"). */
export const INVARIANT_EXIT_STATUS = 70;

/**
 * What the node does when an invariant breaks while a request executes: log it as fatal (flushed)
 * and end the process with INVARIANT_EXIT_STATUS. Going on could fork the ledger; no orderly stop
 * either: it would run more of the code whose assumptions just failed.
 */
export function failStopOf(logger: Pick<Logger, 'fatal'>, exit: (status: number) => void): (error: InvariantError) => void {
  return (error) => {
    logger.fatal('an invariant broke while a request was executed: the node stops', { reason: error.stack ?? error.message });
    exit(INVARIANT_EXIT_STATUS);
  };
}

export function writeFileAtomic(path: string, text: string, mode = 0o644): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  writeFileSync(tmp, text, { mode });
  renameSync(tmp, path);
}

/** Atomic and durable: the data reaches the disk before the rename makes it visible. */
function writeSecretFile(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const tmp = `${path}.tmp-${process.pid}`;
  const fd = openSync(tmp, 'w', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

/**
 * Locks the node's ledger directory, snapshots directory and the folder of its node state
 * (src/platform/directory-lock.ts) before anything reads or writes them: a second process on the
 * same node exits with status 2, naming the process that holds them, having written nothing. The
 * locks go with this process (on exit, or found stale after a crash).
 */
async function lockNodeDirectories(config: NodeConfig): Promise<NodeDirectoryLocks> {
  try {
    return await NodeDirectoryLocks.acquire([
      { directory: config.ledger.directory, purpose: 'the ledger directory' },
      { directory: config.snapshots.directory, purpose: 'the snapshots directory' },
      { directory: dirname(config.node_certificate_file), purpose: 'the node state folder' },
    ]);
  } catch (e) {
    if (!(e instanceof DirectoryLockedError)) throw e;
    process.stderr.write(`covenant node: ${e.message}\n`);
    process.exit(2);
  }
}

/** A published address with port 0 means "the port actually bound". */
function published(configured: string, bound: string): string {
  return configured.endsWith(':0') ? bound : configured;
}

/**
 * Virtual mode stands in for the platform's host data (the digest of the node's security policy)
 * with COVENANT_VIRTUAL_HOST_DATA (64 hex digits): nodes of a new code version report new host
 * data, which members register with add_snp_host_data before those nodes may join.
 */
function virtualHostData(): { hostData?: string } {
  const value = process.env.COVENANT_VIRTUAL_HOST_DATA;
  if (value === undefined || value === '') return {};
  if (!/^[0-9a-f]{64}$/.test(value)) {
    process.stderr.write('covenant node: COVENANT_VIRTUAL_HOST_DATA must be 64 lower-case hex digits\n');
    process.exit(2);
  }
  return { hostData: value };
}

/**
 * Transactions are framed on a worker thread (src/platform/worker-framer.ts) unless
 * COVENANT_FRAMING=inline asks for the request thread (a diagnostic: docs/configuration.md).
 * COVENANT_BUGGIFY_FRAME_DELAY_MS delays the worker's answers, for tests only.
 */
function framingOption(logger: Logger): { createEntryFramer?: EntryFramerFactory } {
  const mode = process.env['COVENANT_FRAMING'] ?? 'worker';
  if (mode === 'inline') return {};
  if (mode !== 'worker') {
    process.stderr.write(`covenant node: COVENANT_FRAMING must be "worker" or "inline", not "${mode}"\n`);
    process.exit(2);
  }
  const delay = process.env['COVENANT_BUGGIFY_FRAME_DELAY_MS'];
  if (delay !== undefined && !/^\d{1,6}$/.test(delay)) {
    process.stderr.write(`covenant node: COVENANT_BUGGIFY_FRAME_DELAY_MS must be a number of milliseconds, not "${delay}"\n`);
    process.exit(2);
  }
  return {
    createEntryFramer: workerEntryFramer({
      ...(delay ? { answerDelayMs: Number(delay) } : {}),
      onFailure: (e) => {
        logger.fatal(`the framing worker failed: ${errorMessage(e)}`);
        process.exit(1);
      },
    }),
  };
}

/**
 * Receipts of compacted transactions re-read their Merkle block's leaves on a worker thread
 * (src/platform/worker-leaf-reader.ts). COVENANT_BUGGIFY_LEAF_READ_DELAY_MS delays the worker's
 * answers, for tests only (a re-read under way is then easy to observe).
 */
function entryLeafReaderOption(): { entryLeafReader: EntryLeafReader } {
  const delay = process.env['COVENANT_BUGGIFY_LEAF_READ_DELAY_MS'];
  if (delay !== undefined && !/^\d{1,6}$/.test(delay)) {
    process.stderr.write(`covenant node: COVENANT_BUGGIFY_LEAF_READ_DELAY_MS must be a number of milliseconds, not "${delay}"\n`);
    process.exit(2);
  }
  return { entryLeafReader: new WorkerEntryLeafReader(delay ? { answerDelayMs: Number(delay) } : {}) };
}

/**
 * COVENANT_BUGGIFY_MAX_ENTRY_BYTES lowers the largest ledger entry the node records, for tests
 * only: the real bound (MAX_ENTRY_BYTES, just under the node-to-node frame limit) needs a
 * transaction of 63 MiB to reach.
 */
function maxEntryOption(): { maxEntryBytes?: number } {
  const value = process.env['COVENANT_BUGGIFY_MAX_ENTRY_BYTES'];
  if (value === undefined) return {};
  if (!/^\d{1,9}$/.test(value) || Number(value) > MAX_ENTRY_BYTES) {
    process.stderr.write(`covenant node: COVENANT_BUGGIFY_MAX_ENTRY_BYTES must be a number of bytes up to ${MAX_ENTRY_BYTES}, not "${value}"\n`);
    process.exit(2);
  }
  return { maxEntryBytes: Number(value) };
}

/** Sealing-based recovery's platform parts: the virtual CPU key file and the decision protocol's transport. */
function sealingRecoveryOptions(config: NodeConfig, logger: Logger): { virtualCpuKey?: () => Uint8Array; decisionTransport?: NodeInit['decisionTransport'] } {
  const sealing = config.sealing_recovery;
  if (sealing === undefined) return {};
  let key: Uint8Array | undefined;
  return {
    virtualCpuKey: () => {
      if (key === undefined) {
        const loaded = loadOrCreateVirtualCpuKey(sealing.virtual_cpu_key_file);
        if (loaded.created) logger.info(`sealing: created the virtual CPU key ${sealing.virtual_cpu_key_file} (nothing sealed under another key will unseal here)`);
        key = loaded.key;
      }
      return key;
    },
    decisionTransport: (options) => new DecisionTransport(options),
  };
}

/**
 * The decision protocol chose another location (RejoinRequested): this node's configuration as a
 * joiner of the opened service, written beside the Recover one (`<name>.joined.json`), with its
 * own folder `joined/` for the node certificate and state, ledger and snapshots (the old ledger
 * stays as it is). Run it again with that file.
 */
function writeJoinedConfig(configPath: string, rejoin: RejoinRequested): string {
  const raw = JSON.parse(readFileSync(configPath, 'utf8')) as Record<string, any>;
  const joined = join(dirname(resolve(configPath)), 'joined');
  const serviceCertificate = join(joined, 'service_cert.pem');
  writeFileAtomic(serviceCertificate, rejoin.service.service_certificate);
  delete raw['service_certificate_file'];
  raw['command'] = { type: 'Join', service_certificate_file: serviceCertificate, join: { target_rpc_address: rejoin.service.rpc_address, retry_timeout: '200ms' } };
  raw['node_certificate_file'] = join(joined, 'node_cert.pem');
  raw['ledger'] = { ...(raw['ledger'] ?? {}), directory: join(joined, 'ledger'), read_only_directories: [] };
  raw['snapshots'] = { ...(raw['snapshots'] ?? {}), directory: join(joined, 'snapshots') };
  delete raw['snapshots']['read_only_directory'];
  const out = join(dirname(resolve(configPath)), `${basename(configPath, '.json')}.joined.json`);
  writeFileAtomic(out, JSON.stringify(raw, null, 2) + '\n');
  return out;
}

export async function runNodeCommand(configPath: string): Promise<void> {
  let config: NodeConfig;
  try {
    config = loadNodeConfig(configPath);
  } catch (e) {
    process.stderr.write(`covenant node: ${errorMessage(e)}\n`);
    process.exit(2);
  }
  const locks = await lockNodeDirectories(config);
  const logger = createLogger({ format: config.logging.format, level: config.logging.level });

  // One registry per node process: the ledger files report their appends and syncs to it.
  const metrics = new NodeMetrics();
  const disk = new FsDisk({ timings: metrics });
  // The node core and its RPC frontends are the trusted part (CCF's enclave side): their lines carry
  // e_ts. The command itself, the node-to-node transport and the files are the host side.
  const trusted = logger.child({}, { enclave: true });
  const keyFetcher = new CaPinnedJsonFetcher();
  const node = new CovenantNode({
    config,
    disk,
    logger: trusted,
    clock: systemClock,
    randomBytes: (n) => new Uint8Array(randomBytes(n)),
    version: COVENANT_VERSION,
    readTextFile: (path) => readFileSync(path, 'utf8'),
    readBinaryFile: (path) => new Uint8Array(readFileSync(path)),
    writeTextFile: (path, text) => writeFileAtomic(path, text),
    writeSecretFile,
    ...virtualHostData(),
    ...framingOption(logger),
    ...maxEntryOption(),
    commitStageTimings: metrics,
    // A backup verifies the primary's signatures on the thread pool while their entries sync.
    signatureVerifier: threadPoolSignatureVerifier,
    ...entryLeafReaderOption(),
    // Snapshots are encoded, written and synced off the request thread (docs/snapshots.md, "Generation").
    snapshotWriter: { writer: new WorkerSnapshotWriter(), kind: 'worker' },
    // A recovery's private replay reads and decrypts the previous service's entries on worker threads.
    entryReplayer: new WorkerEntryReplayer(),
    jwtKeyFetcher: keyFetcher,
    ...sealingRecoveryOptions(config, logger),
  });

  let server: NodeServer | undefined;
  let channels: NodeChannels | undefined;
  let stopping = false;
  const shutdown = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info(`received ${signal}, stopping`);
    // Whatever a peer or client does, the process ends: a stuck connection must not keep it alive.
    // The timer is not unref'd: were every handle gone with a close still unsettled, the process
    // would otherwise end at once with Node's "unsettled top-level await" status (13), not 0.
    const pending = new Set<string>();
    setTimeout(() => {
      logger.fail(`stopping took more than 5s (still closing: ${[...pending].join(', ') || 'nothing'}): exiting now`);
      process.exit(0);
    }, 5000);
    const closing = (name: string, done: Promise<void> | undefined) => {
      if (done === undefined) return undefined;
      pending.add(name);
      return done.finally(() => pending.delete(name));
    };
    try {
      node.stop();
      await Promise.all([
        closing('RPC interfaces', server?.close()),
        closing('node-to-node channels', channels?.close()),
        closing('key fetcher', keyFetcher.close()),
      ]);
      disk.close();
    } finally {
      process.exit(0);
    }
  };
  const onSigterm = () => void shutdown('SIGTERM');
  const onSigint = () => void shutdown('SIGINT');
  process.on('SIGTERM', onSigterm);
  process.on('SIGINT', onSigint);

  try {
    await node.prepareIdentity();
    // A node restarted from its state binds the ports it had where the configuration leaves them to the system (port 0).
    const previous = node.previousBoundAddresses();
    const n2nBind = config.node_to_node_interface.bind_address;
    const created = await listenPreferring(
      portToReuse(n2nBind, previous?.node_to_node),
      (port) =>
        createTlsNodeChannels({
          identity: { nodeId: node.nodeId, privateKeyPem: node.nodePrivateKeyPem, certificatePem: node.selfSignedCertificatePem },
          bindAddress: port === undefined ? n2nBind : withPort(n2nBind, port),
          logger: logger.child({ component: 'channels' }),
          clock: systemClock,
          random: cryptoRandom(),
          handshakeTimeoutMs: config.node_to_node_interface.handshake_timeout,
          maxUnauthenticatedConnections: config.node_to_node_interface.max_unauthenticated_connections,
        }),
      (reason) => logger.fail(`node-to-node interface: ${reason}`),
    );
    channels = created.channels;
    node.attachChannels(channels);
    const appTokens = new TokenValidator({ lookup: (kid) => node.jwtSigningKeyRaw(kid), nowMs: () => node.clock.nowMs() });
    const appAuthenticator = new StoreAuthenticator({ isUser: (id) => node.isUser(id) }, appTokens);
    const application = await createJsApplication({
      node,
      logger: trusted.child({ component: 'app' }),
      bearer: (request) => appAuthenticator.authenticate('user_cert_or_jwt', { headers: request.headers, clientCertificateDer: undefined }),
      historicalCache: config.historical_cache,
    });
    server = new NodeServer({
      node,
      config,
      logger: trusted,
      appRoutes: loggingAppRoutes,
      application,
      tls: { keyPem: node.nodePrivateKeyPem, certificatePem: node.selfSignedCertificatePem },
      metrics,
      failStop: failStopOf(logger, (status) => process.exit(status)),
    });
    const preferPorts = new Map<string, number>();
    for (const [name, iface] of Object.entries(config.rpc_interfaces)) {
      const port = portToReuse(iface.bind_address, previous?.rpc[name]);
      if (port !== undefined) preferPorts.set(name, port);
    }
    const bound = await server.listen(preferPorts);
    const rpc: RpcInterfaceAddress[] = Object.entries(config.rpc_interfaces).map(([name, iface]) => {
      const actual = bound.get(name)!;
      return { name, bindAddress: actual, publishedAddress: published(iface.published_address, actual), enabledOperatorFeatures: iface.enabled_operator_features };
    });
    const addresses: NodeAddresses = {
      rpc,
      nodeToNode: { bindAddress: created.boundAddress, publishedAddress: published(config.node_to_node_interface.published_address, created.boundAddress) },
    };
    // A new Start node checks the files its genesis needs before it writes anything (one that
    // resumes from its own state has its genesis in its ledger).
    if (config.command.type === 'Start' && !node.hasPersistedState()) {
      node.checkStartInputs();
      await checkConstitution(node.startConstitution());
    }
    locks.keepDirectories();
    const outputs = config.output_files;
    if (outputs.pid_file) writeFileAtomic(outputs.pid_file, `${process.pid}\n`);
    if (outputs.node_to_node_address_file) {
      writeFileAtomic(outputs.node_to_node_address_file, JSON.stringify({ [node.nodeId]: addresses.nodeToNode.publishedAddress }, null, 2) + '\n');
    }
    if (outputs.rpc_addresses_file) {
      const record: Record<string, string> = {};
      for (const a of rpc) record[a.name] = a.publishedAddress;
      writeFileAtomic(outputs.rpc_addresses_file, JSON.stringify(record, null, 2) + '\n');
    }
    for (const a of rpc) logger.info(`RPC interface ${a.name} listening on ${a.bindAddress} (published ${a.publishedAddress})`);
    logger.info(`node-to-node interface listening on ${addresses.nodeToNode.bindAddress}`);

    const endorse = () => {
      server!.setTlsIdentity({ keyPem: node.nodePrivateKeyPem, certificatePem: node.nodeCertificatePem });
      channels!.setIdentity({ nodeId: node.nodeId, privateKeyPem: node.nodePrivateKeyPem, certificatePem: node.nodeCertificatePem });
    };
    // The flow follows command.type (src/node/flows): Start, Join, or restart from this node's own state.
    const client =
      config.command.type === 'Join'
        ? {
            ...createJoinClient(() => ({
              serviceCertificatePem: readFileSync(config.command.service_certificate_file, 'utf8'),
              certificatePem: node.selfSignedCertificatePem,
              privateKeyPem: node.nodePrivateKeyPem,
            })),
            fetchSnapshot: (target: string, since: number) => fetchSnapshot(target, since, readFileSync(config.command.service_certificate_file, 'utf8')),
          }
        : undefined;
    await node.start(addresses, client, endorse);
  } catch (e) {
    if (e instanceof RejoinRequested) {
      // Sealing-based recovery chose another location: this process goes on as its joiner.
      node.stop();
      await Promise.all([server?.close(), channels?.close()]);
      disk.close();
      locks.release();
      process.off('SIGTERM', onSigterm);
      process.off('SIGINT', onSigint);
      const joinedConfig = writeJoinedConfig(configPath, e);
      logger.info(`${e.message}; its configuration from now on: ${joinedConfig} (run it with covenant node --config ${joinedConfig})`);
      await runNodeCommand(joinedConfig);
      return;
    }
    if (isCovenantError(e) && e.code === 'InvalidConfiguration') {
      // Found before anything was written: a configuration error like the loader's.
      process.stderr.write(`covenant node: configuration error: ${e.message}\n`);
      node.stop();
      await Promise.all([server?.close(), channels?.close()]);
      process.exit(2);
    }
    const message = isCovenantError(e) ? `${e.code}: ${e.message}` : errorMessage(e);
    logger.fatal(`node failed to start: ${message}`);
    if (!isCovenantError(e) && e instanceof Error && e.stack) process.stderr.write(e.stack + '\n');
    node.stop();
    await Promise.all([server?.close(), channels?.close()]);
    process.exit(1);
  }
}

/** The port of `previous` when `configured` leaves the port to the system (port 0); otherwise none. */
function portToReuse(configured: string, previous: string | undefined): number | undefined {
  const wanted = parseHostPort(configured);
  const before = previous === undefined ? undefined : parseHostPort(previous);
  if (typeof wanted === 'string' || wanted.port !== 0 || before === undefined || typeof before === 'string') return undefined;
  return before.port > 0 ? before.port : undefined;
}

/** `address` (a configured, hence valid, "host:port") with another port. */
function withPort(address: string, port: number): string {
  const parsed = parseHostPort(address);
  if (typeof parsed === 'string') throw new Error(parsed);
  return formatHostPort({ ...parsed, port });
}

/** The constitution of a new service must load in the sandbox and export validate, resolve and apply. */
async function checkConstitution(source: string): Promise<void> {
  if (source.length === 0) return;
  try {
    (await loadJsEngine()).checkModule(source, 'constitution', CONSTITUTION_EXPORTS);
  } catch (e) {
    throw new CovenantError('InvalidConfiguration', `"command.start.constitution_files": the constitution cannot be used: ${errorMessage(e)}`, 400);
  }
}
