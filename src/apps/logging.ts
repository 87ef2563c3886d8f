/**
 * The default application: a message log, the de facto workload of this kind of service
 * (docs/architecture.md, "The default application"). Private records live in an encrypted map, public ones in
 * a `public:` map. Its handlers read and write through the request pipeline's `ctx.state`
 * (src/http/pipeline.ts), which gives them the consistency the request asks for
 * (`x-covenant-consistency`) and answers with the `x-covenant-transaction-id` of what they wrote
 * or read (the last transaction applied before a read).
 */
import { z } from 'zod';
import { CovenantError } from '../base/errors.js';
import { formatTxId, parseTxId } from '../base/ids.js';
import { jsonTable } from '../kv/index.js';
import { TRANSACTION_ID_HEADER } from '../http/pipeline.js';
import type { NodeTransactions } from '../node/api.js';
import { Tables } from '../node/tables.js';
import { integerQuery, json, type Route } from '../http/route.js';

/** Record ids: integers from 0 to 2^53 - 1 (z.int() allows no more), the same in bodies and queries. */
const recordBody = z.object({ id: z.int().nonnegative(), msg: z.string() }).strict();
const idQuery = z.object({ id: integerQuery }).strict();
/** The logging application's tables: a record {msg} by id. */
const LogTables = {
  private: jsonTable<{ msg: string }>(Tables.appPrivateLog),
  public: jsonTable<{ msg: string }>(Tables.appPublicLog),
} as const;

function recordNotFound(id: number): CovenantError {
  return new CovenantError('ResourceNotFound', `No record with id ${id}`, 404);
}

export function loggingAppRoutes(node: NodeTransactions): Route[] {
  const routes: Route[] = [];
  for (const [scope, table] of [
    ['private', LogTables.private],
    ['public', LogTables.public],
  ] as const) {
    routes.push(
      {
        method: 'POST',
        path: `/app/log/${scope}`,
        summary: `Writes a ${scope} record {id, msg}`,
        auth: 'user_cert_or_jwt',
        body: recordBody,
        handler: ({ body, state }) => {
          state.write((tx) => tx.table(table).put(String(body.id), { msg: body.msg }));
          return json(200, true);
        },
      },
      {
        method: 'GET',
        path: `/app/log/${scope}`,
        summary: `Reads the ${scope} record with the given id`,
        auth: 'user_cert_or_jwt',
        query: idQuery,
        handler: ({ query, state }) => {
          const value = state.read((reader) => reader.table(table).get(String(query.id)));
          // The 404 too names the state it read (the pipeline adds the header to both).
          if (!value) throw recordNotFound(query.id);
          return json(200, { msg: value.msg });
        },
      },
      {
        method: 'GET',
        path: `/app/log/${scope}/historical`,
        summary: `Reads the ${scope} record with the given id as written by the committed transaction named in the ${TRANSACTION_ID_HEADER} header, from the ledger`,
        auth: 'user_cert_or_jwt',
        query: idQuery,
        mode: 'historical',
        responses: { 200: 'The record as that transaction wrote it', 202: 'The transaction is not committed yet (see Retry-After)' },
        handler: ({ query, headers }) => {
          const raw = headers[TRANSACTION_ID_HEADER];
          if (typeof raw !== 'string') {
            throw new CovenantError('MissingRequiredHeader', `the ${TRANSACTION_ID_HEADER} header names the transaction to read (<view>.<seqno>)`, 400);
          }
          const txId = parseTxId(raw);
          if (!txId) throw new CovenantError('InvalidHeaderValue', `${TRANSACTION_ID_HEADER} "${raw}" is not a transaction id <view>.<seqno>`, 400);
          const writes = node.historicalWrites(txId);
          if (writes === 'pending') return json(202, { transaction_id: raw, status: 'Pending' }, { 'retry-after': '1' });
          const value = writes.get(table.name)?.get(String(query.id));
          if (value === undefined) throw new CovenantError('ResourceNotFound', `transaction ${raw} wrote no ${scope} record with id ${query.id}`, 404);
          if (value === null) throw new CovenantError('ResourceNotFound', `transaction ${raw} removed the ${scope} record with id ${query.id}`, 404);
          return json(200, { msg: table.codec.decode(value).msg });
        },
      },
      {
        method: 'DELETE',
        path: `/app/log/${scope}`,
        summary: `Removes the ${scope} record with the given id`,
        auth: 'user_cert_or_jwt',
        query: idQuery,
        handler: ({ query, state }) => {
          const { result: existed } = state.write((tx) => {
            const map = tx.table(table);
            if (!map.has(String(query.id))) return false;
            map.remove(String(query.id));
            return true;
          });
          if (!existed) throw recordNotFound(query.id);
          return json(200, true);
        },
      },
    );
  }
  routes.push({
    method: 'GET',
    path: '/app/caller',
    summary: 'Who the caller is: the user id of its certificate, or the issuer, subject and claims of its bearer token',
    auth: 'user_cert_or_jwt',
    handler: ({ caller }) => {
      if (caller.kind === 'jwt') {
        const claims = caller.claims ?? {};
        return json(200, { policy: 'jwt', issuer: claims.iss, subject: caller.id ?? null, claims });
      }
      return json(200, { policy: 'user_cert', user_id: caller.id });
    },
  });
  routes.push({
    method: 'GET',
    path: '/app/tx',
    summary: 'Status of a transaction: Unknown, Pending, Committed or Invalid',
    auth: 'none',
    query: z.object({ transaction_id: z.string() }).strict(),
    handler: ({ query }) => {
      const txId = parseTxId(query.transaction_id);
      if (!txId) {
        throw new CovenantError('InvalidQueryParameterValue', `"${query.transaction_id}" is not a transaction id <view>.<seqno>`, 400);
      }
      return json(200, { transaction_id: formatTxId(txId), status: node.statusOf(txId) });
    },
  });
  routes.push({
    method: 'GET',
    path: '/app/commit',
    summary: 'Latest committed transaction id',
    auth: 'none',
    handler: () => json(200, { transaction_id: formatTxId(node.commitTxId()) }),
  });
  return routes;
}
