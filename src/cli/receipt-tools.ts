/**
 * `covenant receipt verify <file> --service-cert <pem>`: checks a receipt offline, either the JSON
 * answer of GET /node/receipt (or its `receipt` member; a signature transaction's receipt too) or
 * the COSE_Sign1 bytes of
 * GET /node/receipt/cose. Exit code 0 when it verifies, 1 when it does not, 2 for unusable input.
 * A JSON receipt signed before a recovery carries service_endorsements, which the verification
 * follows from the node certificate to the one service certificate given. A receipt kept from
 * before a recovery carries none (or, COSE, is signed by an earlier service key): it verifies
 * with the chain the service publishes (GET /node/service/endorsements), given as a file
 * (`--endorsements`) or fetched from a node (`--endorsements-from`, over TLS checked against the
 * service certificate given).
 *
 * `--claims <file>` (the claim's bytes, SHA-256'd) or `--claims-digest <hex>` also checks that the
 * receipt binds the application's claim: the claims digest of its leaf (which the proof and the
 * signature cover) must be that digest, or the receipt does not verify for that claim (exit 1).
 */
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { errorMessage } from '../base/errors.js';
import { toHex } from '../base/bytes.js';
import {
  isSignatureReceipt,
  serviceEndorsementsChainOf,
  serviceEndorsementsOf,
  verifyCoseReceipt,
  verifyReceipt,
  verifySignatureReceipt,
  type Receipt,
  type ReceiptVerifyOptions,
  type SignatureReceipt,
} from '../merkle/index.js';
import { HttpsClient } from '../platform/https-client.js';
import type { Output } from './ledger-tools.js';

type AnyReceipt = Receipt | SignatureReceipt;

export interface ReceiptVerifyArgs {
  readonly receiptFile: string;
  readonly serviceCertificateFile: string;
  /** A file holding the service's chain of endorsements (the answer of GET /node/service/endorsements). */
  readonly endorsementsFile?: string;
  /** The same chain, already fetched (fetchServiceEndorsements). */
  readonly endorsements?: unknown;
  /** A file holding the claim's bytes: the receipt's claims digest must be their SHA-256. */
  readonly claimsFile?: string;
  /** The claims digest the receipt must bind, as 64 hex digits. */
  readonly claimsDigest?: string;
}

const HEX_DIGEST = /^[0-9a-fA-F]{64}$/;

/** The claims digest to check (lower-case hex), from --claims or --claims-digest; throws for unusable input. */
function expectedClaimsDigest(args: ReceiptVerifyArgs): string | undefined {
  if (args.claimsFile !== undefined && args.claimsDigest !== undefined) throw new Error('give --claims or --claims-digest, not both');
  if (args.claimsFile !== undefined) return createHash('sha256').update(readFileSync(args.claimsFile)).digest('hex');
  if (args.claimsDigest === undefined) return undefined;
  if (!HEX_DIGEST.test(args.claimsDigest)) throw new Error(`--claims-digest "${args.claimsDigest.slice(0, 80)}" is not 64 hex digits (a SHA-256)`);
  return args.claimsDigest.toLowerCase();
}

/** Throws unless the verified receipt's leaf binds the expected claims digest. */
function checkClaims(expected: string | undefined, bound: string): string {
  if (expected === undefined) return '';
  if (bound !== expected) throw new Error(`the receipt's claims digest ${bound} is not the claim's digest ${expected}: it does not bind that claim`);
  return `, binds claims digest ${expected}`;
}

const identities = (count: number) => `${count} earlier service identit${count === 1 ? 'y' : 'ies'}`;

/** How the node certificate chains to the service certificate, for the verdict line. */
function throughEndorsements(receipt: AnyReceipt, verified: { endorsements: number }): string {
  if (verified.endorsements === 0) return '';
  const given = serviceEndorsementsOf(receipt) === undefined ? ' of the chain given' : '';
  return ` (endorsed through ${identities(verified.endorsements)}${given})`;
}

/** GET /node/service/endorsements from `address`, whose TLS certificate the service certificate must have issued. */
export async function fetchServiceEndorsements(address: string, serviceCertificatePem: string): Promise<unknown> {
  const client = new HttpsClient(address, serviceCertificatePem);
  try {
    const answer = await client.request('GET', '/node/service/endorsements', { timeoutMs: 30_000 });
    if (answer.status !== 200) throw new Error(`GET /node/service/endorsements from ${address} answered ${answer.status}: ${answer.text.slice(0, 300)}`);
    return answer.body;
  } finally {
    client.close();
  }
}

function chainOf(args: ReceiptVerifyArgs): readonly string[] | undefined {
  if (args.endorsements !== undefined) return serviceEndorsementsChainOf(args.endorsements);
  if (args.endorsementsFile === undefined) return undefined;
  return serviceEndorsementsChainOf(JSON.parse(readFileSync(args.endorsementsFile, 'utf8')));
}

export function runReceiptVerify(args: ReceiptVerifyArgs, output: Output): number {
  let bytes: Buffer;
  let serviceCertificatePem: string;
  let chain: readonly string[] | undefined;
  let claims: string | undefined;
  try {
    bytes = readFileSync(args.receiptFile);
    serviceCertificatePem = readFileSync(args.serviceCertificateFile, 'utf8');
    chain = chainOf(args);
    claims = expectedClaimsDigest(args);
  } catch (e) {
    output.err(`covenant receipt verify: ${errorMessage(e)}`);
    return 2;
  }
  const options: ReceiptVerifyOptions = chain === undefined ? {} : { serviceEndorsementsChain: chain };
  const text = bytes.toString('utf8').trimStart();
  try {
    if (text.startsWith('{')) {
      let parsed: { receipt?: AnyReceipt; transaction_id?: unknown } & AnyReceipt;
      try {
        parsed = JSON.parse(text) as { receipt?: AnyReceipt; transaction_id?: unknown } & AnyReceipt;
      } catch (e) {
        output.err(`covenant receipt verify: ${args.receiptFile} is neither JSON nor COSE: ${errorMessage(e)}`);
        return 2;
      }
      const receipt = parsed.receipt ?? parsed;
      if (isSignatureReceipt(receipt)) {
        if (claims !== undefined) throw new Error('a signature transaction\'s receipt binds no claims (it has no leaf): check the receipt of the transaction that set them');
        // The receipt itself names no transaction: the answer around it does.
        const verified = verifySignatureReceipt(receipt, serviceCertificatePem, options);
        const txId = typeof parsed.transaction_id === 'string' ? `signature transaction ${parsed.transaction_id}, ` : 'a signature transaction, ';
        output.out(`signature receipt verifies: ${txId}root ${toHex(verified.root)} signed by node ${verified.nodeId}${throughEndorsements(receipt, verified)}`);
        return 0;
      }
      const verified = verifyReceipt(receipt, serviceCertificatePem, options);
      const bound = checkClaims(claims, receipt.leaf_components.claims_digest);
      output.out(
        `receipt verifies: transaction ${verified.view}.${verified.seqno}, root ${toHex(verified.root)} signed by node ${verified.nodeId}${throughEndorsements(receipt, verified)}${bound}`,
      );
    } else {
      const verified = verifyCoseReceipt(bytes, serviceCertificatePem, options);
      const bound = checkClaims(claims, toHex(verified.claimsDigest));
      output.out(
        `COSE receipt verifies: transaction ${verified.view}.${verified.seqno}, root ${toHex(verified.root)} signed by the service` +
          (verified.signatureTxId ? ` (signature transaction ${verified.signatureTxId})` : '') +
          (verified.endorsements > 0 ? ` under an earlier identity, endorsed through ${identities(verified.endorsements)} of the chain given` : '') +
          bound,
      );
    }
    return 0;
  } catch (e) {
    output.err(`covenant receipt verify: ${errorMessage(e)}`);
    return 1;
  }
}
