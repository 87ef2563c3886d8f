/**
 * Receipts of large early entries against a normal client. One node; the ledger starts with
 * `--large` writes of `--size` bytes each, then small writes until the first Merkle block (1024
 * seqnos) is complete and compacted, so that a receipt of a large entry re-reads that block from
 * the ledger files. A client sends GET /node/commit every 20 ms while `--concurrent` receipt
 * requests for different large entries run at once; each round prints the longest gap between the
 * client's answers and how long the receipts took. Round 1 finds the block uncached; round 2 asks
 * again. Run after a build:
 *   node dist/bench/receipt-stall.js [--large 300] [--size 1000000] [--concurrent 3] [--rounds 2]
 */
import { removeDir, startNode, type StartedNode } from '../src/testing/node-process.js';

const args = process.argv.slice(2);
const arg = (name: string, fallback: number) => {
  const i = args.indexOf(name);
  return i === -1 ? fallback : Number(args[i + 1]);
};
const large = arg('--large', 300);
const sizeBytes = arg('--size', 1_000_000);
const concurrent = arg('--concurrent', 3);
const rounds = arg('--rounds', 2);
const POLL_MS = 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const seqnoOf = (txId: string) => Number(txId.split('.')[1]);

async function write(node: StartedNode, id: number, msg: string): Promise<string> {
  const answer = await node.client.request('POST', '/app/log/public', { body: { id, msg }, identity: node.user, timeoutMs: 60_000 });
  if (answer.status !== 200) throw new Error(`write ${id}: ${answer.status} ${JSON.stringify(answer.body)}`);
  return answer.headers['x-covenant-transaction-id'] as string;
}

async function round(node: StartedNode, txIds: readonly string[]): Promise<void> {
  let polling = true;
  let lastAnswerMs = performance.now();
  let gapMaxMs = 0;
  let answers = 0;
  const poller = (async () => {
    while (polling) {
      const sent = performance.now();
      const answer = await node.client.request('GET', '/node/commit', { timeoutMs: 30_000 }).catch(() => undefined);
      const now = performance.now();
      if (answer?.status === 200) {
        gapMaxMs = Math.max(gapMaxMs, now - lastAnswerMs);
        lastAnswerMs = now;
        answers++;
      }
      await sleep(Math.max(0, POLL_MS - (now - sent)));
    }
  })();
  await sleep(200);
  const started = performance.now();
  const statuses = await Promise.all(
    txIds.map(async (txId) => {
      const answer = await node.client.request('GET', `/node/receipt?transaction_id=${txId}`, { timeoutMs: 60_000 });
      return `${answer.status}${answer.status === 200 ? '' : ` ${JSON.stringify(answer.body)}`} after ${Math.round(performance.now() - started)} ms`;
    }),
  );
  await sleep(200);
  polling = false;
  await poller;
  console.log(`  receipts: ${statuses.join('; ')}`);
  console.log(`  GET /node/commit: ${answers} answers, longest gap ${Math.round(gapMaxMs)} ms`);
}

const node = await startNode({
  configPatch: {
    rpc_interfaces: { primary: { max_body_size: `${Math.ceil((sizeBytes + 1024) / 1024)}KB` } },
    ledger_signatures: { tx_count: 100, delay: '100ms' },
  },
});
try {
  const msg = 'x'.repeat(sizeBytes);
  const largeTxIds: string[] = [];
  for (let i = 0; i < large; i++) largeTxIds.push(await write(node, i, msg));
  // Small writes until the first block is complete and behind the commit (it is then compacted).
  let last = largeTxIds.at(-1)!;
  for (let i = 0; seqnoOf(last) < 1100; i++) {
    const batch = await Promise.all(Array.from({ length: 16 }, (_, k) => write(node, 100_000 + i * 16 + k, 'small')));
    for (const txId of batch) if (seqnoOf(txId) > seqnoOf(last)) last = txId;
  }
  for (;;) {
    const status = await node.client.request('GET', `/app/tx?transaction_id=${last}`);
    if (status.body.status === 'Committed') break;
    await sleep(50);
  }
  console.log(`${large} writes of ${sizeBytes} bytes, then small ones up to seqno ${seqnoOf(last)}`);
  const picked = Array.from({ length: concurrent }, (_, i) => largeTxIds[Math.floor(((i + 1) * large) / (concurrent + 1))]!);
  for (let r = 1; r <= rounds; r++) {
    console.log(`round ${r}: ${concurrent} concurrent receipts of ${picked.join(', ')}`);
    await round(node, picked);
  }
} finally {
  await node.stop();
  removeDir(node.dir);
}
