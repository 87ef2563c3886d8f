/**
 * `covenant receipt verify <file> --service-cert <pem>`: checks a receipt offline, either the JSON
 * answer of GET /node/receipt (or its `receipt` member; a signature transaction's receipt too) or
 * the COSE_Sign1 bytes of
 * GET /node/receipt/cose. Exit code 0 when it verifies, 1 when it does not, 2 for unusable input.
 * A JSON receipt signed before a recovery carries service_endorsements, which the verification
 * follows from the node certificate to the one service certificate given.
 */
import { readFileSync } from 'node:fs';
import { errorMessage } from '../base/errors.js';
import { toHex } from '../base/bytes.js';
import {
  isSignatureReceipt,
  serviceEndorsementsOf,
  verifyCoseReceipt,
  verifyReceipt,
  verifySignatureReceipt,
  type Receipt,
  type SignatureReceipt,
} from '../merkle/index.js';
import type { Output } from './ledger-tools.js';

type AnyReceipt = Receipt | SignatureReceipt;

export interface ReceiptVerifyArgs {
  readonly receiptFile: string;
  readonly serviceCertificateFile: string;
}

/** How the node certificate chains to the service certificate, for the verdict line. */
function throughEndorsements(receipt: AnyReceipt): string {
  const count = serviceEndorsementsOf(receipt)?.length ?? 0;
  return count === 0 ? '' : ` (endorsed through ${count} earlier service identit${count === 1 ? 'y' : 'ies'})`;
}

export function runReceiptVerify(args: ReceiptVerifyArgs, output: Output): number {
  let bytes: Buffer;
  let serviceCertificatePem: string;
  try {
    bytes = readFileSync(args.receiptFile);
    serviceCertificatePem = readFileSync(args.serviceCertificateFile, 'utf8');
  } catch (e) {
    output.err(`covenant receipt verify: ${errorMessage(e)}`);
    return 2;
  }
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
        // The receipt itself names no transaction: the answer around it does.
        const verified = verifySignatureReceipt(receipt, serviceCertificatePem);
        const txId = typeof parsed.transaction_id === 'string' ? `signature transaction ${parsed.transaction_id}, ` : 'a signature transaction, ';
        output.out(`signature receipt verifies: ${txId}root ${toHex(verified.root)} signed by node ${verified.nodeId}${throughEndorsements(receipt)}`);
        return 0;
      }
      const verified = verifyReceipt(receipt, serviceCertificatePem);
      output.out(
        `receipt verifies: transaction ${verified.view}.${verified.seqno}, root ${toHex(verified.root)} signed by node ${verified.nodeId}${throughEndorsements(receipt)}`,
      );
    } else {
      const verified = verifyCoseReceipt(bytes, serviceCertificatePem);
      output.out(
        `COSE receipt verifies: transaction ${verified.view}.${verified.seqno}, root ${toHex(verified.root)} signed by the service` +
          (verified.signatureTxId ? ` (signature transaction ${verified.signatureTxId})` : ''),
      );
    }
    return 0;
  } catch (e) {
    output.err(`covenant receipt verify: ${errorMessage(e)}`);
    return 1;
  }
}
