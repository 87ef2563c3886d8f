/**
 * A node run again on its own ledger directory and node state (the configuration it was started
 * with, Start or Join, after a crash or a stop): replays the ledger into the store and the Merkle
 * tree (from a local snapshot if it joined from one), restores consensus from the ledger and the
 * hard state, and — a Join configuration names a node to ask — announces its addresses to the
 * network with a join request; the primary then catches it up. A Start node has no one to ask:
 * it binds the ports it had (the command prefers them), where its peers know it. Edges: restart.
 */
import { nodeError } from '../errors.js';
import type { NodeAddresses } from '../api.js';
import { requestJoin } from '../join/joiner.js';
import type { JoinClient } from '../join.js';
import { FLOW_TRIGGERS } from '../lifecycle.js';
import type { FlowContext } from './context.js';
import { joinerHost, joinRequestOf } from './join.js';

export async function restartFlow(ctx: FlowContext, addresses: NodeAddresses, client: JoinClient | undefined, onEndorsed: () => void): Promise<void> {
  const { replica, stateFile } = ctx;
  const state = stateFile.load();
  ctx.setAddresses(addresses);
  replica.openLedger(undefined);
  ctx.service.adopt(state.service_certificate, state.service_key);
  ctx.identity.nodeCertificatePem = state.node_certificate;
  ctx.genesisConfiguration = state.genesis_configuration;
  replica.serviceStartSeqno = state.service_start_seqno ?? 0;
  // Before the state is persisted again below: a node that joined from a snapshot must still say so
  // at its next restart (its ledger starts after that snapshot).
  replica.startupSeqno = state.startup_seqno ?? 0;
  ctx.installLedgerSecrets(state.ledger_secrets);
  ctx.peers.setBootstrap(state.peers ?? []);
  ctx.driver.hardView = state.view;
  ctx.driver.hardVotedFor = state.voted_for ?? undefined;
  // Record where this run is bound (the same ports unless they were taken).
  ctx.persistState();
  onEndorsed();
  const last = replica.ledger.lastSeqno;
  let from = 0;
  const startupSeqno = state.startup_seqno ?? 0;
  if (startupSeqno > 0) {
    // The ledger of a node that joined from a snapshot starts after it: start from a snapshot again.
    const snapshot = ctx.snapshots.findStartupSnapshot(ctx.service.certificatePem);
    if (!snapshot || snapshot.seqno < startupSeqno || snapshot.seqno > last) {
      throw nodeError(
        'StartupSnapshotMissing',
        `this node started from the snapshot at seqno ${startupSeqno}: a valid committed snapshot between it and the ledger's last seqno ${last} must be in snapshots.directory`,
      );
    }
    ctx.startupSnapshot = snapshot;
    replica.startupSeqno = startupSeqno;
    replica.installSnapshot(snapshot, false);
    // A node restarted during a recovery reads the private domain from the snapshot on.
    ctx.recovery.startupSnapshot = snapshot;
    from = snapshot.seqno;
  }
  replica.replay(from);
  // The store starts from the snapshot, but consensus serves what the ledger holds: when its files
  // hold every entry from the first (a Recover node's old ledger), the log starts at 0 and the
  // primary replicates entries below the snapshot to a backup that lags behind it, from disk.
  if (ctx.startupSnapshot !== undefined && replica.ledger.firstSeqno <= 1) ctx.startupSnapshot = undefined;
  ctx.createConsensus({ lastSeqno: last, view: Math.max(state.view, replica.ledger.lastView), votedFor: ctx.driver.hardVotedFor, commitSeqno: replica.commitSeqno });
  ctx.transition('restart', FLOW_TRIGGERS.restart);
  ctx.startBackgroundWork();
  ctx.pump();
  const join = ctx.init.config.command.join;
  if (join === undefined || client === undefined) {
    ctx.logger.info(`node ${ctx.identity.nodeId} resumed from its ledger (up to seqno ${last}, committed ${replica.commitSeqno})`);
    return;
  }
  const announced = await requestJoin(joinerHost(ctx, true, () => undefined), client, join.target_rpc_address, joinRequestOf(ctx, addresses));
  if (announced === undefined) return;
  // The answer names the trusted nodes as they are now (peers that joined while this node was down).
  if (announced.response.network_info) ctx.peers.setBootstrap(announced.response.network_info.peers);
  ctx.logger.info(`node ${ctx.identity.nodeId} announced its addresses to the network again`);
}
