/**
 * One nemesis run (docs/nemesis.md): a real three-node network, clients on a handful of keys,
 * faults drawn from the seed one after the other for `seconds`, then the checks — every write's id
 * resolved to its final status (GET /app/tx), a final linearizable read of each key, each key's
 * history checked for linearizability, every acknowledged write Committed, every Committed write
 * still in the ledger (read back through the historical endpoint), and every node holding the same
 * value of each key once their commits agree.
 */
import { performance } from 'node:perf_hooks';
import { Prng } from '../prng.js';
import { FAULT_KINDS, NemesisCluster, type FaultKind } from './cluster.js';
import { durabilityViolations, linearizabilityViolations, type FinalStatus, type OpRecord, type Violation } from './history.js';
import { TABLE_PATH, Workload } from './workload.js';

export interface NemesisOptions {
  readonly seconds: number;
  readonly seed: number;
  /** Keys the clients share (default 4). */
  readonly keys?: number;
  /** Concurrent clients (default 6). */
  readonly clients?: number;
  /**
   * 'default': the clients read without x-covenant-consistency (served at once by whichever node
   * they ask), to show that the checker catches what such reads may return. Default 'linearizable'.
   */
  readonly reads?: 'linearizable' | 'default';
  /** Progress lines (faults, phases). */
  readonly log?: (line: string) => void;
}

export interface NemesisReport {
  readonly seed: number;
  readonly seconds: number;
  readonly keys: number;
  readonly clients: number;
  readonly operations: number;
  readonly writes: { readonly acknowledged: number; readonly committed: number; readonly invalid: number; readonly unknown: number };
  readonly reads: { readonly answered: number; readonly refused: number };
  readonly faults: Record<FaultKind, number>;
  readonly checkedCommittedWrites: number;
  readonly searchStates: number;
  readonly violations: readonly Violation[];
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export async function runNemesis(options: NemesisOptions): Promise<NemesisReport> {
  const log = options.log ?? (() => {});
  const root = new Prng(options.seed);
  const faultRng = root.split();
  const clientRoot = root.split();
  const keys = Array.from({ length: options.keys ?? 4 }, (_, i) => i + 1);
  const clients = options.clients ?? 6;
  const cluster = await NemesisCluster.start(log);
  try {
    const originMs = performance.now();
    const workload = new Workload(cluster, keys, options.reads ?? 'linearizable');
    const clientRngs = Array.from({ length: clients }, () => clientRoot.split());
    workload.start(clients, (c) => clientRngs[c]!);
    const deadline = originMs + options.seconds * 1000;
    while (performance.now() < deadline) {
      // A healthy spell, then one fault; the next fault starts only once the network is whole again.
      await sleep(faultRng.int(200, 900));
      if (performance.now() >= deadline) break;
      const kind = faultRng.pick(FAULT_KINDS);
      log(`t=${((performance.now() - originMs) / 1000).toFixed(1)}s fault ${kind}`);
      await cluster.inject(kind, faultRng);
    }
    await sleep(500);
    await workload.stop();
    log(`workload stopped after ${workload.records.length} operations; resolving transaction ids`);
    const primary = await cluster.primaryIndex();
    // A last committed write: every id below it has its final status on the primary.
    await workload.write(-1, primary, 0, 'final');
    await resolveStatuses(cluster, primary, workload.records);
    for (const key of keys) await workload.read(-1, primary, key, 'linearizable');
    const records = workload.records.filter((r) => r.key !== 0);
    const linear = linearizabilityViolations(records, keys, originMs);
    const violations: Violation[] = [...durabilityViolations(records), ...linear.violations];
    const checked = await committedWritesPresent(cluster, records, violations);
    await replicasAgree(cluster, keys, violations);
    return report(options, keys, clients, records, cluster, checked, linear.explored, violations);
  } finally {
    await cluster.stop();
  }
}

/** Every write's id to Committed or Invalid (the primary knows, once commit passed it), or Unknown without an id. */
async function resolveStatuses(cluster: NemesisCluster, primary: number, records: OpRecord[]): Promise<void> {
  const node = cluster.slots[primary]!;
  const writes = records.filter((r) => r.kind === 'write');
  await inBatches(writes, 16, async (r) => {
    if (r.txId === undefined) {
      r.finalStatus = 'Unknown';
      return;
    }
    for (let attempt = 0; attempt < 200; attempt++) {
      const answer = await node.client.request('GET', `/app/tx?transaction_id=${r.txId}`, { timeoutMs: 5000 }).catch(() => undefined);
      const status = answer?.body?.status as FinalStatus | undefined;
      if (status === 'Committed' || status === 'Invalid') {
        r.finalStatus = status;
        return;
      }
      await sleep(25);
    }
    r.finalStatus = 'Pending';
  });
}

/** Every write whose id is Committed reads back from the ledger as it wrote it, on every node in turn. */
async function committedWritesPresent(cluster: NemesisCluster, records: readonly OpRecord[], violations: Violation[]): Promise<number> {
  const committed = records.filter((r) => r.kind === 'write' && r.finalStatus === 'Committed');
  let i = 0;
  await inBatches(committed, 16, async (r) => {
    const node = cluster.slots[i++ % cluster.slots.length]!;
    for (let attempt = 0; attempt < 400; attempt++) {
      const answer = await node.client
        .request('GET', `${TABLE_PATH}/historical?id=${r.key}`, { identity: node.user, headers: { 'x-covenant-transaction-id': r.txId! }, timeoutMs: 5000 })
        .catch(() => undefined);
      if (answer?.status === 202 || answer === undefined) {
        await sleep(25);
        continue;
      }
      if (answer.status !== 200 || answer.body.msg !== r.value) {
        violations.push({ kind: 'committed-write-missing', key: r.key, message: `write #${r.id} (${r.txId}, Committed) reads back from ${node.address} as ${answer.status} ${answer.text.slice(0, 120)}` });
      }
      return;
    }
    violations.push({ kind: 'committed-write-missing', key: r.key, message: `write #${r.id} (${r.txId}, Committed) never read back from ${node.address}` });
  });
  return committed.length;
}

/** Once every node's commit is the same, every node holds the same value of each key. */
async function replicasAgree(cluster: NemesisCluster, keys: readonly number[], violations: Violation[]): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    const commits = await Promise.all(cluster.slots.map((n) => n.client.request('GET', '/node/commit', { timeoutMs: 5000 }).then((a) => String(a.body.transaction_id)).catch(() => '?')));
    if (commits.every((c) => c === commits[0] && c !== '?')) break;
    if (attempt > 400) {
      violations.push({ kind: 'replicas-differ', message: `the nodes' commits never agreed: ${commits.join(', ')}` });
      return;
    }
    await sleep(25);
  }
  for (const key of keys) {
    const values = await Promise.all(
      cluster.slots.map(async (n) => {
        const answer = await n.client.request('GET', `${TABLE_PATH}?id=${key}`, { identity: n.user, timeoutMs: 5000 });
        return answer.status === 200 ? String(answer.body.msg) : `(${answer.status})`;
      }),
    );
    if (values.some((v) => v !== values[0])) violations.push({ kind: 'replicas-differ', key, message: `key ${key} holds ${values.join(' / ')} on the three nodes at the same commit` });
  }
}

async function inBatches<T>(items: readonly T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await fn(items[next++]!);
  };
  await Promise.all(Array.from({ length: width }, worker));
}

function report(
  options: NemesisOptions,
  keys: readonly number[],
  clients: number,
  records: readonly OpRecord[],
  cluster: NemesisCluster,
  checkedCommittedWrites: number,
  searchStates: number,
  violations: readonly Violation[],
): NemesisReport {
  const writes = records.filter((r) => r.kind === 'write');
  const reads = records.filter((r) => r.kind === 'read');
  const answered = reads.filter((r) => r.status === 200 || r.status === 404).length;
  return {
    seed: options.seed,
    seconds: options.seconds,
    keys: keys.length,
    clients,
    operations: records.length,
    writes: {
      acknowledged: writes.filter((r) => r.status === 200).length,
      committed: writes.filter((r) => r.finalStatus === 'Committed').length,
      invalid: writes.filter((r) => r.finalStatus === 'Invalid').length,
      unknown: writes.filter((r) => r.finalStatus === 'Unknown' || r.finalStatus === 'Pending').length,
    },
    reads: { answered, refused: reads.length - answered },
    faults: { ...cluster.faults },
    checkedCommittedWrites,
    searchStates,
    violations,
  };
}
