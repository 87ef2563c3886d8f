/**
 * Node-to-node channels over real mutual TLS on loopback, two instances in one process.
 * Run: node --import tsx bench/channels.ts [roundTrips] [messages]
 * Prints one JSON object per measurement:
 * - channels.rtt: A sends a small frame to B, B echoes it, one at a time; p50/p99 in µs.
 * - channels.throughput: A streams frames to B one way; B counts them. The sender keeps its
 *   queue below half the bound (as a driver with flow control would), so nothing is dropped.
 */
import { performance } from 'node:perf_hooks';
import { nullLogger } from '../src/base/log.js';
import type { NodeChannels } from '../src/base/channels.js';
import { createSelfSignedCertificate, generateEcKeyPair, nodeIdFromPublicKey } from '../src/crypto/index.js';
import { createTlsNodeChannels } from '../src/platform/node-channels.js';
import { systemClock } from '../src/platform/clock.js';
import { cryptoRandom } from '../src/platform/crypto-random.js';

const ROUND_TRIPS = Number(process.argv[2] ?? 20_000);
const MESSAGES = Number(process.argv[3] ?? 500_000);
const QUEUE_BOUND_BYTES = 64 * 1024 * 1024;

async function identity(name: string) {
  const keyPair = generateEcKeyPair('P-384');
  const certificatePem = await createSelfSignedCertificate({ keyPair, subjectCommonName: name, validityDays: 1, isCa: false });
  return { nodeId: nodeIdFromPublicKey(keyPair.publicKey), privateKeyPem: keyPair.privateKeyPem, certificatePem };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

async function roundTrips(a: NodeChannels, b: NodeChannels, bId: string, payloadBytes: number): Promise<void> {
  const payload = new Uint8Array(payloadBytes).fill(1);
  b.onFrame((from, kind, p) => b.send(from, kind, p));
  let resolveEcho: () => void = () => undefined;
  a.onFrame(() => resolveEcho());
  const once = () =>
    new Promise<void>((resolve) => {
      resolveEcho = resolve;
      a.send(bId, 1, payload);
    });
  for (let i = 0; i < 1000; i++) await once();
  const samplesUs: number[] = [];
  for (let i = 0; i < ROUND_TRIPS; i++) {
    const start = performance.now();
    await once();
    samplesUs.push((performance.now() - start) * 1000);
  }
  samplesUs.sort((x, y) => x - y);
  console.log(
    JSON.stringify({
      bench: 'channels.rtt',
      payloadBytes,
      roundTrips: ROUND_TRIPS,
      p50Us: Math.round(percentile(samplesUs, 50)),
      p99Us: Math.round(percentile(samplesUs, 99)),
    }),
  );
}

async function throughput(a: NodeChannels, b: NodeChannels, bId: string, payloadBytes: number, messages: number): Promise<void> {
  const payload = new Uint8Array(payloadBytes).fill(2);
  let received = 0;
  let done: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => (done = resolve));
  b.onFrame(() => {
    if (++received === messages) done();
  });
  const droppedBefore = a.stats().peers[bId]!.dropped;
  const start = performance.now();
  let sent = 0;
  const burst = Math.max(1, Math.floor((256 * 1024) / (payloadBytes + 5)));
  while (sent < messages) {
    if (a.stats().peers[bId]!.queuedBytes > QUEUE_BOUND_BYTES / 2) {
      await tick();
      continue;
    }
    for (let i = 0; i < burst && sent < messages; i++, sent++) a.send(bId, 2, payload);
    await tick();
  }
  await finished;
  const ms = performance.now() - start;
  console.log(
    JSON.stringify({
      bench: 'channels.throughput',
      payloadBytes,
      messages,
      ms: Math.round(ms),
      messagesPerSecond: Math.round((messages / ms) * 1000),
      megabytesPerSecond: Number((((messages * payloadBytes) / ms) * 1000 / 1024 / 1024).toFixed(1)),
      dropped: a.stats().peers[bId]!.dropped - droppedBefore,
    }),
  );
}

const [idA, idB] = await Promise.all([identity('a'), identity('b')]);
const a = await createTlsNodeChannels({ identity: idA, bindAddress: '127.0.0.1:0', logger: nullLogger, clock: systemClock, random: cryptoRandom(), maxQueueBytesPerPeer: QUEUE_BOUND_BYTES });
const b = await createTlsNodeChannels({ identity: idB, bindAddress: '127.0.0.1:0', logger: nullLogger, clock: systemClock, random: cryptoRandom(), maxQueueBytesPerPeer: QUEUE_BOUND_BYTES });
const peers = [
  { nodeId: idA.nodeId, address: a.boundAddress },
  { nodeId: idB.nodeId, address: b.boundAddress },
];
a.channels.setPeers(peers);
b.channels.setPeers(peers);
try {
  await roundTrips(a.channels, b.channels, idB.nodeId, 64);
  await throughput(a.channels, b.channels, idB.nodeId, 64, MESSAGES);
  await throughput(a.channels, b.channels, idB.nodeId, 1024, Math.round(MESSAGES / 4));
  await throughput(a.channels, b.channels, idB.nodeId, 64 * 1024, Math.round(MESSAGES / 100));
} finally {
  await Promise.all([a.channels.close(), b.channels.close()]);
}
