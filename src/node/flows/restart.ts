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
import { replaySliceEntriesMax } from '../limits.js';
import { findStartupSnapshotInSlices, replayInSlices, startupSnapshotAtOnce, type StartupSnapshotSearchOptions } from '../restart-slices.js';
import { dropStartupSnapshotStores, startupSnapshotSearchOf } from './startup-snapshot.js';
import type { StartupSnapshot } from '../snapshots.js';
import type { Store } from '../../kv/index.js';
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
  replica.startServiceAt(state.service_start_seqno ?? 0);
  // Before the state is persisted again below: a node that joined from a snapshot must still say so
  // at its next restart (its ledger starts after that snapshot).
  replica.startFrom(state.startup_seqno ?? 0);
  ctx.installLedgerSecrets(state.ledger_secrets);
  ctx.peers.setBootstrap(state.peers ?? []);
  ctx.driver.restoreHardState(state.view, state.voted_for ?? undefined);
  // Record where this run is bound (the same ports unless they were taken).
  ctx.persistState();
  onEndorsed();
  const last = replica.ledger.lastSeqno;
  const startupSeqno = state.startup_seqno ?? 0;
  // Small work is done in this turn (a start-up flow continues without yielding when it can).
  const starting = startupSeqno > 0 ? startFromLocalSnapshot(ctx, startupSeqno, last) : 0;
  const from = typeof starting === 'object' ? await starting : starting;
  if (from === undefined) return;
  // A ledger of at most one slice's entries (a young service's, the simulator's) is replayed in this
  // turn, a larger one over many: a start-up flow continues without yielding when it can.
  if (last - from <= replaySliceEntriesMax) replica.replay(from);
  else if (!(await replayInSlices(ctx.init.clock, replica, from, () => ctx.stopped()))) return;
  if (ctx.startupSnapshot !== undefined) {
    const settling = settleLogStart(ctx, ctx.startupSnapshot);
    if (!(typeof settling === 'boolean' ? settling : await settling)) return;
  }
  ctx.createConsensus({ lastSeqno: last, view: Math.max(state.view, replica.ledger.lastView), votedFor: ctx.driver.hardVotedFor, commitSeqno: replica.commitSeqno });
  dropStartupSnapshotStores(ctx);
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

/**
 * The ledger of a node that joined from a snapshot starts after it: it starts from a snapshot again,
 * read, hashed and loaded over many turns when large (restart-slices.ts: the node answers
 * meanwhile), in this turn when small. The seqno to replay the ledger from; undefined when the node
 * stopped meanwhile. Functions of their own, so that the flow, which goes on awaiting, keeps no
 * reference to the snapshot's bytes (dropStartupSnapshotStores drops the node's own).
 */
function startFromLocalSnapshot(ctx: FlowContext, startupSeqno: number, last: number): number | undefined | Promise<number | undefined> {
  const search = startupSnapshotSearchOf(ctx);
  const atOnce = startupSnapshotAtOnce(search, ctx.service.certificatePem);
  if (atOnce !== undefined) return ctx.stopped() ? undefined : loadLocalSnapshot(ctx, atOnce.snapshot, startupSeqno, last);
  return findStartupSnapshotInSlices(search, ctx.service.certificatePem).then((snapshot) => (ctx.stopped() ? undefined : loadLocalSnapshot(ctx, snapshot, startupSeqno, last)));
}

function loadLocalSnapshot(ctx: FlowContext, snapshot: StartupSnapshot | undefined, startupSeqno: number, last: number): number | undefined | Promise<number | undefined> {
  if (!snapshot || snapshot.seqno < startupSeqno || snapshot.seqno > last) {
    throw nodeError(
      'StartupSnapshotMissing',
      `this node started from the snapshot at seqno ${startupSeqno}: a valid committed snapshot between it and the ledger's last seqno ${last} must be in snapshots.directory`,
    );
  }
  ctx.logger.info(`starting from snapshot ${snapshot.path}`);
  ctx.startupSnapshot = snapshot;
  ctx.replica.startFrom(startupSeqno);
  const install = (store: Store | undefined): number | undefined => {
    if (store === undefined) return undefined;
    ctx.replica.installSnapshot(snapshot, store, false);
    // A node restarted during a recovery reads the private domain from the snapshot on.
    ctx.recovery.startupSnapshot = snapshot;
    return snapshot.seqno;
  };
  const store = ctx.replica.snapshotStoreAtOnce(snapshot);
  return store !== undefined ? install(store) : ctx.replica.snapshotStoreInSlices(snapshot, () => ctx.stopped()).then(install);
}

/**
 * ctx.startupSnapshot becomes the snapshot the consensus log starts from (logStartOf), in this turn
 * when the snapshots it reads are small; false when the node stopped meanwhile.
 */
function settleLogStart(ctx: FlowContext, newest: StartupSnapshot): boolean | Promise<boolean> {
  const start = logStartAtOnce(ctx, newest);
  if (start !== undefined) {
    ctx.startupSnapshot = start.snapshot;
    return !ctx.stopped();
  }
  return logStartOf(ctx, newest).then((snapshot) => {
    ctx.startupSnapshot = snapshot;
    return !ctx.stopped();
  });
}

/**
 * Where the restarted node's consensus log starts: the store starts from `newest` (the newest
 * valid snapshot, the least to replay), but consensus serves what the ledger files hold, so that
 * as primary it replicates entries below that snapshot, read from disk, to a backup that lags
 * behind it. A ledger that holds every entry from the first (a Recover node's old ledger) gives a
 * log from 0 (undefined: the genesis configuration); a ledger that starts after an older snapshot
 * (the one the node joined from) gives a log from that snapshot, whose metadata holds the view
 * history and configurations as of its seqno (or, if retention removed it, from the oldest valid
 * snapshot of this service the ledger holds the entries after). With none older, the log starts at `newest`, and a
 * backup behind it must join again from a snapshot (docs/snapshots.md).
 */
async function logStartOf(ctx: FlowContext, newest: StartupSnapshot): Promise<StartupSnapshot | undefined> {
  const plan = logStartPlan(ctx, newest);
  if (!('options' in plan)) return plan.snapshot;
  return logStartFound(ctx, newest, await findStartupSnapshotInSlices(startupSnapshotSearchOf(ctx), ctx.service.certificatePem, plan.options));
}

/** logStartOf in this turn while the snapshots it must read are small (startupSnapshotAtOnce); undefined otherwise. */
function logStartAtOnce(ctx: FlowContext, newest: StartupSnapshot): { snapshot: StartupSnapshot | undefined } | undefined {
  const plan = logStartPlan(ctx, newest);
  if (!('options' in plan)) return plan;
  const found = startupSnapshotAtOnce(startupSnapshotSearchOf(ctx), ctx.service.certificatePem, plan.options);
  return found === undefined ? undefined : { snapshot: logStartFound(ctx, newest, found.snapshot) };
}

/** Where the log starts without reading a snapshot, or which snapshots to try. */
function logStartPlan(ctx: FlowContext, newest: StartupSnapshot): { snapshot: StartupSnapshot | undefined } | { options: StartupSnapshotSearchOptions } {
  const before = ctx.replica.ledger.firstSeqno - 1;
  if (before <= 0) return { snapshot: undefined };
  if (before >= newest.seqno) return { snapshot: newest };
  // A snapshot of a previous service holds its configurations, not this service's: a ledger that
  // starts after one (the node joined the recovering service from it) continues into this service's
  // snapshots, the oldest of which is then where the log starts.
  const lowest = Math.max(before, ctx.replica.serviceStartSeqno);
  // Oldest first: the lower the log starts, the further behind a backup it can still catch up.
  return { options: { accept: (seqno) => seqno >= lowest && seqno < newest.seqno, oldestFirst: true, keepInvalid: true } };
}

function logStartFound(ctx: FlowContext, newest: StartupSnapshot, oldest: StartupSnapshot | undefined): StartupSnapshot {
  if (oldest !== undefined) return oldest;
  const before = ctx.replica.ledger.firstSeqno - 1;
  const lowest = Math.max(before, ctx.replica.serviceStartSeqno);
  ctx.logger.info(`no valid snapshot of this service from seqno ${lowest} on (the ledger starts after ${before}), older than ${newest.seqno}: consensus serves entries from ${newest.seqno + 1} on`);
  return newest;
}
