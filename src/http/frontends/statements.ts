/**
 * The service as its own transparency service (docs/join-policy.md): a member or user registers a
 * signed statement (POST /gov/statements:register, the COSE_Sign1 as body, the caller's TLS client
 * certificate identifying them). The statement's signature is checked against its x5chain, and it
 * is recorded in the ledger (STATEMENTS_TABLE) in a transaction whose claims digest is the
 * statement's digest: the COSE receipt of that transaction (GET /node/receipt/cose), once
 * committed, makes it a transparent statement.
 *
 * The route is not forwarded (a forwarded request does not carry the client certificate): a
 * backup redirects it to the primary (307).
 */
import { createHash } from 'node:crypto';
import { CovenantError } from '../../base/errors.js';
import { formatTxId } from '../../base/ids.js';
import { toBase64, toHex } from '../../base/bytes.js';
import { COSE_CONTENT_TYPE, GovTableDefs, StatementsTable, verifySignedStatement, type StatementRecord } from '../../gov/index.js';
import type { NodeTransactions } from '../../node/api.js';
import { json, type Route } from '../route.js';
import { TRANSACTION_ID_HEADER } from '../pipeline.js';

export interface StatementsFrontendOptions {
  readonly node: NodeTransactions;
  /** The primary's address on this interface, for redirects. */
  primaryAddress(interfaceName: string): string | undefined;
}

export const REGISTER_STATEMENT_PATH = '/gov/statements:register';

export function statementRoutes({ node, primaryAddress }: StatementsFrontendOptions): Route[] {
  return [
    {
      method: 'POST',
      path: REGISTER_STATEMENT_PATH,
      summary: 'Registers a signed statement (COSE_Sign1 body) of a member or user (TLS client certificate); its receipt makes it transparent',
      mode: 'operator',
      responses: {
        200: '{"statement_digest", "transaction_id"}: recorded; GET /node/receipt/cose?transaction_id= once committed',
        307: 'Redirect to the primary',
        400: 'InvalidSignedStatement: the statement fails a check (named); InvalidStatementIssuer: its did:x509 issuer does not resolve against its x5chain',
        401: 'Not a member or user certificate',
        415: 'Not application/cose',
      },
      handler: ({ rawBody, headers, clientCertificateDer, interfaceName, state }) => {
        if (!node.isPrimary()) {
          const address = primaryAddress(interfaceName);
          if (!address) throw new CovenantError('NoPrimary', 'no primary is known at the moment: retry shortly', 503);
          return { status: 307, headers: { location: `https://${address}${REGISTER_STATEMENT_PATH}` }, bodyKind: 'none' };
        }
        if (headers['content-type'] !== COSE_CONTENT_TYPE) {
          throw new CovenantError('UnsupportedContentType', `a signed statement is sent as ${COSE_CONTENT_TYPE}`, 415);
        }
        if (!clientCertificateDer || clientCertificateDer.length === 0) {
          throw new CovenantError('InvalidAuthenticationInfo', 'registering a statement requires the TLS client certificate of a member or user', 401);
        }
        const callerId = createHash('sha256').update(clientCertificateDer).digest('hex');
        const statement = new Uint8Array(rawBody.buffer, rawBody.byteOffset, rawBody.byteLength);
        const verified = verifySignedStatement(statement);
        const digest = toHex(verified.digest);
        const { txId } = state.write(
          (tx) => {
            const known = tx.table(GovTableDefs.membersCerts).has(callerId) || tx.table(GovTableDefs.usersCerts).has(callerId);
            if (!known) throw new CovenantError('InvalidAuthenticationInfo', `no member or user with certificate id ${callerId} is known to the service`, 401);
            const record: StatementRecord = {
              statement: toBase64(statement),
              issuer: verified.phdr.cwt.iss,
              subject: verified.phdr.cwt.sub,
              registered_by: callerId,
            };
            tx.table(StatementsTable).put(digest, record);
          },
          { claimsDigest: verified.digest },
        );
        const transactionId = txId ? formatTxId(txId) : undefined;
        node.logger.info('signed statement registered', { statement_digest: digest, issuer: verified.phdr.cwt.iss, registered_by: callerId, ...(transactionId ? { transaction_id: transactionId } : {}) });
        return json(200, { statement_digest: digest, transaction_id: transactionId ?? null }, transactionId ? { [TRANSACTION_ID_HEADER]: transactionId } : undefined);
      },
    },
  ];
}
