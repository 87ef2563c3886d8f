/**
 * Signed governance requests (docs/architecture.md, decision 9): a tagged COSE_Sign1 whose payload is the JSON
 * request body, signed with the member's identity key. The protected header carries
 *
 *   1 (alg)                    -35 (ES384, P-384 key) or -7 (ES256, P-256 key)
 *   4 (kid)                    UTF-8 bytes of the member id (hex SHA-256 of the certificate DER)
 *   "svc.gov.msg.type"         proposal | ballot | withdrawal | ack | state_digest | recovery_share
 *   "svc.gov.msg.created_at"   integer seconds since the Unix epoch
 *   "svc.gov.msg.proposal_id"  for ballots and withdrawals
 *
 * Verification answers the member id and the parsed fields, or throws a CovenantError whose code
 * says what was wrong; it never touches the store (the caller supplies the member's certificate).
 */
import { CovenantError } from '../base/errors.js';
import { utf8 } from '../base/bytes.js';
import { CoseHeader, decodeCoseSign1, loadPrivateKey, loadPublicKey, signCoseSign1, verifyCoseSign1, type CoseHeaderMap, type DecodedCoseSign1 } from '../crypto/index.js';

export const COSE_CONTENT_TYPE = 'application/cose';

export const GovHeader = {
  msgType: 'svc.gov.msg.type',
  createdAt: 'svc.gov.msg.created_at',
  proposalId: 'svc.gov.msg.proposal_id',
} as const;

export const GOV_MESSAGE_TYPES = ['proposal', 'ballot', 'withdrawal', 'ack', 'state_digest', 'recovery_share'] as const;
export type GovMessageType = (typeof GOV_MESSAGE_TYPES)[number];

/** How far created_at may be from the node's clock. */
export const CREATED_AT_WINDOW_SECONDS = 5 * 60;

export interface SignGovRequestOptions {
  readonly type: GovMessageType;
  /** The request body (JSON text or bytes); an empty body signs an empty payload. */
  readonly payload: string | Uint8Array;
  readonly privateKeyPem: string;
  readonly memberId: string;
  /** Seconds since the Unix epoch. */
  readonly createdAtSeconds: number;
  readonly proposalId?: string;
}

/** Builds the tagged COSE_Sign1 a member sends for a governance write. */
export function signGovRequest(options: SignGovRequestOptions): Uint8Array {
  const header: CoseHeaderMap = new Map<number | string, unknown>([
    [CoseHeader.kid, utf8.encode(options.memberId)],
    [GovHeader.msgType, options.type],
    [GovHeader.createdAt, options.createdAtSeconds],
  ]);
  if (options.proposalId !== undefined) header.set(GovHeader.proposalId, options.proposalId);
  const payload = typeof options.payload === 'string' ? utf8.encode(options.payload) : options.payload;
  return signCoseSign1({ protectedHeader: header, payload, privateKey: loadPrivateKey(options.privateKeyPem) });
}

export interface VerifiedGovRequest {
  readonly memberId: string;
  readonly type: GovMessageType;
  readonly createdAtSeconds: number;
  readonly proposalId: string | undefined;
  /** The signed payload (the JSON request body). */
  readonly payload: Uint8Array;
  readonly envelope: DecodedCoseSign1;
}

export interface VerifyGovRequestOptions {
  readonly contentType: string | undefined;
  readonly expectedType: GovMessageType;
  /** The node's clock, in milliseconds since the Unix epoch. */
  readonly nowMs: number;
  /** The certificate PEM of a member id, or undefined for an unknown member. */
  readonly memberCertificate: (memberId: string) => string | undefined;
  /** For ballots and withdrawals: the proposal id of the path, which the signed header must name. */
  readonly proposalId?: string;
  /** For routes naming a member in the path: the signer must be that member. */
  readonly memberIdInPath?: string;
  readonly createdAtWindowSeconds?: number;
}

export function unauthenticated(message: string): CovenantError {
  return new CovenantError('InvalidAuthenticationInfo', message, 401);
}

const MEMBER_ID = /^[0-9a-f]{64}$/;
/** The first byte of a CBOR item with tag 18 (major type 6, value 18). */
const COSE_SIGN1_TAG_BYTE = 0xd2;

/** Verifies a governance request; throws InvalidAuthenticationInfo (401), UntaggedCoseSign1 or InvalidCreatedAt (400), or UnsupportedContentType (415). */
export function verifyGovRequest(bytes: Uint8Array, options: VerifyGovRequestOptions): VerifiedGovRequest {
  const contentType = options.contentType?.split(';')[0]?.trim().toLowerCase();
  if (contentType !== COSE_CONTENT_TYPE) {
    throw new CovenantError(
      'UnsupportedContentType',
      `governance writes are COSE_Sign1 envelopes sent with content-type ${COSE_CONTENT_TYPE}, not ${contentType ?? '(none)'}`,
      415,
    );
  }
  let envelope: DecodedCoseSign1;
  try {
    envelope = decodeCoseSign1(bytes);
  } catch (e) {
    throw unauthenticated(`request is not a valid COSE_Sign1 envelope: ${(e as Error).message}`);
  }
  // Tag 18 is the byte 0xd2. docs/governance.md promises tagged envelopes; an untagged one may
  // be meant as something else (a receipt, another protocol's message), so it is not guessed at.
  if (bytes[0] !== COSE_SIGN1_TAG_BYTE) {
    throw new CovenantError('UntaggedCoseSign1', 'governance requests are tagged COSE_Sign1 envelopes (CBOR tag 18); this one is untagged', 400);
  }
  const header = envelope.protectedHeader;
  const kid = header.get(CoseHeader.kid);
  if (!(kid instanceof Uint8Array)) throw unauthenticated('protected header kid (4) is missing or not a byte string');
  const memberId = utf8.decode(kid);
  if (!MEMBER_ID.test(memberId)) throw unauthenticated('protected header kid (4) is not a member id (64 lower-case hex digits)');
  const type = header.get(GovHeader.msgType);
  if (typeof type !== 'string') throw unauthenticated(`protected header "${GovHeader.msgType}" is missing or not a text string`);
  const createdAt = header.get(GovHeader.createdAt);
  if (typeof createdAt !== 'number' || !Number.isSafeInteger(createdAt) || createdAt < 0) {
    throw unauthenticated(`protected header "${GovHeader.createdAt}" is missing or not a non-negative integer`);
  }
  const proposalId = header.get(GovHeader.proposalId);
  if (proposalId !== undefined && typeof proposalId !== 'string') throw unauthenticated(`protected header "${GovHeader.proposalId}" is not a text string`);
  if (envelope.payload === null) throw unauthenticated('governance requests carry their payload (detached payloads are not accepted)');

  // Only after the signature holds do the other fields mean anything, but an unknown signer is
  // reported first: it is the most useful thing to say to a client with the wrong key.
  const certificate = options.memberCertificate(memberId);
  if (certificate === undefined) throw unauthenticated(`no member with id ${memberId} (the kid of the request) is known to the service`);
  let valid: boolean;
  try {
    valid = verifyCoseSign1(envelope, loadPublicKey(certificate));
  } catch (e) {
    throw unauthenticated(`signature could not be checked: ${(e as Error).message}`);
  }
  if (!valid) throw unauthenticated(`signature does not verify with the certificate of member ${memberId}`);

  if (type !== options.expectedType) {
    throw unauthenticated(`message type "${type}" does not match this endpoint, which accepts "${options.expectedType}"`);
  }
  if (options.memberIdInPath !== undefined && options.memberIdInPath !== memberId) {
    throw unauthenticated(`request is signed by member ${memberId}, but the path names member ${options.memberIdInPath}`);
  }
  if (options.proposalId !== undefined && proposalId !== options.proposalId) {
    throw unauthenticated(
      proposalId === undefined
        ? `protected header "${GovHeader.proposalId}" is required for a ${type}`
        : `signed proposal id ${proposalId} does not match proposal ${options.proposalId} of the path`,
    );
  }
  const window = options.createdAtWindowSeconds ?? CREATED_AT_WINDOW_SECONDS;
  const nowSeconds = Math.floor(options.nowMs / 1000);
  if (Math.abs(createdAt - nowSeconds) > window) {
    throw new CovenantError(
      'InvalidCreatedAt',
      `created_at ${createdAt} is more than ${window}s away from the node's clock (${nowSeconds}); check the clock of the signer`,
      400,
    );
  }
  return { memberId, type: type as GovMessageType, createdAtSeconds: createdAt, proposalId, payload: envelope.payload, envelope };
}
