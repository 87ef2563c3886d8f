/**
 * command.type Recover (spec "Disaster recovery procedure"): a new service from a previous
 * service's ledger. The node reads the public domain of the old ledger (from the newest valid
 * committed snapshot of ledger.directory / snapshots.directory when there is one), keeps what the
 * last signature covers, and creates a new service identity and a new ledger secret for the
 * entries it writes; its first transaction records the new service as Recovering, the previous
 * service's certificate, and this node as the only node (the old nodes are deleted: they never
 * pass through Retired). New ledger files carry `.recovery` until the service opens. It is then
 * primary of a view at least two above the last old one, so no transaction id of the new service
 * is one of the old service's. The recovery machine (src/node/recovery/recovery-machine.ts) takes
 * the lifecycle edges recover and public-ledger-restored as the flow posts `recover` and
 * `public-ledger-read`; the private domain is read once members have submitted their recovery
 * shares (src/node/recovery/recovery.ts).
 */
import { assert } from '../../base/assert.js';
import { errorMessage } from '../../base/errors.js';
import { certificateId, parseCertificate } from '../../crypto/index.js';
import type { Tx } from '../../kv/index.js';
import type { NodeAddresses } from '../api.js';
import { nodeError } from '../errors.js';
import { phaseSummary, readPublicLedger, type PublicLedgerRead } from '../recovery/public-ledger.js';
import { SINGLETON_KEY, TableDefs, type NodeInfo, type SealedRecoveryKeyRecord, type ServiceInfo } from '../tables.js';
import type { FlowContext } from './context.js';
import { sealedRecoveryKeyOf } from './genesis.js';
import { findStartupSnapshotInSlices, startupSnapshotAtOnce } from '../restart-slices.js';
import { endorseStartupSnapshot } from '../snapshot-trust.js';
import { dropStartupSnapshotStores, startupSnapshotSearchOf } from './startup-snapshot.js';
import { decideSealedRecovery, openSealedRecovery } from './recover-sealing.js';

export async function recoverFlow(ctx: FlowContext, addresses: NodeAddresses): Promise<void> {
  const { init, identity, service, replica, logger } = ctx;
  const config = init.config;
  const recover = config.command.recover;
  assert(recover, 'Recover configuration is present');
  ctx.setAddresses(addresses);
  // Until the new service endorses it, operators poll GET /node/state with the node's
  // self-signed certificate as CA (spec endpoint rule 9): node_certificate_file holds that one.
  init.writeTextFile(config.node_certificate_file, identity.selfSignedCertificatePem);
  const startedMs = init.clock.monotonicMs();
  ctx.recovery.post({ kind: 'recover' });
  replica.openLedger(undefined, { recovery: true });
  if (replica.ledger.lastSeqno === 0) {
    throw nodeError('RecoveryLedgerEmpty', `there is no ledger to recover in "${config.ledger.directory}" or ledger.read_only_directories`);
  }
  const previousFile = recover.previous_service_identity_file;
  const previousFromFile = previousFile === undefined ? undefined : readPreviousIdentity(ctx, previousFile);
  const from = await startFromSnapshot(ctx, previousFromFile);
  if (ctx.stopped()) return;
  // The entries' Merkle leaves are hashed on the node's leaf reader thread when it has one.
  const read = await readPublicLedger({ replica, logger, clock: init.clock, leafReader: init.entryLeafReader, yieldControl: () => ctx.sleep(0) }, from);
  if (ctx.stopped()) return;
  if (read.lastSignedSeqno === 0) throw nodeError('RecoveryLedgerUnsigned', 'the ledger holds no signature transaction: there is nothing to recover');
  replica.settleRecoveredPublic(read.lastSignedSeqno);
  const previous = previousIdentityOf(ctx, previousFromFile);
  const lastSeqno = read.lastSignedSeqno;
  // With sealing_recovery: unseal, and let the decision protocol say whether this node opens.
  const opening = await decideSealedRecovery(ctx, { view: read.lastSignedView, seqno: lastSeqno });
  if (ctx.stopped()) return;

  logger.info('creating the new service identity');
  await service.create(recover.initial_service_certificate_validity_days);
  identity.nodeCertificatePem = await service.endorse(identity.publicKeyPem, ctx.subjectAltNames(), config.node_certificate.initial_validity_days);
  const endorsement = await service.endorsePreviousIdentity(previous.certificate, recover.initial_service_certificate_validity_days);
  if (ctx.startupSnapshot !== undefined) {
    endorseStartupSnapshot({ disk: init.disk, logger, directory: config.snapshots.directory }, ctx.startupSnapshot, endorsement);
  }
  ctx.installLedgerSecret(lastSeqno + 1, init.randomBytes(32));
  replica.startServiceAt(lastSeqno + 1);
  ctx.genesisConfiguration = { seqno: 0, nodes: [identity.nodeId] };
  init.writeTextFile(config.command.service_certificate_file, service.certificatePem);
  init.writeTextFile(config.node_certificate_file, identity.nodeCertificatePem);

  createRecoveredConsensus(ctx, read);
  dropStartupSnapshotStores(ctx);
  ctx.driver.raft!.campaign();
  ctx.pump();
  assert(ctx.driver.raft!.summary().role === 'Primary', 'the recovery node is primary after campaigning alone');
  const view = ctx.driver.raft!.status().view;
  ctx.transactions.executeWrite((tx) =>
    writeRecoveryStart(tx, ctx, {
      addresses,
      previous,
      endorsement,
      createTxId: `${view}.${lastSeqno + 1}`,
      createSeqno: lastSeqno + 1,
      sealedRecoveryKey: sealedRecoveryKeyOf(ctx),
    }),
  );
  ctx.signatures.emit();
  ctx.pump();
  ctx.persistState();
  ctx.recovery.post({ kind: 'public-ledger-read' });
  logger.info(`public phase: ${phaseSummary(lastSeqno - from.seqno, init.clock.monotonicMs() - startedMs)}, from the start of the recovery to PartOfPublicNetwork`);
  ctx.startBackgroundWork();
  if (opening !== undefined) {
    openSealedRecovery(ctx, opening, { rpc_address: addresses.rpc[0]!.publishedAddress, service_certificate: service.certificatePem });
    return;
  }
  logger.info(
    `recovering the service from seqno ${lastSeqno} (view ${read.lastSignedView}); this node ${identity.nodeId} is primary in view ${view}. ` +
      'Members open it with transition_service_to_open, then submit their recovery shares',
  );
}

function readPreviousIdentity(ctx: FlowContext, path: string): string {
  try {
    const pem = ctx.init.readTextFile(path);
    certificateId(pem);
    return pem;
  } catch (e) {
    throw nodeError('InvalidConfiguration', `"command.recover.previous_service_identity_file": cannot use ${path}: ${errorMessage(e)}`);
  }
}

/**
 * Loads the newest valid committed snapshot of the previous service (only with its certificate,
 * against which the snapshot is checked); reading starts after it. Invalid snapshots are left in
 * place: the operator's copy of the old service is not this node's to delete.
 */
async function startFromSnapshot(ctx: FlowContext, previousCertificate: string | undefined): Promise<{ seqno: number; view: number }> {
  if (previousCertificate === undefined) {
    ctx.logger.info('no command.recover.previous_service_identity_file: snapshots cannot be checked, reading the whole ledger');
    return { seqno: 0, view: 0 };
  }
  // Read and hashed over many turns when large (restart-slices.ts): the node answers meanwhile.
  const search = startupSnapshotSearchOf(ctx);
  const atOnce = startupSnapshotAtOnce(search, previousCertificate, { keepInvalid: true });
  const snapshot = atOnce !== undefined ? atOnce.snapshot : await findStartupSnapshotInSlices(search, previousCertificate, { keepInvalid: true });
  if (snapshot === undefined || ctx.stopped()) return { seqno: 0, view: 0 };
  ctx.logger.info(`starting from snapshot ${snapshot.path}`);
  const ledger = ctx.replica.ledger;
  if (snapshot.seqno > ledger.lastSeqno || ledger.firstSeqno > snapshot.seqno + 1) {
    ctx.logger.info(`snapshot ${snapshot.name} does not meet the ledger (entries ${ledger.firstSeqno}..${ledger.lastSeqno}): reading the whole ledger`);
    return { seqno: 0, view: 0 };
  }
  ctx.startupSnapshot = snapshot;
  ctx.recovery.startupSnapshot = snapshot;
  const store = ctx.replica.snapshotStoreAtOnce(snapshot) ?? (await ctx.replica.snapshotStoreInSlices(snapshot, () => ctx.stopped()));
  if (store === undefined) return { seqno: 0, view: 0 };
  ctx.replica.installSnapshot(snapshot, store, false);
  ctx.replica.startFrom(snapshot.seqno);
  return { seqno: snapshot.seqno, view: snapshot.parts.meta.view };
}

interface PreviousIdentity {
  readonly certificate: string;
  readonly service: ServiceInfo;
}

/** The previous service as its ledger records it (checked against the configured certificate, when there is one). */
function previousIdentityOf(ctx: FlowContext, fromFile: string | undefined): PreviousIdentity {
  const info = ctx.transactions.executeRead((tx) => tx.table(TableDefs.serviceInfo).get(SINGLETON_KEY));
  if (info === undefined) throw nodeError('RecoveryLedgerUnsigned', 'the recovered ledger holds no service record');
  // The same key, not the same bytes: members may have renewed the certificate since the operator's copy was taken.
  if (fromFile !== undefined && parseCertificate(fromFile).publicKeyPem !== parseCertificate(info.cert).publicKeyPem) {
    throw nodeError(
      'InvalidConfiguration',
      '"command.recover.previous_service_identity_file" is not the certificate of the service this ledger records (its service record names another key)',
    );
  }
  return { certificate: info.cert, service: info };
}

/**
 * Consensus from the last recovered entry, with this node alone. When the ledger holds every entry
 * from the first, the log starts at 0 (joiners replicate the whole ledger from this node); when it
 * starts after a snapshot, the log starts at the snapshot. A view at least two above the last
 * old view: the next one is taken by the campaign.
 */
function createRecoveredConsensus(ctx: FlowContext, read: PublicLedgerRead): void {
  const self = ctx.identity.nodeId;
  const lastSeqno = read.lastSignedSeqno;
  const view = Math.max(read.lastSignedView, ctx.replica.ledger.lastView) + 1;
  ctx.driver.restoreHardState(view, undefined);
  if (ctx.replica.ledger.firstSeqno <= 1) ctx.startupSnapshot = undefined;
  const configs = ctx.startupSnapshot ? [{ seqno: ctx.startupSnapshot.seqno, nodes: [self] }] : undefined;
  ctx.createConsensus({ lastSeqno, view, votedFor: undefined, commitSeqno: lastSeqno, ...(configs ? { configs } : {}) });
}

interface RecoveryStart {
  readonly addresses: NodeAddresses;
  readonly previous: PreviousIdentity;
  readonly endorsement: string;
  readonly createTxId: string;
  readonly createSeqno: number;
  /** This node's recovery key for the next sealing-based recovery. */
  readonly sealedRecoveryKey: SealedRecoveryKeyRecord | undefined;
}

/** The first transaction of the recovered service. */
function writeRecoveryStart(tx: Tx, ctx: FlowContext, start: RecoveryStart): void {
  const { identity, service } = ctx;
  const old = start.previous.service;
  const info: ServiceInfo = {
    status: 'Recovering',
    cert: service.certificatePem,
    recovery_count: old.recovery_count,
    service_data: old.service_data,
    current_service_create_txid: start.createTxId,
    previous_service_identity_version: start.createSeqno,
  };
  tx.table(TableDefs.serviceInfo).put(SINGLETON_KEY, info);
  tx.table(TableDefs.previousServiceIdentity).put(SINGLETON_KEY, start.previous.certificate);
  tx.table(TableDefs.serviceEndorsements).put(String(start.createSeqno), {
    endorsing_service_created_seqno: start.createSeqno,
    previous_service_certificate: start.previous.certificate,
    endorsement: start.endorsement,
  });
  // The previous service's nodes are gone with it: deleted, with their certificates.
  const nodes = tx.table(TableDefs.nodesInfo);
  const certificates = tx.table(TableDefs.nodesEndorsedCertificates);
  const submitted = tx.table(TableDefs.submittedShares);
  // With their local-sealing records (spec "Node status in the network").
  const sealedKeys = tx.table(TableDefs.sealedRecoveryKeys);
  for (const map of [nodes, certificates, submitted, sealedKeys]) {
    const keys: string[] = [];
    map.forEach((_, key) => void keys.push(key));
    for (const key of keys) map.remove(key);
  }
  tx.table(TableDefs.recoveredLedgerSecrets).remove(SINGLETON_KEY);
  tx.table(TableDefs.sealedShares).remove(SINGLETON_KEY);
  tx.table(TableDefs.recoveryDecisionOpenKind).remove(SINGLETON_KEY);
  if (start.sealedRecoveryKey !== undefined) sealedKeys.put(identity.nodeId, start.sealedRecoveryKey);
  const nodeInfo: NodeInfo = {
    status: 'Trusted',
    public_key: identity.publicKeyPem,
    node_data: ctx.init.config.node_data ?? null,
    rpc_interfaces: ctx.rpcInterfacesRecord(),
    node_to_node_interface: { bind_address: start.addresses.nodeToNode.bindAddress, published_address: start.addresses.nodeToNode.publishedAddress },
    quote_info: identity.quoteInfo!,
    retired_committed: false,
  };
  nodes.put(identity.nodeId, nodeInfo);
  certificates.put(identity.nodeId, identity.nodeCertificatePem);
  tx.table(TableDefs.hostData).put(identity.hostData, { measurement: identity.measurement });
  tx.table(TableDefs.virtualMeasurements).put(identity.measurement, {});
}
