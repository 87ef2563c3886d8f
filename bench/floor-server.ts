/**
 * The floor of `npm run bench`: a node:https server that does, per write, only what any ledger of
 * Covenant's design must do whatever its implementation, with Covenant's own parts:
 *
 * - parse and check the JSON body, and encode the write (one key, one value) as a write set;
 * - frame its entry on the framing worker (AES-GCM of the private write set, commit evidence, the
 *   frame, the Merkle leaf: `WorkerEntryFramer`, as a primary does);
 * - add the leaf to the Merkle tree and append the entry to a file (one `writev` per batch);
 * - answer at the end of the event-loop turn with a transaction id.
 *
 * No store, routing, authentication, consensus, signatures, snapshots or commit: a node's cost
 * beyond this server's is the cost of those. Same TLS options as the bare server (reference-server.ts).
 *
 * Given the ports of floor backups (floor-backup.ts), it also sends each batch it appends, as one
 * node-to-node frame over TLS, to every backup, each entry preceded by its private write set in
 * clear (as a primary sends it beside the entry), and reads their acknowledgements: the floor
 * of a replicated network. Then `GET` answers `{"seqno", "replicated"}`: the newest seqno, and the
 * newest held by a majority (this server and enough backups).
 *
 *   node dist/bench/floor-server.js <key.pem> <cert.pem> <entries file> [<ledger secret, hex> [<backup port> ...]]
 */
import type { ServerResponse } from 'node:http';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import tls from 'node:tls';
import { utf8 } from '../src/base/bytes.js';
import { encodeWriteSet, type Write } from '../src/kv/write-set.js';
import { HistoryTree, NO_CLAIMS_DIGEST } from '../src/merkle/index.js';
import type { FrameJob } from '../src/ledger/index.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../src/node/channels.js';
import { encodeFrame, FrameDecoder } from '../src/platform/node-channels.js';
import { WorkerEntryFramer } from '../src/platform/worker-framer.js';
import { EntriesFile, FLOOR_FRAME_KIND } from './floor-file.js';
import { ownArguments, serveReference } from './reference-server.js';

const [entriesFile, secretHex, ...backupPorts] = ownArguments();
const file = new EntriesFile(entriesFile!);
const tree = new HistoryTree();

/** The backups' connections and the newest seqno each acknowledged. */
const backups = await Promise.all(
  backupPorts.map(
    (port) =>
      new Promise<{ socket: tls.TLSSocket; acked: number }>((resolve, reject) => {
        const [keyFile, certFile] = process.argv.slice(2);
        const socket = tls.connect({ host: '127.0.0.1', port: Number(port), key: readFileSync(keyFile!), cert: readFileSync(certFile!), rejectUnauthorized: false, minVersion: 'TLSv1.3' });
        const backup = { socket, acked: 0 };
        socket.setNoDelay(true);
        socket.once('secureConnect', () => resolve(backup));
        socket.on('error', (e) => {
          // Without its backups the floor of three processes cannot be measured.
          process.stderr.write(`floor server: backup on port ${port}: ${e.message}\n`);
          reject(e);
          process.exit(1);
        });
        const decoder = new FrameDecoder(DEFAULT_MAX_FRAME_BYTES);
        socket.on('data', (chunk: Buffer) => {
          const error = decoder.push(chunk, (_kind, ack) => (backup.acked = ack.readDoubleLE(0)));
          if (error !== undefined) socket.destroy(error);
        });
      }),
  ),
);

/** The newest seqno held by a majority of the three (or more) processes. */
function replicatedSeqno(): number {
  if (backups.length === 0) return seqno;
  const acked = backups.map((b) => b.acked).sort((a, b) => b - a);
  // This server plus floor((n + 1) / 2) backups make a majority of n + 1.
  return acked[Math.floor((backups.length + 1) / 2) - 1]!;
}

let unwritten: Uint8Array[] = [];
/** Per unwritten entry, for the backups: the length of its private write set, that write set, the frame. */
let unsent: Uint8Array[] = [];
let writeScheduled = false;
const writeEntries = (): void => {
  writeScheduled = false;
  const entries = unwritten;
  const parts = unsent;
  unwritten = [];
  unsent = [];
  if (entries.length === 0) return;
  file.append(entries);
  if (backups.length === 0) return;
  const message = encodeFrame(FLOOR_FRAME_KIND, Buffer.concat(parts));
  for (const backup of backups) backup.socket.write(message);
};
const framer = new WorkerEntryFramer<FrameJob>(
  secretHex === undefined ? randomBytes(32) : Buffer.from(secretHex, 'hex'),
  (job, framed) => {
    tree.append(framed.leaf);
    unwritten.push(framed.bytes);
    if (backups.length > 0) {
      const length = Buffer.allocUnsafe(4);
      length.writeUInt32LE(job.privatePlain.byteLength, 0);
      unsent.push(length, job.privatePlain, framed.bytes);
    }
    if (!writeScheduled) {
      writeScheduled = true;
      setImmediate(writeEntries);
    }
  },
  {
    onFailure: (e) => {
      process.stderr.write(`floor server: the framing worker failed: ${e.message}\n`);
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
  if (req.method === 'GET') {
    const text = JSON.stringify({ seqno, replicated: replicatedSeqno() });
    res.writeHead(200, ['content-type', 'application/json', 'content-length', Buffer.byteLength(text)]);
    res.end(text);
    return;
  }
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
    framer.submit({ view: VIEW, seqno, flags: 0, claimsDigest: NO_CLAIMS_DIGEST, publicBytes: encoded.publicBytes, privatePlain: encoded.privateBytes });
    held.push([res, `${VIEW}.${seqno}`]);
    if (held.length === 1) setImmediate(answerHeld);
  });
});
