/**
 * An EntryLeafReader (src/ledger/entry-leaves.ts) on a worker thread: a receipt of a transaction
 * whose Merkle block the tree has compacted needs that block's leaves again, and re-reading 1024
 * entries (megabytes each, possibly) and hashing them would hold the request thread for as long.
 * The worker starts on the first request, serves requests one at a time in order, and never keeps
 * the process alive; close() ends it and fails what it had not answered.
 */
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import { CovenantError } from '../base/errors.js';
import { errorOfAnswer } from './ledger-file-job.js';
import type { EntryLeafReader, EntryLeavesRequest } from '../ledger/index.js';
import type { LeafAnswerMessage, LeafRequestMessage, LeafWorkerData } from './leaf-worker.js';

export interface WorkerLeafReaderOptions {
  /**
   * Fault injection for tests (a "buggify" point): the worker answers each request this many
   * milliseconds late, so that a test can observe the node while a rebuild is under way. Default 0.
   */
  readonly answerDelayMs?: number;
}

export class WorkerEntryLeafReader implements EntryLeafReader {
  #worker: Worker | undefined;
  #port: MessagePort | undefined;
  #nextId = 1;
  readonly #waiting = new Map<number, { resolve: (leaves: Uint8Array) => void; reject: (e: Error) => void }>();
  #closed = false;

  constructor(private readonly options: WorkerLeafReaderOptions = {}) {}

  leavesOf(request: EntryLeavesRequest): Promise<Uint8Array> {
    if (this.#closed) return Promise.reject(new CovenantError('LeafReaderClosed', 'the entry leaf reader is closed', 503));
    const port = this.#start();
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      const message: LeafRequestMessage = { id, request };
      port.postMessage(message);
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#failAll(new CovenantError('LeafReaderClosed', 'the entry leaf reader was closed', 503));
    this.#port?.close();
    void this.#worker?.terminate();
  }

  #start(): MessagePort {
    if (this.#port !== undefined) return this.#port;
    const { port1, port2 } = new MessageChannel();
    const workerData: LeafWorkerData = { port: port2, answerDelayMs: this.options.answerDelayMs ?? 0 };
    // The worker needs none of the process's Node.js options (source maps, --import hooks).
    const worker = new Worker(new URL('./leaf-worker.js', import.meta.url), { workerData, transferList: [port2], execArgv: [] });
    worker.on('error', (e) => this.#onEnd(worker, e));
    worker.on('exit', (code) => this.#onEnd(worker, new Error(`the entry leaf worker exited with code ${code}`)));
    port1.on('message', (message: LeafAnswerMessage) => this.#onAnswer(message));
    // Neither the worker nor its port keeps the process alive: the node decides when it ends.
    worker.unref();
    port1.unref();
    this.#worker = worker;
    this.#port = port1;
    return port1;
  }

  #onAnswer(message: LeafAnswerMessage): void {
    const waiting = this.#waiting.get(message.id);
    if (waiting === undefined) return;
    this.#waiting.delete(message.id);
    if ('leaves' in message) waiting.resolve(message.leaves);
    else waiting.reject(errorOfAnswer(message.error));
  }

  /** The worker ended: what it had not answered fails, and the next request starts a new one. */
  #onEnd(worker: Worker, error: Error): void {
    if (this.#closed || this.#worker !== worker) return;
    this.#port?.close();
    this.#port = undefined;
    this.#worker = undefined;
    this.#failAll(new CovenantError('InternalError', `re-reading ledger entries failed: ${error.message}`, 500));
  }

  #failAll(error: Error): void {
    const waiting = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const w of waiting) w.reject(error);
  }
}
