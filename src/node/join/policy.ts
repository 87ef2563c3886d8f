/**
 * The join policy's evaluator on a node: the process-wide sandbox engine (shared with governance),
 * loaded on first use. Each evaluation gets its own SandboxBudget, as a governance request does.
 */
import { runJoinPolicy } from '../../gov/join-policy.js';
import { type JsEngine, loadJsEngine, SandboxError } from '../../gov/sandbox.js';
import type { JoinPolicyEvaluator } from './admission.js';

export class SandboxJoinPolicy implements JoinPolicyEvaluator {
  private engine: JsEngine | undefined;

  async ready(): Promise<void> {
    this.engine ??= await loadJsEngine();
    await this.engine.ready();
  }

  evaluate(...[source, statements]: Parameters<JoinPolicyEvaluator['evaluate']>): ReturnType<JoinPolicyEvaluator['evaluate']> {
    if (this.engine === undefined) throw new SandboxError('Unavailable', 'the JavaScript sandbox is loading; retry shortly');
    return runJoinPolicy(this.engine, source, statements);
  }
}
