/**
 * Node.js flags of every process that runs the application engine (a node, the simulator, the test
 * runner, the benchmarks): on Node 20, V8 isolates of `isolated-vm` beside Node's own need Node's
 * startup snapshot off, or V8 may crash when it shares read-only data between the two kinds of
 * isolate (docs/apps.md). Our launchers pass them; the engine refuses to start without them.
 */
export const ENGINE_NODE_FLAGS: readonly string[] = ['--no-node-snapshot'];

/** The flags of ENGINE_NODE_FLAGS this process was started without. */
export function missingEngineNodeFlags(execArgv: readonly string[] = process.execArgv): string[] {
  return ENGINE_NODE_FLAGS.filter((flag) => !execArgv.includes(flag));
}
