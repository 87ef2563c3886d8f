/**
 * An entry-replay worker thread (see worker-entry-replayer.ts): for each request, reads the
 * entries' frames from the chunk files (synchronous reads: this thread does nothing else),
 * checks them, decrypts their private write sets and answers with them packed, or with the error
 * that stopped it.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { replayedEntriesOf, type EntryReplayRequest, type ReplayedEntries } from '../ledger/index.js';
import { runLedgerFileJob, type WorkerErrorAnswer } from './ledger-file-job.js';

export interface ReplayWorkerData {
  readonly port: MessagePort;
}

export interface ReplayRequestMessage {
  readonly id: number;
  readonly request: EntryReplayRequest;
}

export type ReplayAnswerMessage =
  | { readonly id: number; readonly replayed: ReplayedEntries }
  | { readonly id: number; readonly error: WorkerErrorAnswer };

const { port } = workerData as ReplayWorkerData;

port.on('message', ({ id, request }: ReplayRequestMessage) => {
  const outcome = runLedgerFileJob(`replaying ledger entries ${request.firstSeqno}..${request.lastSeqno}`, (read) => replayedEntriesOf(request, read));
  const answer: ReplayAnswerMessage = 'value' in outcome ? { id, replayed: outcome.value } : { id, error: outcome.error };
  port.postMessage(answer, 'replayed' in answer ? [answer.replayed.packed.buffer as ArrayBuffer, answer.replayed.bounds.buffer as ArrayBuffer] : []);
});
