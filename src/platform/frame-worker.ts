/**
 * The framing worker thread (see worker-framer.ts): frames each batch it receives, in order, and
 * answers with the framed batch (or with the reason it could not frame it, and ends), then bumps the
 * shared counter of answered batches so that a request thread blocked in drain() wakes up.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { EntryFraming } from '../ledger/index.js';
import { framePacked, unpackJobs, type PackedBatch } from './frame-batch.js';

export interface FrameWorkerData {
  readonly port: MessagePort;
  /**
   * Int32Array over a SharedArrayBuffer: [0] counts the batches answered (and is bumped once more
   * when the worker ends), [1] becomes 1 when the worker ends, whatever ends it.
   */
  readonly answered: Int32Array;
  readonly ledgerSecret: Uint8Array;
  /** Test-only fault injection: answer each batch this much later (WorkerFramerOptions). */
  readonly answerDelayMs: number;
  /** Test-only fault injection: end without answering on receiving this batch (0: never). */
  readonly vanishAtBatch: number;
}

export interface FrameBatchMessage {
  readonly id: number;
  readonly jobs: PackedBatch;
}

/** The framed batch, or why it could not be framed (the worker then ends). */
export type FramedBatchMessage = { readonly id: number; readonly framed: PackedBatch } | { readonly id: number; readonly error: string };

const { port, answered, ledgerSecret, answerDelayMs, vanishAtBatch } = workerData as FrameWorkerData;
const frame = new EntryFraming(ledgerSecret);
let received = 0;

// However the worker ends (an uncaught error, process.exit), a request thread blocked in drain()
// wakes up and learns it at once instead of waiting out its timeout.
process.on('exit', () => {
  Atomics.store(answered, 1, 1);
  Atomics.add(answered, 0, 1);
  Atomics.notify(answered, 0);
});

function answer(message: FramedBatchMessage): void {
  port.postMessage(message, 'framed' in message ? [message.framed.packed, ...message.framed.transferred] : []);
  Atomics.add(answered, 0, 1);
  Atomics.notify(answered, 0);
}

port.on('message', (message: FrameBatchMessage) => {
  if (++received === vanishAtBatch) process.exit(1);
  let framed: PackedBatch;
  try {
    framed = framePacked(unpackJobs(message.jobs), frame);
  } catch (e) {
    // Answered like a batch, so that a request thread blocked in drain() learns it at once; the
    // error then ends the worker.
    answer({ id: message.id, error: e instanceof Error ? e.message : String(e) });
    throw e;
  }
  // Equal delays fire in order, so answers keep the order of the batches.
  if (answerDelayMs > 0) setTimeout(() => answer({ id: message.id, framed }), answerDelayMs);
  else answer({ id: message.id, framed });
});
