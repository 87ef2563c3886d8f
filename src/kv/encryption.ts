/**
 * Encryption of the private domain (docs/architecture.md, decision 6): AES-256-GCM under the ledger secret that
 * applies to the transaction's seqno, with a 12-byte IV bound to the transaction id:
 *
 *   IV = seqno as 8 bytes little-endian ‖ view as 4 bytes little-endian
 *
 * A given (view, seqno) holds one transaction for ever (a primary never rewrites its own log
 * within a view, and a rewrite after a view change has a higher view), so an IV is never reused
 * under one key. Snapshots are encrypted under a separate key derived from the ledger secret
 * (HKDF-SHA-256, info "covenant kv snapshot v1") because a snapshot at seqno S shares S and the
 * view with the transaction at S.
 *
 * An empty plaintext is not encrypted (empty in, empty out): the private part of a transaction
 * that wrote no private map costs nothing, and its absence is covered by the ledger entry digest.
 */
import { createCipheriv, createDecipheriv, hkdfSync, type DecipherGCM } from 'node:crypto';
import { assert, type Seqno, type View } from '../base/index.js';
import { decryptionFailed, noLedgerSecret } from './errors.js';

export const LEDGER_SECRET_BYTES = 32;
export const AES_GCM_IV_BYTES = 12;
export const AES_GCM_TAG_BYTES = 16;
const VIEW_MAX = 0xffff_ffff;
const SNAPSHOT_KEY_INFO = 'covenant kv snapshot v1';
const EMPTY = new Uint8Array(0);

export interface LedgerSecret {
  /** The first seqno whose private writes this secret encrypts. */
  readonly fromSeqno: Seqno;
  readonly secret: Uint8Array;
}

/**
 * Keys as raw bytes: createCipheriv with a Buffer key is about 15% cheaper per call than with a
 * KeyObject (measured with Node 20), and it runs once per transaction on every node.
 */
interface SecretKeys extends LedgerSecret {
  readonly entryKey: Buffer;
  readonly snapshotKey: Buffer;
}

/** The ledger secrets of the service, each applying from a seqno until the next one's. */
export class LedgerSecrets {
  readonly #secrets: SecretKeys[] = [];

  constructor(secrets: readonly LedgerSecret[] = []) {
    for (const s of secrets) this.add(s.fromSeqno, s.secret);
  }

  /** Adds a secret used from `fromSeqno` on (rekey). Seqnos must increase. */
  add(fromSeqno: Seqno, secret: Uint8Array): void {
    assert(Number.isSafeInteger(fromSeqno) && fromSeqno >= 0, `bad fromSeqno ${fromSeqno}`);
    assert(secret.byteLength === LEDGER_SECRET_BYTES, `a ledger secret has ${LEDGER_SECRET_BYTES} bytes`);
    const last = this.#secrets.at(-1);
    assert(last === undefined || fromSeqno > last.fromSeqno, `ledger secret from ${fromSeqno} is not after ${last?.fromSeqno}`);
    const copy = new Uint8Array(secret);
    const snapshotKeyBytes = new Uint8Array(hkdfSync('sha256', copy, EMPTY, SNAPSHOT_KEY_INFO, 32));
    this.#secrets.push({
      fromSeqno,
      secret: copy,
      entryKey: Buffer.from(copy),
      snapshotKey: Buffer.from(snapshotKeyBytes),
    });
  }

  get size(): number {
    return this.#secrets.length;
  }

  /** All secrets, oldest first (copies). */
  list(): LedgerSecret[] {
    return this.#secrets.map((s) => ({ fromSeqno: s.fromSeqno, secret: new Uint8Array(s.secret) }));
  }

  /** The secret that applies to `seqno`. */
  keysFor(seqno: Seqno): SecretKeys {
    // Rekeys are rare and recent seqnos are the common case: scan from the newest.
    for (let i = this.#secrets.length - 1; i >= 0; i--) {
      const s = this.#secrets[i]!;
      if (s.fromSeqno <= seqno) return s;
    }
    throw noLedgerSecret(`no ledger secret applies to seqno ${seqno}`);
  }
}

function ivFor(view: View, seqno: Seqno): Buffer {
  assert(Number.isSafeInteger(seqno) && seqno >= 0, `bad seqno ${seqno}`);
  assert(Number.isInteger(view) && view >= 0 && view <= VIEW_MAX, `bad view ${view}`);
  const iv = Buffer.allocUnsafe(AES_GCM_IV_BYTES);
  iv.writeUInt32LE(seqno % 0x1_0000_0000, 0);
  iv.writeUInt32LE(Math.floor(seqno / 0x1_0000_0000), 4);
  iv.writeUInt32LE(view, 8);
  return iv;
}

function seal(key: Buffer, iv: Buffer, plaintext: Uint8Array, aad: Uint8Array): Uint8Array {
  const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: AES_GCM_TAG_BYTES });
  if (aad.byteLength > 0) cipher.setAAD(aad);
  const out = Buffer.allocUnsafe(plaintext.byteLength + AES_GCM_TAG_BYTES);
  const body = cipher.update(plaintext);
  out.set(body, 0);
  const tail = cipher.final();
  out.set(tail, body.byteLength);
  out.set(cipher.getAuthTag(), body.byteLength + tail.byteLength);
  return out;
}

function open(key: Buffer, iv: Buffer, sealed: Uint8Array, aad: Uint8Array, what: string): Uint8Array {
  if (sealed.byteLength < AES_GCM_TAG_BYTES) throw decryptionFailed(`${what}: ${sealed.byteLength} bytes is shorter than a tag`);
  const split = sealed.byteLength - AES_GCM_TAG_BYTES;
  const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: AES_GCM_TAG_BYTES });
  decipher.setAuthTag(sealed.subarray(split));
  if (aad.byteLength > 0) decipher.setAAD(aad);
  const body = decipher.update(sealed.subarray(0, split));
  try {
    const tail = decipher.final();
    if (tail.byteLength === 0) return new Uint8Array(body.buffer, body.byteOffset, body.byteLength);
    // (GCM gives nothing at final; were it to, the result stays a buffer of its own, not a pool slice.)
    const out = new Uint8Array(body.byteLength + tail.byteLength);
    out.set(body, 0);
    out.set(tail, body.byteLength);
    return out;
  } catch {
    throw decryptionFailed(`${what}: authentication failed (wrong secret, wrong transaction id, or tampered bytes)`);
  }
}

/** Enciphering in place goes through this much at a time (each chunk's output is a temporary copy). */
const IN_PLACE_CHUNK_BYTES = 1 << 20;

/**
 * A decryption spread over calls (a large snapshot section, a slice per turn): `step` deciphers at
 * most `bytesMax` more bytes; the last call checks the tag. The plaintext exists only once
 * authenticated (result), as `open` gives it.
 */
export class IncrementalOpening {
  readonly #decipher: DecipherGCM | undefined;
  readonly #ciphertext: Uint8Array;
  readonly #out: Uint8Array;
  readonly #what: string;
  #offset = 0;
  #done = false;

  constructor(key: Buffer, iv: Buffer, sealed: Uint8Array, aad: Uint8Array, what: string) {
    this.#what = what;
    if (sealed.byteLength === 0) {
      this.#ciphertext = this.#out = EMPTY;
      this.#done = true;
      return;
    }
    if (sealed.byteLength < AES_GCM_TAG_BYTES) throw decryptionFailed(`${what}: ${sealed.byteLength} bytes is shorter than a tag`);
    const split = sealed.byteLength - AES_GCM_TAG_BYTES;
    this.#decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: AES_GCM_TAG_BYTES });
    this.#decipher.setAuthTag(sealed.subarray(split));
    if (aad.byteLength > 0) this.#decipher.setAAD(aad);
    this.#ciphertext = sealed.subarray(0, split);
    // A buffer of its own (not a pool slice): decoded values may be carved from it or copied out.
    this.#out = new Uint8Array(Buffer.allocUnsafeSlow(split).buffer, 0, split);
  }

  /** Deciphers at most `bytesMax` more bytes; true once all are and the tag verified. Throws LedgerDecryptionFailed. */
  step(bytesMax: number): boolean {
    assert(Number.isSafeInteger(bytesMax) && bytesMax > 0, `bad decryption step ${bytesMax}`);
    if (this.#done) return true;
    const decipher = this.#decipher!;
    const end = Math.min(this.#ciphertext.byteLength, this.#offset + bytesMax);
    let written = this.#offset;
    if (end > this.#offset) {
      const body = decipher.update(this.#ciphertext.subarray(this.#offset, end));
      this.#out.set(body, written);
      written += body.byteLength;
    }
    this.#offset = end;
    if (end < this.#ciphertext.byteLength) {
      assert(written === end, 'AES-GCM deciphers as many bytes as it is given');
      return false;
    }
    let tail: Buffer;
    try {
      tail = decipher.final();
    } catch {
      throw decryptionFailed(`${this.#what}: authentication failed (wrong secret, wrong transaction id, or tampered bytes)`);
    }
    assert(tail.byteLength === 0 && written === end, 'AES-GCM deciphers every byte before final');
    this.#done = true;
    return true;
  }

  /** The authenticated plaintext (once step returned true). */
  result(): Uint8Array {
    assert(this.#done, 'the decryption is not finished');
    return this.#out;
  }
}

/** An AES-256-GCM encryption fed piece by piece (LedgerEncryptor.sealSnapshotIncrementally). */
export interface IncrementalSealing {
  update(piece: Uint8Array): Buffer;
  /** Ends the encryption: the authentication tag. */
  tag(): Buffer;
}

/** Encrypts and decrypts private write sets and snapshot sections with the ledger secrets. */
export class LedgerEncryptor {
  readonly secrets: LedgerSecrets;

  /** A single 32-byte secret applies from seqno 0. */
  constructor(secrets: LedgerSecrets | Uint8Array) {
    this.secrets = secrets instanceof LedgerSecrets ? secrets : new LedgerSecrets([{ fromSeqno: 0, secret: secrets }]);
  }

  /** AES-256-GCM ciphertext ‖ 16-byte tag of a transaction's private write set. */
  encryptPrivate(view: View, seqno: Seqno, plaintext: Uint8Array, aad: Uint8Array = EMPTY): Uint8Array {
    if (plaintext.byteLength === 0) return EMPTY;
    return seal(this.secrets.keysFor(seqno).entryKey, ivFor(view, seqno), plaintext, aad);
  }

  /**
   * Inverse of encryptPrivate, as a buffer of its own (decoded write sets keep views of it);
   * throws LedgerDecryptionFailed when the bytes or their binding were altered.
   */
  decryptPrivate(view: View, seqno: Seqno, sealed: Uint8Array, aad: Uint8Array = EMPTY): Uint8Array {
    if (sealed.byteLength === 0) return EMPTY;
    return open(this.secrets.keysFor(seqno).entryKey, ivFor(view, seqno), sealed, aad, `private write set of ${view}.${seqno}`);
  }

  encryptSnapshot(view: View, seqno: Seqno, plaintext: Uint8Array, aad: Uint8Array): Uint8Array {
    if (plaintext.byteLength === 0) return EMPTY;
    return seal(this.secrets.keysFor(seqno).snapshotKey, ivFor(view, seqno), plaintext, aad);
  }

  decryptSnapshot(view: View, seqno: Seqno, sealed: Uint8Array, aad: Uint8Array): Uint8Array {
    if (sealed.byteLength === 0) return EMPTY;
    return open(this.secrets.keysFor(seqno).snapshotKey, ivFor(view, seqno), sealed, aad, `snapshot at ${view}.${seqno}`);
  }

  /**
   * encryptSnapshot in place: `region` (the plaintext) becomes the ciphertext, and the tag is
   * written into `tag`, so that a large snapshot section is never held twice. The bytes are those
   * of encryptSnapshot (AES-GCM is a stream: chunks of input give the same output).
   */
  encryptSnapshotInPlace(view: View, seqno: Seqno, region: Uint8Array, tag: Uint8Array, aad: Uint8Array): void {
    assert(region.byteLength > 0 && tag.byteLength === AES_GCM_TAG_BYTES, 'a non-empty section and a tag-sized slot');
    const cipher = createCipheriv('aes-256-gcm', this.secrets.keysFor(seqno).snapshotKey, ivFor(view, seqno), { authTagLength: AES_GCM_TAG_BYTES });
    if (aad.byteLength > 0) cipher.setAAD(aad);
    for (let offset = 0; offset < region.byteLength; offset += IN_PLACE_CHUNK_BYTES) {
      const end = Math.min(region.byteLength, offset + IN_PLACE_CHUNK_BYTES);
      const enciphered = cipher.update(region.subarray(offset, end));
      assert(enciphered.byteLength === end - offset, 'AES-GCM enciphers as many bytes as it is given');
      region.set(enciphered, offset);
    }
    assert(cipher.final().byteLength === 0, 'AES-GCM gives nothing at final');
    tag.set(cipher.getAuthTag());
  }

  /**
   * encryptSnapshotInPlace spread over calls, for a section written piece by piece: update() gives
   * the ciphertext of each piece in turn (as many bytes as it was given), tag() the tag at the end.
   * The same key, IV and additional data, so the same bytes.
   */
  sealSnapshotIncrementally(view: View, seqno: Seqno, aad: Uint8Array): IncrementalSealing {
    const cipher = createCipheriv('aes-256-gcm', this.secrets.keysFor(seqno).snapshotKey, ivFor(view, seqno), { authTagLength: AES_GCM_TAG_BYTES });
    if (aad.byteLength > 0) cipher.setAAD(aad);
    return {
      update: (piece) => {
        const enciphered = cipher.update(piece);
        assert(enciphered.byteLength === piece.byteLength, 'AES-GCM enciphers as many bytes as it is given');
        return enciphered;
      },
      tag: () => {
        assert(cipher.final().byteLength === 0, 'AES-GCM gives nothing at final');
        return cipher.getAuthTag();
      },
    };
  }

  /** decryptSnapshot spread over calls (IncrementalOpening); the same plaintext and the same failures. */
  openSnapshotIncrementally(view: View, seqno: Seqno, sealed: Uint8Array, aad: Uint8Array): IncrementalOpening {
    return new IncrementalOpening(this.secrets.keysFor(seqno).snapshotKey, ivFor(view, seqno), sealed, aad, `snapshot at ${view}.${seqno}`);
  }
}
