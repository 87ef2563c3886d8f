import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fromHex, toHex } from '../../src/base/index.js';
import {
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
  submittedShareStorageKey,
  unwrapLatestSecret,
  wrapLatestSecret,
} from '../../src/recovery/index.js';
import { combineKey } from '../../src/recovery/key-sharing.js';
import { seededRandomBytes } from './helpers.js';

interface Vectors {
  random_stream_first_64_bytes: { seed: string; bytes: string };
  shares_v1: { wrapping_key: string; count: number; threshold: number; shares: string[] };
  shares_v2: { sharing_id: string; shares: string[] };
  wrapped_latest_secret: { seed: string; wrapping_key: string; from_seqno: number; secret: string; record: string };
  previous_secret: { seed: string; successor_from_seqno: number; successor_secret: string; from_seqno: number; secret: string; record: string };
  rsa_oaep: { member_private_key_pem: string; plaintext: string; ciphertext: string };
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

test('both share formats reproduce from one another, and any two shares reassemble the wrapping key', async () => {
  const key = fromHex(v.shares_v1.wrapping_key);
  assert.equal(v.shares_v1.shares.length, v.shares_v1.count);
  const shares = v.shares_v1.shares.map((h) => decodeShare(fromHex(h)));
  assert.ok(shares.every((s) => s.version === 1));
  assert.deepEqual(shares.map((s) => toHex(encodeShareV1(s))), v.shares_v1.shares);
  assert.equal(toHex(sharingIdOf(key)), v.shares_v2.sharing_id);
  assert.deepEqual(shares.map((s) => toHex(encodeShareV2(s, v.shares_v1.threshold, sharingIdOf(key)))), v.shares_v2.shares);
  const v2 = v.shares_v2.shares.map((h) => decodeShare(fromHex(h)));
  assert.deepEqual(v2.map((s) => [s.version, s.x, s.threshold, toHex(s.sharingId!), toHex(s.y)]), shares.map((s) => [2, s.x, v.shares_v1.threshold, v.shares_v2.sharing_id, toHex(s.y)]));
  for (const decoded of [shares, v2]) {
    assert.deepEqual(await combineKey(decoded.slice(0, 2)), key);
    assert.deepEqual(await combineKey(decoded.slice(1)), key);
    assert.deepEqual(await combineKey([decoded[0]!, decoded[2]!]), key);
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

test('the RSA-OAEP-SHA256 encryption of a share decrypts; a new encryption has its format, not its bytes', () => {
  const r = v.rsa_oaep;
  assert.equal(toHex(decryptShare(fromHex(r.ciphertext), r.member_private_key_pem)), r.plaintext);
  const fresh = encryptRsaOaepSha256(loadEncryptionPublicKey(r.member_private_key_pem), fromHex(r.plaintext));
  assert.equal(fresh.byteLength, fromHex(r.ciphertext).byteLength);
  assert.notEqual(toHex(fresh), r.ciphertext, 'OpenSSL draws the OAEP seed');
  assert.equal(toHex(decryptShare(fresh, r.member_private_key_pem)), r.plaintext);
});

test('the submitted-share storage key and a stored share reproduce and decrypt', () => {
  const s = v.submitted_share;
  const key = submittedShareStorageKey(s.service_private_key_pem);
  assert.equal(toHex(key), s.storage_key);
  assert.equal(toHex(encryptSubmittedShare(key, s.member_id, fromHex(s.share), seededRandomBytes(s.seed))), s.stored);
  assert.equal(toHex(decryptSubmittedShare(key, s.member_id, fromHex(s.stored))), s.share);
});
