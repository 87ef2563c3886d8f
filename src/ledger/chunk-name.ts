/**
 * Chunk file names, exactly the spec's shapes:
 *   ledger_<first>              the chunk being written
 *   ledger_<first>-<last>       a completed chunk (ends on a signature), not yet committed
 *   ledger_<first>-<last>.committed   committed, immutable
 * and any of them with the suffix `.recovery` while a disaster recovery is in progress.
 */
import type { Seqno } from '../base/index.js';
import { LedgerError } from './errors.js';

export const CHUNK_NAME_PREFIX = 'ledger_';
export const COMMITTED_SUFFIX = '.committed';
export const RECOVERY_SUFFIX = '.recovery';

export interface ChunkName {
  first: Seqno;
  /** Undefined for the chunk being written. */
  last: Seqno | undefined;
  committed: boolean;
  recovery: boolean;
}

const NAME_PATTERN = /^ledger_([1-9]\d{0,15})(?:-([1-9]\d{0,15}))?(\.committed)?(\.recovery)?$/;

export function formatChunkName(name: ChunkName): string {
  let text = `${CHUNK_NAME_PREFIX}${name.first}`;
  if (name.last !== undefined) text += `-${name.last}`;
  if (name.committed) text += COMMITTED_SUFFIX;
  if (name.recovery) text += RECOVERY_SUFFIX;
  return text;
}

/** True for names the ledger owns (it ignores other files in its directories). */
export function isChunkFileName(fileName: string): boolean {
  return fileName.startsWith(CHUNK_NAME_PREFIX);
}

/** Parses a chunk file name; throws InvalidLedgerFileName for a `ledger_` name of another shape. */
export function parseChunkName(fileName: string): ChunkName {
  const match = NAME_PATTERN.exec(fileName);
  const invalid = (why: string) =>
    new LedgerError('InvalidLedgerFileName', `invalid ledger file name ${JSON.stringify(fileName)}: ${why}`, { file: fileName });
  if (!match) throw invalid('expected ledger_<first>[-<last>][.committed][.recovery]');
  const first = Number(match[1]);
  const last = match[2] === undefined ? undefined : Number(match[2]);
  const committed = match[3] !== undefined;
  if (!Number.isSafeInteger(first) || (last !== undefined && !Number.isSafeInteger(last))) throw invalid('seqno too large');
  if (last !== undefined && last < first) throw invalid('last seqno before first');
  if (committed && last === undefined) throw invalid('a committed chunk must name its last seqno');
  return { first, last, committed, recovery: match[4] !== undefined };
}
