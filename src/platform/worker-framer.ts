/**
 * An EntryFramer (src/ledger/framing.ts) that frames on a worker thread, so that the primary's
 * request thread only executes transactions while another core encrypts, derives commit
 * evidence, frames and hashes them.
 *
 * Jobs submitted during one turn of the event loop travel as one batch (posted at the end of the
 * turn, or at once when a batch is full); the worker answers each batch with its framed entries
 * and completions run in submission order when the answer arrives. drain() is synchronous: it
 * takes the worker's answers with receiveMessageOnPort, sleeping on a shared counter
 * (Atomics.wait) until the worker has answered every posted batch, then frames what was not yet
 * posted on the calling thread; a worker that ends, however, flags it in the same shared memory,
 * so a drain learns it at once. The node drains before anything that needs every earlier entry
 * in consensus and in the Merkle tree (a signature, a reconfiguration, a snapshot).
 * A job's large write sets are transferred to the worker, not copied (frame-batch.ts): once its
 * batch is posted, the job's views of them are detached, and only its other fields stay usable.
 */
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from 'node:worker_threads';
import { assert } from '../base/assert.js';
import { EntryFraming, type EntryFramer, type EntryFramerFactory, type FrameCompletion, type FrameJob } from '../ledger/index.js';
import { packJobs, unpackFramed } from './frame-batch.js';
import type { FrameBatchMessage, FramedBatchMessage, FrameWorkerData } from './frame-worker.js';

/** A batch is posted at the end of the turn, or as soon as it holds this many jobs. */
const BATCH_JOBS_MAX = 256;
/** drain() gives up on a worker that neither answers nor ends (a fatal error) after this long. */
const DRAIN_TIMEOUT_MS = 30_000;
const WAIT_SLICE_MS = 100;

export interface WorkerFramerOptions {
  /** Called once if the worker thread fails; the node cannot continue without it. */
  readonly onFailure: (error: Error) => void;
  /**
   * Fault injection for tests (a "buggify" point): the worker answers each batch this many
   * milliseconds late, so that transactions stay in the pipeline long enough for a test to
   * depose the primary while they are there. Default 0.
   */
  readonly answerDelayMs?: number;
  /** Fault injection for tests: the worker ends without answering when this batch (1-based) arrives. */
  readonly vanishAtBatch?: number;
}

export class WorkerEntryFramer<J extends FrameJob> implements EntryFramer<J> {
  readonly #worker: Worker;
  readonly #port: MessagePort;
  readonly #answered: Int32Array;
  /** Frames on this thread what drain() finds not yet posted. */
  readonly #frame: EntryFraming;
  #unposted: J[] = [];
  readonly #posted: { id: number; jobs: J[]; bytes: number }[] = [];
  #nextBatchId = 1;
  #postScheduled = false;
  #pending = 0;
  #pendingBytes = 0;
  #closed = false;
  /** Why the worker failed, once it has. */
  #failure: Error | undefined;

  constructor(
    ledgerSecret: Uint8Array,
    private readonly complete: FrameCompletion<J>,
    private readonly options: WorkerFramerOptions,
  ) {
    this.#frame = new EntryFraming(ledgerSecret);
    const { port1, port2 } = new MessageChannel();
    this.#port = port1;
    this.#answered = new Int32Array(new SharedArrayBuffer(8));
    const workerData: FrameWorkerData = {
      port: port2,
      answered: this.#answered,
      ledgerSecret: new Uint8Array(ledgerSecret),
      answerDelayMs: options.answerDelayMs ?? 0,
      vanishAtBatch: options.vanishAtBatch ?? 0,
    };
    // The worker needs none of the process's Node.js options (source maps, --import hooks).
    this.#worker = new Worker(new URL('./frame-worker.js', import.meta.url), { workerData, transferList: [port2], execArgv: [] });
    this.#worker.on('error', (e) => this.#fail(e));
    this.#worker.on('exit', (code) => {
      if (!this.#closed) this.#fail(new Error(`the framing worker exited with code ${code}`));
    });
    // Neither the worker nor its port keeps the process alive: the node decides when it ends.
    this.#worker.unref();
    this.#port.on('message', (message: FramedBatchMessage) => this.#onFramed(message));
    this.#port.unref();
  }

  get pending(): number {
    return this.#pending;
  }

  get pendingBytes(): number {
    return this.#pendingBytes;
  }

  submit(job: J): void {
    assert(!this.#closed, 'the framer is open');
    this.#pending++;
    this.#pendingBytes += jobBytes(job);
    this.#unposted.push(job);
    if (this.#unposted.length >= BATCH_JOBS_MAX) this.#post();
    else if (!this.#postScheduled) {
      this.#postScheduled = true;
      setImmediate(() => {
        this.#postScheduled = false;
        this.#post();
      });
    }
  }

  drain(): void {
    if (this.#closed) return;
    const deadline = Date.now() + DRAIN_TIMEOUT_MS;
    while (this.#posted.length > 0) {
      const seen = Atomics.load(this.#answered, 0);
      // Read before the port: whatever the worker answered before it ended is queued by then.
      const ended = Atomics.load(this.#answered, 1) !== 0;
      const received = receiveMessageOnPort(this.#port);
      if (received !== undefined) {
        this.#onFramed(received.message as FramedBatchMessage);
        continue;
      }
      if (this.#failure !== undefined) throw this.#failure;
      if (ended) {
        this.#fail(new Error(`the framing worker ended without answering ${this.#posted.length} batch(es)`));
        throw this.#failure!;
      }
      if (Date.now() > deadline) {
        throw new Error(`the framing worker did not answer ${this.#posted.length} batch(es) within ${DRAIN_TIMEOUT_MS} ms`);
      }
      Atomics.wait(this.#answered, 0, seen, WAIT_SLICE_MS);
    }
    // Not posted yet: framing here is quicker than a round trip to the worker.
    const jobs = this.#unposted;
    this.#unposted = [];
    for (const job of jobs) {
      this.#pending--;
      this.#pendingBytes -= jobBytes(job);
      this.complete(job, this.#frame.frame(job));
    }
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#unposted = [];
    this.#posted.length = 0;
    this.#pending = 0;
    this.#pendingBytes = 0;
    this.#port.close();
    void this.#worker.terminate();
  }

  #post(): void {
    if (this.#closed || this.#unposted.length === 0) return;
    const jobs = this.#unposted;
    this.#unposted = [];
    let bytes = 0;
    for (const job of jobs) bytes += jobBytes(job);
    const message: FrameBatchMessage = { id: this.#nextBatchId++, jobs: packJobs(jobs) };
    this.#posted.push({ id: message.id, jobs, bytes });
    // Large write sets go transferred: the jobs' views of them are detached from here on.
    this.#port.postMessage(message, [message.jobs.packed, ...message.jobs.transferred]);
  }

  #onFramed(message: FramedBatchMessage): void {
    if (this.#closed || this.#failure !== undefined) return;
    if ('error' in message) {
      this.#fail(new Error(`the framing worker failed: ${message.error}`));
      return;
    }
    const batch = this.#posted.shift();
    assert(batch !== undefined && batch.id === message.id, () => `framed batch ${message.id} answers the oldest posted batch (${batch?.id})`);
    const framed = unpackFramed(message.framed);
    assert(framed.length === batch.jobs.length, 'a framed batch holds one entry per job');
    this.#pendingBytes -= batch.bytes;
    for (let i = 0; i < framed.length; i++) {
      this.#pending--;
      this.complete(batch.jobs[i]!, framed[i]!);
    }
  }

  #fail(error: Error): void {
    if (this.#failure !== undefined || this.#closed) return;
    this.#failure = error;
    this.options.onFailure(error);
  }
}

/** The write-set bytes of a job (counted before its parts are transferred away). */
function jobBytes(job: FrameJob): number {
  return job.publicBytes.byteLength + job.privatePlain.byteLength;
}

/** The factory a node process passes to the node (NodeInit.createEntryFramer). */
export function workerEntryFramer(options: WorkerFramerOptions): EntryFramerFactory {
  return (secret, complete) => new WorkerEntryFramer(secret, complete, options);
}
