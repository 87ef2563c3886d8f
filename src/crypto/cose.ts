/**
 * COSE_Sign1 (RFC 9052 §4.2) for governance requests and COSE receipts.
 *
 *   COSE_Sign1 = #6.18([ protected: bstr .cbor header_map, unprotected: header_map,
 *                        payload: bstr / nil, signature: bstr ])
 *   Sig_structure = [ "Signature1", protected (the exact bytes), external_aad: h'', payload ]
 *
 * Signatures are ECDSA with the raw r ‖ s encoding (IEEE P1363) that COSE requires:
 * alg -35 (ES384) needs a P-384 key, alg -7 (ES256) a P-256 key.
 */
import { Encoder, Tag } from 'cbor-x';
import type { KeyObject } from 'node:crypto';
import { cryptoError, CryptoErrorCode } from './errors.js';
import { ecCurveOf, signEcdsa, verifyEcdsa, type EcCurve } from './keys.js';

export type CoseAlgorithm = -35 | -7;
export type CoseLabel = number | string;
export type CoseHeaderMap = Map<CoseLabel, unknown>;

export const COSE_SIGN1_TAG = 18;
/** Common header labels (RFC 9052 §3.1). */
export const CoseHeader = { alg: 1, crit: 2, contentType: 3, kid: 4 } as const;

const CURVE_OF_ALG: Record<CoseAlgorithm, EcCurve> = { [-35]: 'P-384', [-7]: 'P-256' };

// The defaults of cbor-x are not canonical (records, objects as maps, tagged typed arrays).
const encoder = new Encoder({ mapsAsObjects: false, useRecords: false, tagUint8Array: false, variableMapSize: true });

export function encodeCbor(value: unknown): Uint8Array {
  return encoder.encode(value);
}

export function decodeCbor(bytes: Uint8Array): unknown {
  return encoder.decode(bytes);
}

function invalid(message: string): Error {
  return cryptoError(CryptoErrorCode.InvalidCoseSign1, message);
}

function algorithmFor(key: KeyObject): CoseAlgorithm {
  return ecCurveOf(key) === 'P-384' ? -35 : -7;
}

function sigStructure(protectedBytes: Uint8Array, payload: Uint8Array): Uint8Array {
  return encoder.encode(['Signature1', protectedBytes, new Uint8Array(0), payload]);
}

export interface SignCoseSign1Options {
  readonly protectedHeader: CoseHeaderMap;
  readonly unprotectedHeader?: CoseHeaderMap;
  /** null for a detached payload (the verifier supplies it). */
  readonly payload: Uint8Array | null;
  /** Signed with this payload when `payload` is null. */
  readonly detachedPayload?: Uint8Array;
  readonly privateKey: KeyObject;
  /** Defaults to the key's algorithm; must agree with it. */
  readonly alg?: CoseAlgorithm;
}

/**
 * Signs and returns the tagged COSE_Sign1 bytes. `alg` (label 1) is put first in the protected
 * header unless the caller already set it; header order is otherwise the caller's.
 */
export function signCoseSign1(options: SignCoseSign1Options): Uint8Array {
  const alg = options.alg ?? algorithmFor(options.privateKey);
  if (CURVE_OF_ALG[alg] !== ecCurveOf(options.privateKey)) {
    throw cryptoError(CryptoErrorCode.InvalidKey, `COSE alg ${alg} needs a ${CURVE_OF_ALG[alg]} key`);
  }
  const headerAlg = options.protectedHeader.get(CoseHeader.alg);
  if (headerAlg !== undefined && headerAlg !== alg) throw invalid(`protected header alg ${String(headerAlg)} differs from ${alg}`);
  const protectedHeader: CoseHeaderMap = headerAlg === undefined ? new Map<CoseLabel, unknown>([[CoseHeader.alg, alg], ...options.protectedHeader]) : options.protectedHeader;
  const protectedBytes = encoder.encode(protectedHeader);
  const signedPayload = options.payload ?? options.detachedPayload;
  if (signedPayload === undefined) throw invalid('a detached payload (payload null) needs detachedPayload to sign');
  const signature = signEcdsa(options.privateKey, sigStructure(protectedBytes, signedPayload), 'ieee-p1363');
  return encoder.encode(new Tag([protectedBytes, options.unprotectedHeader ?? new Map(), options.payload, signature], COSE_SIGN1_TAG));
}

export interface CoseSign1Parts {
  /** The exact protected bytes (as signed). */
  readonly protectedBytes: Uint8Array;
  readonly unprotectedHeader: CoseHeaderMap;
  readonly payload: Uint8Array | null;
  readonly signature: Uint8Array;
}

/**
 * Re-encodes a signed COSE_Sign1 (tagged), for instance with another unprotected header, which
 * the signature does not cover.
 */
export function encodeCoseSign1(parts: CoseSign1Parts): Uint8Array {
  return encoder.encode(new Tag([parts.protectedBytes, parts.unprotectedHeader, parts.payload, parts.signature], COSE_SIGN1_TAG));
}

export interface DecodedCoseSign1 {
  readonly protectedHeader: CoseHeaderMap;
  /** The exact protected bytes, as signed. */
  readonly protectedBytes: Uint8Array;
  readonly unprotectedHeader: CoseHeaderMap;
  /** null when detached. */
  readonly payload: Uint8Array | null;
  readonly signature: Uint8Array;
  readonly alg: CoseAlgorithm;
}

const COSE_SIGN1_BYTES_MAX = 16 * 1024 * 1024;

function asBytes(value: unknown): Uint8Array | undefined {
  return value instanceof Uint8Array ? new Uint8Array(value.buffer, value.byteOffset, value.byteLength) : undefined;
}

/** Declared entry count of a definite-length CBOR map header, or undefined for anything else. */
function declaredMapSize(bytes: Uint8Array): number | undefined {
  const first = bytes[0];
  if (first === undefined || first >> 5 !== 5) return undefined;
  const info = first & 0x1f;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (info < 24) return info;
  if (info === 24 && bytes.byteLength >= 2) return dv.getUint8(1);
  if (info === 25 && bytes.byteLength >= 3) return dv.getUint16(1);
  if (info === 26 && bytes.byteLength >= 5) return dv.getUint32(1);
  return undefined;
}

function checkLabels(map: CoseHeaderMap, where: string): void {
  for (const label of map.keys()) {
    if (typeof label !== 'string' && !(typeof label === 'number' && Number.isInteger(label))) {
      throw invalid(`${where} header label ${String(label)} is neither an integer nor a text string`);
    }
  }
}

/** Decodes tagged (18) or untagged COSE_Sign1 bytes; InvalidCoseSign1 for anything malformed. */
export function decodeCoseSign1(bytes: Uint8Array): DecodedCoseSign1 {
  if (bytes.byteLength > COSE_SIGN1_BYTES_MAX) throw invalid(`COSE_Sign1 of ${bytes.byteLength} bytes exceeds ${COSE_SIGN1_BYTES_MAX}`);
  let outer: unknown;
  try {
    outer = encoder.decode(bytes);
  } catch (e) {
    throw invalid(`not CBOR: ${(e as Error).message}`);
  }
  if (outer instanceof Tag) {
    if (outer.tag !== COSE_SIGN1_TAG) throw invalid(`CBOR tag ${outer.tag} is not COSE_Sign1 (18)`);
    outer = outer.value;
  }
  if (!Array.isArray(outer) || outer.length !== 4) throw invalid('COSE_Sign1 must be an array of 4 elements');
  const [protectedRaw, unprotectedHeader, payloadRaw, signatureRaw] = outer as unknown[];
  const protectedBytes = asBytes(protectedRaw);
  if (protectedBytes === undefined) throw invalid('protected header must be a byte string');
  let protectedHeader: CoseHeaderMap;
  if (protectedBytes.byteLength === 0) {
    protectedHeader = new Map();
  } else {
    let decoded: unknown;
    try {
      decoded = encoder.decode(protectedBytes);
    } catch (e) {
      throw invalid(`protected header is not CBOR: ${(e as Error).message}`);
    }
    if (!(decoded instanceof Map)) throw invalid('protected header must encode a map');
    // cbor-x keeps the last of duplicate labels; RFC 9052 requires rejecting them.
    if (declaredMapSize(protectedBytes) !== decoded.size) throw invalid('protected header has duplicate labels or an indefinite length');
    protectedHeader = decoded as CoseHeaderMap;
  }
  if (!(unprotectedHeader instanceof Map)) throw invalid('unprotected header must be a map');
  checkLabels(protectedHeader, 'protected');
  checkLabels(unprotectedHeader as CoseHeaderMap, 'unprotected');
  for (const label of (unprotectedHeader as CoseHeaderMap).keys()) {
    if (protectedHeader.has(label)) throw invalid(`header label ${String(label)} is both protected and unprotected`);
  }
  const payload = payloadRaw === null ? null : asBytes(payloadRaw);
  if (payload === undefined) throw invalid('payload must be a byte string or nil');
  const signature = asBytes(signatureRaw);
  if (signature === undefined) throw invalid('signature must be a byte string');
  const alg = protectedHeader.get(CoseHeader.alg);
  if (alg !== -35 && alg !== -7) throw invalid(`protected header alg ${String(alg)} is not supported (ES384 -35, ES256 -7)`);
  return { protectedHeader, protectedBytes, unprotectedHeader: unprotectedHeader as CoseHeaderMap, payload, signature, alg };
}

/**
 * True when the signature verifies with `publicKey`. The key's curve must match the envelope's alg
 * (false otherwise). A detached envelope needs `detachedPayload`.
 */
export function verifyCoseSign1(decoded: DecodedCoseSign1, publicKey: KeyObject, detachedPayload?: Uint8Array): boolean {
  if (CURVE_OF_ALG[decoded.alg] !== ecCurveOf(publicKey)) return false;
  const payload = decoded.payload ?? detachedPayload;
  if (payload === undefined) throw invalid('detached payload required to verify this COSE_Sign1');
  if (decoded.payload !== null && detachedPayload !== undefined) throw invalid('COSE_Sign1 has an attached payload; a detached one was also given');
  const expectedLength = decoded.alg === -35 ? 96 : 64;
  if (decoded.signature.byteLength !== expectedLength) return false;
  return verifyEcdsa(publicKey, sigStructure(decoded.protectedBytes, payload), decoded.signature, 'ieee-p1363');
}
