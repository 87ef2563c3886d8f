/**
 * A network of real node processes for end-to-end tests and benchmarks: one Start node, then
 * Join nodes against it, each its own OS process with its own temp folder.
 */
import { joinOptionsOf, openTestService, removeDir, startJoiningNode, startNode, type StartedNode } from './node-process.js';

export interface TestNetwork {
  readonly nodes: StartedNode[];
  /** The node currently reporting itself primary (polls until one does). */
  primary(timeoutMs?: number): Promise<StartedNode>;
  stopAll(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export async function until<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 20_000, intervalMs = 25): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let value: T | undefined;
    try {
      value = await fn();
    } catch {
      value = undefined;
    }
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(intervalMs);
  }
}

/** Waits until `node` reports the transaction `txId` Committed (GET /app/tx). */
export async function waitCommitted(node: Pick<StartedNode, 'address' | 'client'>, txId: string): Promise<void> {
  await until(`commit of ${txId} on ${node.address}`, async () => {
    const answer = await node.client.request('GET', `/app/tx?transaction_id=${txId}`);
    return answer.body?.status === 'Committed' ? true : undefined;
  });
}

/** Waits until `node`'s commit (GET /node/commit) reaches the seqno of `txId` (also before the application is open). */
export async function waitCommitReaches(node: Pick<StartedNode, 'address' | 'client'>, txId: string): Promise<void> {
  const seqno = Number(txId.split('.')[1]);
  await until(`commit to ${txId} on ${node.address}`, async () => {
    const answer = await node.client.request('GET', '/node/commit').catch(() => undefined);
    const committed = Number(String(answer?.body?.transaction_id ?? '0.0').split('.')[1]);
    return committed >= seqno ? true : undefined;
  });
}

export async function startNetwork(count: number, configPatch: Record<string, unknown> = {}): Promise<TestNetwork> {
  // Nodes that join while the service is opening are trusted at once; then member0 opens it.
  const first = await startNode({ configPatch, open: false });
  const nodes: StartedNode[] = [first];
  const network: TestNetwork = {
    nodes,
    async primary(timeoutMs = 20_000) {
      return until(
        'a primary',
        async () => {
          for (const node of nodes) {
            if (node.process.exitCode !== null || node.process.signalCode !== null) continue;
            const state = await node.client.request('GET', '/node/consensus', { timeoutMs: 2000 }).catch(() => undefined);
            if (state?.status === 200 && state.body.role === 'Primary') return node;
          }
          return undefined;
        },
        timeoutMs,
      );
    },
    async stopAll() {
      await Promise.all(nodes.map((n) => n.stop()));
      for (const n of nodes) removeDir(n.dir);
    },
  };
  try {
    for (let i = 1; i < count; i++) {
      nodes.push(
        await startJoiningNode({ ...joinOptionsOf(first), configPatch }),
      );
    }
    await openTestService(first);
  } catch (e) {
    await network.stopAll();
    throw e;
  }
  return network;
}
