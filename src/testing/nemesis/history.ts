/**
 * The nemesis's record of what clients did and saw, and its verdicts: per key, the linearizable
 * history (linearizability.ts) of writes and linearizable reads, and the durability of every write
 * whose id committed.
 *
 * How an operation enters the history:
 * - a write answered 200 (sent with x-covenant-consistency: committed) took effect between its
 *   invocation and its answer; its id must end Committed;
 * - a write refused with an id (TransactionRolledBack, CommitWaitTimedOut) or never answered: its
 *   id's final status decides — Committed: it took effect after its invocation, when is unknown;
 *   Invalid: it never did and is left out; no id: it may or may not have taken effect;
 * - a linearizable read answered 200 or 404 returned the value (or nothing) it read; a refused read
 *   did nothing and is left out.
 */
import { checkRegister, describeOps, minimalFailing, type RegisterOp } from './linearizability.js';

export type FinalStatus = 'Committed' | 'Invalid' | 'Pending' | 'Unknown';

export interface OpRecord {
  readonly id: number;
  readonly client: number;
  readonly key: number;
  readonly kind: 'write' | 'read';
  /** Written, or read (null: 404). */
  value: string | null;
  readonly invokedMs: number;
  completedMs?: number;
  /** HTTP status, or 0 when no answer came (connection refused, reset, timed out). */
  status?: number;
  /** The error code of a refusal. */
  code?: string;
  /** The transaction id of a write (from the answer or the refusal), or the state a read read. */
  txId?: string;
  /** A write's id's status at the end of the run. */
  finalStatus?: FinalStatus;
}

export interface Violation {
  readonly kind: 'not-linearizable' | 'acknowledged-write-lost' | 'rolled-back-write-committed' | 'committed-write-missing' | 'replicas-differ';
  readonly key?: number;
  readonly message: string;
  /** For not-linearizable: the minimal failing sub-history, one line per operation. */
  readonly history?: readonly string[];
}

/** The register operations of one key that the checker judges. */
export function registerOpsOf(records: readonly OpRecord[], key: number): RegisterOp[] {
  const ops: RegisterOp[] = [];
  for (const r of records) {
    if (r.key !== key) continue;
    if (r.kind === 'read') {
      if (r.status === 200 || r.status === 404) ops.push({ id: r.id, kind: 'read', value: r.value, invokedMs: r.invokedMs, completedMs: r.completedMs });
      continue;
    }
    if (r.status === 200) {
      ops.push({ id: r.id, kind: 'write', value: r.value, invokedMs: r.invokedMs, completedMs: r.completedMs });
    } else if (r.finalStatus !== 'Invalid') {
      // Committed without an answer, or unknown: any time after it was sent (or never, if unknown).
      ops.push({ id: r.id, kind: 'write', value: r.value, invokedMs: r.invokedMs, completedMs: undefined });
    }
  }
  return ops;
}

/** Acknowledged writes must end Committed; writes refused as rolled back must not. */
export function durabilityViolations(records: readonly OpRecord[]): Violation[] {
  const violations: Violation[] = [];
  for (const r of records) {
    if (r.kind !== 'write') continue;
    if (r.status === 200 && r.finalStatus !== 'Committed') {
      violations.push({ kind: 'acknowledged-write-lost', key: r.key, message: `write #${r.id} (${r.txId}) was answered 200 once committed, but its id ends ${r.finalStatus}` });
    }
    if (r.code === 'TransactionRolledBack' && r.finalStatus === 'Committed') {
      violations.push({ kind: 'rolled-back-write-committed', key: r.key, message: `write #${r.id} (${r.txId}) was refused as rolled back, but its id ends Committed` });
    }
  }
  return violations;
}

/** Per key: linearizable, or a violation with the minimal failing sub-history. */
export function linearizabilityViolations(records: readonly OpRecord[], keys: readonly number[], originMs: number): { violations: Violation[]; explored: number } {
  const violations: Violation[] = [];
  let explored = 0;
  for (const key of keys) {
    const ops = registerOpsOf(records, key);
    const result = checkRegister(ops);
    explored += result.explored;
    if (result.linearizable) continue;
    const witness = minimalFailing(ops);
    violations.push({
      kind: 'not-linearizable',
      key,
      message: `key ${key}: ${ops.length} operations are not linearizable; a failing sub-history of ${witness.length}:`,
      history: describeOps(witness, originMs),
    });
  }
  return { violations, explored };
}
