/**
 * Offline ledger and snapshot tools: `covenant ledger verify`, `covenant ledger download` and
 * `covenant snapshot inspect`. Each returns an exit code and prints through the given writers, so
 * tests and the command line share one code path.
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import { basename, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import cliProgress from 'cli-progress';
import { parseDictionary } from 'structured-headers';
import { errorMessage } from '../base/errors.js';
import { createHasher, sha256 } from '../crypto/index.js';
import { verifyLedger, type VerifyReport } from '../audit/verify-ledger.js';
import { bytesCodec, readSnapshotHeader, SNAPSHOT_HEADER_BYTES, Store } from '../kv/index.js';
import { parseChunkName, parseSnapshotFile } from '../ledger/index.js';
import { FsDisk } from '../platform/fs-disk.js';

export interface Output {
  readonly out: (line: string) => void;
  readonly err: (line: string) => void;
  /** Show a progress bar (a TTY). */
  readonly progress?: boolean;
}

export const consoleOutput = (): Output => ({
  out: (line) => process.stdout.write(line + '\n'),
  err: (line) => process.stderr.write(line + '\n'),
  progress: process.stderr.isTTY === true,
});

/** Below this, verification is over before a bar would be worth drawing. */
const PROGRESS_BAR_BYTES_MIN = 32 * 1024 * 1024;

function megabytes(bytes: number): string {
  return (bytes / 1024 / 1024).toFixed(bytes < 1024 * 1024 ? 3 : 1);
}

// ---- covenant ledger verify ----

export interface LedgerVerifyArgs {
  readonly directories: readonly string[];
  readonly serviceCertificateFile?: string;
  readonly snapshotFile?: string;
}

export function runLedgerVerify(args: LedgerVerifyArgs, output: Output): number {
  const serviceCertificatePem = args.serviceCertificateFile === undefined ? undefined : readFileSync(args.serviceCertificateFile, 'utf8');
  const snapshot = args.snapshotFile === undefined ? undefined : { name: args.snapshotFile, bytes: readFileSync(args.snapshotFile) };
  let bar: cliProgress.SingleBar | undefined;
  const start = performance.now();
  const report: VerifyReport = verifyLedger(new FsDisk(), args.directories, {
    ...(serviceCertificatePem !== undefined ? { serviceCertificatePem } : {}),
    ...(snapshot !== undefined ? { snapshot } : {}),
    onProgress: ({ bytesDone, bytesTotal, entries }) => {
      if (bar === undefined && output.progress === true && bytesTotal >= PROGRESS_BAR_BYTES_MIN) {
        bar = new cliProgress.SingleBar(
          { format: 'verifying [{bar}] {percentage}% | {value}/{total} MB | {entries} tx | eta {eta}s', stream: process.stderr },
          cliProgress.Presets.shades_classic,
        );
        bar.start(Math.ceil(bytesTotal / 1024 / 1024), 0, { entries: 0 });
      }
      bar?.update(Math.floor(bytesDone / 1024 / 1024), { entries });
    },
  });
  bar?.stop();
  const seconds = (performance.now() - start) / 1000;

  for (const file of report.files) output.out(`ok ${file.file}: seqnos ${file.first}-${file.last} (${file.sizeBytes} bytes)`);
  if (!report.rootsChecked) output.out('note: the ledger starts after the snapshot, so Merkle roots cannot be rebuilt; signatures were verified');
  const range = report.firstSeqno === undefined ? 'no entries' : `seqnos ${report.firstSeqno}-${report.lastSeqno}`;
  const speed = `${megabytes(report.bytes)} MB in ${seconds.toFixed(2)} s: ${(report.bytes / 1024 / 1024 / Math.max(seconds, 1e-6)).toFixed(1)} MB/s, ${Math.round(report.entries / Math.max(seconds, 1e-6))} transactions/s`;
  if (report.problem !== undefined) {
    const p = report.problem;
    output.err(`FAILED (${p.code}): ${p.message}`);
    if (p.file !== undefined) output.err(`  file: ${p.file}${p.offsetBytes !== undefined ? `, offset ${p.offsetBytes}` : ''}${p.seqno !== undefined ? `, seqno ${p.seqno}` : ''}`);
    output.err(report.entries === 0 ? `nothing was verified before the problem; ${speed}` : `verified before the problem: ${report.entries} entries (${range}), ${report.signatures} signatures; ${speed}`);
    return 1;
  }
  if (report.entries === 0) {
    output.err(`FAILED: no ledger entries in ${args.directories.join(', ')}`);
    return 1;
  }
  const unsigned = report.lastSeqno! - (report.lastSignedSeqno ?? (report.firstSeqno! - 1));
  output.out(
    `verified ${report.entries} entries (${range}) in ${report.files.length} files, ${report.signatures} signatures, last signed seqno ${report.lastSignedSeqno ?? 'none'}` +
      (unsigned > 0 ? ` (${unsigned} later entries are not covered by a signature yet)` : ''),
  );
  if (report.recoveries.length > 0) {
    output.out(
      `the ledger spans ${report.recoveries.length + 1} service identities: recovered services began at seqnos ${report.recoveries.join(', ')}` +
        (args.serviceCertificateFile !== undefined ? '; earlier identities are trusted through the endorsements recorded there' : ''),
    );
  }
  output.out(speed);
  return 0;
}

// ---- covenant ledger download ----

export interface LedgerDownloadArgs {
  /** host:port of any node. */
  readonly from: string;
  readonly since: number;
  readonly to: string;
  readonly caFile: string;
}

const REDIRECTS_MAX = 10;
const COMMITTED_CHUNK_NAME = /^ledger_[1-9]\d*-[1-9]\d*\.committed$/;

interface Fetched {
  readonly response: IncomingMessage;
  readonly url: URL;
}

function get(url: URL, ca: string, headers: Record<string, string>): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { ca, headers, timeout: 30_000 }, resolve);
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error(`GET ${url.href} timed out`)));
  });
}

/** GET following 30x answers (relative or absolute Location), at most REDIRECTS_MAX of them. */
async function getFollowing(start: URL, ca: string, headers: Record<string, string>): Promise<Fetched> {
  let url = start;
  for (let hop = 0; hop <= REDIRECTS_MAX; hop++) {
    const response = await get(url, ca, headers);
    const status = response.statusCode ?? 0;
    if (status < 300 || status >= 400 || status === 304) return { response, url };
    response.resume();
    const location = response.headers.location;
    if (location === undefined) throw new Error(`${url.href} answered ${status} without a Location`);
    url = new URL(location, url);
    if (url.protocol !== 'https:') throw new Error(`refusing to follow a redirect to ${url.href}`);
  }
  throw new Error(`more than ${REDIRECTS_MAX} redirects from ${start.href}`);
}

async function readText(response: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const c of response) chunks.push(c as Buffer);
  return Buffer.concat(chunks).toString('utf8').slice(0, 500);
}

/** The sha-256 member of a Repr-Digest dictionary. */
function reprDigestSha256(header: string | string[] | undefined): Uint8Array | undefined {
  if (typeof header !== 'string') return undefined;
  try {
    const member = parseDictionary(header).get('sha-256');
    const value = member?.[0];
    return value instanceof ArrayBuffer ? new Uint8Array(value) : undefined;
  } catch (e) {
    if (e instanceof Error) return undefined;
    throw e;
  }
}

/**
 * Streams a chunk into a temporary file while hashing it, checks the digest against Repr-Digest,
 * then fsyncs and renames: a chunk appears under its name only whole and verified.
 */
async function saveVerified(response: IncomingMessage, directory: string, name: string): Promise<number> {
  const expected = reprDigestSha256(response.headers['repr-digest']);
  if (expected === undefined) throw new Error(`${name}: the answer carries no sha-256 Repr-Digest`);
  const temporary = join(directory, `.${name}.download`);
  const fd = openSync(temporary, 'w');
  const hasher = createHasher('sha-256');
  let sizeBytes = 0;
  try {
    for await (const c of response) {
      const data = c as Buffer;
      hasher.update(data);
      for (let off = 0; off < data.length; ) off += writeSync(fd, data, off);
      sizeBytes += data.length;
    }
    fsyncSync(fd);
  } catch (e) {
    closeSync(fd);
    rmSync(temporary, { force: true });
    throw e;
  }
  closeSync(fd);
  const actual = hasher.digest();
  if (Buffer.compare(Buffer.from(actual), Buffer.from(expected)) !== 0) {
    rmSync(temporary, { force: true });
    throw new Error(`${name}: downloaded bytes do not match the Repr-Digest (sha-256 ${Buffer.from(actual).toString('base64')} against ${Buffer.from(expected).toString('base64')})`);
  }
  renameSync(temporary, join(directory, name));
  const dirFd = openSync(directory, 'r');
  try {
    fsyncSync(dirFd);
  } finally {
    closeSync(dirFd);
  }
  return sizeBytes;
}

export async function runLedgerDownload(args: LedgerDownloadArgs, output: Output): Promise<number> {
  let since = args.since;
  let chunks = 0;
  let bytes = 0;
  const start = performance.now();
  try {
    const ca = readFileSync(args.caFile, 'utf8');
    mkdirSync(args.to, { recursive: true });
    for (let round = 0; ; round++) {
      const { response, url } = await getFollowing(new URL(`https://${args.from}/node/ledger_chunk?since=${since}`), ca, { 'want-repr-digest': 'sha-256=1' });
      const status = response.statusCode ?? 0;
      if (status === 404 && round > 0) {
        response.resume();
        break;
      }
      if (status !== 200) throw new Error(`GET ${url.href} answered ${status}: ${await readText(response)}`);
      const name = decodeURIComponent(url.pathname.slice(url.pathname.lastIndexOf('/') + 1));
      const header = response.headers['x-covenant-ledger-chunk-name'];
      if (!COMMITTED_CHUNK_NAME.test(name) || header !== name) {
        response.resume();
        throw new Error(`${url.href} is not a committed chunk (name header ${JSON.stringify(header)})`);
      }
      const parsed = parseChunkName(name);
      if (parsed.first > since || parsed.last! < since) {
        response.resume();
        throw new Error(`asked for seqno ${since}, got ${name}`);
      }
      const existing = join(args.to, name);
      if (existsSync(existing)) {
        // Committed chunks are immutable: a different local copy is damage, never an update.
        const expected = reprDigestSha256(response.headers['repr-digest']);
        const local = sha256(readFileSync(existing));
        response.resume();
        if (expected === undefined || Buffer.compare(Buffer.from(local), Buffer.from(expected)) !== 0) {
          throw new Error(`${existing} exists and differs from the node's ${name}`);
        }
        output.out(`kept ${name} (identical local copy)`);
      } else {
        const size = await saveVerified(response, args.to, name);
        bytes += size;
        chunks++;
        output.out(`downloaded ${name} (${size} bytes) from ${url.host}`);
      }
      since = parsed.last! + 1;
    }
  } catch (e) {
    output.err(`covenant ledger download: ${errorMessage(e)}`);
    return 1;
  }
  const seconds = (performance.now() - start) / 1000;
  if (chunks === 0 && since === args.since) {
    output.err(`covenant ledger download: no committed chunk holds seqno ${args.since}`);
    return 1;
  }
  output.out(`${chunks} chunks, ${megabytes(bytes)} MB in ${seconds.toFixed(2)} s; committed chunks end at seqno ${since - 1}`);
  return 0;
}

// ---- covenant snapshot inspect ----

export function runSnapshotInspect(file: string, output: Output): number {
  const fileBytes = readFileSync(file);
  output.out(`file: ${basename(file)} (${fileBytes.length} bytes)`);
  // A node's snapshot file (docs/snapshots.md) wraps the store snapshot; a bare one is shown as is.
  let bytes: Uint8Array = fileBytes;
  let evidence = sha256(fileBytes);
  if (fileBytes.subarray(0, 4).toString('latin1') === 'CVSF') {
    try {
      const parts = parseSnapshotFile(fileBytes);
      bytes = parts.kv;
      evidence = parts.digest;
      output.out(`snapshot file: seqno ${parts.meta.seqno}, view ${parts.meta.view}, receipt ${parts.receipt === undefined ? 'absent (uncommitted)' : 'present'}`);
    } catch (e) {
      output.err(`not a readable snapshot: ${errorMessage(e)}`);
      return 1;
    }
  }
  try {
    const header = readSnapshotHeader(bytes);
    output.out(`format: ${header.format}`);
    output.out(`seqno: ${header.seqno}`);
    output.out(`view: ${header.view}`);
    output.out(`body sha-256 (header): ${Buffer.from(header.bodyDigest).toString('hex')}`);
    output.out(`body bytes: ${bytes.length - SNAPSHOT_HEADER_BYTES}`);
  } catch (e) {
    output.err(`not a readable snapshot: ${errorMessage(e)}`);
    return 1;
  }
  output.out(`file sha-256 (snapshot evidence): ${Buffer.from(evidence).toString('hex')}`);
  try {
    const view = Store.fromSnapshot(bytes).current();
    const names = view.mapNames();
    output.out(`public maps (${names.length}):`);
    // Every map, whatever it holds: counted as bytes, no declaration applies.
    for (const name of names) output.out(`  ${name}: ${view.map(name, bytesCodec).size} keys`);
    output.out('private maps: encrypted (not shown)');
  } catch (e) {
    output.err(`body does not decode: ${errorMessage(e)}`);
    return 1;
  }
  return 0;
}
