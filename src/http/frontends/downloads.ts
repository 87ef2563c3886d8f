/**
 * Ledger chunk and snapshot downloads (spec endpoint rules 1-7) and snapshot requests (rule 10).
 * Each family exists only on interfaces whose enabled_operator_features list its feature.
 */
import { z } from 'zod';
import { CovenantError } from '../../base/errors.js';
import type { Route } from '../route.js';

const integerQuery = z.string().regex(/^\d+$/, 'must be a non-negative integer').transform(Number);

function notImplemented(what: string): never {
  throw new CovenantError('NotImplemented', `${what} is not available in this version of the node`, 501);
}

export function downloadRoutes(): Route[] {
  return [
    {
      method: ['GET', 'HEAD'],
      path: '/node/ledger_chunk',
      summary: 'Redirects (308) to the committed ledger chunk holding seqno `since`',
      feature: 'LedgerChunkRead',
      query: z.object({ since: integerQuery }).strict(),
      responses: { 308: 'Redirect to the chunk', 404: 'No matching chunk' },
      handler: () => notImplemented('ledger chunk download'),
    },
    {
      method: ['GET', 'HEAD'],
      path: '/node/ledger_chunk/{chunk_name}',
      summary: 'A committed ledger chunk (Range, ETag, If-None-Match, Want-Repr-Digest)',
      feature: 'LedgerChunkRead',
      responses: { 200: 'The chunk', 206: 'A range of the chunk', 304: 'Not modified', 404: 'No such chunk' },
      handler: () => notImplemented('ledger chunk download'),
    },
    {
      method: ['GET', 'HEAD'],
      path: '/node/snapshot',
      summary: 'Redirects (308) to the latest committed snapshot (newer than `since`)',
      feature: 'SnapshotRead',
      query: z.object({ since: integerQuery.optional() }).strict(),
      responses: { 308: 'Redirect to the snapshot', 404: 'No matching snapshot' },
      handler: () => notImplemented('snapshot download'),
    },
    {
      method: ['GET', 'HEAD'],
      path: '/node/snapshot/{snapshot_name}',
      summary: 'A committed snapshot (Range, ETag, If-None-Match, Want-Repr-Digest)',
      feature: 'SnapshotRead',
      responses: { 200: 'The snapshot', 206: 'A range of the snapshot', 304: 'Not modified', 404: 'No such snapshot' },
      handler: () => notImplemented('snapshot download'),
    },
    {
      method: 'POST',
      path: '/node/snapshot:create',
      summary: 'Requests a snapshot at the next signature transaction',
      feature: 'SnapshotCreate',
      responses: { 204: 'Snapshot requested', 404: 'SnapshotCreate is not enabled on this interface' },
      handler: () => notImplemented('POST /node/snapshot:create (snapshots)'),
    },
  ];
}
