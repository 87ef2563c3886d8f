/**
 * Virtual attestation: a software stand-in with the shape and checks of a hardware quote.
 * It gives NO security guarantee (anyone can forge it); it exists so that join, code trust and
 * host-data checks run the same code path a hardware platform will use.
 *
 * report_data binds the quote to the node's identity key: SHA-256 of its DER public key.
 */
import { createHash } from 'node:crypto';

export const VIRTUAL_FORMAT = 'Insecure_Virtual';

export interface VirtualQuote {
  readonly format: typeof VIRTUAL_FORMAT;
  /** Hex SHA-256 of the code identity (stands for the launch measurement). */
  readonly measurement: string;
  /** Hex SHA-256 of the host data (stands for the security policy digest). */
  readonly host_data: string;
  /** Hex SHA-256 of the node's DER SubjectPublicKeyInfo. */
  readonly report_data: string;
}

export interface QuoteInfo {
  readonly format: typeof VIRTUAL_FORMAT;
  /** Base64 of the JSON VirtualQuote. */
  readonly quote: string;
  readonly endorsements: string;
}

const sha256Hex = (data: Uint8Array | string) => createHash('sha256').update(data).digest('hex');

/** The measurement of this build: every node running the same code reports the same value. */
export function codeMeasurement(codeIdentity: string): string {
  return sha256Hex(`covenant-code:${codeIdentity}`);
}

export function defaultHostData(): string {
  return sha256Hex('covenant-virtual-host-data');
}

export function createVirtualQuote(publicKeyDer: Uint8Array, measurement: string, hostData: string): QuoteInfo {
  const quote: VirtualQuote = { format: VIRTUAL_FORMAT, measurement, host_data: hostData, report_data: sha256Hex(publicKeyDer) };
  return { format: VIRTUAL_FORMAT, quote: Buffer.from(JSON.stringify(quote)).toString('base64'), endorsements: '' };
}

export type QuoteVerdict = { ok: true; quote: VirtualQuote } | { ok: false; reason: string };

/** Checks the quote's shape and that it binds the given public key. Trust of measurement and host data is the caller's policy. */
export function verifyVirtualQuote(info: QuoteInfo, publicKeyDer: Uint8Array): QuoteVerdict {
  // The quote comes from the network: nothing about its shape is taken for granted.
  if (typeof info !== 'object' || info === null) return { ok: false, reason: 'quote_info is not an object' };
  if (info.format !== VIRTUAL_FORMAT) return { ok: false, reason: `unsupported quote format ${String(info.format).slice(0, 64)}` };
  if (typeof info.quote !== 'string') return { ok: false, reason: 'quote_info.quote is not a base64 string' };
  let quote: VirtualQuote;
  try {
    quote = JSON.parse(Buffer.from(info.quote, 'base64').toString('utf8')) as VirtualQuote;
  } catch {
    return { ok: false, reason: 'quote is not a virtual quote document' };
  }
  if (typeof quote !== 'object' || quote === null) return { ok: false, reason: 'quote is not a virtual quote document' };
  const hex64 = /^[0-9a-f]{64}$/;
  if (quote.format !== VIRTUAL_FORMAT || !hex64.test(quote.measurement ?? '') || !hex64.test(quote.host_data ?? '') || !hex64.test(quote.report_data ?? '')) {
    return { ok: false, reason: 'quote fields are malformed' };
  }
  if (quote.report_data !== sha256Hex(publicKeyDer)) return { ok: false, reason: 'quote report data does not bind the node public key' };
  return { ok: true, quote };
}
