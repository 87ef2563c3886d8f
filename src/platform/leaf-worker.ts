/**
 * The entry-leaf worker thread (see worker-leaf-reader.ts): for each request, reads the entries'
 * frames from the chunk files (synchronous reads: this thread does nothing else), checks them and
 * answers with their Merkle leaves, or with the error that stopped it.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { isCovenantError } from '../base/errors.js';
import { leavesOfEntries, type EntryLeavesRequest } from '../ledger/index.js';
import { FsDisk } from './fs-disk.js';

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
  | { readonly id: number; readonly error: { readonly code: string; readonly message: string; readonly status: number } };

const { port, answerDelayMs } = workerData as LeafWorkerData;

port.on('message', ({ id, request }: LeafRequestMessage) => {
  // One descriptor per file for the request (the disk's read cache), closed after it: a chunk
  // file may be renamed or replaced between requests, so nothing is kept across them.
  const disk = new FsDisk();
  let answer: LeafAnswerMessage;
  try {
    answer = { id, leaves: leavesOfEntries(request, (path, position, length) => disk.read(path, position, length)) };
  } catch (e) {
    const error = isCovenantError(e)
      ? { code: e.code, message: e.message, status: e.status }
      : { code: 'DiskIoFailed', message: `reading ledger entries ${request.firstSeqno}..${request.lastSeqno}: ${e instanceof Error ? e.message : String(e)}`, status: 500 };
    answer = { id, error };
  } finally {
    disk.close();
  }
  const send = () => port.postMessage(answer, 'leaves' in answer ? [answer.leaves.buffer as ArrayBuffer] : []);
  if (answerDelayMs > 0) setTimeout(send, answerDelayMs);
  else send();
});
