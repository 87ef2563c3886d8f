/**
 * The recovery decision protocol's transport on loopback: envelopes of several kinds sent to one
 * location in the same round all arrive (one kind in flight never holds up another), and what is
 * not an envelope of the right size, shape or path is refused with a JSON error and never handed on.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import https from 'node:https';
import { nullLogger } from '../../src/base/log.js';
import { generateIdentity } from '../../src/crypto/index.js';
import { DECISION_BODY_BYTES_MAX, DECISION_PATH, DecisionTransport } from '../../src/platform/decision-transport.js';
import { until } from '../../src/testing/network.js';

async function transportPair(): Promise<{ sender: DecisionTransport; receiver: DecisionTransport; address: string; received: unknown[] }> {
  const identity = await generateIdentity({ commonName: 'location' });
  const tls = { keyPem: identity.privateKeyPem, certificatePem: identity.certificatePem };
  const received: unknown[] = [];
  const receiver = new DecisionTransport({ bindAddress: '127.0.0.1:0', tls, logger: nullLogger, onEnvelope: (e) => received.push(e) });
  const sender = new DecisionTransport({ bindAddress: '127.0.0.1:0', tls, logger: nullLogger, onEnvelope: () => undefined });
  const address = await receiver.listen();
  await sender.listen();
  return { sender, receiver, address, received };
}

function post(address: string, path: string, body: Buffer): Promise<{ status: number; text: string }> {
  const [host, port] = [address.slice(0, address.lastIndexOf(':')), Number(address.slice(address.lastIndexOf(':') + 1))];
  return new Promise((resolve, reject) => {
    const request = https.request({ host, port, path, method: 'POST', rejectUnauthorized: false, headers: { 'content-length': body.length } }, (response) => {
      let text = '';
      response.on('data', (c: Buffer) => (text += c.toString()));
      response.on('end', () => resolve({ status: response.statusCode!, text }));
    });
    request.on('error', reject);
    request.end(body);
  });
}

test('messages of every kind sent to one location in the same round all arrive', async () => {
  const { sender, receiver, address, received } = await transportPair();
  try {
    for (let round = 0; round < 3; round++) {
      sender.send(address, { kind: 'Gossip', round }, 'Gossip');
      sender.send(address, { kind: 'Vote', round }, 'Vote');
      await until(`round ${round}`, async () => (received.length === 2 * (round + 1) ? true : undefined), 10_000, 10);
      // The receiver hands an envelope on as it answers; the answer reaches the sender a little later,
      // and until then a message of the same kind is dropped (the protocol resends on its timer).
      await until(`round ${round} answered`, async () => (sender.inFlightCount === 0 ? true : undefined), 10_000, 10);
    }
    assert.deepEqual(
      received.map((e) => (e as { kind: string }).kind).sort(),
      ['Gossip', 'Gossip', 'Gossip', 'Vote', 'Vote', 'Vote'],
    );
  } finally {
    await sender.close();
    await receiver.close();
  }
});

test('a body that is too large, not JSON, or sent elsewhere is refused and never handed on', async () => {
  const { sender, receiver, address, received } = await transportPair();
  try {
    const large = await post(address, DECISION_PATH, Buffer.alloc(DECISION_BODY_BYTES_MAX + 1, 0x20)).catch(() => ({ status: 413, text: '' }));
    assert.equal(large.status, 413);
    const garbage = await post(address, DECISION_PATH, Buffer.from('{not json'));
    assert.equal(garbage.status, 400);
    assert.equal(JSON.parse(garbage.text).error.code, 'InvalidJsonBody');
    const elsewhere = await post(address, '/node/state', Buffer.from('{}'));
    assert.equal(elsewhere.status, 404);
    assert.equal(received.length, 0);
    // And the server still serves.
    sender.send(address, { kind: 'Gossip' }, 'Gossip');
    await until('a good envelope after the bad ones', async () => (received.length === 1 ? true : undefined), 10_000, 10);
  } finally {
    await sender.close();
    await receiver.close();
  }
});
