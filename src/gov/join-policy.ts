/**
 * The node join policy (docs/join-policy.md): member JavaScript, set by `set_node_join_policy`, that
 * judges a joiner whose host data is not registered as trusted. It exports
 * `policy(transparentStatements)` and runs in the sandbox, under the limits of governance requests
 * (one `SandboxBudget` per join request), with no host functions at all.
 *
 * The decision (the spec's "Join policy decision" table, the policy's part):
 *   - returns `true`: the joiner is admitted;
 *   - returns a string: the joiner is refused, the string is the reason;
 *   - anything else (another value, a throw, a timeout, memory exhausted, touching the host):
 *     an error, and the joiner is refused, said as such.
 * The sandbox being unavailable (a worker restarting) is none of these: it is rethrown (503) so
 * that the joiner retries.
 */
import { boundedReason } from './governance.js';
import { DEFAULT_SANDBOX_LIMITS, type JsEngine, SandboxBudget, SandboxError, type SandboxLimits } from './sandbox.js';
import type { TransparentStatementInput } from './transparent-statement.js';

export type JoinPolicyVerdict =
  | { readonly kind: 'admitted' }
  | { readonly kind: 'refused'; readonly reason: string }
  | { readonly kind: 'error'; readonly reason: string };

/** Runs the policy `source` over the joiner's transparent statements. Synchronous: it may run inside a transaction. */
export function runJoinPolicy(
  engine: JsEngine,
  source: string,
  statements: readonly TransparentStatementInput[],
  limits: SandboxLimits = DEFAULT_SANDBOX_LIMITS,
  budget: SandboxBudget = new SandboxBudget(limits.executionTimeMsMax),
): JoinPolicyVerdict {
  let result: unknown;
  try {
    result = engine.run({ source, filename: 'join_policy', limits, budget }, (module) => {
      if (!module.hasFunction('policy')) throw new SandboxError('MissingExport', 'the join policy does not export a function "policy"');
      return module.call('policy', [statements]);
    });
  } catch (e) {
    if (e instanceof SandboxError && e.kind === 'Unavailable') throw e;
    const kind = e instanceof SandboxError ? e.kind : 'Error';
    return { kind: 'error', reason: boundedReason(`the join policy failed (${kind}): ${(e as Error).message}`) };
  }
  if (result === true) return { kind: 'admitted' };
  if (typeof result === 'string') return { kind: 'refused', reason: boundedReason(result) };
  const shown = JSON.stringify(result) ?? String(result);
  return { kind: 'error', reason: boundedReason(`the join policy returned ${shown.length > 200 ? `${shown.slice(0, 200)}…` : shown}, neither true nor a string`) };
}
