/**
 * A SnapshotWriter (src/ledger/snapshot-writer.ts) on a worker thread: encoding, encrypting,
 * hashing, writing and syncing the snapshot of a large state take seconds (a 90 MB snapshot took
 * about 3 s in one turn), longer than an election timeout, so the node's thread only packs the
 * state in slices and hands the chunks over (transferred, not copied). The worker starts on the
 * first job, runs jobs one at a time in order, and never keeps the process alive; close() ends it
 * and fails what it had not answered.
 */
import { MessageChannel, type MessagePort, Worker } from 'node:worker_threads';
import { CovenantError } from '../base/errors.js';
import type { SnapshotWriteJob, SnapshotWriteResult, SnapshotWriter } from '../ledger/index.js';
import { errorOfAnswer } from './ledger-file-job.js';
import type { SnapshotAnswerMessage, SnapshotJobMessage, SnapshotWorkerData } from './snapshot-worker.js';

export class WorkerSnapshotWriter implements SnapshotWriter {
  #worker: Worker | undefined;
  #port: MessagePort | undefined;
  #nextId = 1;
  readonly #waiting = new Map<number, { resolve: (result: SnapshotWriteResult) => void; reject: (e: Error) => void }>();
  #closed = false;

  write(job: SnapshotWriteJob): Promise<SnapshotWriteResult> {
    if (this.#closed) return Promise.reject(new CovenantError('SnapshotWriterClosed', 'the snapshot writer is closed', 503));
    const port = this.#start();
    const id = this.#nextId++;
    return new Promise((resolve, reject) => {
      this.#waiting.set(id, { resolve, reject });
      const message: SnapshotJobMessage = { id, job };
      const buffers = new Set(job.packed.chunks.map((c) => c.buffer as ArrayBuffer));
      port.postMessage(message, [...buffers]);
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#failAll(new CovenantError('SnapshotWriterClosed', 'the snapshot writer was closed', 503));
    this.#port?.close();
    void this.#worker?.terminate();
  }

  #start(): MessagePort {
    if (this.#port !== undefined) return this.#port;
    const { port1, port2 } = new MessageChannel();
    const workerData: SnapshotWorkerData = { port: port2 };
    // The worker needs none of the process's Node.js options (source maps, --import hooks).
    const worker = new Worker(new URL('./snapshot-worker.js', import.meta.url), { workerData, transferList: [port2], execArgv: [] });
    worker.on('error', (e) => this.#onEnd(worker, e));
    worker.on('exit', (code) => this.#onEnd(worker, new Error(`the snapshot worker exited with code ${code}`)));
    port1.on('message', (message: SnapshotAnswerMessage) => this.#onAnswer(message));
    worker.unref();
    port1.unref();
    this.#worker = worker;
    this.#port = port1;
    return port1;
  }

  #onAnswer(message: SnapshotAnswerMessage): void {
    const waiting = this.#waiting.get(message.id);
    if (waiting === undefined) return;
    this.#waiting.delete(message.id);
    if ('result' in message) waiting.resolve(message.result);
    else waiting.reject(errorOfAnswer(message.error));
  }

  /** The worker ended: what it had not answered fails, and the next job starts a new one. */
  #onEnd(worker: Worker, error: Error): void {
    if (this.#closed || this.#worker !== worker) return;
    this.#port?.close();
    this.#port = undefined;
    this.#worker = undefined;
    this.#failAll(new CovenantError('InternalError', `writing a snapshot failed: ${error.message}`, 500));
  }

  #failAll(error: Error): void {
    const waiting = [...this.#waiting.values()];
    this.#waiting.clear();
    for (const w of waiting) w.reject(error);
  }
}
