/**
 * The nemesis's clients: each, in a loop, writes a unique value to one of a handful of keys (with
 * x-covenant-consistency: committed, so that a 200 means committed) or reads one linearizably
 * (x-covenant-consistency: linearizable), through a node drawn at random (a backup forwards both
 * to the primary), and records the invocation, the completion, the answer and the transaction id.
 */
import { performance } from 'node:perf_hooks';
import type { Prng } from '../prng.js';
import type { NemesisCluster } from './cluster.js';
import type { OpRecord } from './history.js';

export const TABLE_PATH = '/app/log/private';
/**
 * A client gives up on an answer after this long (a write's outcome is then unknown, a read did
 * nothing): longer than a pause of the primary and an election, shorter than the forwarding
 * timeout (10 s) a backup waits for a primary that was killed with its request, so that a run ends
 * soon after its last fault.
 */
const WRITE_TIMEOUT_MS = 4_000;
const READ_TIMEOUT_MS = 4_000;

interface ErrorBody {
  error?: { code?: string; details?: { transaction_id?: string } };
}

export class Workload {
  readonly records: OpRecord[] = [];
  private stopped = false;
  private nextId = 1;
  private readonly loops: Promise<void>[] = [];

  constructor(
    private readonly cluster: NemesisCluster,
    private readonly keys: readonly number[],
    /** 'default' sends reads without the header: to show that the checker catches stale reads. */
    private readonly readConsistency: 'linearizable' | 'default' = 'linearizable',
  ) {}

  start(clients: number, rngOf: (client: number) => Prng): void {
    for (let c = 0; c < clients; c++) this.loops.push(this.loop(c, rngOf(c)));
  }

  /** Stops issuing operations and waits for those in flight. */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  private async loop(client: number, rng: Prng): Promise<void> {
    let n = 0;
    while (!this.stopped) {
      const key = rng.pick(this.keys);
      const up = [...this.cluster.slots.keys()].filter((i) => !this.cluster.down.has(i));
      // Mostly nodes that run; now and then one that is down (a client cannot know).
      const slot = up.length > 0 && rng.chance(0.9) ? rng.pick(up) : rng.int(0, this.cluster.slots.length - 1);
      if (rng.chance(0.5)) await this.write(client, slot, key, `c${client}-${n++}`);
      else await this.read(client, slot, key);
    }
  }

  /** One write, recorded; an answer that is not 200 leaves its fate to its id's final status. */
  async write(client: number, slot: number, key: number, value: string): Promise<OpRecord> {
    const node = this.cluster.slots[slot]!;
    const record: OpRecord = { id: this.nextId++, client, key, kind: 'write', value, invokedMs: performance.now() };
    this.records.push(record);
    try {
      const answer = await node.client.request('POST', TABLE_PATH, {
        body: { id: key, msg: value },
        identity: node.user,
        headers: { 'x-covenant-consistency': 'committed' },
        timeoutMs: WRITE_TIMEOUT_MS,
      });
      record.completedMs = performance.now();
      record.status = answer.status;
      const header = answer.headers['x-covenant-transaction-id'];
      const error = (answer.body as ErrorBody | undefined)?.error;
      if (typeof header === 'string') record.txId = header;
      else if (typeof error?.details?.transaction_id === 'string') record.txId = error.details.transaction_id;
      if (error?.code !== undefined) record.code = error.code;
    } catch (e) {
      record.completedMs = performance.now();
      record.status = 0;
      record.code = e instanceof Error ? e.message.slice(0, 80) : 'failed';
    }
    return record;
  }

  /** One linearizable read, recorded (200: the value; 404: nothing; anything else: refused). */
  async read(client: number, slot: number, key: number, consistency = this.readConsistency): Promise<OpRecord> {
    const node = this.cluster.slots[slot]!;
    const record: OpRecord = { id: this.nextId++, client, key, kind: 'read', value: null, invokedMs: performance.now() };
    this.records.push(record);
    try {
      const answer = await node.client.request('GET', `${TABLE_PATH}?id=${key}`, {
        identity: node.user,
        headers: consistency === 'linearizable' ? { 'x-covenant-consistency': 'linearizable' } : {},
        timeoutMs: READ_TIMEOUT_MS,
      });
      record.completedMs = performance.now();
      const error = (answer.body as ErrorBody | undefined)?.error;
      // A 404 of the record (it holds nothing) names the state it read; any other 404 is a refusal.
      const readNothing = answer.status === 404 && error?.code === 'ResourceNotFound' && answer.headers['x-covenant-transaction-id'] !== undefined;
      record.status = answer.status === 404 && !readNothing ? 499 : answer.status;
      if (answer.status === 200) record.value = String((answer.body as { msg: string }).msg);
      const header = answer.headers['x-covenant-transaction-id'];
      if (typeof header === 'string') record.txId = header;
      if (error?.code !== undefined) record.code = error.code;
    } catch (e) {
      record.completedMs = performance.now();
      record.status = 0;
      record.code = e instanceof Error ? e.message.slice(0, 80) : 'failed';
    }
    return record;
  }
}
