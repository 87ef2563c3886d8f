/**
 * The tables the simulated clients write: the application's log tables, holding each write's
 * mark (a step number, or "step:write") rather than the logging application's records.
 */
import { jsonTable } from '../../kv/index.js';
import { Tables } from '../../node/tables.js';

export const SimTables = {
  records: jsonTable<string | number>(Tables.appPrivateLog),
  publicRecords: jsonTable<string | number>(Tables.appPublicLog),
} as const;
