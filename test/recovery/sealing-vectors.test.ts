/** The test vectors of docs/sealing.md: the code reproduces the deterministic layouts and reads each back. */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { fromBase64, fromHex, toHex } from '../../src/base/index.js';
import { codeMeasurement, defaultHostData } from '../../src/attestation/virtual.js';
import { publicKeyPem } from '../../src/crypto/index.js';
import {
  deriveSealingKey,
  deriveVirtualDerivedKey,
  issueSealedShares,
  recoverChainWithSealedShare,
  sealRecoveryPrivateKey,
  unsealRecoveryPrivateKey,
  unwrapLatestSecret,
  VIRTUAL_TCB_VERSION,
} from '../../src/recovery/index.js';
import { seededRandomBytes } from './helpers.js';

interface Vectors {
  derived_key: { cpu_key: string; measurement: string; host_data: string; tcb_version: string; derived_key: string; sealing_key: string };
  sealed_recovery_key: { seed: string; binding: string; recovery_private_key_pem: string; record: string };
  sealed_share: { seed: string; from_seqno: number; secret: string; wrapping_key: string; wrapped_latest_secret: string; encrypted_wrapping_key: string };
}

function documentedVectors(): Vectors {
  // The test runs from test/ (tsx) or from dist/test/ (compiled): find docs/ above either.
  const fromSource = fileURLToPath(new URL('../../docs/sealing.md', import.meta.url));
  const path = existsSync(fromSource) ? fromSource : fileURLToPath(new URL('../../../docs/sealing.md', import.meta.url));
  const match = /<!-- test-vectors:begin -->\s*```json\n([\s\S]*?)```\s*<!-- test-vectors:end -->/.exec(readFileSync(path, 'utf8'));
  assert.ok(match, 'docs/sealing.md has a test-vectors block');
  return JSON.parse(match[1]!) as Vectors;
}

const v = documentedVectors();

/** The PKCS#8 DER of a PEM: its base64 body. */
function derOfPem(pem: string): Uint8Array {
  return fromBase64(pem.replace(/-----(BEGIN|END) PRIVATE KEY-----/g, '').replace(/\s+/g, ''));
}

test('DERIVED_KEY and the sealing key reproduce from the documented inputs', () => {
  const d = v.derived_key;
  assert.equal(d.measurement, codeMeasurement('0.1.0'));
  assert.equal(d.host_data, defaultHostData());
  assert.equal(d.tcb_version, VIRTUAL_TCB_VERSION);
  const derived = deriveVirtualDerivedKey({ cpuKey: fromHex(d.cpu_key), measurement: d.measurement, hostData: d.host_data, tcbVersion: d.tcb_version });
  assert.equal(toHex(derived), d.derived_key);
  assert.equal(toHex(deriveSealingKey(derived)), d.sealing_key);
});

test('the sealed recovery key reproduces from its seed and unseals to the PEM\'s DER', () => {
  const s = v.sealed_recovery_key;
  const sealingKey = fromHex(v.derived_key.sealing_key);
  const der = derOfPem(s.recovery_private_key_pem);
  assert.equal(toHex(sealRecoveryPrivateKey(sealingKey, der, s.binding, seededRandomBytes(s.seed))), s.record);
  assert.deepEqual(unsealRecoveryPrivateKey(sealingKey, fromHex(s.record), s.binding), der);
});

test('the sealed share: wrapping key and wrapped secret reproduce, the fixed encryption recovers the secret', () => {
  const s = v.sealed_share;
  const latest = { fromSeqno: s.from_seqno, secret: fromHex(s.secret) };
  assert.equal(toHex(seededRandomBytes(s.seed)(32)), s.wrapping_key);
  const recipient = { id: v.sealed_recovery_key.binding, recoveryPublicKeyPem: publicKeyPem(v.sealed_recovery_key.recovery_private_key_pem) };
  const issue = issueSealedShares(latest, [recipient], seededRandomBytes(s.seed));
  assert.equal(toHex(issue.wrappedLatestSecret), s.wrapped_latest_secret);
  assert.deepEqual(unwrapLatestSecret(fromHex(s.wrapping_key), fromHex(s.wrapped_latest_secret)), latest);
  assert.equal(issue.encryptedWrappingKeys.get(recipient.id)!.byteLength, fromHex(s.encrypted_wrapping_key).byteLength);
  const recover = (encryptedWrappingKey: Uint8Array) =>
    recoverChainWithSealedShare({
      sealingKey: fromHex(v.derived_key.sealing_key),
      sealedPrivateKeyRecord: fromHex(v.sealed_recovery_key.record),
      binding: v.sealed_recovery_key.binding,
      encryptedWrappingKey,
      wrappedLatestSecret: fromHex(s.wrapped_latest_secret),
      previousRecords: [],
    });
  assert.deepEqual(recover(fromHex(s.encrypted_wrapping_key)), [latest]);
  assert.deepEqual(recover(issue.encryptedWrappingKeys.get(recipient.id)!), [latest]);
});
