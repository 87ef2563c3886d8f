/**
 * The normal client of src/testing/hostile-clients.ts in a worker thread: its own event loop, so
 * that the gaps it measures are the node's, not those of the attackers running in the caller's
 * thread. Started by normalClientInWorker; answers a 'stop' message with its report.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { normalClient, type FloodTarget } from './hostile-clients.js';

const { target, request, pauseMs } = workerData as {
  target: FloodTarget & { localAddress?: string };
  request: Parameters<typeof normalClient>[1];
  pauseMs: number;
};
const client = normalClient(target, request, pauseMs);
parentPort!.once('message', () => {
  void client.stop().then((report) => parentPort!.postMessage(report));
});
