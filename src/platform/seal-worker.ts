/**
 * The sealing worker thread (see worker-sealer.ts): seals each batch it receives, in order, and
 * answers with the sealed batch (or with the reason it could not seal it, and ends), then bumps the
 * shared counter of answered batches so that a request thread blocked in drain() wakes up.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { EntrySeal } from '../ledger/index.js';
import { sealPacked, unpackJobs, type PackedBatch } from './seal-batch.js';

export interface SealWorkerData {
  readonly port: MessagePort;
  /**
   * Int32Array over a SharedArrayBuffer: [0] counts the batches answered (and is bumped once more
   * when the worker ends), [1] becomes 1 when the worker ends, whatever ends it.
   */
  readonly answered: Int32Array;
  readonly ledgerSecret: Uint8Array;
  /** Test-only fault injection: answer each batch this much later (WorkerSealerOptions). */
  readonly answerDelayMs: number;
  /** Test-only fault injection: end without answering on receiving this batch (0: never). */
  readonly vanishAtBatch: number;
}

export interface SealBatchMessage {
  readonly id: number;
  readonly jobs: PackedBatch;
}

/** The sealed batch, or why it could not be sealed (the worker then ends). */
export type SealedBatchMessage = { readonly id: number; readonly sealed: PackedBatch } | { readonly id: number; readonly error: string };

const { port, answered, ledgerSecret, answerDelayMs, vanishAtBatch } = workerData as SealWorkerData;
const seal = new EntrySeal(ledgerSecret);
let received = 0;

// However the worker ends (an uncaught error, process.exit), a request thread blocked in drain()
// wakes up and learns it at once instead of waiting out its timeout.
process.on('exit', () => {
  Atomics.store(answered, 1, 1);
  Atomics.add(answered, 0, 1);
  Atomics.notify(answered, 0);
});

function answer(message: SealedBatchMessage): void {
  port.postMessage(message, 'sealed' in message ? [message.sealed.packed, ...message.sealed.transferred] : []);
  Atomics.add(answered, 0, 1);
  Atomics.notify(answered, 0);
}

port.on('message', (message: SealBatchMessage) => {
  if (++received === vanishAtBatch) process.exit(1);
  let sealed: PackedBatch;
  try {
    sealed = sealPacked(unpackJobs(message.jobs), seal);
  } catch (e) {
    // Answered like a batch, so that a request thread blocked in drain() learns it at once; the
    // error then ends the worker.
    answer({ id: message.id, error: e instanceof Error ? e.message : String(e) });
    throw e;
  }
  // Equal delays fire in order, so answers keep the order of the batches.
  if (answerDelayMs > 0) setTimeout(() => answer({ id: message.id, sealed }), answerDelayMs);
  else answer({ id: message.id, sealed });
});
