/**
 * `covenant receipt verify <file> --service-cert <pem>`: checks a receipt offline, either the JSON
 * answer of GET /node/receipt (or its `receipt` member) or the COSE_Sign1 bytes of
 * GET /node/receipt/cose. Exit code 0 when it verifies, 1 when it does not, 2 for unusable input.
 */
import { readFileSync } from 'node:fs';
import { errorMessage } from '../base/errors.js';
import { toHex } from '../base/bytes.js';
import { verifyCoseReceipt, verifyReceipt, type Receipt } from '../merkle/index.js';
import type { Output } from './ledger-tools.js';

export interface ReceiptVerifyArgs {
  readonly receiptFile: string;
  readonly serviceCertificateFile: string;
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
      let parsed: { receipt?: Receipt } & Receipt;
      try {
        parsed = JSON.parse(text) as { receipt?: Receipt } & Receipt;
      } catch (e) {
        output.err(`covenant receipt verify: ${args.receiptFile} is neither JSON nor COSE: ${errorMessage(e)}`);
        return 2;
      }
      const verified = verifyReceipt(parsed.receipt ?? parsed, serviceCertificatePem);
      output.out(`receipt verifies: transaction ${verified.view}.${verified.seqno}, root ${toHex(verified.root)} signed by node ${verified.nodeId}`);
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
