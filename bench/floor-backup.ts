/**
 * A backup of the floor (floor-server.ts started with backups): does, per replicated entry, only
 * what any backup of Covenant's design must do whatever its implementation, with Covenant's own
 * parts:
 *
 * - read the entries the primary sends over mutual TLS (one node-to-node frame per batch), each
 *   preceded by its private write set in clear (as a primary sends it beside the entry: a node's
 *   backup applies that copy instead of decrypting the entry's, docs/ledger.md "Replication");
 * - check each frame (crc included), decode both write sets (the private one from that copy, or
 *   decrypted when there is none) and apply them to an in-memory state;
 * - add the entry's Merkle leaf to the tree, append the batch to a file (one `writev`);
 * - acknowledge the batch (its last seqno) to the primary.
 *
 * No consensus, store versions, signatures, snapshots or commit. Same TLS settings as a node's
 * node-to-node channel (TLS 1.3, a certificate on both sides).
 *
 *   node dist/bench/floor-backup.js <key.pem> <cert.pem> <entries file> <ledger secret, hex>
 */
import tls from 'node:tls';
import { readFileSync } from 'node:fs';
import { LedgerEncryptor } from '../src/kv/encryption.js';
import { decodeWriteSetParts, type Write } from '../src/kv/write-set.js';
import { decodeEntry, peekFrameSizeBytes } from '../src/ledger/entry.js';
import { entryLeaf } from '../src/ledger/framing.js';
import { HistoryTree } from '../src/merkle/index.js';
import { DEFAULT_MAX_FRAME_BYTES } from '../src/node/channels.js';
import { encodeFrame, FrameDecoder } from '../src/platform/node-channels.js';
import { EntriesFile, FLOOR_FRAME_KIND } from './floor-file.js';

const [keyFile, certFile, entriesFile, secretHex] = process.argv.slice(2);
const file = new EntriesFile(entriesFile!);
const encryptor = new LedgerEncryptor(Buffer.from(secretHex!, 'hex'));
const tree = new HistoryTree();
const state = new Map<string, Map<string, Write>>();

/** Applies the entries of one batch and appends them to the file; returns the last seqno. */
function applyBatch(batch: Uint8Array): number {
  const frames: Uint8Array[] = [];
  let seqno = 0;
  const view = new DataView(batch.buffer, batch.byteOffset, batch.byteLength);
  for (let offset = 0; offset < batch.byteLength; ) {
    const plainLength = view.getUint32(offset, true);
    const plain = batch.slice(offset + 4, offset + 4 + plainLength);
    offset += 4 + plainLength;
    const entry = decodeEntry(batch, offset);
    const privatePlain = plainLength > 0 || entry.privateBytes.byteLength === 0 ? plain : encryptor.decryptPrivate(entry.view, entry.seqno, entry.privateBytes);
    const writes = decodeWriteSetParts(entry.publicBytes, privatePlain);
    for (const [name, map] of writes) {
      let table = state.get(name);
      if (table === undefined) state.set(name, (table = new Map()));
      for (const [key, value] of map) {
        if (value === null) table.delete(key);
        else table.set(key, value);
      }
    }
    tree.append(entryLeaf(entry));
    frames.push(entry.frameBytes);
    seqno = entry.seqno;
    offset += peekFrameSizeBytes(batch, offset);
  }
  file.append(frames);
  return seqno;
}

const server = tls.createServer(
  { key: readFileSync(keyFile!), cert: readFileSync(certFile!), requestCert: true, rejectUnauthorized: false, minVersion: 'TLSv1.3' },
  (socket) => {
    socket.setNoDelay(true);
    const decoder = new FrameDecoder(DEFAULT_MAX_FRAME_BYTES);
    socket.on('data', (chunk: Buffer) => {
      let acked = 0;
      const error = decoder.push(chunk, (_kind, batch) => (acked = applyBatch(batch)));
      if (error !== undefined) {
        process.stderr.write(`floor backup: ${error.message}\n`);
        process.exit(1);
      }
      if (acked > 0) {
        const ack = Buffer.allocUnsafe(8);
        ack.writeDoubleLE(acked, 0);
        socket.write(encodeFrame(FLOOR_FRAME_KIND, ack));
      }
    });
    socket.on('error', () => socket.destroy());
  },
);
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as { port: number }).port}\n`));
process.on('SIGTERM', () => process.exit(0));
