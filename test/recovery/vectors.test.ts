import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fromHex, toHex } from '../../src/base/index.js';
import {
  combineShares,
  decodeShare,
  decryptShare,
  decryptSubmittedShare,
  encodeShareV1,
  encodeShareV2,
  encryptRsaOaepSha256,
  encryptSubmittedShare,
  loadEncryptionPublicKey,
  openPreviousSecret,
  sealPreviousSecret,
  sharingIdOf,
  splitSecret,
  submittedShareStorageKey,
  unwrapLatestSecret,
  wrapLatestSecret,
} from '../../src/recovery/index.js';
import { seededRandomBytes } from './helpers.js';

interface Vectors {
  random_stream_first_64_bytes: { seed: string; bytes: string };
  split: { seed: string; wrapping_key: string; count: number; threshold: number; shares_v1: string[] };
  shares_v2: { sharing_id: string; shares: string[] };
  wrapped_latest_secret: { seed: string; wrapping_key: string; from_seqno: number; secret: string; record: string };
  previous_secret: { seed: string; successor_from_seqno: number; successor_secret: string; from_seqno: number; secret: string; record: string };
  rsa_oaep: { seed: string; member_private_key_pem: string; plaintext: string; ciphertext: string };
  submitted_share: { seed: string; service_private_key_pem: string; storage_key: string; member_id: string; share: string; stored: string };
}

function documentedVectors(): Vectors {
  // The test runs from test/ (tsx) or from dist/test/ (compiled): find docs/ above either.
  const fromSource = fileURLToPath(new URL('../../docs/recovery.md', import.meta.url));
  const path = existsSync(fromSource) ? fromSource : fileURLToPath(new URL('../../../docs/recovery.md', import.meta.url));
  const match = /<!-- test-vectors:begin -->\s*```json\n([\s\S]*?)```\s*<!-- test-vectors:end -->/.exec(readFileSync(path, 'utf8'));
  assert.ok(match, 'docs/recovery.md has a test-vectors block');
  return JSON.parse(match[1]!) as Vectors;
}

const v = documentedVectors();

test('the seeded random source is the documented stream', () => {
  assert.equal(toHex(seededRandomBytes(v.random_stream_first_64_bytes.seed)(64)), v.random_stream_first_64_bytes.bytes);
  // Drawn in pieces, the same stream.
  const pieces = seededRandomBytes(v.random_stream_first_64_bytes.seed);
  assert.equal([5, 27, 32].map((n) => toHex(pieces(n))).join(''), v.random_stream_first_64_bytes.bytes);
});

test('Shamir split and both share formats reproduce, and read back to the wrapping key', () => {
  const key = fromHex(v.split.wrapping_key);
  const shares = splitSecret(key, v.split.count, v.split.threshold, seededRandomBytes(v.split.seed));
  assert.deepEqual(shares.map((s) => toHex(encodeShareV1(s))), v.split.shares_v1);
  assert.equal(toHex(sharingIdOf(key)), v.shares_v2.sharing_id);
  assert.deepEqual(shares.map((s) => toHex(encodeShareV2(s, v.split.threshold, sharingIdOf(key)))), v.shares_v2.shares);
  for (const format of [v.split.shares_v1, v.shares_v2.shares]) {
    const decoded = format.map((h) => decodeShare(fromHex(h)));
    assert.deepEqual(combineShares(decoded.slice(0, 2)), key);
    assert.deepEqual(combineShares(decoded.slice(1)), key);
  }
});

test('the wrapped latest secret and the previous-secret record reproduce and open', () => {
  const w = v.wrapped_latest_secret;
  const latest = { fromSeqno: w.from_seqno, secret: fromHex(w.secret) };
  assert.equal(toHex(wrapLatestSecret(fromHex(w.wrapping_key), latest, seededRandomBytes(w.seed))), w.record);
  assert.deepEqual(unwrapLatestSecret(fromHex(w.wrapping_key), fromHex(w.record)), latest);
  const p = v.previous_secret;
  const successor = { fromSeqno: p.successor_from_seqno, secret: fromHex(p.successor_secret) };
  const previous = { fromSeqno: p.from_seqno, secret: fromHex(p.secret) };
  assert.equal(toHex(sealPreviousSecret(successor, previous, seededRandomBytes(p.seed))), p.record);
  assert.deepEqual(openPreviousSecret(successor, fromHex(p.record)), previous);
});

test('the RSA-OAEP-SHA256 encryption of a share reproduces and decrypts', () => {
  const r = v.rsa_oaep;
  const publicKey = loadEncryptionPublicKey(r.member_private_key_pem);
  assert.equal(toHex(encryptRsaOaepSha256(publicKey, fromHex(r.plaintext), seededRandomBytes(r.seed))), r.ciphertext);
  assert.equal(toHex(decryptShare(fromHex(r.ciphertext), r.member_private_key_pem)), r.plaintext);
});

test('the submitted-share storage key and a stored share reproduce and decrypt', () => {
  const s = v.submitted_share;
  const key = submittedShareStorageKey(s.service_private_key_pem);
  assert.equal(toHex(key), s.storage_key);
  assert.equal(toHex(encryptSubmittedShare(key, s.member_id, fromHex(s.share), seededRandomBytes(s.seed))), s.stored);
  assert.equal(toHex(decryptSubmittedShare(key, s.member_id, fromHex(s.stored))), s.share);
});
