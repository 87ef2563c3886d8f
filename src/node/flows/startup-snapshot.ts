/**
 * Where a starting node (restart, join) looks for its startup snapshot: snapshots.directory, then
 * snapshots.read_only_directory, read and checked over several turns (src/node/restart-slices.ts).
 */
import type { StartupSnapshotSearch } from '../restart-slices.js';
import { withoutStoreBytes } from '../startup-snapshot-store.js';
import type { FlowContext } from './context.js';

export function startupSnapshotSearchOf(ctx: FlowContext): StartupSnapshotSearch {
  const { directory, read_only_directory: readOnlyDirectory } = ctx.init.config.snapshots;
  return { clock: ctx.init.clock, disk: ctx.init.disk, logger: ctx.logger, directory, readOnlyDirectory, stopped: () => ctx.stopped() };
}

/**
 * Once consensus started from the startup snapshot (its metadata) and the store was loaded from it,
 * the snapshot's store bytes (most of the file) are dropped: a recovery's private phase, the one
 * later use, reads them again from the file (startup-snapshot-store.ts).
 */
export function dropStartupSnapshotStores(ctx: FlowContext): void {
  const reader = { clock: ctx.init.clock, disk: ctx.init.disk, stopped: () => ctx.stopped() };
  if (ctx.startupSnapshot !== undefined) ctx.startupSnapshot = withoutStoreBytes(ctx.startupSnapshot, reader);
  if (ctx.recovery.startupSnapshot !== undefined) ctx.recovery.startupSnapshot = withoutStoreBytes(ctx.recovery.startupSnapshot, reader);
}
