/**
 * The Recover flow's sealing-based part (docs/sealing.md, docs/recovery-decision.md): with
 * sealing_recovery configured, after the public ledger is read, the node tries to unseal the
 * chain of ledger secrets from the old ledger's tables, then runs the recovery decision protocol
 * with the other expected locations. The location with the best ledger opens the service itself
 * (no member vote, no share) once it has created the new service; every other node restarts as a
 * joiner of it (`RejoinRequested`, which `covenant node` acts on). A node that cannot unseal still
 * takes part; if it is the one that opens, members open it with their shares as usual.
 */
import { errorMessage } from '../../base/errors.js';
import { CovenantError } from '../../base/errors.js';
import type { ChainSecret } from '../../recovery/index.js';
import { DecisionDriver, type OpenedService } from '../recovery/decision-driver.js';
import { unsealLedgerSecrets } from '../recovery/sealing.js';
import { TableDefs } from '../tables.js';
import type { FlowContext } from './context.js';

/** The decision protocol chose another location: this node restarts as a joiner of `service`. */
export class RejoinRequested extends CovenantError {
  constructor(
    readonly target: string,
    readonly service: OpenedService,
  ) {
    super('RecoveryRejoinRequested', `location "${target}" opened the recovered service at ${service.rpc_address}: this node restarts as its joiner`, 500);
  }
}

export interface SealedOpening {
  readonly driver: DecisionDriver;
  readonly openKind: 'Election' | 'Failover';
  /** The unsealed chain of ledger secrets; undefined when this node could not unseal. */
  readonly chain: ChainSecret[] | undefined;
}

/**
 * Unseals and decides: resolves when this node is to open the service, throws RejoinRequested
 * when another one opened it; resolves undefined when the protocol does not run here.
 */
export async function decideSealedRecovery(ctx: FlowContext, position: { view: number; seqno: number }): Promise<SealedOpening | undefined> {
  const { init, logger, identity } = ctx;
  const sealing = init.config.sealing_recovery;
  if (sealing?.recovery_decision_protocol === undefined) return undefined;
  const chain = unsealChain(ctx);
  if (init.decisionTransport === undefined) {
    logger.info('recovery decision protocol: this node has no transport for it; members open the service with their shares');
    return undefined;
  }
  const driver = new DecisionDriver(
    {
      logger,
      clock: init.clock,
      sealing,
      tls: { keyPem: identity.privateKeyPem, certificatePem: identity.selfSignedCertificatePem },
      publicKeyPem: identity.publicKeyPem,
      quoteInfo: identity.quoteInfo!,
      sign: (bytes) => identity.sign(bytes),
      trustsCode: (measurement, hostData) =>
        ctx.transactions.executeRead((tx) => {
          const measurements = tx.table(TableDefs.virtualMeasurements);
          const measured = measurements.has(measurement) || (measurements.size === 0 && measurement === identity.measurement);
          return measured && tx.table(TableDefs.hostData).has(hostData);
        }),
      transport: init.decisionTransport,
    },
    position,
  );
  ctx.recovery.attachDecision(driver);
  const decision = await driver.decide();
  if (decision.kind === 'Join') throw new RejoinRequested(decision.target, decision.service);
  return { driver, openKind: decision.openKind, chain };
}

/** After the new service exists: tells the others where it is and, with an unsealed chain, opens it. */
export function openSealedRecovery(ctx: FlowContext, opening: SealedOpening, service: OpenedService): void {
  opening.driver.announceOpen(service);
  const sealing = ctx.init.config.sealing_recovery!;
  const location = sealing.location.name;
  const expected = sealing.recovery_decision_protocol!.expected_locations.map((l) => l.name);
  if (opening.chain === undefined) {
    ctx.logger.info('recovery decision protocol: this node opens the service but could not unseal the ledger secrets: members open it with transition_service_to_open and their shares');
    return;
  }
  ctx.recovery.openWithUnsealedSecrets(opening.chain, { open_kind: opening.openKind, location, expected_locations: expected });
  ctx.logger.info(`recovery decision protocol: the service opens with the unsealed ledger secrets (open_kind ${opening.openKind}), no member share needed`);
}

function unsealChain(ctx: FlowContext): ChainSecret[] | undefined {
  const inputs = ctx.sealingInputs();
  if (inputs === undefined) {
    ctx.logger.fail('sealing: this node cannot read a virtual CPU key, so it cannot unseal; falling back to member shares');
    return undefined;
  }
  try {
    const outcome = ctx.transactions.executeRead((tx) => unsealLedgerSecrets(tx, inputs));
    if ('chain' in outcome) {
      ctx.logger.info(`sealing: unsealed the recovery key of node ${outcome.nodeId.slice(0, 12)} and the ${outcome.chain.length} ledger secret(s) of the old ledger`);
      return outcome.chain;
    }
    ctx.logger.fail(`sealing: cannot unseal the ledger secrets: ${outcome.reason}; falling back to member shares`);
  } catch (e) {
    ctx.logger.fail(`sealing: cannot unseal the ledger secrets: ${errorMessage(e)}; falling back to member shares`);
  }
  return undefined;
}
