/** Operating errors of the consensus core: typed, with stable codes (see src/base/errors.ts). */
import { CovenantError, type NodeId } from '../base/index.js';

/** The primary holds as many uncommitted entries as it may: new work must wait for commit. */
export function tooManyPendingTransactions(uncommittedEntries: number, maxUncommittedEntries: number): CovenantError {
  return new CovenantError(
    'TooManyPendingTransactions',
    `too many uncommitted transactions (${uncommittedEntries}, limit ${maxUncommittedEntries}): retry later`,
    503,
    { uncommittedEntries, maxUncommittedEntries },
  );
}

/** Only the primary accepts new entries. */
export function notPrimary(primaryId: NodeId | undefined): CovenantError {
  return new CovenantError(
    'NotPrimary',
    primaryId === undefined ? 'this node is not the primary and no primary is known' : `this node is not the primary (primary: ${primaryId})`,
    503,
    primaryId === undefined ? undefined : { primaryId },
  );
}

/** A consensus message that does not decode: it came from a broken or hostile peer and is dropped. */
export class ConsensusMessageError extends CovenantError {
  constructor(message: string) {
    super('InvalidConsensusMessage', `invalid consensus message: ${message}`, 400);
    this.name = 'ConsensusMessageError';
  }
}
