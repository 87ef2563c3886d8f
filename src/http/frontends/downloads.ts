/**
 * Ledger chunk and snapshot downloads (spec endpoint rules 1-7) and snapshot requests (rule 10).
 * Each family exists only on interfaces whose enabled_operator_features list its feature.
 *
 * Only committed files are served, found by name in the configured directories (the writable
 * one first, then the read-only ones operators move committed files to). Names are matched
 * against the spec's exact shapes before any path is built, so no request can name another file.
 */
import { readdir, readFile, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { CovenantError } from '../../base/errors.js';
import { parseChunkName } from '../../ledger/index.js';
import { httpErrors } from '../errors.js';
import { FileDigestCache, serveImmutableFile } from '../file-download.js';
import type { NodeConfig } from '../../config/index.js';
import { integerQuery, noContent, type RequestContext, type Route, type RouteResponse } from '../route.js';


/** The chunk name header of rule 3 (`vendor-service` is `covenant`). */
export const LEDGER_CHUNK_NAME_HEADER = 'x-covenant-ledger-chunk-name';
export const SNAPSHOT_NAME_HEADER = 'x-covenant-snapshot-name';

export interface DownloadDeps {
  /** Where committed chunks may be: ledger.directory, then ledger.read_only_directories. */
  readonly ledgerDirectories: readonly string[];
  /** snapshots.directory, then snapshots.read_only_directory. */
  readonly snapshotDirectories: readonly string[];
  /**
   * `https://<primary address>` when this node is not the primary, so a missing file is asked
   * there: on the primary's interface named like the one the request came in on.
   */
  readonly redirectBase: (interfaceName: string) => string | undefined;
  /** Digests of served files; a fresh bounded cache by default. */
  readonly digestCache?: FileDigestCache;
  /** Asks for a snapshot at the next signature (POST /node/snapshot:create, forwarded to the primary). */
  readonly requestSnapshot?: () => void;
  /**
   * Whether the committed snapshot at `path` may be served: undefined when it verifies against the
   * service certificate, otherwise why not. Without it every committed snapshot is served.
   */
  readonly snapshotVerdict?: (path: string, name: string) => Promise<string | undefined>;
}

function notImplemented(what: string): never {
  throw httpErrors.notImplemented(what);
}

const COMMITTED_CHUNK_NAME = /^ledger_[1-9]\d{0,15}-[1-9]\d{0,15}\.committed$/;
const COMMITTED_SNAPSHOT_NAME = /^snapshot_(0|[1-9]\d{0,15})_(0|[1-9]\d{0,15})\.committed$/;

interface CommittedChunk {
  readonly name: string;
  readonly first: number;
  readonly last: number;
}

interface CommittedSnapshot {
  readonly name: string;
  readonly seqno: number;
  readonly evidenceSeqno: number;
}

export function parseCommittedChunkName(name: string): CommittedChunk | undefined {
  if (!COMMITTED_CHUNK_NAME.test(name)) return undefined;
  try {
    const parsed = parseChunkName(name);
    return { name, first: parsed.first, last: parsed.last! };
  } catch (e) {
    // parseChunkName refuses what the pattern lets through (last before first, too large).
    if (e instanceof CovenantError) return undefined;
    throw e;
  }
}

export function parseCommittedSnapshotName(name: string): CommittedSnapshot | undefined {
  const m = COMMITTED_SNAPSHOT_NAME.exec(name);
  if (!m) return undefined;
  const seqno = Number(m[1]);
  const evidenceSeqno = Number(m[2]);
  if (!Number.isSafeInteger(seqno) || !Number.isSafeInteger(evidenceSeqno) || evidenceSeqno < seqno) return undefined;
  return { name, seqno, evidenceSeqno };
}

async function listNames(directories: readonly string[]): Promise<string[]> {
  const names: string[] = [];
  for (const directory of directories) {
    try {
      names.push(...(await readdir(directory)));
    } catch (e) {
      // A directory that does not exist yet (no snapshot taken, no read-only copy) holds nothing.
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
  return names;
}

/** The deps of a node: directories from its configuration, the primary from its view of the network. */
export function downloadDepsOf(
  config: Pick<NodeConfig, 'ledger' | 'snapshots'>,
  node: {
    isPrimary(): boolean;
    primaryAddress(interfaceName?: string): string | undefined;
    requestSnapshot?(): void;
    servedSnapshotVerdict?(path: string, name: string, stamp: { sizeBytes: number; modifiedMs: number }, read: () => Promise<Uint8Array>): Promise<string | undefined>;
  },
): DownloadDeps {
  const snapshotsReadOnly = config.snapshots.read_only_directory;
  return {
    ledgerDirectories: [config.ledger.directory, ...config.ledger.read_only_directories],
    snapshotDirectories: snapshotsReadOnly === undefined ? [config.snapshots.directory] : [config.snapshots.directory, snapshotsReadOnly],
    redirectBase: (interfaceName) => {
      if (node.isPrimary()) return undefined;
      const address = node.primaryAddress(interfaceName);
      return address === undefined ? undefined : `https://${address}`;
    },
    ...(node.requestSnapshot ? { requestSnapshot: () => node.requestSnapshot!() } : {}),
    ...(node.servedSnapshotVerdict
      ? {
          snapshotVerdict: async (path: string, name: string) => {
            const info = await stat(path);
            return node.servedSnapshotVerdict!(path, name, { sizeBytes: info.size, modifiedMs: info.mtimeMs }, async () => new Uint8Array(await readFile(path)));
          },
        }
      : {}),
  };
}

/** Where the committed snapshot `name` is (the writable directory first), or undefined. */
async function snapshotPath(directories: readonly string[], name: string): Promise<string | undefined> {
  for (const directory of directories) {
    const path = join(directory, name);
    try {
      if ((await stat(path)).isFile()) return path;
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    }
  }
  return undefined;
}

/**
 * The committed snapshots in `directories` newer than `since`, newest first, that verify (the
 * corrupt ones are skipped, logged by the verdict).
 */
async function newestServableSnapshot(deps: DownloadDeps, since: number | undefined): Promise<CommittedSnapshot | undefined> {
  const candidates: CommittedSnapshot[] = [];
  for (const name of new Set(await listNames(deps.snapshotDirectories))) {
    const snapshot = parseCommittedSnapshotName(name);
    if (snapshot !== undefined && (since === undefined || snapshot.seqno > since)) candidates.push(snapshot);
  }
  candidates.sort((a, b) => b.seqno - a.seqno || b.evidenceSeqno - a.evidenceSeqno);
  for (const candidate of candidates) {
    if (deps.snapshotVerdict === undefined) return candidate;
    const path = await snapshotPath(deps.snapshotDirectories, candidate.name);
    if (path !== undefined && (await deps.snapshotVerdict(path, candidate.name)) === undefined) return candidate;
  }
  return undefined;
}

function redirect(location: string): RouteResponse {
  return { status: 308, headers: { location, 'content-length': 0 }, bodyKind: 'none' };
}

function notFound(code: string, message: string): never {
  throw new CovenantError(code, message, 404);
}

async function serveNamed(
  ctx: RequestContext,
  directories: readonly string[],
  name: string,
  nameHeader: string,
  cache: FileDigestCache,
): Promise<RouteResponse | undefined> {
  for (const directory of directories) {
    const answer = await serveImmutableFile(
      { method: ctx.method === 'HEAD' ? 'HEAD' : 'GET', path: join(directory, name), headers: ctx.headers, nameHeaders: { [nameHeader]: name } },
      cache,
    );
    if (answer !== undefined) return answer;
  }
  return undefined;
}

export function downloadRoutes(deps: DownloadDeps): Route[] {
  const cache = deps.digestCache ?? new FileDigestCache();
  const redirectTo = (interfaceName: string, path: string, query: string): RouteResponse | undefined => {
    const base = deps.redirectBase(interfaceName);
    return base === undefined ? undefined : redirect(`${base}${path}${query}`);
  };

  return [
    {
      method: ['GET', 'HEAD'],
      path: '/node/ledger_chunk',
      summary: 'Redirects (308) to the committed ledger chunk holding seqno `since`',
      feature: 'LedgerChunkRead',
      query: z.object({ since: integerQuery }).strict(),
      responses: { 308: 'Redirect to the chunk', 404: 'No matching chunk' },
      handler: async (ctx: RequestContext<{ since: number }>) => {
        const since = ctx.query.since;
        for (const name of await listNames(deps.ledgerDirectories)) {
          const chunk = parseCommittedChunkName(name);
          if (chunk !== undefined && chunk.first <= since && since <= chunk.last) return redirect(`/node/ledger_chunk/${chunk.name}`);
        }
        return (
          redirectTo(ctx.interfaceName, '/node/ledger_chunk', `?since=${since}`) ??
          notFound(
            'LedgerChunkNotFound',
            `no committed ledger chunk holds seqno ${since} yet: the chunk that holds it is still open (a chunk is served once it is ` +
              'complete and committed: at ledger.chunk_size, or after a trigger_ledger_chunk proposal), or the ledger does not reach it',
          )
        );
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/node/ledger_chunk/{chunk_name}',
      summary: 'A committed ledger chunk (Range, ETag, If-None-Match, Want-Repr-Digest)',
      feature: 'LedgerChunkRead',
      responses: { 200: 'The chunk', 206: 'A range of the chunk', 304: 'Not modified', 404: 'No such chunk', 416: 'Range not satisfiable' },
      handler: async (ctx) => {
        const name = ctx.params['chunk_name'] ?? '';
        const missing = () => notFound('LedgerChunkNotFound', `no committed ledger chunk is named ${JSON.stringify(name)}`);
        if (parseCommittedChunkName(name) === undefined) return missing();
        return (await serveNamed(ctx, deps.ledgerDirectories, name, LEDGER_CHUNK_NAME_HEADER, cache)) ?? missing();
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/node/snapshot',
      summary: 'Redirects (308) to the latest committed snapshot (newer than `since`)',
      feature: 'SnapshotRead',
      query: z.object({ since: integerQuery.optional() }).strict(),
      responses: { 308: 'Redirect to the snapshot', 404: 'No matching snapshot' },
      handler: async (ctx: RequestContext<{ since?: number }>) => {
        const since = ctx.query.since;
        const latest = await newestServableSnapshot(deps, since);
        if (latest !== undefined) return redirect(`/node/snapshot/${latest.name}`);
        const what = since === undefined ? 'no committed snapshot' : `no committed snapshot is newer than seqno ${since}`;
        return redirectTo(ctx.interfaceName, '/node/snapshot', since === undefined ? '' : `?since=${since}`) ?? notFound('SnapshotNotFound', what);
      },
    },
    {
      method: ['GET', 'HEAD'],
      path: '/node/snapshot/{snapshot_name}',
      summary: 'A committed snapshot (Range, ETag, If-None-Match, Want-Repr-Digest)',
      feature: 'SnapshotRead',
      responses: {
        200: 'The snapshot',
        206: 'A range of the snapshot',
        304: 'Not modified',
        404: 'No such snapshot',
        416: 'Range not satisfiable',
        500: 'SnapshotCorrupted: the file does not verify against the service certificate',
      },
      handler: async (ctx) => {
        const name = ctx.params['snapshot_name'] ?? '';
        const missing = () => notFound('SnapshotNotFound', `no committed snapshot is named ${JSON.stringify(name)}`);
        if (parseCommittedSnapshotName(name) === undefined) return missing();
        const path = deps.snapshotVerdict === undefined ? undefined : await snapshotPath(deps.snapshotDirectories, name);
        if (path !== undefined) {
          const why = await deps.snapshotVerdict!(path, name);
          if (why !== undefined) throw new CovenantError('SnapshotCorrupted', `snapshot ${name} is not served: it does not verify against the service certificate (${why})`, 500);
        }
        return (await serveNamed(ctx, deps.snapshotDirectories, name, SNAPSHOT_NAME_HEADER, cache)) ?? missing();
      },
    },
    {
      method: 'POST',
      path: '/node/snapshot:create',
      summary: 'Requests a snapshot at the next signature transaction',
      feature: 'SnapshotCreate',
      responses: {
        204: 'Snapshot requested (or already requested and not yet written: the same snapshot serves both)',
        400: 'The request has a body (it takes none)',
        404: 'SnapshotCreate is not enabled on this interface',
        429: 'TooManySnapshotRequests: within snapshots.min_interval of the last request (see Retry-After)',
      },
      handler: ({ rawBody }): RouteResponse => {
        if (rawBody.length > 0) throw new CovenantError('UnexpectedBody', 'POST /node/snapshot:create takes no request body', 400);
        if (deps.requestSnapshot === undefined) return notImplemented('POST /node/snapshot:create (snapshots)');
        deps.requestSnapshot();
        // No Content-Length: RFC 9110 forbids it on a 204.
        return noContent();
      },
    },
  ];
}
