/**
 * The TLS node channels take time and randomness only from what they are given: reconnection
 * delays are timers of the injected clock, jittered by the injected random source. With a manual
 * clock nothing is retried until the test moves time on.
 */
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { MemoryLogger } from '../../src/base/log.js';
import type { RandomSource } from '../../src/base/random.js';
import { createSelfSignedCertificate, generateEcKeyPair, nodeIdFromPublicKey } from '../../src/crypto/index.js';
import { createTlsNodeChannels } from '../../src/platform/node-channels.js';
import { ManualClock } from '../../src/testing/manual-clock.js';

async function makeIdentity(name: string) {
  const keyPair = generateEcKeyPair('P-384');
  const certificatePem = await createSelfSignedCertificate({ keyPair, subjectCommonName: name, validityDays: 1, isCa: false });
  return { nodeId: nodeIdFromPublicKey(keyPair.publicKey), privateKeyPem: keyPair.privateKeyPem, certificatePem };
}

async function waitFor(what: string, condition: () => boolean, deadlineMs = 10_000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > deadlineMs) assert.fail(`timed out waiting for: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

/** The lowest jitter factor, every time: each delay is exactly (1 - 0.2) × the backoff. */
const lowestRandom: RandomSource = { nextUint32: () => 0 };

test('reconnection waits for the injected clock, with delays jittered by the injected random source', { timeout: 30_000 }, async (t) => {
  const [idA, idB] = await Promise.all([makeIdentity('a'), makeIdentity('b')]);
  // B's address is held by a listener that drops every connection before any handshake.
  let connections = 0;
  const sockets = new Set<net.Socket>();
  const dropper = net.createServer((socket) => {
    connections++;
    sockets.add(socket);
    socket.destroy();
  });
  await new Promise<void>((resolve) => dropper.listen(0, '127.0.0.1', resolve));
  t.after(() => new Promise<void>((resolve) => dropper.close(() => resolve())));
  const addressB = `127.0.0.1:${(dropper.address() as net.AddressInfo).port}`;

  const clock = new ManualClock();
  const { channels, boundAddress } = await createTlsNodeChannels({
    identity: idA,
    bindAddress: '127.0.0.1:0',
    logger: new MemoryLogger(),
    clock,
    random: lowestRandom,
    reconnect: { initialMs: 1000, maxMs: 8000 },
  });
  t.after(() => channels.close());
  channels.setPeers([
    { nodeId: idA.nodeId, address: boundAddress },
    { nodeId: idB.nodeId, address: addressB },
  ]);

  assert.ok(channels.send(idB.nodeId, 1, Buffer.from('hello')));
  await waitFor('the first attempt fails and a retry is armed on the clock', () => clock.pendingDelaysMs().length === 1);
  assert.equal(connections, 1);
  assert.deepEqual(clock.pendingDelaysMs(), [800]);

  // However long we wait in real time, the clock has not moved: no retry.
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(connections, 1);

  clock.advance(799);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(connections, 1, 'not before the delay');

  clock.advance(1);
  await waitFor('the retry connects', () => connections === 2);
  await waitFor('the next retry is armed, its backoff doubled', () => clock.pendingDelaysMs().length === 1);
  assert.deepEqual(clock.pendingDelaysMs(), [1600]);
  assert.equal(channels.stats().peers[idB.nodeId]!.connected, false);
});
