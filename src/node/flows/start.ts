/**
 * command.type Start: creates the service with this node as its first, primary node — service
 * key and certificate, the node certificate endorsed by it, the first ledger secret, the genesis
 * transaction and its signature — and writes the certificates. Edges: start.
 */
import { assert } from '../../base/assert.js';
import { FLOW_TRIGGERS } from '../lifecycle.js';
import type { NodeAddresses } from '../api.js';
import type { FlowContext } from './context.js';
import { sealedRecoveryKeyOf, writeGenesis } from './genesis.js';

export async function startFlow(ctx: FlowContext, addresses: NodeAddresses): Promise<void> {
  const { init, identity, service, replica, transactions, signatures } = ctx;
  const config = init.config;
  ctx.setAddresses(addresses);
  replica.openLedger({ commandType: 'Start' });
  assert(identity.exists, 'prepareIdentity() runs before the Start flow');
  ctx.logger.info('creating the service identity');
  await service.create(config.command.start?.initial_service_certificate_validity_days ?? 1);
  identity.nodeCertificatePem = await service.endorse(identity.publicKeyPem, ctx.subjectAltNames(), config.node_certificate.initial_validity_days);
  ctx.logger.info('service certificate created and node certificate endorsed');
  ctx.installLedgerSecret(0, init.randomBytes(32));
  ctx.genesisConfiguration = { seqno: 0, nodes: [identity.nodeId] };
  init.writeTextFile(config.command.service_certificate_file, service.certificatePem);
  init.writeTextFile(config.node_certificate_file, identity.nodeCertificatePem);

  ctx.createConsensus();
  // A lone node wins its own election at once.
  ctx.driver.raft!.campaign();
  ctx.pump();
  assert(ctx.driver.raft!.summary().role === 'Primary', 'the first node is primary after campaigning alone');
  ctx.transition('start', FLOW_TRIGGERS.start);
  transactions.executeWrite((tx) =>
    writeGenesis(tx, init, {
      identity,
      serviceCertificatePem: service.certificatePem,
      rpcInterfaces: ctx.rpcInterfacesRecord(),
      nodeToNode: { bind_address: addresses.nodeToNode.bindAddress, published_address: addresses.nodeToNode.publishedAddress },
      createTxId: `${ctx.driver.raft!.status().view}.${replica.store.version + 1}`,
      sealedRecoveryKey: sealedRecoveryKeyOf(ctx),
    }),
  );
  // Sign the genesis at once: the service exists, committed, before the first client arrives.
  signatures.emit();
  ctx.pump();
  ctx.persistState();
  ctx.startBackgroundWork();
  ctx.logger.info(`service started; node ${identity.nodeId} is primary`);
}
