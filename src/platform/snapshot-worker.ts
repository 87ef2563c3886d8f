/**
 * The snapshot worker thread (see worker-snapshot-writer.ts): for each job, encodes the packed
 * state, writes and syncs the file through a disk of its own, and answers with the file's digest
 * and size, or with the error that stopped it.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import { writeSnapshotJob, type SnapshotWriteJob, type SnapshotWriteResult } from '../ledger/index.js';
import { FsDisk } from './fs-disk.js';
import { runLedgerFileJob, type WorkerErrorAnswer } from './ledger-file-job.js';

export interface SnapshotWorkerData {
  readonly port: MessagePort;
}

export interface SnapshotJobMessage {
  readonly id: number;
  readonly job: SnapshotWriteJob;
}

export type SnapshotAnswerMessage = { readonly id: number; readonly result: SnapshotWriteResult } | { readonly id: number; readonly error: WorkerErrorAnswer };

const { port } = workerData as SnapshotWorkerData;

port.on('message', ({ id, job }: SnapshotJobMessage) => {
  const outcome = runLedgerFileJob(`writing snapshot ${job.path}`, () => {
    const disk = new FsDisk();
    try {
      return writeSnapshotJob(job, disk);
    } finally {
      disk.close();
    }
  });
  const answer: SnapshotAnswerMessage = 'value' in outcome ? { id, result: outcome.value } : { id, error: outcome.error };
  port.postMessage(answer);
});
