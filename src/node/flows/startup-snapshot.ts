/**
 * Where a starting node (restart, join) looks for its startup snapshot: snapshots.directory, then
 * snapshots.read_only_directory, read and checked over several turns (src/node/restart-slices.ts).
 */
import type { StartupSnapshotSearch } from '../restart-slices.js';
import type { FlowContext } from './context.js';

export function startupSnapshotSearchOf(ctx: FlowContext): StartupSnapshotSearch {
  const { directory, read_only_directory: readOnlyDirectory } = ctx.init.config.snapshots;
  return { clock: ctx.init.clock, disk: ctx.init.disk, logger: ctx.logger, directory, readOnlyDirectory, stopped: () => ctx.stopped() };
}
