/**
 * The entry-leaf worker thread (see worker-leaf-reader.ts): for each request, reads the entries'
 * frames from the chunk files (synchronous reads: this thread does nothing else), checks them and
 * answers with their Merkle leaves, or with the error that stopped it.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { leavesOfEntries, type EntryLeavesRequest } from '../ledger/index.js';
import { runLedgerFileJob, type WorkerErrorAnswer } from './ledger-file-job.js';

export interface LeafWorkerData {
  readonly port: MessagePort;
  /** Test-only fault injection: answer each request this much later (WorkerLeafReaderOptions). */
  readonly answerDelayMs: number;
}

export interface LeafRequestMessage {
  readonly id: number;
  readonly request: EntryLeavesRequest;
}

export type LeafAnswerMessage =
  | { readonly id: number; readonly leaves: Uint8Array }
  | { readonly id: number; readonly error: WorkerErrorAnswer };

const { port, answerDelayMs } = workerData as LeafWorkerData;

port.on('message', ({ id, request }: LeafRequestMessage) => {
  const outcome = runLedgerFileJob(`reading ledger entries ${request.firstSeqno}..${request.lastSeqno}`, (read) => leavesOfEntries(request, read));
  const answer: LeafAnswerMessage = 'value' in outcome ? { id, leaves: outcome.value } : { id, error: outcome.error };
  const send = () => port.postMessage(answer, 'leaves' in answer ? [answer.leaves.buffer as ArrayBuffer] : []);
  if (answerDelayMs > 0) setTimeout(send, answerDelayMs);
  else send();
});
