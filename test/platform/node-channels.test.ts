/**
 * Node-to-node channels: the behavioural contract run against the TLS implementation (real TLS on
 * 127.0.0.1, port 0) and the in-memory one, then what only TLS has (certificates, frames on the
 * wire, reconnection, slow readers). Every listener and socket a test opens is closed by it.
 */
import { test, describe, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import tls from 'node:tls';
import { X509Certificate } from 'node:crypto';
import fc from 'fast-check';
import { MemoryLogger } from '../../src/base/log.js';
import { ChannelError, type ChannelIdentity, type NodeChannels, type PeerAddress } from '../../src/node/channels.js';
import { createEndorsedCertificate, createSelfSignedCertificate, generateEcKeyPair, nodeIdFromPublicKey, type KeyPair } from '../../src/crypto/index.js';
import { createTlsNodeChannels, encodeFrame, FrameDecoder, UNCOPIED_PAYLOAD_BYTES, type TlsNodeChannelsInit } from '../../src/platform/node-channels.js';
import { MemoryChannelNetwork } from '../../src/testing/memory-channels.js';
import { systemClock } from '../../src/platform/clock.js';
import { cryptoRandom } from '../../src/platform/crypto-random.js';

/** A broken channel tends to hang rather than fail: bound each suite. */
const TEST_TIMEOUT_MS = 30_000;

interface TestIdentity extends ChannelIdentity {
  readonly keyPair: KeyPair;
}

async function makeIdentity(name: string): Promise<TestIdentity> {
  const keyPair = generateEcKeyPair('P-384');
  const certificatePem = await createSelfSignedCertificate({ keyPair, subjectCommonName: name, validityDays: 1, isCa: false });
  return { nodeId: nodeIdFromPublicKey(keyPair.publicKey), privateKeyPem: keyPair.privateKeyPem, certificatePem, keyPair };
}

const [idA, idB, idC, idD, idS] = await Promise.all(['a', 'b', 'c', 'd', 's'].map(makeIdentity)) as [TestIdentity, TestIdentity, TestIdentity, TestIdentity, TestIdentity];

interface Received {
  readonly from: string;
  readonly kind: number;
  readonly text: string;
}

interface Started {
  readonly channels: NodeChannels;
  readonly address: string;
  readonly logger: MemoryLogger;
  readonly frames: Received[];
  readonly identity: TestIdentity;
}

interface StartOptions {
  readonly maxQueueBytesPerPeer?: number;
  readonly maxFrameBytes?: number;
  readonly bindAddress?: string;
  readonly stallTimeoutMs?: number;
  readonly maxUnauthenticatedConnections?: number;
}

/** One implementation under the shared contract. */
interface Harness {
  readonly name: string;
  start(t: TestContext, identity: TestIdentity, options?: StartOptions): Promise<Started>;
  /** An address where nothing listens. */
  deadAddress(): Promise<string>;
}

function collect(channels: NodeChannels): Received[] {
  const frames: Received[] = [];
  channels.onFrame((from, kind, payload) => frames.push({ from, kind, text: Buffer.from(payload).toString() }));
  return frames;
}

/** Polls `condition` until it holds; fails with `what` after the deadline. */
async function waitFor(what: string, condition: () => boolean, deadlineMs = 10_000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > deadlineMs) assert.fail(`timed out waiting for: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const peer = (s: Started): PeerAddress => ({ nodeId: s.identity.nodeId, address: s.address });
const text = (s: string) => Buffer.from(s);

const tlsHarness: Harness = {
  name: 'tls',
  async start(t, identity, options = {}) {
    const logger = new MemoryLogger();
    const init: TlsNodeChannelsInit = {
      identity,
      bindAddress: options.bindAddress ?? '127.0.0.1:0',
      logger,
      clock: systemClock,
      random: cryptoRandom(),
      reconnect: { initialMs: 10, maxMs: 100 },
      ...(options.maxQueueBytesPerPeer === undefined ? {} : { maxQueueBytesPerPeer: options.maxQueueBytesPerPeer }),
      ...(options.maxFrameBytes === undefined ? {} : { maxFrameBytes: options.maxFrameBytes }),
      ...(options.stallTimeoutMs === undefined ? {} : { stallTimeoutMs: options.stallTimeoutMs }),
      ...(options.maxUnauthenticatedConnections === undefined ? {} : { maxUnauthenticatedConnections: options.maxUnauthenticatedConnections }),
    };
    const { channels, boundAddress } = await createTlsNodeChannels(init);
    t.after(() => channels.close());
    return { channels, address: boundAddress, logger, frames: collect(channels), identity };
  },
  async deadAddress() {
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as net.AddressInfo).port;
    await new Promise<void>((resolve) => server.close(() => resolve()));
    return `127.0.0.1:${port}`;
  },
};

function memoryHarness(): Harness {
  const network = new MemoryChannelNetwork();
  let next = 0;
  return {
    name: 'memory',
    start(t, identity, options = {}) {
      const logger = new MemoryLogger();
      const channels = network.join({ nodeId: identity.nodeId, address: `mem:${next++}`, logger, ...options });
      t.after(() => channels.close());
      return Promise.resolve({ channels, address: channels.address, logger, frames: collect(channels), identity });
    },
    deadAddress: () => Promise.resolve('mem:nowhere'),
  };
}

function contract(makeHarness: () => Harness): void {
  const name = makeHarness().name;
  describe(`NodeChannels contract (${name})`, { timeout: TEST_TIMEOUT_MS }, () => {
    test('two nodes exchange frames both ways, in order, with the sender authenticated', async (t) => {
      const h = makeHarness();
      const a = await h.start(t, idA);
      const b = await h.start(t, idB);
      a.channels.setPeers([peer(a), peer(b)]);
      b.channels.setPeers([peer(a), peer(b)]);
      for (let i = 0; i < 200; i++) {
        assert.equal(a.channels.send(idB.nodeId, 1, text(`a${i}`)), true);
        assert.equal(b.channels.send(idA.nodeId, 2, text(`b${i}`)), true);
      }
      await waitFor('200 frames each way', () => a.frames.length === 200 && b.frames.length === 200);
      assert.deepEqual(b.frames, Array.from({ length: 200 }, (_, i) => ({ from: idA.nodeId, kind: 1, text: `a${i}` })));
      assert.deepEqual(a.frames, Array.from({ length: 200 }, (_, i) => ({ from: idB.nodeId, kind: 2, text: `b${i}` })));
      const statsA = a.channels.stats().peers[idB.nodeId]!;
      assert.equal(statsA.sent, 200);
      assert.equal(statsA.received, 200);
      assert.equal(statsA.dropped, 0);
      assert.equal(statsA.connected, true);
    });

    test('three nodes: every ordered pair delivers', async (t) => {
      const h = makeHarness();
      const nodes = [await h.start(t, idA), await h.start(t, idB), await h.start(t, idC)];
      for (const n of nodes) n.channels.setPeers(nodes.map(peer));
      for (const from of nodes) {
        for (const to of nodes) if (to !== from) assert.ok(from.channels.send(to.identity.nodeId, 7, text(`${from.identity.nodeId}>${to.identity.nodeId}`)));
      }
      await waitFor('two frames at each node', () => nodes.every((n) => n.frames.length === 2));
      for (const n of nodes) {
        const expected = nodes.filter((o) => o !== n).map((o) => ({ from: o.identity.nodeId, kind: 7, text: `${o.identity.nodeId}>${n.identity.nodeId}` }));
        assert.deepEqual([...n.frames].sort((x, y) => x.from.localeCompare(y.from)), expected.sort((x, y) => x.from.localeCompare(y.from)));
      }
    });

    test('frames from a node outside the peer set are refused, with a logged reason; members are unaffected', async (t) => {
      const h = makeHarness();
      const a = await h.start(t, idA);
      const b = await h.start(t, idB);
      const c = await h.start(t, idC);
      a.channels.setPeers([peer(a), peer(b)]);
      b.channels.setPeers([peer(a), peer(b)]);
      c.channels.setPeers([peer(a), peer(c)]);
      assert.ok(c.channels.send(idA.nodeId, 1, text('from c')));
      await waitFor('A refuses C', () => (a.channels.stats().refused.UnknownPeer ?? 0) >= 1);
      assert.ok(b.channels.send(idA.nodeId, 1, text('from b')));
      await waitFor('A receives from B', () => a.frames.length === 1);
      assert.deepEqual(a.frames, [{ from: idB.nodeId, kind: 1, text: 'from b' }]);
      const line = a.logger.entries.find((e) => e.fields['reason'] === 'UnknownPeer');
      assert.ok(line, 'the refusal is logged');
      assert.equal(line.fields['presented_node_id'], idC.nodeId);
      assert.equal(a.channels.stats().peers[idC.nodeId], undefined);
    });

    test('a node at a peer address presenting another key is refused by the connecting side', async (t) => {
      const h = makeHarness();
      const a = await h.start(t, idA);
      const c = await h.start(t, idC);
      // A believes B listens where C does; C would accept A.
      a.channels.setPeers([{ nodeId: idB.nodeId, address: c.address }]);
      c.channels.setPeers([peer(a)]);
      assert.ok(a.channels.send(idB.nodeId, 1, text('for b only')));
      await waitFor('A refuses the key at that address', () => (a.channels.stats().refused.PeerIdMismatch ?? 0) >= 1);
      const line = a.logger.entries.find((e) => e.fields['reason'] === 'PeerIdMismatch');
      assert.ok(line);
      assert.equal(line.level, 'fail');
      assert.equal(line.fields['presented_node_id'], idC.nodeId);
      assert.equal(a.channels.stats().peers[idB.nodeId]!.connected, false);
      assert.deepEqual(c.frames, []);
    });

    test('sending to an unknown node id returns false and is counted', async (t) => {
      const h = makeHarness();
      const a = await h.start(t, idA);
      a.channels.setPeers([]);
      assert.equal(a.channels.send(idB.nodeId, 1, text('x')), false);
      assert.equal(a.channels.send(idA.nodeId, 1, text('to self')), false);
      assert.equal(a.channels.stats().droppedUnknownPeer, 2);
    });

    test('frames to a down peer queue up to the bound, then drop and are counted', async (t) => {
      const h = makeHarness();
      const a = await h.start(t, idA, { maxQueueBytesPerPeer: 10_000 });
      a.channels.setPeers([{ nodeId: idD.nodeId, address: await h.deadAddress() }]);
      const results = Array.from({ length: 20 }, () => a.channels.send(idD.nodeId, 1, new Uint8Array(1000)));
      // 9 frames of 5 + 1000 bytes fit in 10,000 bytes.
      assert.deepEqual(results, [...Array<boolean>(9).fill(true), ...Array<boolean>(11).fill(false)]);
      const stats = a.channels.stats().peers[idD.nodeId]!;
      assert.equal(stats.dropped, 11);
      assert.equal(stats.queuedBytes, 9 * 1005);
      assert.equal(stats.connected, false);
      assert.equal(a.logger.messages().filter((m) => m === 'dropping node-to-node frames').length, 1, 'one line per episode');
    });

    test('a frame above the frame limit is dropped at the sender', async (t) => {
      const h = makeHarness();
      const a = await h.start(t, idA, { maxFrameBytes: 100 });
      a.channels.setPeers([{ nodeId: idB.nodeId, address: await h.deadAddress() }]);
      assert.equal(a.channels.send(idB.nodeId, 1, new Uint8Array(99)), true);
      assert.equal(a.channels.send(idB.nodeId, 1, new Uint8Array(100)), false);
      assert.equal(a.channels.stats().peers[idB.nodeId]!.dropped, 1);
    });
  });
}

contract(() => tlsHarness);
contract(memoryHarness);

// ---- TLS only -------------------------------------------------------------------------------------

function hostPort(address: string): { host: string; port: number } {
  const i = address.lastIndexOf(':');
  return { host: address.slice(0, i), port: Number(address.slice(i + 1)) };
}

/** A raw TLS client presenting `identity` (or no certificate), connected and handshaken. */
async function rawClient(t: TestContext, address: string, identity?: ChannelIdentity): Promise<tls.TLSSocket> {
  const socket = tls.connect({
    ...hostPort(address),
    rejectUnauthorized: false,
    ...(identity === undefined ? {} : { key: identity.privateKeyPem, cert: identity.certificatePem }),
  });
  t.after(() => socket.destroy());
  socket.on('error', () => undefined);
  await new Promise<void>((resolve, reject) => {
    socket.once('secureConnect', resolve);
    socket.once('error', reject);
  });
  return socket;
}

const closed = (socket: net.Socket) => new Promise<void>((resolve) => (socket.destroyed ? resolve() : socket.once('close', () => resolve())));

/** A pair A, B that keep working; the checks below run beside them. */
async function healthyPair(t: TestContext, options: StartOptions = {}): Promise<[Started, Started]> {
  const a = await tlsHarness.start(t, idA, options);
  const b = await tlsHarness.start(t, idB);
  a.channels.setPeers([peer(a), peer(b), { nodeId: idS.nodeId, address: await tlsHarness.deadAddress() }]);
  b.channels.setPeers([peer(a), peer(b)]);
  return [a, b];
}

async function roundTrip(a: Started, b: Started, label: string): Promise<void> {
  const before = a.frames.length;
  b.channels.onFrame((from, kind, payload) => {
    b.frames.push({ from, kind, text: Buffer.from(payload).toString() });
    b.channels.send(from, kind, payload);
  });
  assert.ok(a.channels.send(b.identity.nodeId, 3, text(label)));
  await waitFor(`echo of ${label}`, () => a.frames.length > before);
  assert.deepEqual(a.frames.at(-1), { from: b.identity.nodeId, kind: 3, text: label });
}

/** A TLS server presenting `identity` that accepts connections and never reads from them. */
async function nonReadingServer(t: TestContext, identity: ChannelIdentity): Promise<{ address: string; accepted: tls.TLSSocket[] }> {
  const accepted: tls.TLSSocket[] = [];
  const server = tls.createServer({ key: identity.privateKeyPem, cert: identity.certificatePem, requestCert: true, rejectUnauthorized: false }, (socket) => {
    socket.pause();
    socket.on('error', () => undefined);
    accepted.push(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    for (const s of accepted) s.destroy();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return { address: `127.0.0.1:${(server.address() as net.AddressInfo).port}`, accepted };
}

describe('TLS node-to-node channels', { timeout: TEST_TIMEOUT_MS }, () => {
  test('connections that never authenticate: one address holds half of maxUnauthenticatedConnections, a full table closes the oldest of the largest address, and a peer still connects', async (t) => {
    const [a, b] = await healthyPair(t, { maxUnauthenticatedConnections: 8 });
    const flood: net.Socket[] = [];
    const open = (localAddress: string) =>
      new Promise<net.Socket>((resolve) => {
        const socket = net.connect({ ...hostPort(a.address), localAddress }, () => resolve(socket));
        socket.on('error', () => undefined);
        flood.push(socket);
      });
    t.after(() => flood.forEach((s) => s.destroy()));
    // 10 from one address: 4 held (half of 8), 6 closed at accept.
    for (let i = 0; i < 10; i++) await open('127.0.0.2');
    await waitFor('the connections beyond the share to be closed', () => flood.filter((s) => s.destroyed).length === 6);
    assert.equal(a.channels.stats().unauthenticatedHeld, 4);
    // 4 from each of two more addresses: the table (8) fills, then each new one closes the oldest
    // connection of an address holding the most: the two older addresses lose two each.
    for (let i = 0; i < 4; i++) await open('127.0.0.3');
    for (let i = 0; i < 4; i++) await open('127.0.0.4');
    const alive = (from: number, to: number) => flood.slice(from, to).filter((s) => !s.destroyed).length;
    await waitFor('the table to stay at its bound', () => alive(0, flood.length) === 8);
    assert.equal(a.channels.stats().unauthenticatedHeld, 8);
    assert.deepEqual([alive(0, 10), alive(10, 14), alive(14, 18)], [2, 2, 4], 'the newest address lost nothing');
    // B connects to A now (from 127.0.0.1), through the full table, and is authenticated.
    await roundTrip(a, b, 'through the flood');
    assert.equal(a.channels.stats().refused.TooManyUnauthenticated, 6 + 4 + 1);
  });

  test('a client without a certificate is refused', async (t) => {
    const [a, b] = await healthyPair(t);
    const socket = await rawClient(t, a.address);
    socket.write(encodeFrame(1, text('anonymous')));
    await closed(socket);
    assert.equal(a.channels.stats().refused.NoPeerCertificate, 1);
    assert.ok(a.logger.entries.some((e) => e.fields['reason'] === 'NoPeerCertificate'));
    await roundTrip(a, b, 'still working');
    assert.ok(a.frames.every((f) => f.from === idB.nodeId));
  });

  test('garbage and bad length prefixes close only that connection, with a logged reason', async (t) => {
    const [a, b] = await healthyPair(t, { maxFrameBytes: 1024 });
    await roundTrip(a, b, 'before');

    // Not TLS at all.
    const tcp = net.connect(hostPort(a.address));
    t.after(() => tcp.destroy());
    tcp.on('error', () => undefined);
    tcp.write(Buffer.from('GET / HTTP/1.1\r\n\r\n\x00\xff garbage'));
    await closed(tcp);
    await waitFor('handshake failure counted', () => (a.channels.stats().refused.HandshakeFailed ?? 0) >= 1);

    // An authenticated member (S) sending bad frames: oversized, empty, and random bytes after a good frame.
    const oversized = await rawClient(t, a.address, idS);
    oversized.write(Buffer.from([0xff, 0xff, 0xff, 0xff, 1, 2, 3]));
    await closed(oversized);
    const empty = await rawClient(t, a.address, idS);
    empty.write(Buffer.from([0, 0, 0, 0]));
    await closed(empty);
    const mixed = await rawClient(t, a.address, idS);
    mixed.write(Buffer.concat([encodeFrame(9, text('good')), Buffer.from('this is not a frame header at all')]));
    await closed(mixed);

    const refused = a.channels.stats().refused;
    assert.equal(refused.FrameEmpty, 1);
    assert.equal(refused.FrameTooLarge, 2, 'the oversized prefix, and the garbage that parses to a huge length');
    const tooLarge = a.logger.entries.filter((e) => e.fields['reason'] === 'FrameTooLarge');
    assert.equal(tooLarge.length, 2);
    assert.ok(tooLarge.every((e) => e.level === 'fail' && e.fields['peer'] === idS.nodeId));
    // The good frame before the garbage was delivered, nothing after it.
    assert.deepEqual(a.frames.filter((f) => f.from === idS.nodeId), [{ from: idS.nodeId, kind: 9, text: 'good' }]);
    await roundTrip(a, b, 'after');
    assert.equal(a.channels.stats().peers[idB.nodeId]!.connected, true);
  });

  test('a peer restarting is reconnected to, and frames queued meanwhile are delivered', async (t) => {
    const a = await tlsHarness.start(t, idA);
    const b1 = await tlsHarness.start(t, idB);
    a.channels.setPeers([peer(a), peer(b1)]);
    b1.channels.setPeers([peer(a), peer(b1)]);
    assert.ok(a.channels.send(idB.nodeId, 1, text('first life')));
    await waitFor('B receives', () => b1.frames.length === 1);

    await b1.channels.close();
    await waitFor('A notices B is gone', () => !a.channels.stats().peers[idB.nodeId]!.connected);
    for (let i = 0; i < 5; i++) assert.ok(a.channels.send(idB.nodeId, 1, text(`queued ${i}`)));
    assert.ok(a.channels.stats().peers[idB.nodeId]!.queuedBytes > 0);

    const b2 = await tlsHarness.start(t, idB, { bindAddress: b1.address });
    b2.channels.setPeers([peer(a), peer(b2)]);
    await waitFor('B receives the queued frames', () => b2.frames.length === 5);
    assert.deepEqual(b2.frames.map((f) => f.text), [0, 1, 2, 3, 4].map((i) => `queued ${i}`));
    assert.equal(a.channels.stats().peers[idB.nodeId]!.connected, true);
    assert.equal(a.channels.stats().peers[idB.nodeId]!.queuedBytes, 0);
    assert.ok(a.logger.messages('info').includes('node-to-node connection lost'));
  });

  test('large payloads, written after their own header, arrive whole and in order among small ones, queued or not', async (t) => {
    const a = await tlsHarness.start(t, idA);
    const b1 = await tlsHarness.start(t, idB);
    a.channels.setPeers([peer(a), peer(b1)]);
    b1.channels.setPeers([peer(a), peer(b1)]);
    const large = (i: number, bytes: number) => text(`${i}:`.padEnd(bytes, String.fromCharCode(97 + (i % 26))));
    const sizes = [UNCOPIED_PAYLOAD_BYTES - 1, UNCOPIED_PAYLOAD_BYTES, 3 * 1024 * 1024, 10, UNCOPIED_PAYLOAD_BYTES + 1];
    // Sent before the connection is up (queued), then on a live connection (written at once).
    for (const round of [0, 1]) {
      for (const [i, bytes] of sizes.entries()) assert.ok(a.channels.send(idB.nodeId, 3, large(round * 10 + i, bytes)));
      await waitFor(`round ${round} delivered`, () => b1.frames.length === (round + 1) * sizes.length);
    }
    const expected = [0, 1].flatMap((round) => sizes.map((bytes, i) => large(round * 10 + i, bytes).toString()));
    assert.deepEqual(b1.frames.map((f) => f.text), expected);

    // Queued while the peer is down, large frames go out whole on the next connection.
    await b1.channels.close();
    await waitFor('A notices B is gone', () => !a.channels.stats().peers[idB.nodeId]!.connected);
    for (const [i, bytes] of sizes.entries()) assert.ok(a.channels.send(idB.nodeId, 3, large(20 + i, bytes)));
    const b2 = await tlsHarness.start(t, idB, { bindAddress: b1.address });
    b2.channels.setPeers([peer(a), peer(b2)]);
    await waitFor('B receives the queued frames', () => b2.frames.length === sizes.length);
    assert.deepEqual(b2.frames.map((f) => f.text), sizes.map((bytes, i) => large(20 + i, bytes).toString()));
    assert.equal(a.channels.stats().peers[idB.nodeId]!.queuedBytes, 0);
    assert.deepEqual(b2.channels.stats().refused, {});
  });

  test('removing a peer closes its connections and refuses it from then on', async (t) => {
    const a = await tlsHarness.start(t, idA);
    const b = await tlsHarness.start(t, idB);
    a.channels.setPeers([peer(a), peer(b)]);
    b.channels.setPeers([peer(a), peer(b)]);
    assert.ok(a.channels.send(idB.nodeId, 1, text('hello')));
    await waitFor('B receives', () => b.frames.length === 1);
    b.channels.setPeers([peer(b)]);
    await waitFor("A's connection closed by B", () => !a.channels.stats().peers[idB.nodeId]!.connected);
    await waitFor('A refused on reconnection', () => (b.channels.stats().refused.UnknownPeer ?? 0) >= 1);
    assert.ok(a.channels.send(idB.nodeId, 1, text('after removal')));
    a.channels.setPeers([peer(a)]);
    assert.equal(a.channels.send(idB.nodeId, 1, text('unknown now')), false);
    assert.deepEqual(b.frames.map((f) => f.text), ['hello']);
  });

  test('a peer that does not read fills only its own queue; the others keep exchanging', async (t) => {
    const queueBound = 1024 * 1024;
    const a = await tlsHarness.start(t, idA, { maxQueueBytesPerPeer: queueBound });
    const b = await tlsHarness.start(t, idB);
    // S accepts A's connection and never reads from it.
    const { address: slowAddress } = await nonReadingServer(t, idS);
    a.channels.setPeers([peer(a), peer(b), { nodeId: idS.nodeId, address: slowAddress }]);
    b.channels.setPeers([peer(a), peer(b), { nodeId: idS.nodeId, address: slowAddress }]);
    // S also connects to A and stalls in the middle of a frame, never reading.
    const halfFrame = await rawClient(t, a.address, idS);
    halfFrame.write(Buffer.from([100, 0, 0]));

    const big = new Uint8Array(64 * 1024);
    let roundTripsWhileDropping = 0;
    for (let i = 0; roundTripsWhileDropping < 20; i++) {
      assert.ok(i < 2000, 'the slow peer never pushed back');
      for (let j = 0; j < 16; j++) a.channels.send(idS.nodeId, 1, big);
      const s = a.channels.stats().peers[idS.nodeId]!;
      assert.ok(s.queuedBytes <= queueBound, `queue within its bound (${s.queuedBytes})`);
      if (s.dropped > 0 && s.connected) {
        await roundTrip(a, b, `rt ${roundTripsWhileDropping}`);
        roundTripsWhileDropping++;
      } else {
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    const s = a.channels.stats().peers[idS.nodeId]!;
    assert.equal(s.connected, true, 'S is connected, just not reading');
    assert.ok(s.dropped > 0);
    assert.equal(a.channels.stats().peers[idB.nodeId]!.dropped, 0);
  });

  test('an outgoing connection on which no write completes for stallTimeoutMs is re-established', async (t) => {
    const a = await tlsHarness.start(t, idA, { maxQueueBytesPerPeer: 1024 * 1024, stallTimeoutMs: 200 });
    const slow = await nonReadingServer(t, idS);
    a.channels.setPeers([{ nodeId: idS.nodeId, address: slow.address }]);
    const big = new Uint8Array(64 * 1024);
    await waitFor('a second connection after the first stalled', () => {
      for (let j = 0; j < 16; j++) a.channels.send(idS.nodeId, 1, big);
      return slow.accepted.length >= 2;
    });
    const line = a.logger.entries.find((e) => e.msg === 'node-to-node connection stalled');
    assert.ok(line);
    assert.equal(line.fields['peer'], idS.nodeId);
    assert.ok(a.logger.entries.some((e) => e.msg === 'node-to-node connection lost' && String(e.fields['error']).includes('no write completed')));
  });

  test('setIdentity: new connections in both directions present the new certificate', async (t) => {
    const [a, b] = await healthyPair(t);
    const caKeys = generateEcKeyPair('P-384');
    const caPem = await createSelfSignedCertificate({ keyPair: caKeys, subjectCommonName: 'service', validityDays: 1, isCa: true });
    const endorsedPem = await createEndorsedCertificate({
      subjectPublicKey: idA.keyPair.publicKey,
      subjectCommonName: 'a',
      subjectAltNames: [],
      issuerCertificatePem: caPem,
      issuerPrivateKey: caKeys.privateKey,
      validityDays: 1,
    });
    const fingerprint = (pem: string) => new X509Certificate(pem).fingerprint256;
    const serverCertOf = async () => {
      const probe = await rawClient(t, a.address, idD);
      const seen = probe.getPeerX509Certificate()!.fingerprint256;
      probe.destroy();
      return seen;
    };

    // R records the client certificate of every connection A makes to it, then hangs up.
    const presented: string[] = [];
    const recorder = tls.createServer({ key: idS.privateKeyPem, cert: idS.certificatePem, requestCert: true, rejectUnauthorized: false }, (socket) => {
      presented.push(socket.getPeerX509Certificate()!.fingerprint256);
      socket.destroy();
    });
    await new Promise<void>((resolve) => recorder.listen(0, '127.0.0.1', resolve));
    t.after(() => new Promise<void>((resolve) => recorder.close(() => resolve())));
    a.channels.setPeers([peer(a), peer(b), { nodeId: idS.nodeId, address: `127.0.0.1:${(recorder.address() as net.AddressInfo).port}` }]);

    assert.equal(await serverCertOf(), fingerprint(idA.certificatePem));
    a.channels.send(idS.nodeId, 1, text('x'));
    await waitFor('a connection to R', () => presented.length >= 1);
    assert.equal(presented[0], fingerprint(idA.certificatePem));

    const tls12Refused = async () => {
      const socket = tls.connect({ ...hostPort(a.address), rejectUnauthorized: false, maxVersion: 'TLSv1.2', key: idD.privateKeyPem, cert: idD.certificatePem });
      t.after(() => socket.destroy());
      return new Promise<boolean>((resolve) => {
        socket.once('secureConnect', () => resolve(false));
        socket.once('error', () => resolve(true));
      });
    };
    assert.equal(await tls12Refused(), true, 'TLS 1.3 only');

    a.channels.setIdentity({ nodeId: idA.nodeId, privateKeyPem: idA.privateKeyPem, certificatePem: endorsedPem });
    assert.equal(await serverCertOf(), fingerprint(endorsedPem));
    assert.equal(await tls12Refused(), true, 'still TLS 1.3 only with the new certificate');
    await waitFor('a reconnection to R with the endorsed certificate', () => presented.at(-1) === fingerprint(endorsedPem));
    // B accepts A by key, whatever signed its certificate.
    await roundTrip(b, a, 'B to A');
    await roundTrip(a, b, 'A to B');

    assert.throws(() => a.channels.setIdentity(idB), (e: unknown) => e instanceof ChannelError && e.code === 'IdentityMismatch');
    assert.throws(
      () => a.channels.setIdentity({ nodeId: idA.nodeId, privateKeyPem: idA.privateKeyPem, certificatePem: idB.certificatePem }),
      (e: unknown) => e instanceof ChannelError && e.code === 'IdentityMismatch',
    );
  });

  test('createTlsNodeChannels refuses a certificate that does not carry the node id', async () => {
    await assert.rejects(
      createTlsNodeChannels({ identity: { ...idA, certificatePem: idB.certificatePem }, bindAddress: '127.0.0.1:0', logger: new MemoryLogger(), clock: systemClock, random: cryptoRandom() }),
      (e: unknown) => e instanceof ChannelError && e.code === 'IdentityMismatch',
    );
    await assert.rejects(
      createTlsNodeChannels({ identity: idA, bindAddress: 'nowhere', logger: new MemoryLogger(), clock: systemClock, random: cryptoRandom() }),
      (e: unknown) => e instanceof ChannelError && e.code === 'InvalidAddress',
    );
  });
});

describe('frame decoding', () => {
  const frameArb = fc.record({ kind: fc.integer({ min: 0, max: 255 }), payload: fc.uint8Array({ maxLength: 300 }) });

  test('any split of a stream of frames yields the same frames', () => {
    fc.assert(
      fc.property(fc.array(frameArb, { maxLength: 20 }), fc.array(fc.integer({ min: 0, max: 10_000 }), { maxLength: 30 }), (frames, cuts) => {
        const stream = Buffer.concat(frames.map((f) => encodeFrame(f.kind, f.payload)));
        const points = [...new Set(cuts.map((c) => c % (stream.length + 1)))].sort((x, y) => x - y);
        const decoder = new FrameDecoder(1024);
        const out: { kind: number; payload: Uint8Array }[] = [];
        let last = 0;
        for (const p of [...points, stream.length]) {
          const error = decoder.push(stream.subarray(last, p), (kind, payload) => out.push({ kind, payload: new Uint8Array(payload) }));
          assert.equal(error, undefined);
          last = p;
        }
        assert.deepEqual(out, frames.map((f) => ({ kind: f.kind, payload: new Uint8Array(f.payload) })));
      }),
    );
  });

  test('a length prefix of 0 or above the limit is an error, however it is split', () => {
    for (const [prefix, code] of [[[0, 0, 0, 0], 'FrameEmpty'], [[0x01, 0x04, 0, 0], 'FrameTooLarge']] as const) {
      for (let cut = 0; cut <= 4; cut++) {
        const decoder = new FrameDecoder(1024);
        const bytes = Buffer.from(prefix);
        const first = decoder.push(bytes.subarray(0, cut), () => assert.fail('no frame'));
        const error = first ?? decoder.push(bytes.subarray(cut), () => assert.fail('no frame'));
        assert.equal(error?.code, code);
        assert.equal(decoder.push(encodeFrame(1, text('ok')), () => assert.fail('a failed stream stays failed'))?.code, code);
      }
    }
    const decoder = new FrameDecoder(1024);
    const frames: number[] = [];
    assert.equal(decoder.push(encodeFrame(5, new Uint8Array(1023)), (kind, payload) => frames.push(kind, payload.length)), undefined);
    assert.deepEqual(frames, [5, 1023], 'a frame at exactly the limit is accepted');
  });
});
