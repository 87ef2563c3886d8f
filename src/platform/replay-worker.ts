/**
 * An entry-replay worker thread (see worker-entry-replayer.ts): for each request, reads the
 * entries' frames from the chunk files (synchronous reads: this thread does nothing else),
 * checks them, decrypts their private write sets and answers with them packed, or with the error
 * that stopped it.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { isCovenantError } from '../base/errors.js';
import { replayedEntriesOf, type EntryReplayRequest, type ReplayedEntries } from '../ledger/index.js';
import { FsDisk } from './fs-disk.js';

export interface ReplayWorkerData {
  readonly port: MessagePort;
}

export interface ReplayRequestMessage {
  readonly id: number;
  readonly request: EntryReplayRequest;
}

export type ReplayAnswerMessage =
  | { readonly id: number; readonly replayed: ReplayedEntries }
  | { readonly id: number; readonly error: { readonly code: string; readonly message: string; readonly status: number } };

const { port } = workerData as ReplayWorkerData;

port.on('message', ({ id, request }: ReplayRequestMessage) => {
  // One descriptor per file for the request, closed after it: a chunk file may be renamed between requests.
  const disk = new FsDisk();
  let answer: ReplayAnswerMessage;
  try {
    answer = { id, replayed: replayedEntriesOf(request, (path, position, length) => disk.read(path, position, length)) };
  } catch (e) {
    const error = isCovenantError(e)
      ? { code: e.code, message: e.message, status: e.status }
      : { code: 'DiskIoFailed', message: `replaying ledger entries ${request.firstSeqno}..${request.lastSeqno}: ${e instanceof Error ? e.message : String(e)}`, status: 500 };
    answer = { id, error };
  } finally {
    disk.close();
  }
  port.postMessage(answer, 'replayed' in answer ? [answer.replayed.packed.buffer as ArrayBuffer, answer.replayed.bounds.buffer as ArrayBuffer] : []);
});
