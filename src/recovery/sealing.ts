/**
 * Local sealing and sealed shares: the cryptographic core of sealing-based recovery (the spec's
 * "Local sealing"; docs/architecture.md, decision 17; docs/sealing.md has the exact bytes).
 *
 * VIRTUAL SEALING PROTECTS NOTHING. Hardware derives DERIVED_KEY inside the CPU from a key that
 * never leaves it; virtual mode derives it in software from a CPU key kept in a file
 * (src/platform/virtual-cpu-key.ts). Anyone who can read that file and knows the node's
 * measurement and host data (both public: they are in its quote) can unseal its recovery key and,
 * with the sealed shares in the ledger, read every ledger secret. It exists so that the same
 * recovery path runs in virtual mode as on hardware.
 *
 * The public face, in the order a node uses it:
 *
 *   deriveVirtualDerivedKey({cpuKey, measurement, hostData, tcbVersion}) → DERIVED_KEY (32 bytes)
 *       HMAC-SHA256(cpuKey, lp(label) ‖ lp(measurement) ‖ lp(host data) ‖ lp(TCB version)),
 *       lp(x) = u32 LE length ‖ x; measurement and host data as the bytes of their hex.
 *   deriveSealingKey(derivedKey) → the AES-256-GCM sealing key
 *       HKDF-SHA256(DERIVED_KEY, salt empty, info "covenant sealing key v1", 32 bytes).
 *   createRecoveryKeyPair() → {publicKeyPem, privateKeyPkcs8Der}, RSA-2048 (at join).
 *   sealRecoveryPrivateKey(sealingKey, privateKeyPkcs8Der, binding, randomBytes) → sealed record
 *       0x01 ‖ iv[12] ‖ AES-256-GCM(PKCS#8 DER) ‖ tag[16],
 *       AAD = 0x01 ‖ "covenant sealed recovery key" ‖ 0x00 ‖ UTF-8(binding).
 *       `binding` is the node's persistent name (sealing_recovery.location.name, which survives
 *       the restart a recovery is; or the node id if that is what keys the row), so that a record
 *       moved to another node's row does not unseal there.
 *   unsealRecoveryPrivateKey(sealingKey, record, binding) → PKCS#8 DER, or MalformedSealedKey /
 *       UnsealFailed.
 *   issueSealedShares(latest, recipients, randomBytes) → {wrappedLatestSecret,
 *       encryptedWrappingKeys}: a fresh wrapping key wraps the latest ledger secret (the wrapped
 *       latest secret record of secret-chain.ts, so the previous-secret records chain the older
 *       secrets exactly as for member shares), and each recipient gets 0x01 ‖ wrapping key
 *       RSA-OAEP-SHA256 encrypted to its recovery public key.
 *   recoverChainWithSealedShare({...}) → the chain of ledger secrets, oldest first: unseal, decrypt
 *       the wrapping key, unwrapSecretChain.
 *
 * Randomness: the wrapping key and the IVs come from the injected `randomBytes` (the deterministic
 * zone); the RSA key pair and the RSA-OAEP seeds are OpenSSL's (as for member shares), so key
 * pairs and encrypted wrapping keys are not reproducible from a seed, only their formats.
 */
import nodeCrypto, { type KeyObject } from 'node:crypto';
import { assert, concatBytes, fromHex, isCovenantError, utf8 } from '../base/index.js';
import { AES_GCM_IV_LENGTH_BYTES, AES_GCM_KEY_LENGTH_BYTES, AES_GCM_TAG_LENGTH_BYTES, generateRsaKeyPair, hkdfSha256, hmacSha256, openAesGcm, sealAesGcm } from '../crypto/index.js';
import { RecoveryError } from './errors.js';
import { draw, type RandomBytes } from './random.js';
import { encryptRsaOaepSha256, loadRsaPublicKey, privateDecryptRsaOaepSha256, RSA_MODULUS_BITS_MIN } from './rsa-oaep.js';
import { type ChainSecret, unwrapSecretChain, WRAPPING_KEY_LENGTH_BYTES, wrapLatestSecret } from './secret-chain.js';

/** The virtual CPU key: 32 secret bytes per machine (the same as src/platform/virtual-cpu-key.ts reads). */
export const VIRTUAL_CPU_KEY_LENGTH_BYTES = 32;
/**
 * The TCB version virtual mode reports. A TCB version is text here: a hardware platform would pass
 * the canonical text of its own (e.g. the decimal of SEV-SNP's 64-bit TCB_VERSION). Raising it
 * (a "TCB update") changes DERIVED_KEY, so keys sealed before no longer unseal.
 */
export const VIRTUAL_TCB_VERSION = 'virtual-tcb-1';
export const DERIVED_KEY_LENGTH_BYTES = 32;
export const SEALING_KEY_LENGTH_BYTES = AES_GCM_KEY_LENGTH_BYTES;
/** Recovery key pairs are RSA of the size members' encryption keys must have at least. */
export const RECOVERY_KEY_MODULUS_BITS = RSA_MODULUS_BITS_MIN;
export const SEALED_RECOVERY_KEY_VERSION = 1;
/** An RSA-2048 private key is about 1.2 KiB of PKCS#8 DER; 4 KiB leaves room for keys up to ~6000 bits. */
export const RECOVERY_PRIVATE_KEY_DER_BYTES_MAX = 4096;
const SEALED_KEY_HEADER_BYTES = 1;
export const SEALED_RECOVERY_KEY_BYTES_MAX = SEALED_KEY_HEADER_BYTES + AES_GCM_IV_LENGTH_BYTES + RECOVERY_PRIVATE_KEY_DER_BYTES_MAX + AES_GCM_TAG_LENGTH_BYTES;
/** The plaintext of a sealed share: version ‖ wrapping key. */
export const SEALED_SHARE_VERSION = 1;
export const SEALED_SHARE_PLAINTEXT_BYTES = 1 + WRAPPING_KEY_LENGTH_BYTES;

const DERIVED_KEY_LABEL = 'covenant virtual derived key v1';
const SEALING_KEY_INFO = 'covenant sealing key v1';
const SEALED_KEY_AAD_LABEL = 'covenant sealed recovery key';
/** Each input of the derivation; far above any real one (a measurement is 32-48 bytes). */
const DERIVATION_FIELD_BYTES_MAX = 1024;
const BINDING_BYTES_MAX = 1024;
const EMPTY = new Uint8Array(0);
const HEX = /^(?:[0-9a-fA-F]{2})+$/;

/** What DERIVED_KEY depends on (the spec's rule 1): the CPU key, the measurement, the policy and the TCB version. */
export interface VirtualDerivedKeyInputs {
  /** The machine's virtual CPU key (32 secret bytes, src/platform/virtual-cpu-key.ts). */
  readonly cpuKey: Uint8Array;
  /** Hex of the node's measurement (src/attestation/virtual.ts, codeMeasurement); either case. */
  readonly measurement: string;
  /** Hex of the node's host data, the digest of its security policy; either case. */
  readonly hostData: string;
  /** The TCB version's text: VIRTUAL_TCB_VERSION in virtual mode. */
  readonly tcbVersion: string;
}

/** A node's recovery key pair, made at join: the public key goes to the ledger, the private key only sealed. */
export interface RecoveryKeyPair {
  /** SubjectPublicKeyInfo PEM, RSA of RECOVERY_KEY_MODULUS_BITS. */
  readonly publicKeyPem: string;
  /** PKCS#8 DER of the private key: seal it, then zero it. */
  readonly privateKeyPkcs8Der: Uint8Array;
}

/** A node that receives a sealed share: a trusted node with a sealed recovery key. */
export interface SealedShareRecipient {
  /** The name the recipient finds its share under: the key of its row of sealed recovery keys (its location name or node id). */
  readonly id: string;
  /** Its recovery public key (SubjectPublicKeyInfo PEM), as in its row. */
  readonly recoveryPublicKeyPem: string;
}

/** One issue of sealed shares: what the primary stores (internal.sealed_shares). */
export interface SealedShares {
  /** The latest ledger secret under this issue's wrapping key: secret-chain.ts's wrapped latest secret record. */
  readonly wrappedLatestSecret: Uint8Array;
  /** Recipient id → RSA-OAEP-SHA256 ciphertext of 0x01 ‖ wrapping key, in the recipients' order. */
  readonly encryptedWrappingKeys: ReadonlyMap<string, Uint8Array>;
}

/** What a recovering node reads (its own sealed key and share, the ledger's records) to get the secrets back. */
export interface SealedShareRecovery {
  /** deriveSealingKey of this node's DERIVED_KEY. */
  readonly sealingKey: Uint8Array;
  /** The node's sealed recovery key record (its row of sealed recovery keys). */
  readonly sealedPrivateKeyRecord: Uint8Array;
  /** The binding the record was sealed with (the node's location name or node id). */
  readonly binding: string;
  /** The node's entry of SealedShares.encryptedWrappingKeys. */
  readonly encryptedWrappingKey: Uint8Array;
  /** SealedShares.wrappedLatestSecret of the same issue. */
  readonly wrappedLatestSecret: Uint8Array;
  /** The ledger's previous-secret records (secret-chain.ts), in any order. */
  readonly previousRecords: readonly Uint8Array[];
}

function lengthPrefixed(field: Uint8Array, what: string): Uint8Array {
  assert(field.byteLength <= DERIVATION_FIELD_BYTES_MAX, () => `${what} is ${field.byteLength} bytes, at most ${DERIVATION_FIELD_BYTES_MAX}`);
  const out = new Uint8Array(4 + field.byteLength);
  new DataView(out.buffer).setUint32(0, field.byteLength, true);
  out.set(field, 4);
  return out;
}

function hexField(hex: string, what: string): Uint8Array {
  // The node's own measurement and host data, checked where they enter (attestation, configuration).
  assert(typeof hex === 'string' && HEX.test(hex), () => `${what} is a non-empty even-length hex string, got ${JSON.stringify(String(hex).slice(0, 80))}`);
  return fromHex(hex);
}

/**
 * Virtual mode's DERIVED_KEY, from the inputs hardware would mix in (docs/sealing.md, "The
 * derivation"): HMAC-SHA256 keyed with the CPU key over the length-prefixed label, measurement,
 * host data and TCB version. The CPU key is the only secret: THIS PROTECTS NOTHING against whoever
 * can read the CPU key file.
 */
export function deriveVirtualDerivedKey(inputs: VirtualDerivedKeyInputs): Uint8Array {
  const { cpuKey, measurement, hostData, tcbVersion } = inputs;
  assert(cpuKey instanceof Uint8Array && cpuKey.byteLength === VIRTUAL_CPU_KEY_LENGTH_BYTES, () => `a virtual CPU key is ${VIRTUAL_CPU_KEY_LENGTH_BYTES} bytes, got ${cpuKey?.byteLength}`);
  assert(typeof tcbVersion === 'string' && tcbVersion.length > 0, 'a TCB version is non-empty text');
  const message = concatBytes([
    lengthPrefixed(utf8.encode(DERIVED_KEY_LABEL), 'label'),
    lengthPrefixed(hexField(measurement, 'measurement'), 'measurement'),
    lengthPrefixed(hexField(hostData, 'host data'), 'host data'),
    lengthPrefixed(utf8.encode(tcbVersion), 'TCB version'),
  ]);
  return hmacSha256(cpuKey, message);
}

/** The AES-256-GCM sealing key: HKDF-SHA256(DERIVED_KEY, salt empty, info "covenant sealing key v1", 32 bytes). */
export function deriveSealingKey(derivedKey: Uint8Array): Uint8Array {
  assert(derivedKey.byteLength === DERIVED_KEY_LENGTH_BYTES, () => `DERIVED_KEY is ${DERIVED_KEY_LENGTH_BYTES} bytes, got ${derivedKey.byteLength}`);
  return hkdfSha256(derivedKey, EMPTY, SEALING_KEY_INFO, SEALING_KEY_LENGTH_BYTES);
}

/** A fresh RSA recovery key pair (OpenSSL's randomness, not the injected source: a key pair is never reproduced). */
export function createRecoveryKeyPair(): RecoveryKeyPair {
  const pair = generateRsaKeyPair(RECOVERY_KEY_MODULUS_BITS);
  return { publicKeyPem: pair.publicKeyPem, privateKeyPkcs8Der: new Uint8Array(pair.privateKey.export({ format: 'der', type: 'pkcs8' })) };
}

function checkSealingKey(sealingKey: Uint8Array): void {
  assert(sealingKey.byteLength === SEALING_KEY_LENGTH_BYTES, () => `a sealing key is ${SEALING_KEY_LENGTH_BYTES} bytes, got ${sealingKey.byteLength}`);
}

function checkBinding(binding: string): Uint8Array {
  assert(typeof binding === 'string' && binding.length > 0, 'a sealed recovery key is bound to a non-empty name (its location name or node id)');
  const bytes = utf8.encode(binding);
  assert(bytes.byteLength <= BINDING_BYTES_MAX, () => `a binding is at most ${BINDING_BYTES_MAX} bytes, got ${bytes.byteLength}`);
  return bytes;
}

function sealedKeyAad(binding: string): Uint8Array {
  return concatBytes([new Uint8Array([SEALED_RECOVERY_KEY_VERSION]), utf8.encode(SEALED_KEY_AAD_LABEL), new Uint8Array([0]), checkBinding(binding)]);
}

/** The RSA private key of PKCS#8 DER bytes, or undefined if they are not one of at least RSA_MODULUS_BITS_MIN bits. */
function rsaPrivateKeyFromDer(der: Uint8Array): KeyObject | undefined {
  let key: KeyObject;
  try {
    key = nodeCrypto.createPrivateKey({ key: Buffer.from(der.buffer, der.byteOffset, der.byteLength), format: 'der', type: 'pkcs8' });
  } catch {
    return undefined;
  }
  const bits = key.asymmetricKeyDetails?.modulusLength ?? 0;
  return key.asymmetricKeyType === 'rsa' && bits >= RSA_MODULUS_BITS_MIN ? key : undefined;
}

/**
 * Seals the node's recovery private key (PKCS#8 DER) under the sealing key, bound to `binding` (the
 * name of the row the record goes to: the node's location name, or its id). Draws the 12-byte IV from `randomBytes`. A key that is not
 * RSA of at least 2048 bits, or is longer than RECOVERY_PRIVATE_KEY_DER_BYTES_MAX, is
 * InvalidEncryptionKey.
 */
export function sealRecoveryPrivateKey(sealingKey: Uint8Array, privateKeyPkcs8Der: Uint8Array, binding: string, randomBytes: RandomBytes): Uint8Array {
  checkSealingKey(sealingKey);
  const aad = sealedKeyAad(binding);
  if (privateKeyPkcs8Der.byteLength > RECOVERY_PRIVATE_KEY_DER_BYTES_MAX || rsaPrivateKeyFromDer(privateKeyPkcs8Der) === undefined) {
    throw new RecoveryError('InvalidEncryptionKey', `the recovery private key to seal for ${binding} is not the PKCS#8 DER of an RSA key of at least ${RSA_MODULUS_BITS_MIN} bits within ${RECOVERY_PRIVATE_KEY_DER_BYTES_MAX} bytes`, { binding });
  }
  const iv = draw(randomBytes, AES_GCM_IV_LENGTH_BYTES);
  return concatBytes([new Uint8Array([SEALED_RECOVERY_KEY_VERSION]), iv, sealAesGcm(sealingKey, iv, privateKeyPkcs8Der, aad)]);
}

/**
 * Inverse of sealRecoveryPrivateKey: the PKCS#8 DER of the recovery private key. A record of the
 * wrong layout is MalformedSealedKey; one that does not authenticate (another CPU key, measurement,
 * host data or TCB version; another binding; changed bytes) is UnsealFailed.
 */
export function unsealRecoveryPrivateKey(sealingKey: Uint8Array, record: Uint8Array, binding: string): Uint8Array {
  checkSealingKey(sealingKey);
  const aad = sealedKeyAad(binding);
  const minBytes = SEALED_KEY_HEADER_BYTES + AES_GCM_IV_LENGTH_BYTES + 1 + AES_GCM_TAG_LENGTH_BYTES;
  if (record.byteLength < minBytes || record.byteLength > SEALED_RECOVERY_KEY_BYTES_MAX) {
    throw new RecoveryError('MalformedSealedKey', `sealed recovery key of ${binding} is ${record.byteLength} bytes, not in [${minBytes}, ${SEALED_RECOVERY_KEY_BYTES_MAX}]`, { binding });
  }
  if (record[0] !== SEALED_RECOVERY_KEY_VERSION) {
    throw new RecoveryError('MalformedSealedKey', `sealed recovery key of ${binding}: version ${record[0]} is not ${SEALED_RECOVERY_KEY_VERSION}`, { binding });
  }
  const ivEnd = SEALED_KEY_HEADER_BYTES + AES_GCM_IV_LENGTH_BYTES;
  let der: Uint8Array;
  try {
    der = openAesGcm(sealingKey, record.subarray(SEALED_KEY_HEADER_BYTES, ivEnd), record.subarray(ivEnd), aad);
  } catch (e) {
    if (isCovenantError(e) && e.code === 'DecryptionFailed') {
      throw new RecoveryError(
        'UnsealFailed',
        `the sealed recovery key of ${binding} does not unseal with this node's sealing key: the CPU key (the virtual CPU key file), measurement, host data or TCB version differ from the ones that sealed it, or the record was sealed for another node, or its bytes were changed`,
        { binding },
      );
    }
    throw e;
  }
  if (rsaPrivateKeyFromDer(der) === undefined) {
    der.fill(0);
    throw new RecoveryError('MalformedSealedKey', `the sealed recovery key of ${binding} unseals to bytes that are not an RSA private key`, { binding });
  }
  return der;
}

/**
 * A fresh issue of sealed shares: a new wrapping key (32 bytes drawn from `randomBytes` first)
 * wraps the latest ledger secret (a 12-byte IV drawn next; secret-chain.ts's record), and each
 * recipient gets 0x01 ‖ wrapping key encrypted to its recovery public key with RSA-OAEP-SHA256.
 * The wrapping key is not returned. Every key is checked before anything is drawn: one that is
 * not RSA of at least 2048 bits is InvalidEncryptionKey. With no recipient nothing can recover
 * from the issue: the caller may skip it.
 */
export function issueSealedShares(latest: ChainSecret, recipients: readonly SealedShareRecipient[], randomBytes: RandomBytes): SealedShares {
  assert(new Set(recipients.map((r) => r.id)).size === recipients.length, 'sealed share recipients are distinct nodes');
  const keys = recipients.map((r) => loadRsaPublicKey(r.recoveryPublicKeyPem, `recovery public key of node ${r.id}`, { nodeId: r.id }));
  const wrappingKey = new Uint8Array(draw(randomBytes, WRAPPING_KEY_LENGTH_BYTES));
  const plaintext = new Uint8Array(SEALED_SHARE_PLAINTEXT_BYTES);
  try {
    const wrappedLatestSecret = wrapLatestSecret(wrappingKey, latest, randomBytes);
    plaintext[0] = SEALED_SHARE_VERSION;
    plaintext.set(wrappingKey, 1);
    const encryptedWrappingKeys = new Map<string, Uint8Array>();
    recipients.forEach((r, i) => encryptedWrappingKeys.set(r.id, encryptRsaOaepSha256(keys[i]!, plaintext)));
    return { wrappedLatestSecret, encryptedWrappingKeys };
  } finally {
    wrappingKey.fill(0);
    plaintext.fill(0);
  }
}

/** The wrapping key of a sealed share, decrypted with the node's recovery private key. */
function decryptSealedShare(privateKeyPkcs8Der: Uint8Array, encryptedWrappingKey: Uint8Array, binding: string): Uint8Array {
  const key = rsaPrivateKeyFromDer(privateKeyPkcs8Der);
  assert(key !== undefined, 'an unsealed recovery key is an RSA private key (unsealRecoveryPrivateKey checks it)');
  const plaintext = privateDecryptRsaOaepSha256(key, encryptedWrappingKey);
  if (plaintext === undefined) {
    throw new RecoveryError('SealedShareDecryptionFailed', `the sealed share of ${binding} does not decrypt with its recovery private key (encrypted to another node, or tampered)`, { binding });
  }
  try {
    if (plaintext.byteLength !== SEALED_SHARE_PLAINTEXT_BYTES || plaintext[0] !== SEALED_SHARE_VERSION) {
      throw new RecoveryError('MalformedSealedShare', `the sealed share of ${binding} decrypts to ${plaintext.byteLength} bytes, not version ${SEALED_SHARE_VERSION} ‖ a ${WRAPPING_KEY_LENGTH_BYTES}-byte wrapping key`, { binding });
    }
    return plaintext.slice(1);
  } finally {
    plaintext.fill(0);
  }
}

/**
 * What a recovering node does with its sealed share (the spec's rule 4): unseals its recovery
 * private key (MalformedSealedKey, UnsealFailed), decrypts its wrapping key
 * (SealedShareDecryptionFailed, MalformedSealedShare), unwraps the latest secret and the chain
 * below it (LedgerSecretUnwrapFailed, MalformedSecretRecord, SecretChainBroken). Returns the whole
 * chain of ledger secrets, oldest first, as unwrapSecretChain does for member shares.
 */
export function recoverChainWithSealedShare(input: SealedShareRecovery): ChainSecret[] {
  const der = unsealRecoveryPrivateKey(input.sealingKey, input.sealedPrivateKeyRecord, input.binding);
  let wrappingKey: Uint8Array | undefined;
  try {
    wrappingKey = decryptSealedShare(der, input.encryptedWrappingKey, input.binding);
    return unwrapSecretChain(wrappingKey, input.wrappedLatestSecret, input.previousRecords);
  } finally {
    der.fill(0);
    wrappingKey?.fill(0);
  }
}
