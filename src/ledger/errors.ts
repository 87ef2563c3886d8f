/**
 * Operating errors of the ledger. Each failure mode has its own stable code; the details always
 * name the offending file and byte offset when there is one, so an operator can find it.
 */
import { CovenantError } from '../base/index.js';

export type LedgerErrorCode =
  /** A frame's header fields are inconsistent (bad version, flags, lengths, crc). */
  | 'MalformedLedgerEntry'
  /** A frame claims more bytes than the input holds. */
  | 'TruncatedLedgerEntry'
  /** A chunk file is damaged where damage cannot be a torn write (a committed file, or a crc-valid but inconsistent frame). */
  | 'LedgerCorrupted'
  /** A file name starts with `ledger_` but does not have one of the spec's shapes. */
  | 'InvalidLedgerFileName'
  /** Ledger files overlap, or non-committed files leave a gap. */
  | 'LedgerFilesInconsistent'
  /** An appended entry does not continue the ledger (seqno not last+1, or view going back). */
  | 'LedgerEntryOutOfOrder'
  /** The requested seqno is not held by this ledger. */
  | 'LedgerEntryNotFound';

/** Every ledger error code (the list the project's error catalog test reads). */
export const LEDGER_ERROR_CODES = [
  'MalformedLedgerEntry',
  'TruncatedLedgerEntry',
  'LedgerCorrupted',
  'InvalidLedgerFileName',
  'LedgerFilesInconsistent',
  'LedgerEntryOutOfOrder',
  'LedgerEntryNotFound',
] as const satisfies readonly LedgerErrorCode[];
// Every code of the union is in the list.
type _AllLedgerCodesListed = Exclude<LedgerErrorCode, (typeof LEDGER_ERROR_CODES)[number]> extends never ? true : never;
const _allLedgerCodesListed: _AllLedgerCodesListed = true;

export interface LedgerErrorDetails {
  file?: string;
  offsetBytes?: number;
  seqno?: number;
  [key: string]: unknown;
}

export class LedgerError extends CovenantError {
  declare readonly code: LedgerErrorCode;
  constructor(code: LedgerErrorCode, message: string, details: LedgerErrorDetails = {}) {
    super(code, message, code === 'LedgerEntryNotFound' ? 404 : code === 'LedgerEntryOutOfOrder' ? 400 : 500, details);
    this.name = 'LedgerError';
  }

  get file(): string | undefined {
    return this.details?.['file'] as string | undefined;
  }

  get offsetBytes(): number | undefined {
    return this.details?.['offsetBytes'] as number | undefined;
  }
}

/**
 * Re-raises an entry decoding error met at `offsetBytes` of `file` as corruption of that file.
 * Decoding errors carry their `problem` without offsets, so the message names the file offset.
 */
export function asFileCorruption(e: LedgerError, file: string, offsetBytes: number): LedgerError {
  const problem = (e.details?.['problem'] as string | undefined) ?? e.message;
  return new LedgerError('LedgerCorrupted', `${file} at offset ${offsetBytes}: ${problem}`, {
    ...e.details,
    file,
    offsetBytes,
    reason: e.code,
  });
}

/** Whether `e` is a ledger error, optionally of one code. */
export function isLedgerError(e: unknown, code?: LedgerErrorCode): e is LedgerError {
  return e instanceof LedgerError && (code === undefined || e.code === code);
}
