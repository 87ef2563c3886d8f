/**
 * The default application: a message log, the de facto workload of this kind of service
 * (docs/architecture.md, "The default application"). Private records live in an encrypted map, public ones in
 * a `public:` map. Every write answers with the `x-covenant-transaction-id` header of its
 * transaction, every read with that of the state it read (the last transaction applied before it).
 */
import { z } from 'zod';
import { CovenantError } from '../base/errors.js';
import { formatTxId, parseTxId, type TxId } from '../base/ids.js';
import { jsonCodec, type StoreView, type Tx } from '../kv/index.js';
import { CONSISTENCY_HEADER } from '../http/forwarding.js';
import type { NodeTransactions } from '../node/api.js';
import { Tables } from '../node/tables.js';
import { errorJson, integerQuery, json, type Route } from '../http/route.js';

export const TRANSACTION_ID_HEADER = 'x-covenant-transaction-id';
/**
 * `x-covenant-consistency: committed` on a write: answer only once the transaction is committed
 * (a write so answered is never rolled back); a rolled-back or late one is refused with a
 * retryable 503 naming its id. Without it, a write is answered once the primary executed it.
 * `linearizable` on a write means the same: a write answered once committed is linearizable.
 * `x-covenant-consistency: linearizable` on a read: answered by the primary (a backup forwards
 * it) once it confirmed with a majority that it still leads, from committed state that holds every
 * write committed before the read arrived (ReadIndex). Without it, a read is answered at once from
 * the node's current state.
 */
export { CONSISTENCY_HEADER };

type Headers = Readonly<Record<string, string | string[] | undefined>>;

function badConsistency(value: unknown, allowed: string): CovenantError {
  return new CovenantError('InvalidHeaderValue', `${CONSISTENCY_HEADER} must be ${allowed} (got "${String(value).slice(0, 64)}")`, 400);
}

function wantsCommitted(headers: Headers): boolean {
  const value = headers[CONSISTENCY_HEADER];
  if (value === undefined) return false;
  if (value === 'committed' || value === 'linearizable') return true;
  throw badConsistency(value, '"committed" or "linearizable" on a write');
}

function wantsLinearizable(headers: Headers): boolean {
  const value = headers[CONSISTENCY_HEADER];
  if (value === undefined) return false;
  if (value === 'linearizable') return true;
  throw badConsistency(value, '"linearizable" on a read');
}

/** A read function over a transaction (a default read) or a committed view (a linearizable one). */
type Reader = Pick<StoreView, 'map'>;

/** Record ids: integers from 0 to 2^53 - 1 (z.int() allows no more), the same in bodies and queries. */
const recordBody = z.object({ id: z.int().nonnegative(), msg: z.string() }).strict();
const idQuery = z.object({ id: integerQuery }).strict();
const msgCodec = jsonCodec<{ msg: string }>();

function recordNotFound(id: number): CovenantError {
  return new CovenantError('ResourceNotFound', `No record with id ${id}`, 404);
}

export function loggingAppRoutes(node: NodeTransactions): Route[] {
  const routes: Route[] = [];
  for (const [scope, table] of [
    ['private', Tables.appPrivateLog],
    ['public', Tables.appPublicLog],
  ] as const) {
    routes.push(
      {
        method: 'POST',
        path: `/app/log/${scope}`,
        summary: `Writes a ${scope} record {id, msg}`,
        auth: 'user_cert_or_jwt',
        body: recordBody,
        handler: ({ body, headers }) => {
          const write = (tx: Tx) => tx.map(table, msgCodec).put(String(body.id), { msg: body.msg });
          const answer = ({ txId }: { txId: TxId | undefined }) => json(200, true, txId ? { [TRANSACTION_ID_HEADER]: formatTxId(txId) } : undefined);
          return wantsCommitted(headers) ? node.executeWriteCommitted(write).then(answer) : answer(node.executeWrite(write));
        },
      },
      {
        method: 'GET',
        path: `/app/log/${scope}`,
        summary: `Reads the ${scope} record with the given id`,
        auth: 'user_cert_or_jwt',
        query: idQuery,
        handler: ({ query, headers }) => {
          const read = (reader: Reader) => reader.map(table, msgCodec).get(String(query.id));
          const answer = ({ result: value, txId }: { result: { msg: string } | undefined; txId: TxId }) => {
            const header = { [TRANSACTION_ID_HEADER]: formatTxId(txId) };
            if (!value) return errorJson(recordNotFound(query.id), header);
            return json(200, { msg: value.msg }, header);
          };
          return wantsLinearizable(headers) ? node.executeReadLinearizable(read).then(answer) : answer(node.executeReadAt(read));
        },
      },
      {
        method: 'GET',
        path: `/app/log/${scope}/historical`,
        summary: `Reads the ${scope} record with the given id as written by the committed transaction named in the ${TRANSACTION_ID_HEADER} header, from the ledger`,
        auth: 'user_cert_or_jwt',
        query: idQuery,
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
          const value = writes.get(table)?.get(String(query.id));
          if (value === undefined) throw new CovenantError('ResourceNotFound', `transaction ${raw} wrote no ${scope} record with id ${query.id}`, 404);
          if (value === null) throw new CovenantError('ResourceNotFound', `transaction ${raw} removed the ${scope} record with id ${query.id}`, 404);
          return json(200, { msg: msgCodec.decode(value).msg });
        },
      },
      {
        method: 'DELETE',
        path: `/app/log/${scope}`,
        summary: `Removes the ${scope} record with the given id`,
        auth: 'user_cert_or_jwt',
        query: idQuery,
        handler: ({ query, headers }) => {
          const remove = (tx: Tx) => {
            const map = tx.map(table, msgCodec);
            if (!map.has(String(query.id))) return false;
            map.remove(String(query.id));
            return true;
          };
          const answer = ({ result: existed, txId }: { result: boolean; txId: TxId | undefined }) => {
            if (!existed) throw recordNotFound(query.id);
            return json(200, true, txId ? { [TRANSACTION_ID_HEADER]: formatTxId(txId) } : undefined);
          };
          return wantsCommitted(headers) ? node.executeWriteCommitted(remove).then(answer) : answer(node.executeWrite(remove));
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
