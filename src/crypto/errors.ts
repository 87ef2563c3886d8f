/**
 * Stable error codes of the crypto layer. All are operating errors caused by input (a bad PEM, a
 * tampered ciphertext, a malformed envelope), so they map to 400 unless a caller re-maps them.
 */
import { CovenantError } from '../base/index.js';

export const CryptoErrorCode = {
  InvalidKey: 'InvalidKey',
  InvalidCertificate: 'InvalidCertificate',
  InvalidSubjectAltName: 'InvalidSubjectAltName',
  DecryptionFailed: 'DecryptionFailed',
  InvalidCoseSign1: 'InvalidCoseSign1',
  CoseSignatureInvalid: 'CoseSignatureInvalid',
} as const;
export type CryptoErrorCode = (typeof CryptoErrorCode)[keyof typeof CryptoErrorCode];

export function cryptoError(code: CryptoErrorCode, message: string, details?: Record<string, unknown>): CovenantError {
  return new CovenantError(code, message, 400, details);
}
