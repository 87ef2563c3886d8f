/**
 * Shared by the download and ledger-tool end-to-end tests: raw HTTPS requests that keep the
 * body as bytes, and writes that wait until the node has committed chunks on disk.
 */
import https from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { StartedNode } from '../../src/testing/node-process.js';

export interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One request on a fresh connection; the path is sent exactly as given (no normalisation). */
export function rawRequest(node: Pick<StartedNode, 'address' | 'serviceCertificatePem'>, method: string, path: string, headers: Record<string, string> = {}): Promise<RawAnswer> {
  const i = node.address.lastIndexOf(':');
  return new Promise((resolve, reject) => {
    const req = https.request(
      { host: node.address.slice(0, i), port: Number(node.address.slice(i + 1)), method, path, headers, ca: node.serviceCertificatePem, agent: false, timeout: 10_000 },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`${method} ${path} timed out`)));
    req.end();
  });
}

export function committedChunkNames(node: Pick<StartedNode, 'dir'>): string[] {
  return readdirSync(join(node.dir, 'ledger'))
    .filter((f) => f.endsWith('.committed'))
    .sort((a, b) => Number(/^ledger_(\d+)/.exec(a)![1]) - Number(/^ledger_(\d+)/.exec(b)![1]));
}

/**
 * Writes `count` log messages, then waits until the last is committed and at least
 * `committedChunksMin` committed chunk files exist (the rename follows the commit).
 */
export async function writeUntilCommittedChunks(node: StartedNode, count: number, committedChunksMin: number): Promise<string[]> {
  let last = '';
  for (let i = 0; i < count; i++) {
    const answer = await node.client.request('POST', i % 2 ? '/app/log/public' : '/app/log/private', {
      body: { id: i, msg: `message ${i} ${'x'.repeat(60)}` },
      identity: node.user,
    });
    if (answer.status !== 200) throw new Error(`write ${i} failed: ${answer.status} ${answer.text}`);
    last = answer.headers['x-covenant-transaction-id'] as string;
  }
  for (let attempt = 0; ; attempt++) {
    const status = await node.client.request('GET', `/app/tx?transaction_id=${last}`);
    const names = committedChunkNames(node);
    if (status.body.status === 'Committed' && names.length >= committedChunksMin) return names;
    if (attempt > 500) throw new Error(`no ${committedChunksMin} committed chunks: ${names.join(', ')}`);
    await sleep(20);
  }
}
