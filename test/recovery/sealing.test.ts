/** Local sealing and sealed shares (src/recovery/sealing.ts, docs/sealing.md). */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import nodeCrypto from 'node:crypto';
import fc from 'fast-check';
import { fromHex, InvariantError } from '../../src/base/index.js';
import { codeMeasurement, defaultHostData } from '../../src/attestation/virtual.js';
import { generateEcKeyPair, sha256Hex } from '../../src/crypto/index.js';
import {
  createRecoveryKeyPair,
  deriveSealingKey,
  deriveVirtualDerivedKey,
  encryptRsaOaepSha256,
  isRecoveryError,
  issueSealedShares,
  loadEncryptionPublicKey,
  RECOVERY_KEY_MODULUS_BITS,
  recoverChainWithSealedShare,
  sealPreviousSecret,
  sealRecoveryPrivateKey,
  SEALED_RECOVERY_KEY_BYTES_MAX,
  unsealRecoveryPrivateKey,
  unwrapLatestSecret,
  VIRTUAL_TCB_VERSION,
  WRAPPED_LATEST_SECRET_BYTES,
  type ChainSecret,
  type RecoveryErrorCode,
  type RecoveryKeyPair,
  type VirtualDerivedKeyInputs,
} from '../../src/recovery/index.js';
import { seededRandomBytes } from './helpers.js';

const code = (c: RecoveryErrorCode) => (e: unknown) => isRecoveryError(e, c);

const machine: VirtualDerivedKeyInputs = {
  cpuKey: fromHex('000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f'),
  measurement: codeMeasurement('0.1.0'),
  hostData: defaultHostData(),
  tcbVersion: VIRTUAL_TCB_VERSION,
};
const sealingKeyOf = (inputs: VirtualDerivedKeyInputs) => deriveSealingKey(deriveVirtualDerivedKey(inputs));

/** The same node with one input changed: each must give another key. */
const changed: Record<string, VirtualDerivedKeyInputs> = {
  'CPU key': { ...machine, cpuKey: fromHex('ff0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f') },
  measurement: { ...machine, measurement: codeMeasurement('0.1.1') },
  'host data': { ...machine, hostData: sha256Hex('another policy') },
  'TCB version': { ...machine, tcbVersion: 'virtual-tcb-2' },
};

// RSA key generation costs tens of milliseconds: the file makes its nodes' key pairs once.
const nodes: RecoveryKeyPair[] = [createRecoveryKeyPair(), createRecoveryKeyPair(), createRecoveryKeyPair()];
const nodeIds = ['node0', 'node1', 'node2'];

test('DERIVED_KEY and the sealing key: 32 bytes, the same for the same inputs, the spec\'s HKDF over DERIVED_KEY', () => {
  const derived = deriveVirtualDerivedKey(machine);
  assert.equal(derived.byteLength, 32);
  assert.deepEqual(deriveVirtualDerivedKey({ ...machine, cpuKey: new Uint8Array(machine.cpuKey) }), derived);
  // The hex case of measurement and host data does not matter: their bytes go in.
  assert.deepEqual(deriveVirtualDerivedKey({ ...machine, measurement: machine.measurement.toUpperCase() }), derived);
  const sealingKey = deriveSealingKey(derived);
  assert.deepEqual(sealingKey, new Uint8Array(nodeCrypto.hkdfSync('sha256', derived, new Uint8Array(0), 'covenant sealing key v1', 32)));
  assert.notDeepEqual(sealingKey, derived);
});

test('a different CPU key, measurement, host data or TCB version gives a different key', () => {
  const keys = [machine, ...Object.values(changed)].map((m) => Buffer.from(sealingKeyOf(m)).toString('hex'));
  assert.equal(new Set(keys).size, keys.length);
});

test('the derivation is unambiguous: moving bytes from one field to the next changes the key', () => {
  const a = deriveVirtualDerivedKey({ ...machine, measurement: 'aabb', hostData: 'cc' });
  const b = deriveVirtualDerivedKey({ ...machine, measurement: 'aa', hostData: 'bbcc' });
  assert.notDeepEqual(a, b);
  // 'x' is 0x78: without the length prefixes both would end aa 78 79.
  const c = deriveVirtualDerivedKey({ ...machine, hostData: 'aa', tcbVersion: 'xy' });
  const d = deriveVirtualDerivedKey({ ...machine, hostData: 'aa78', tcbVersion: 'y' });
  assert.notDeepEqual(c, d);
});

test('inputs the node should never pass are programmer errors', () => {
  assert.throws(() => deriveVirtualDerivedKey({ ...machine, cpuKey: new Uint8Array(31) }), InvariantError);
  assert.throws(() => deriveVirtualDerivedKey({ ...machine, measurement: 'abc' }), InvariantError);
  assert.throws(() => deriveVirtualDerivedKey({ ...machine, hostData: '' }), InvariantError);
  assert.throws(() => deriveVirtualDerivedKey({ ...machine, tcbVersion: '' }), InvariantError);
  assert.throws(() => deriveSealingKey(new Uint8Array(16)), InvariantError);
});

test('a recovery key pair is RSA of RECOVERY_KEY_MODULUS_BITS whose halves match', () => {
  const [pair] = nodes;
  const publicKey = loadEncryptionPublicKey(pair!.publicKeyPem);
  assert.equal(publicKey.asymmetricKeyDetails?.modulusLength, RECOVERY_KEY_MODULUS_BITS);
  const privateKey = nodeCrypto.createPrivateKey({ key: Buffer.from(pair!.privateKeyPkcs8Der), format: 'der', type: 'pkcs8' });
  assert.equal(nodeCrypto.createPublicKey(privateKey).export({ format: 'pem', type: 'spki' }), pair!.publicKeyPem);
});

test('a sealed recovery key unseals to the same PKCS#8 DER, with the documented layout', () => {
  const sealingKey = sealingKeyOf(machine);
  const random = seededRandomBytes('seal round trip');
  const der = nodes[0]!.privateKeyPkcs8Der;
  const record = sealRecoveryPrivateKey(sealingKey, der, 'node0', random);
  assert.equal(random.drawnBytes(), 12, 'one IV');
  assert.equal(record.byteLength, 1 + 12 + der.byteLength + 16);
  assert.equal(record[0], 1);
  assert.deepEqual(unsealRecoveryPrivateKey(sealingKey, record, 'node0'), der);
  // A second seal draws a new IV: another record, the same key inside.
  const again = sealRecoveryPrivateKey(sealingKey, der, 'node0', random);
  assert.notDeepEqual(again, record);
  assert.deepEqual(unsealRecoveryPrivateKey(sealingKey, again, 'node0'), der);
});

for (const [input, inputs] of Object.entries(changed)) {
  test(`a node whose ${input} differs cannot unseal, and the error says what may differ`, () => {
    const record = sealRecoveryPrivateKey(sealingKeyOf(machine), nodes[0]!.privateKeyPkcs8Der, 'node0', seededRandomBytes(input));
    assert.throws(
      () => unsealRecoveryPrivateKey(sealingKeyOf(inputs), record, 'node0'),
      (e: unknown) => isRecoveryError(e, 'UnsealFailed') && e.status === 500 && /CPU key.*measurement, host data or TCB version differ/.test(e.message),
    );
  });
}

test('a sealed key moved to another node\'s row (binding) does not unseal', () => {
  const sealingKey = sealingKeyOf(machine);
  const record = sealRecoveryPrivateKey(sealingKey, nodes[0]!.privateKeyPkcs8Der, 'node0', seededRandomBytes('moved'));
  assert.throws(() => unsealRecoveryPrivateKey(sealingKey, record, 'node1'), code('UnsealFailed'));
  assert.throws(() => unsealRecoveryPrivateKey(sealingKey, record, 'node00'), code('UnsealFailed'));
});

test('every flipped byte of a sealed key is refused: the version is malformed, the rest does not authenticate', () => {
  const sealingKey = sealingKeyOf(machine);
  const record = sealRecoveryPrivateKey(sealingKey, nodes[0]!.privateKeyPkcs8Der, 'node0', seededRandomBytes('tamper'));
  for (let i = 0; i < record.byteLength; i++) {
    const bad = new Uint8Array(record);
    bad[i]! ^= 0x80;
    assert.throws(() => unsealRecoveryPrivateKey(sealingKey, bad, 'node0'), i === 0 ? code('MalformedSealedKey') : code('UnsealFailed'), `byte ${i}`);
  }
});

test('any flipped bit of a sealed key is refused (property)', () => {
  const sealingKey = sealingKeyOf(machine);
  const record = sealRecoveryPrivateKey(sealingKey, nodes[1]!.privateKeyPkcs8Der, 'node1', seededRandomBytes('bit flips'));
  fc.assert(
    fc.property(fc.integer({ min: 0, max: record.byteLength * 8 - 1 }), (bit) => {
      const bad = new Uint8Array(record);
      bad[bit >> 3]! ^= 1 << (bit & 7);
      assert.throws(() => unsealRecoveryPrivateKey(sealingKey, bad, 'node1'), (e: unknown) => isRecoveryError(e, 'UnsealFailed') || isRecoveryError(e, 'MalformedSealedKey'));
    }),
    { numRuns: 300 },
  );
});

test('a sealed key of the wrong length is malformed', () => {
  const sealingKey = sealingKeyOf(machine);
  const record = sealRecoveryPrivateKey(sealingKey, nodes[0]!.privateKeyPkcs8Der, 'node0', seededRandomBytes('lengths'));
  for (const bad of [new Uint8Array(0), record.subarray(0, 29), new Uint8Array(SEALED_RECOVERY_KEY_BYTES_MAX + 1).fill(1)]) {
    assert.throws(() => unsealRecoveryPrivateKey(sealingKey, bad, 'node0'), code('MalformedSealedKey'), `${bad.byteLength} bytes`);
  }
  // Truncated but long enough: the tag is then other bytes, which do not authenticate.
  assert.throws(() => unsealRecoveryPrivateKey(sealingKey, record.subarray(0, record.byteLength - 1), 'node0'), code('UnsealFailed'));
});

test('only an RSA private key of at least 2048 bits is sealed', () => {
  const sealingKey = sealingKeyOf(machine);
  const ec = new Uint8Array(generateEcKeyPair().privateKey.export({ format: 'der', type: 'pkcs8' }));
  for (const bad of [ec, new Uint8Array(100), new Uint8Array(0)]) {
    assert.throws(() => sealRecoveryPrivateKey(sealingKey, bad, 'node0', seededRandomBytes('bad key')), code('InvalidEncryptionKey'));
  }
  assert.throws(() => sealRecoveryPrivateKey(sealingKey, nodes[0]!.privateKeyPkcs8Der, '', seededRandomBytes('no binding')), InvariantError);
  assert.throws(() => sealRecoveryPrivateKey(new Uint8Array(16), nodes[0]!.privateKeyPkcs8Der, 'node0', seededRandomBytes('short key')), InvariantError);
});

/** Three secrets with the previous-secret records two rekeys write, and each node's sealed key on the same machine inputs. */
function chainOfThree(seed: string) {
  const random = seededRandomBytes(seed);
  const secrets: ChainSecret[] = [0, 100, 5000].map((fromSeqno) => ({ fromSeqno, secret: random(32) }));
  const previousRecords = [sealPreviousSecret(secrets[1]!, secrets[0]!, random), sealPreviousSecret(secrets[2]!, secrets[1]!, random)];
  const sealingKey = sealingKeyOf(machine);
  const sealedKeys = nodes.map((n, i) => sealRecoveryPrivateKey(sealingKey, n.privateKeyPkcs8Der, nodeIds[i]!, random));
  const recipients = nodes.map((n, i) => ({ id: nodeIds[i]!, recoveryPublicKeyPem: n.publicKeyPem }));
  return { secrets, previousRecords, sealingKey, sealedKeys, recipients, random };
}

test('sealed shares recover the chain of three secrets for every recipient, whatever the order of the previous records', () => {
  const { secrets, previousRecords, sealingKey, sealedKeys, recipients } = chainOfThree('three secrets');
  const random = seededRandomBytes('issue');
  const issue = issueSealedShares(secrets[2]!, recipients, random);
  assert.equal(random.drawnBytes(), 32 + 12, 'a wrapping key, then an IV');
  assert.equal(issue.wrappedLatestSecret.byteLength, WRAPPED_LATEST_SECRET_BYTES);
  assert.deepEqual([...issue.encryptedWrappingKeys.keys()], nodeIds);
  for (const [i, id] of nodeIds.entries()) {
    const encryptedWrappingKey = issue.encryptedWrappingKeys.get(id)!;
    assert.equal(encryptedWrappingKey.byteLength, 256);
    const input = { sealingKey, sealedPrivateKeyRecord: sealedKeys[i]!, binding: id, encryptedWrappingKey, wrappedLatestSecret: issue.wrappedLatestSecret };
    assert.deepEqual(recoverChainWithSealedShare({ ...input, previousRecords }), secrets);
    assert.deepEqual(recoverChainWithSealedShare({ ...input, previousRecords: [...previousRecords].reverse() }), secrets);
  }
});

test('an issue reproduces its wrapping key and wrapped secret from the seed; the encrypted keys differ every time', () => {
  const { secrets, recipients } = chainOfThree('reproduce');
  const a = issueSealedShares(secrets[2]!, recipients, seededRandomBytes('same seed'));
  const b = issueSealedShares(secrets[2]!, recipients, seededRandomBytes('same seed'));
  assert.deepEqual(a.wrappedLatestSecret, b.wrappedLatestSecret);
  assert.deepEqual(unwrapLatestSecret(seededRandomBytes('same seed')(32), a.wrappedLatestSecret), secrets[2]);
  assert.notDeepEqual(a.encryptedWrappingKeys.get('node0'), b.encryptedWrappingKeys.get('node0'), 'OpenSSL draws the OAEP seed');
});

test('a recipient\'s share opened with another node\'s private key fails', () => {
  const { secrets, previousRecords, sealingKey, sealedKeys, recipients } = chainOfThree('another node');
  const issue = issueSealedShares(secrets[2]!, recipients, seededRandomBytes('issue'));
  // node1 unseals its own key fine, but node0's share was encrypted to node0's key.
  assert.throws(
    () =>
      recoverChainWithSealedShare({
        sealingKey,
        sealedPrivateKeyRecord: sealedKeys[1]!,
        binding: 'node1',
        encryptedWrappingKey: issue.encryptedWrappingKeys.get('node0')!,
        wrappedLatestSecret: issue.wrappedLatestSecret,
        previousRecords,
      }),
    code('SealedShareDecryptionFailed'),
  );
});

test('each failure on the way to the chain has its own code', () => {
  const { secrets, previousRecords, sealingKey, sealedKeys, recipients, random } = chainOfThree('failures');
  const issue = issueSealedShares(secrets[2]!, recipients, seededRandomBytes('issue'));
  const good = {
    sealingKey,
    sealedPrivateKeyRecord: sealedKeys[0]!,
    binding: 'node0',
    encryptedWrappingKey: issue.encryptedWrappingKeys.get('node0')!,
    wrappedLatestSecret: issue.wrappedLatestSecret,
    previousRecords,
  };
  assert.deepEqual(recoverChainWithSealedShare(good), secrets);
  // Another machine cannot unseal.
  assert.throws(() => recoverChainWithSealedShare({ ...good, sealingKey: sealingKeyOf(changed['CPU key']!) }), code('UnsealFailed'));
  assert.throws(() => recoverChainWithSealedShare({ ...good, sealedPrivateKeyRecord: good.sealedPrivateKeyRecord.subarray(0, 10) }), code('MalformedSealedKey'));
  // A tampered encrypted wrapping key does not decrypt.
  const tampered = new Uint8Array(good.encryptedWrappingKey);
  tampered[100]! ^= 0x01;
  assert.throws(() => recoverChainWithSealedShare({ ...good, encryptedWrappingKey: tampered }), code('SealedShareDecryptionFailed'));
  // Something encrypted to the node's key that is not 0x01 ‖ wrapping key.
  const raw = encryptRsaOaepSha256(loadEncryptionPublicKey(nodes[0]!.publicKeyPem), random(32));
  assert.throws(() => recoverChainWithSealedShare({ ...good, encryptedWrappingKey: raw }), code('MalformedSealedShare'));
  // The wrapped secret of another issue: the wrapping key does not open it.
  const other = issueSealedShares(secrets[2]!, recipients, seededRandomBytes('another issue'));
  assert.throws(() => recoverChainWithSealedShare({ ...good, wrappedLatestSecret: other.wrappedLatestSecret }), code('LedgerSecretUnwrapFailed'));
  // A previous-secret record under a secret that is not on the chain breaks it.
  const stray = sealPreviousSecret({ fromSeqno: 7000, secret: random(32) }, { fromSeqno: 6000, secret: random(32) }, random);
  assert.throws(() => recoverChainWithSealedShare({ ...good, previousRecords: [...previousRecords, stray] }), code('SecretChainBroken'));
  // One of another chain put in a record's place names the right seqnos but does not decrypt.
  const substitute = chainOfThree('another chain').previousRecords[0]!;
  assert.throws(() => recoverChainWithSealedShare({ ...good, previousRecords: [substitute, previousRecords[1]!] }), code('LedgerSecretUnwrapFailed'));
  // A missing record stops the chain early: only the secrets above the gap come back.
  assert.deepEqual(recoverChainWithSealedShare({ ...good, previousRecords: previousRecords.slice(1) }), secrets.slice(1));
});

test('issuing refuses a recipient whose key is not RSA of at least 2048 bits, before drawing anything', () => {
  const { secrets, recipients } = chainOfThree('bad recipient');
  const random = seededRandomBytes('nothing drawn');
  assert.throws(
    () => issueSealedShares(secrets[2]!, [...recipients, { id: 'node9', recoveryPublicKeyPem: generateEcKeyPair().publicKeyPem }], random),
    (e: unknown) => isRecoveryError(e, 'InvalidEncryptionKey') && /recovery public key of node node9/.test(e.message),
  );
  assert.equal(random.drawnBytes(), 0);
  assert.throws(() => issueSealedShares(secrets[2]!, [recipients[0]!, recipients[0]!], random), InvariantError);
  // No recipient: an issue nobody can open, which the caller may skip.
  assert.equal(issueSealedShares(secrets[2]!, [], random).encryptedWrappingKeys.size, 0);
});
