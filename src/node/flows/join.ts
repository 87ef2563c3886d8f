/**
 * command.type Join on an empty ledger directory: joins an existing network (from a local or
 * fetched snapshot when there is one), Pending until members trust it, then takes the service
 * identity and secrets, starts replicating, and serves with its endorsed certificate. Edges:
 * join, join-while-opening, trusted; a node trusted by a recovering service posts
 * `trusted-by-recovering-service` to the recovery machine, which takes trusted-by-recovered-network.
 */
import { toBase64 } from '../../base/bytes.js';
import { nodeError } from '../errors.js';
import { errorMessage } from '../../base/errors.js';
import type { NodeAddresses } from '../api.js';
import { requestJoin, type JoinerHost, type SnapshotFetchOutcome } from '../join/joiner.js';
import type { JoinClient, JoinRequest, NetworkInfo } from '../join.js';
import { FLOW_TRIGGERS } from '../lifecycle.js';
import type { FlowContext } from './context.js';
import { sealedRecoveryKeyOf } from './genesis.js';
import { dropStartupSnapshotStores, startupSnapshotSearchOf } from './startup-snapshot.js';
import { findStartupSnapshotInSlices, startupSnapshotAtOnce } from '../restart-slices.js';
import type { SealedRecoveryKeyRecord } from '../tables.js';

/** The join request this node sends (a restarting node sends it too, to announce its addresses). */
export function joinRequestOf(ctx: FlowContext, addresses: NodeAddresses, sealedRecoveryKey?: SealedRecoveryKeyRecord): JoinRequest {
  const { identity } = ctx;
  return {
    public_key: identity.publicKeyPem,
    quote_info: identity.quoteInfo!,
    node_data: ctx.init.config.node_data ?? null,
    rpc_interfaces: ctx.rpcInterfacesRecord(),
    node_to_node_interface: { bind_address: addresses.nodeToNode.bindAddress, published_address: addresses.nodeToNode.publishedAddress },
    startup_seqno: ctx.replica.startupSeqno,
    subject_alt_names: ctx.subjectAltNames(),
    ...transparentStatementOf(ctx),
    ...(sealedRecoveryKey !== undefined ? { sealed_recovery_key: sealedRecoveryKey } : {}),
  };
}

/** The transparent statement about this node's code (command.join.host_data_transparent_statement_path), for the join policy. */
function transparentStatementOf(ctx: FlowContext): Pick<JoinRequest, 'host_data_transparent_statement'> {
  const path = ctx.init.config.command.join?.host_data_transparent_statement_path;
  if (path === undefined) return {};
  if (ctx.init.readBinaryFile === undefined) throw nodeError('InvalidConfiguration', 'this node cannot read binary files: host_data_transparent_statement_path is not supported');
  return { host_data_transparent_statement: toBase64(ctx.init.readBinaryFile(path)) };
}

/** The joiner's host for `requestJoin`: waits, logs and snapshot fetches through the flow's parts. */
export function joinerHost(ctx: FlowContext, resuming: boolean, onPending: () => void): JoinerHost {
  const join = ctx.init.config.command.join!;
  return {
    logger: ctx.logger,
    nodeId: ctx.identity.nodeId,
    retryTimeoutMs: join.retry_timeout,
    mayFetchSnapshot: join.fetch_recent_snapshot && !resuming,
    resuming,
    stopped: () => ctx.stopped(),
    sleep: (ms) => ctx.sleep(ms),
    onPending,
    onServiceStatus: (status) => {
      ctx.joinReportedServiceStatus = status;
    },
    fetchSnapshot: (client, target) => fetchStartupSnapshot(ctx, client, target),
  };
}

export async function joinFlow(ctx: FlowContext, addresses: NodeAddresses, client: JoinClient, onEndorsed: () => void): Promise<void> {
  const { init, replica } = ctx;
  const config = init.config;
  const join = config.command.join!;
  ctx.setAddresses(addresses);
  replica.openLedger({ commandType: 'Join' });
  // Until the service endorses it, clients reach this node with its self-signed certificate as CA
  // (spec endpoint rule 9): node_certificate_file holds that one, then the endorsed one.
  init.writeTextFile(config.node_certificate_file, ctx.identity.selfSignedCertificatePem);
  ctx.service.adopt(init.readTextFile(config.command.service_certificate_file));
  // Read and hashed over many turns (restart-slices.ts): the node answers meanwhile.
  const search = startupSnapshotSearchOf(ctx);
  const atOnce = startupSnapshotAtOnce(search, ctx.service.certificatePem);
  ctx.startupSnapshot = atOnce !== undefined ? atOnce.snapshot : await findStartupSnapshotInSlices(search, ctx.service.certificatePem);
  if (ctx.stopped()) return;
  if (ctx.startupSnapshot !== undefined) ctx.logger.info(`starting from snapshot ${ctx.startupSnapshot.path}`);
  replica.startFrom(ctx.startupSnapshot?.seqno ?? 0);
  let pending = false;
  const host = joinerHost(ctx, false, () => {
    ctx.transition('join', FLOW_TRIGGERS.join);
    pending = true;
  });
  const trusted = await requestJoin(host, client, join.target_rpc_address, joinRequestOf(ctx, addresses, sealedRecoveryKeyOf(ctx)));
  if (trusted === undefined) return;
  adoptNetworkInfo(ctx, trusted.response.network_info!);
  onEndorsed();
  if (ctx.startupSnapshot !== undefined) {
    const snapshot = ctx.startupSnapshot;
    const store = replica.snapshotStoreAtOnce(snapshot) ?? (await replica.snapshotStoreInSlices(snapshot, () => ctx.stopped()));
    if (store === undefined) return;
    replica.installSnapshot(snapshot, store, true);
  }
  // Joining a recovering service from a snapshot: its ledger starts after the snapshot, so the
  // private phase reads the old entries' private domain from the snapshot on.
  ctx.recovery.startupSnapshot = ctx.startupSnapshot;
  ctx.createConsensus();
  dropStartupSnapshotStores(ctx);
  ctx.persistState();
  const status = ctx.joinReportedServiceStatus;
  if (status === 'Recovering' || status === 'WaitingForRecoveryShares') {
    // A recovering service: this node holds only the public domain of its previous service's
    // entries until members recover its secrets (src/node/recovery).
    if (!pending) ctx.transition('join', FLOW_TRIGGERS.join);
    ctx.recovery.post({ kind: 'trusted-by-recovering-service' });
  } else {
    ctx.transition(pending ? 'trusted' : 'join-while-opening', FLOW_TRIGGERS.join);
  }
  ctx.startBackgroundWork();
  ctx.pump();
  ctx.logger.info(`node ${ctx.identity.nodeId} joined the network after ${trusted.attempts} join request(s)`);
}

function adoptNetworkInfo(ctx: FlowContext, info: NetworkInfo): void {
  ctx.service.adopt(info.service_certificate, info.service_key);
  ctx.identity.nodeCertificatePem = info.endorsed_certificate;
  ctx.genesisConfiguration = info.genesis_configuration;
  ctx.replica.startServiceAt(info.service_start_seqno ?? 0);
  ctx.peers.setBootstrap(info.peers);
  ctx.installLedgerSecrets(info.ledger_secrets);
  ctx.init.writeTextFile(ctx.init.config.node_certificate_file, info.endorsed_certificate);
}

/** Downloads a snapshot newer than startup_seqno from `target` and verifies it: its seqno, or why it failed. */
async function fetchStartupSnapshot(ctx: FlowContext, client: JoinClient, target: string): Promise<SnapshotFetchOutcome> {
  const { replica, logger } = ctx;
  let fetched: { name: string; bytes: Uint8Array } | undefined;
  try {
    fetched = await client.fetchSnapshot!(target, replica.startupSeqno);
  } catch (e) {
    const failure = `fetching a snapshot from ${target} failed: ${errorMessage(e)}`;
    logger.info(failure);
    return { failure };
  }
  if (fetched === undefined) {
    const failure = `${target} has no committed snapshot newer than ${replica.startupSeqno}`;
    logger.info(failure);
    return { failure };
  }
  try {
    ctx.startupSnapshot = ctx.snapshots.adoptFetchedSnapshot(fetched.name, fetched.bytes, ctx.service.certificatePem);
  } catch (e) {
    const failure = `snapshot ${fetched.name} fetched from ${target} is invalid: ${errorMessage(e)}`;
    logger.fail(failure);
    return { failure };
  }
  replica.startFrom(ctx.startupSnapshot.seqno);
  logger.info(`fetched snapshot ${fetched.name} from ${target}; joining from seqno ${replica.startupSeqno}`);
  return { startupSeqno: replica.startupSeqno };
}
