/**
 * A linearizability checker for one register (one key of the key-value application), in the
 * manner of Wing and Gong with Lowe's memoisation: a depth-first search for an order of the
 * operations that respects real time (an operation that completed before another was invoked comes
 * first) and the register's sequential semantics (a read returns the last value written, `null`
 * before any write), remembering the (set of operations linearized, register value) pairs already
 * explored so that each is explored once.
 *
 * Operations whose completion is unknown (a write that may or may not have taken effect, or that
 * committed but whose answer was lost) have no completion time: they may be placed anywhere after
 * their invocation, or after every other operation, which is the same as never taking effect as
 * far as the reads can tell. A write known not to have taken effect (its id Invalid) is left out
 * of the history by the caller.
 *
 * `minimalFailing` shrinks a failing history to a short failing sub-history: the shortest prefix
 * (by invocation) that fails, then without each operation whose removal keeps it failing (a write
 * stays while a remaining read returns its value, so that the witness never fails only because
 * something it needs was cut).
 */

export interface RegisterOp {
  /** Unique within the history (for printing). */
  readonly id: number;
  readonly kind: 'write' | 'read';
  /** The value written, or the value read (null: the key held nothing). */
  readonly value: string | null;
  readonly invokedMs: number;
  /** Undefined: the outcome is not known (it may take effect at any time after invocation, or never). */
  readonly completedMs: number | undefined;
}

export interface CheckResult {
  readonly linearizable: boolean;
  /** Search states explored (for reports). */
  readonly explored: number;
}

/** Bounds the search: histories of a few thousand operations per key check within it in practice. */
const EXPLORED_MAX = 5_000_000;

interface Event {
  readonly op: number;
  readonly call: boolean;
  readonly atMs: number;
  prev: Event | undefined;
  next: Event | undefined;
  /** On a call event: its return event (undefined for an operation of unknown outcome). */
  match: Event | undefined;
}

/** The events as a doubly linked list (calls before returns at equal times), head first. */
function eventList(ops: readonly RegisterOp[]): Event | undefined {
  const events: Event[] = [];
  ops.forEach((op, i) => {
    const call: Event = { op: i, call: true, atMs: op.invokedMs, prev: undefined, next: undefined, match: undefined };
    events.push(call);
    if (op.completedMs !== undefined) {
      const ret: Event = { op: i, call: false, atMs: op.completedMs, prev: undefined, next: undefined, match: undefined };
      call.match = ret;
      events.push(ret);
    }
  });
  // Ties: a call before a return, so that operations that touch in time count as concurrent.
  events.sort((a, b) => a.atMs - b.atMs || (a.call === b.call ? a.op - b.op : a.call ? -1 : 1));
  const head: Event = { op: -1, call: true, atMs: -Infinity, prev: undefined, next: undefined, match: undefined };
  let last = head;
  for (const e of events) {
    last.next = e;
    e.prev = last;
    last = e;
  }
  return head;
}

function lift(e: Event): void {
  e.prev!.next = e.next;
  if (e.next) e.next.prev = e.prev;
  const m = e.match;
  if (m) {
    m.prev!.next = m.next;
    if (m.next) m.next.prev = m.prev;
  }
}

function unlift(e: Event): void {
  const m = e.match;
  if (m) {
    m.prev!.next = m;
    if (m.next) m.next.prev = m;
  }
  e.prev!.next = e;
  if (e.next) e.next.prev = e;
}

/**
 * The same history with its writes of unknown completion bounded, which changes no verdict and
 * keeps the search small (each such write could otherwise be placed at every point):
 * - one that no read returned is left out: "never", or "after everything", explains it as well;
 * - one that a read returned completes, at the latest, when the first read that returned it did.
 */
export function boundUnknownWrites(ops: readonly RegisterOp[]): RegisterOp[] {
  const firstSeenMs = new Map<string, number>();
  for (const op of ops) {
    if (op.kind !== 'read' || op.value === null || op.completedMs === undefined) continue;
    firstSeenMs.set(op.value, Math.min(firstSeenMs.get(op.value) ?? Infinity, op.completedMs));
  }
  const out: RegisterOp[] = [];
  for (const op of ops) {
    if (op.kind === 'read' || op.completedMs !== undefined) {
      out.push(op);
      continue;
    }
    const seenMs = op.value === null ? undefined : firstSeenMs.get(op.value);
    if (seenMs !== undefined) out.push({ ...op, completedMs: Math.max(seenMs, op.invokedMs) });
  }
  return out;
}

/** Whether the history of one register is linearizable (throws past the search bound). */
export function checkRegister(history: readonly RegisterOp[]): CheckResult {
  const ops = boundUnknownWrites(history);
  const head = eventList(ops)!;
  const linearized = new Uint8Array(ops.length);
  const seen = new Set<string>();
  const stack: { event: Event; state: string | null }[] = [];
  let state: string | null = null;
  let explored = 0;
  let entry = head.next;
  const keyOf = (s: string | null) => `${Buffer.from(linearized).toString('base64')}|${s === null ? '\u0000' : s}`;
  while (entry !== undefined) {
    if (++explored > EXPLORED_MAX) throw new Error(`linearizability search beyond ${EXPLORED_MAX} states`);
    if (entry.call) {
      const op = ops[entry.op]!;
      const ok = op.kind === 'write' || op.value === state;
      const next: string | null = op.kind === 'write' ? op.value : state;
      if (ok) {
        linearized[entry.op] = 1;
        const key = keyOf(next);
        if (!seen.has(key)) {
          seen.add(key);
          stack.push({ event: entry, state });
          state = next;
          lift(entry);
          entry = head.next;
          continue;
        }
        linearized[entry.op] = 0;
      }
      entry = entry.next;
      continue;
    }
    // A return whose operation could not be placed before it: undo the last choice.
    const top = stack.pop();
    if (top === undefined) return { linearizable: false, explored };
    linearized[top.event.op] = 0;
    state = top.state;
    unlift(top.event);
    entry = top.event.next;
  }
  // Only calls of unknown outcome may be left: each takes effect after everything, or never.
  return { linearizable: true, explored };
}

/** Writes that some read among `ops` returned (by value): they must stay in a witness. */
function observedValues(ops: readonly RegisterOp[]): Set<string> {
  const values = new Set<string>();
  for (const op of ops) if (op.kind === 'read' && op.value !== null) values.add(op.value);
  return values;
}

/** The ops of `subset` plus every write of `all` whose value a read of `subset` returned. */
function closed(subset: readonly RegisterOp[], all: readonly RegisterOp[]): RegisterOp[] {
  const values = observedValues(subset);
  const ids = new Set(subset.map((op) => op.id));
  const extra = all.filter((op) => op.kind === 'write' && op.value !== null && values.has(op.value) && !ids.has(op.id));
  return [...subset, ...extra].sort((a, b) => a.invokedMs - b.invokedMs || a.id - b.id);
}

/** A short failing sub-history of a history that is not linearizable (itself if nothing shorter fails). */
export function minimalFailing(ops: readonly RegisterOp[]): RegisterOp[] {
  const byInvocation = [...ops].sort((a, b) => a.invokedMs - b.invokedMs || a.id - b.id);
  const fails = (candidate: readonly RegisterOp[]) => !checkRegister(candidate).linearizable;
  // The shortest failing prefix by invocation (with the writes its reads saw), by bisection.
  let low = 1;
  let high = byInvocation.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (fails(closed(byInvocation.slice(0, mid), ops))) high = mid;
    else low = mid + 1;
  }
  let witness = closed(byInvocation.slice(0, high), ops);
  if (!fails(witness)) return byInvocation;
  // Then without each operation that is not needed for it to fail.
  for (let i = witness.length - 1; i >= 0; i--) {
    const without = witness.filter((_, j) => j !== i);
    const removed = witness[i]!;
    if (removed.kind === 'write' && removed.value !== null && observedValues(without).has(removed.value)) continue;
    if (fails(without)) witness = without;
  }
  return witness;
}

/** One line per operation, for a failing run's report. */
export function describeOps(ops: readonly RegisterOp[], originMs: number): string[] {
  return ops.map((op) => {
    const at = (ms: number | undefined) => (ms === undefined ? '?' : (ms - originMs).toFixed(1));
    const what = op.kind === 'write' ? `write ${JSON.stringify(op.value)}` : `read -> ${op.value === null ? 'nothing' : JSON.stringify(op.value)}`;
    return `  #${op.id} [${at(op.invokedMs)} ms, ${at(op.completedMs)} ms] ${what}${op.completedMs === undefined ? ' (outcome unknown)' : ''}`;
  });
}
