/**
 * `covenant statement sign|register`: signed statements and their transparent form
 * (docs/join-policy.md). `sign` makes a COSE_Sign1 statement from an issuer's key, its certificate
 * chain and a payload file; `register` sends it to the service as a member or user (TLS client
 * certificate), waits until its transaction is committed, fetches the COSE receipt and writes the
 * transparent statement (the statement with the receipt in its unprotected header).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { type Command, InvalidArgumentError } from 'commander';
import { errorMessage } from '../base/errors.js';
import { attachReceipt, COSE_CONTENT_TYPE, didX509Of, signStatement, verifySignedStatement } from '../gov/index.js';
import { certificateFields, parseCertificate, splitPemCertificates } from '../crypto/index.js';
import { HttpsClient, type ClientIdentity } from '../platform/https-client.js';

const REQUEST_TIMEOUT_MS = 30_000;
/** How long `register` waits for the statement's transaction to commit, by default. */
const COMMIT_WAIT_SECONDS_DEFAULT = 30;
const RECEIPT_POLL_MS = 250;
/** Redirects to the primary followed at most. */
const REDIRECTS_MAX = 3;

export interface RegisterOptions {
  /** host:port of a node's RPC interface. */
  readonly address: string;
  /** Service certificate: the only CA trusted for TLS. */
  readonly caPem: string;
  /** A member's or user's certificate and key (TLS client identity). */
  readonly identity: ClientIdentity;
  readonly statement: Uint8Array;
  readonly commitWaitSeconds?: number;
}

export interface Registered {
  readonly transactionId: string;
  readonly statementDigest: string;
  readonly receipt: Uint8Array;
  readonly transparentStatement: Uint8Array;
}

function failure(answer: { status: number; text: string; body: any }): Error {
  const error = (answer.body as { error?: { code?: string; message?: string } } | undefined)?.error;
  return new Error(`${error?.code ?? 'HttpError'} (${answer.status}): ${error?.message ?? answer.text}`);
}

/** Registers a signed statement and answers its transparent form once its transaction is committed. */
export async function registerStatement(options: RegisterOptions): Promise<Registered> {
  let address = options.address;
  let answer;
  for (let redirects = 0; ; redirects++) {
    const client = new HttpsClient(address, options.caPem);
    try {
      answer = await client.request('POST', '/gov/statements:register', {
        rawBody: Buffer.from(options.statement),
        headers: { 'content-type': COSE_CONTENT_TYPE },
        identity: options.identity,
        timeoutMs: REQUEST_TIMEOUT_MS,
      });
    } finally {
      client.close();
    }
    const location = answer.headers.location;
    if (answer.status === 307 && typeof location === 'string' && redirects < REDIRECTS_MAX) {
      address = new URL(location).host;
      continue;
    }
    break;
  }
  if (answer.status !== 200) throw failure(answer);
  const { transaction_id: transactionId, statement_digest: statementDigest } = answer.body as { transaction_id: string; statement_digest: string };
  const deadline = Date.now() + (options.commitWaitSeconds ?? COMMIT_WAIT_SECONDS_DEFAULT) * 1000;
  const client = new HttpsClient(address, options.caPem);
  try {
    for (;;) {
      const receipt = await client.request('GET', `/node/receipt/cose?transaction_id=${transactionId}`, { timeoutMs: REQUEST_TIMEOUT_MS });
      if (receipt.status === 200) {
        const bytes = new Uint8Array(receipt.bytes);
        return { transactionId, statementDigest, receipt: bytes, transparentStatement: attachReceipt(options.statement, bytes) };
      }
      if (receipt.status !== 202) throw failure(receipt);
      if (Date.now() > deadline) throw new Error(`transaction ${transactionId} was not committed within the wait`);
      await new Promise((resolve) => setTimeout(resolve, RECEIPT_POLL_MS));
    }
  } finally {
    client.close();
  }
}

function integer(value: string): number {
  const n = Number(value);
  if (!/^-?\d+$/.test(value) || !Number.isSafeInteger(n)) throw new InvalidArgumentError('must be an integer');
  return n;
}

async function run(what: string, fn: () => Promise<void> | void): Promise<void> {
  try {
    await fn();
  } catch (e) {
    process.stderr.write(`covenant statement ${what}: ${errorMessage(e)}\n`);
    process.exitCode = 1;
  }
}

/** The did:x509 naming the chain's last certificate (its root) and the key certificate's subject CN. */
function defaultIssuer(chainPem: string): string {
  const chain = splitPemCertificates(chainPem).map((pem) => parseCertificate(pem).derBytes);
  if (chain.length < 2) throw new Error('--chain holds fewer than two certificates: a did:x509 issuer names a CA certificate of the chain');
  const commonName = certificateFields(chain[0]!).subject.get('2.5.4.3');
  if (commonName?.length !== 1) throw new Error("the key certificate has no single subject CN: give --issuer");
  return didX509Of(chain[chain.length - 1]!, commonName[0]!);
}

export function registerStatementCommands(program: Command): void {
  const statement = program.command('statement').description('sign statements and register them with the service (transparent statements for the join policy)');
  statement
    .command('sign')
    .description('sign a statement (COSE_Sign1) over a payload file, such as the host data of a node build')
    .requiredOption('--key <file>', "issuer's private key (PEM, P-384 or P-256)")
    .requiredOption('--chain <file>', "issuer's certificate chain (PEM, the key's certificate first)")
    .option('--issuer <did>', 'CWT iss: the issuer, a did:x509 the chain resolves (default: did:x509:0:sha256:<fingerprint of the chain\'s last certificate>::subject:CN:<the key certificate\'s CN>)')
    .requiredOption('--subject <text>', 'CWT sub: what the statement is about')
    .requiredOption('--payload <file>', 'the artefact the statement speaks for (for a node: its host data, 64 hex digits)')
    .requiredOption('--out <file>', 'where to write the signed statement')
    .option('--svn <n>', 'security version number (CWT claim "svn")', integer)
    .option('--iat <seconds>', 'CWT iat: issued at, seconds since the Unix epoch', integer)
    .option('--content-type <type>', 'cty of the payload')
    .action((opts: { key: string; chain: string; issuer?: string; subject: string; payload: string; out: string; svn?: number; iat?: number; contentType?: string }) =>
      run('sign', () => {
        const chainPem = readFileSync(opts.chain, 'utf8');
        const bytes = signStatement({
          privateKeyPem: readFileSync(opts.key, 'utf8'),
          x5chainPem: chainPem,
          issuer: opts.issuer ?? defaultIssuer(chainPem),
          subject: opts.subject,
          payload: new Uint8Array(readFileSync(opts.payload)),
          ...(opts.svn !== undefined ? { svn: opts.svn } : {}),
          ...(opts.iat !== undefined ? { issuedAtSeconds: opts.iat } : {}),
          ...(opts.contentType !== undefined ? { contentType: opts.contentType } : {}),
        });
        // The service refuses a statement whose issuer its chain does not resolve: say so now.
        verifySignedStatement(bytes);
        writeFileSync(opts.out, bytes);
      }),
    );
  statement
    .command('register')
    .description('register a signed statement as a member or user; writes the transparent statement once committed')
    .requiredOption('--statement <file>', 'the signed statement (from `covenant statement sign`)')
    .requiredOption('--address <host:port>', "a node's RPC address")
    .requiredOption('--ca <file>', 'service certificate (TLS certificate authority)')
    .requiredOption('--cert <file>', "a member's or user's certificate (PEM)")
    .requiredOption('--key <file>', "its private key (PEM)")
    .requiredOption('--out <file>', 'where to write the transparent statement')
    .option('--wait <seconds>', 'how long to wait for the commit', integer, COMMIT_WAIT_SECONDS_DEFAULT)
    .action((opts: { statement: string; address: string; ca: string; cert: string; key: string; out: string; wait: number }) =>
      run('register', async () => {
        const registered = await registerStatement({
          address: opts.address,
          caPem: readFileSync(opts.ca, 'utf8'),
          identity: { certificatePem: readFileSync(opts.cert, 'utf8'), privateKeyPem: readFileSync(opts.key, 'utf8') },
          statement: new Uint8Array(readFileSync(opts.statement)),
          commitWaitSeconds: opts.wait,
        });
        writeFileSync(opts.out, registered.transparentStatement);
        process.stdout.write(JSON.stringify({ transaction_id: registered.transactionId, statement_digest: registered.statementDigest }, null, 2) + '\n');
      }),
    );
}
