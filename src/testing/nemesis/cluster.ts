/**
 * The nemesis's network: three real node processes (mutual TLS on loopback, free ports, a temp
 * folder each), the faults it injects into them, one at a time so that a majority always runs
 * (every run can finish), and the restart of a killed node with the configuration it was started
 * with (the restart flow). Every fault is drawn from the run's seed.
 */
import { restartNode, type StartedNode } from '../node-process.js';
import { startNetwork, type TestNetwork } from '../network.js';
import { applyActions } from '../jwt.js';
import type { Prng } from '../prng.js';

export const FAULT_KINDS = ['kill', 'kill-primary', 'pause-primary', 'kill-after-snapshot', 'kill-after-chunk'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Small chunks and frequent snapshots (every 400 transactions, not waiting for ledger bytes), so that kills land near chunk renames and snapshot writes. */
const NEMESIS_CONFIG = {
  logging: { level: 'fail' },
  ledger: { chunk_size: '64KB' },
  snapshots: { tx_count: 400, min_interval: '0s', min_ledger_fraction: 0 },
};

export class NemesisCluster {
  /** The current handle of each node (a restart replaces it: new process, new address). */
  readonly slots: StartedNode[];
  /** Slots whose process is killed or stopped right now. */
  readonly down = new Set<number>();
  readonly faults: Record<FaultKind, number> = { kill: 0, 'kill-primary': 0, 'pause-primary': 0, 'kill-after-snapshot': 0, 'kill-after-chunk': 0 };

  private constructor(
    private readonly network: TestNetwork,
    private readonly log: (line: string) => void,
  ) {
    this.slots = network.nodes;
  }

  /**
   * Starts the network, again (up to 3 times) if the start itself fails: on a loaded machine the
   * member's opening proposal can run out of its sandbox time, which is not what a run tests.
   */
  static async start(log: (line: string) => void): Promise<NemesisCluster> {
    for (let attempt = 1; ; attempt++) {
      try {
        return new NemesisCluster(await startNetwork(3, NEMESIS_CONFIG), log);
      } catch (e) {
        if (attempt >= 3) throw e;
        log(`the network did not start (${e instanceof Error ? e.message.split('\n')[0] : String(e)}): starting again`);
      }
    }
  }

  /** The slot of the node that reports itself primary (polls until one does). */
  async primaryIndex(timeoutMs = 20_000): Promise<number> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      for (let i = 0; i < this.slots.length; i++) {
        if (this.down.has(i)) continue;
        const answer = await this.slots[i]!.client.request('GET', '/node/consensus', { timeoutMs: 1000 }).catch(() => undefined);
        if (answer?.status === 200 && answer.body.role === 'Primary') return i;
      }
      if (Date.now() > deadline) throw new Error('no primary');
      await sleep(50);
    }
  }

  /** Injects one fault drawn from `rng`, and waits until the network is whole again. */
  async inject(kind: FaultKind, rng: Prng): Promise<void> {
    this.faults[kind]++;
    switch (kind) {
      case 'kill':
        return this.killAndRestart(rng.int(0, this.slots.length - 1), rng, 'kill');
      case 'kill-primary':
        return this.killAndRestart(await this.primaryIndex(), rng, 'kill-primary');
      case 'pause-primary':
        return this.pause(await this.primaryIndex(), rng);
      case 'kill-after-snapshot': {
        const primary = await this.primaryIndex();
        const answer = await this.slots[primary]!.client.request('POST', '/node/snapshot:create', { timeoutMs: 5000 }).catch(() => undefined);
        this.log(`snapshot asked of node ${primary}: ${answer?.status ?? 'no answer'}`);
        // The snapshot is written at the next signature (within ledger_signatures.delay): kill around it.
        await sleep(rng.int(0, 150));
        return this.killAndRestart(rng.chance(0.5) ? primary : rng.int(0, this.slots.length - 1), rng, 'kill-after-snapshot');
      }
      case 'kill-after-chunk': {
        const primary = await this.primaryIndex();
        const outcome = await applyActions(this.slots[primary]!, [{ name: 'trigger_ledger_chunk', args: {} }]).catch((e: unknown) => ({ state: String(e) }));
        this.log(`trigger_ledger_chunk through node ${primary}: ${outcome.state}`);
        // The chunk ends at the next signature and is renamed once committed: kill around it.
        await sleep(rng.int(0, 150));
        return this.killAndRestart(rng.chance(0.5) ? primary : rng.int(0, this.slots.length - 1), rng, 'kill-after-chunk');
      }
    }
  }

  /** SIGKILL, a pause, then the same configuration again; resolves once the node is PartOfNetwork. */
  private async killAndRestart(i: number, rng: Prng, why: string): Promise<void> {
    const node = this.slots[i]!;
    this.down.add(i);
    await node.kill();
    this.log(`${why}: SIGKILL node ${i} (pid ${node.process.pid})`);
    await sleep(rng.int(50, 600));
    this.slots[i] = await restartNode(node);
    this.down.delete(i);
    this.log(`${why}: node ${i} restarted (pid ${this.slots[i]!.process.pid}, ${this.slots[i]!.address})`);
  }

  /** SIGSTOP for longer than an election timeout: the others elect a new primary; it resumes deposed. */
  private async pause(i: number, rng: Prng): Promise<void> {
    const node = this.slots[i]!;
    this.down.add(i);
    node.process.kill('SIGSTOP');
    const pausedMs = rng.int(1200, 2500);
    this.log(`pause-primary: SIGSTOP node ${i} for ${pausedMs} ms`);
    try {
      await sleep(pausedMs);
    } finally {
      node.process.kill('SIGCONT');
      this.down.delete(i);
    }
    this.log(`pause-primary: SIGCONT node ${i}`);
  }

  /** Stops every process (by its pid, through its handle) and removes the folders. */
  async stop(): Promise<void> {
    for (const node of this.slots) if (node.process.exitCode === null && node.process.signalCode === null) node.process.kill('SIGCONT');
    await this.network.stopAll();
  }
}
