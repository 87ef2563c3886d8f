/**
 * The floor of `npm run bench`: a node:https server that does, per write, only what any ledger of
 * Covenant's design must do whatever its implementation, with Covenant's own parts:
 *
 * - parse and check the JSON body, and encode the write (one key, one value) as a write set;
 * - seal its entry on the sealing worker (AES-GCM of the private write set, commit evidence, the
 *   frame, the Merkle leaf: `WorkerEntrySealer`, as a primary does);
 * - add the leaf to the Merkle tree and append the entry to a file (one `writev` per batch);
 * - answer at the end of the event-loop turn with a transaction id.
 *
 * No store, routing, authentication, consensus, signatures, snapshots or commit: a node's cost
 * beyond this server's is the cost of those. Same TLS options as the bare server (reference-server.ts).
 *
 *   node dist/bench/floor-server.js <key.pem> <cert.pem> <entries file>
 */
import type { ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { ftruncateSync, openSync, writevSync } from 'node:fs';
import { utf8 } from '../src/base/bytes.js';
import { encodeWriteSet, type Write } from '../src/kv/write-set.js';
import { HistoryTree, NO_CLAIMS_DIGEST } from '../src/merkle/index.js';
import type { SealJob } from '../src/ledger/index.js';
import { WorkerEntrySealer } from '../src/platform/worker-sealer.js';
import { ownArguments, serveReference } from './reference-server.js';

const fd = openSync(ownArguments()[0]!, 'w');
const tree = new HistoryTree();
/** The file starts over past this size, so that a long benchmark does not fill the disk. */
const FILE_BYTES_MAX = 256 * 1024 * 1024;
let position = 0;
let unwritten: Uint8Array[] = [];
let writeScheduled = false;
const writeEntries = (): void => {
  writeScheduled = false;
  const entries = unwritten;
  unwritten = [];
  if (entries.length === 0) return;
  if (position > FILE_BYTES_MAX) {
    ftruncateSync(fd, 0);
    position = 0;
  }
  position += writevSync(fd, entries, position);
};
const sealer = new WorkerEntrySealer<SealJob>(
  randomBytes(32),
  (_job, sealed) => {
    tree.append(sealed.leaf);
    unwritten.push(sealed.bytes);
    if (!writeScheduled) {
      writeScheduled = true;
      setImmediate(writeEntries);
    }
  },
  {
    onFailure: (e) => {
      process.stderr.write(`floor server: the sealing worker failed: ${e.message}\n`);
      process.exit(1);
    },
  },
);

const VIEW = 2;
let seqno = 0;
let held: [ServerResponse, string][] = [];
const answerHeld = (): void => {
  const answers = held;
  held = [];
  for (const [res, txId] of answers) {
    res.writeHead(200, ['x-covenant-transaction-id', txId, 'content-type', 'application/json', 'content-length', '2']);
    res.end('{}');
  }
};
const refuse = (res: ServerResponse): void => {
  res.writeHead(400, ['content-type', 'application/json', 'content-length', '2']);
  res.end('{}');
};

serveReference((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    let body: { id?: unknown; msg?: unknown };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
    } catch {
      refuse(res);
      return;
    }
    if (!Number.isSafeInteger(body.id) || typeof body.msg !== 'string') {
      refuse(res);
      return;
    }
    const writes = new Map<string, ReadonlyMap<string, Write>>([['records', new Map([[String(body.id), utf8.encode(JSON.stringify({ msg: body.msg }))]])]]);
    const encoded = encodeWriteSet(writes);
    seqno++;
    sealer.submit({ view: VIEW, seqno, flags: 0, claimsDigest: NO_CLAIMS_DIGEST, publicBytes: encoded.publicBytes, privatePlain: encoded.privateBytes });
    held.push([res, `${VIEW}.${seqno}`]);
    if (held.length === 1) setImmediate(answerHeld);
  });
});
