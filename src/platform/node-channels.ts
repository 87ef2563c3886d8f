/**
 * Node-to-node channels over mutual TLS (node:tls), implementing NodeChannels (src/base/channels.ts).
 *
 * Connection model: every ordered pair of nodes A→B has its own connection, opened by A to B's
 * published node-to-node address. A sends frames on it; B only reads. So a peer that does not
 * read can only fill the queue of its own connection, and a receiver never writes to anyone.
 *
 * Authentication is by node id, not by a CA: identity certificates may still be self-signed
 * (before the node joins), so both sides accept any certificate in the handshake and then hash
 * the presented public key (DER SPKI, SHA-256, lower-case hex):
 * - the listener keeps a connection only if that id is in the current peer set;
 * - the connector keeps it only if that id is the node id it meant to reach.
 * TLS itself proves that the other side holds the private key of the presented certificate.
 *
 * Frames: u32 LE length of (kind + payload), u8 kind, payload; 1 ≤ length ≤ maxFrameBytes.
 * A bad length closes that one connection with a logged reason.
 *
 * Sending: each peer has one queue bounded in bytes (frames waiting for the connection or for
 * 'drain', plus what the socket holds). Frames that do not fit are dropped and counted: consensus
 * retransmits. A payload of UNCOPIED_PAYLOAD_BYTES or more is written after its own header rather
 * than copied into the frame. Frames are written one by one: while a write is in progress the
 * socket buffers the next ones and hands them to TLS together (writev), so corking each
 * synchronous burst of sends into one write measured no faster (bench/channels.ts) and was left
 * out.
 * Once a peer has been sent to, its connection is kept up, re-established after a failure with
 * exponential backoff (with jitter) that resets once a connection has lasted reconnect.maxMs.
 */
import type { Socket, AddressInfo } from 'node:net';
import tls from 'node:tls';
import { assert } from '../base/assert.js';
import {
  ChannelError,
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_MAX_QUEUE_BYTES_PER_PEER,
  FRAME_HEADER_BYTES,
  type ChannelErrorCode,
  type ChannelIdentity,
  type ChannelStats,
  type FrameHandler,
  type NodeChannels,
  type PeerAddress,
  type PeerChannelStats,
} from '../base/channels.js';
import type { Clock } from '../base/clock.js';
import { errorMessage } from '../base/errors.js';
import type { LogFields, Logger, LogLevel } from '../base/log.js';
import { randomUnit, type RandomSource } from '../base/random.js';
import { formatHostPort, parseHostPort, type HostPort } from '../config/index.js';
import { nodeIdFromPublicKey } from '../crypto/index.js';
import { FrameDecoder, frameBytesOf, outFrameOf, type OutFrame } from './node-channel-frames.js';
import { checkIdentity, Peer, remoteOf, secureContextOf } from './node-channel-peer.js';
import { UnauthenticatedConnections } from './node-channel-admission.js';

export { encodeFrame, FrameDecoder, UNCOPIED_PAYLOAD_BYTES } from './node-channel-frames.js';

export interface ReconnectOptions {
  /** Delay before the first reconnection attempt after a failure. */
  readonly initialMs: number;
  /** Cap of the doubling delay; also how long a connection must last for the delay to reset. */
  readonly maxMs: number;
}

export interface TlsNodeChannelsInit {
  readonly identity: ChannelIdentity;
  /** "host:port" to listen on; port 0 picks a free port (see boundAddress). */
  readonly bindAddress: string;
  readonly logger: Logger;
  /** Reconnection delays and connection ages (socket inactivity timeouts are the sockets' own). */
  readonly clock: Clock;
  /** The jitter of reconnection delays. */
  readonly random: RandomSource;
  /** Limit of a frame's kind + payload, both sent and received. Default 64 MiB. */
  readonly maxFrameBytes?: number;
  /** Bound of each peer's send queue. Default 64 MiB. */
  readonly maxQueueBytesPerPeer?: number;
  /** Default 50 ms doubling to 2 s. */
  readonly reconnect?: Partial<ReconnectOptions>;
  /** Time allowed to connect and complete the TLS handshake, both directions. Default 5 s. */
  readonly handshakeTimeoutMs?: number;
  /**
   * An outgoing connection with frames to write on which no write completed for this long is
   * closed and re-established: a peer that vanished without a reset would otherwise hold its
   * connection (and fill its queue) until TCP gives up, many minutes later. Default 10 s.
   */
  readonly stallTimeoutMs?: number;
  /**
   * Incoming connections held before they are known to come from a peer (TCP accepted, TLS
   * handshake and key check not done yet), each address holding at most half; see
   * node-channel-admission.ts. Default DEFAULT_MAX_UNAUTHENTICATED_CONNECTIONS.
   */
  readonly maxUnauthenticatedConnections?: number;
}

/** Incoming connections not yet authenticated as a peer's, held at once by default. */
export const DEFAULT_MAX_UNAUTHENTICATED_CONNECTIONS = 256;

const DEFAULT_RECONNECT: ReconnectOptions = { initialMs: 50, maxMs: 2000 };
const DEFAULT_HANDSHAKE_TIMEOUT_MS = 5000;
const DEFAULT_STALL_TIMEOUT_MS = 10_000;
/** TCP keep-alive probes start after this idle time, so that a vanished peer is noticed. */
const KEEPALIVE_DELAY_MS = 10_000;
/** Each delay is scaled by a factor in [1 - J, 1 + J], so that nodes do not retry in lockstep. */
const RECONNECT_JITTER = 0.2;
const EMPTY = Buffer.alloc(0);


export class TlsNodeChannels implements NodeChannels {
  private identity: ChannelIdentity;
  private secureContext: tls.SecureContext;
  private readonly peers = new Map<string, Peer>();
  private handler: FrameHandler | undefined;
  /** Every accepted TCP socket, authenticated or not, so that close() can end them all. */
  private readonly acceptedSockets = new Set<Socket>();
  private closed = false;
  private closing: Promise<void> | undefined;
  private droppedUnknownPeer = 0;
  private readonly refused: Partial<Record<ChannelErrorCode, number>> = {};
  private readonly log: Logger;
  private readonly clock: Clock;
  private readonly random: RandomSource;
  private readonly maxFrameBytes: number;
  private readonly maxQueueBytesPerPeer: number;
  private readonly reconnect: ReconnectOptions;
  private readonly handshakeTimeoutMs: number;
  private readonly stallTimeoutMs: number;
  private readonly unauthenticated: UnauthenticatedConnections;

  /** Use createTlsNodeChannels, which also starts listening. */
  constructor(
    private readonly server: tls.Server,
    init: TlsNodeChannelsInit,
  ) {
    checkIdentity(init.identity);
    this.identity = init.identity;
    this.secureContext = secureContextOf(init.identity);
    this.log = init.logger;
    this.clock = init.clock;
    this.random = init.random;
    this.maxFrameBytes = init.maxFrameBytes ?? DEFAULT_MAX_FRAME_BYTES;
    this.maxQueueBytesPerPeer = init.maxQueueBytesPerPeer ?? DEFAULT_MAX_QUEUE_BYTES_PER_PEER;
    this.reconnect = { ...DEFAULT_RECONNECT, ...init.reconnect };
    this.handshakeTimeoutMs = init.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS;
    this.stallTimeoutMs = init.stallTimeoutMs ?? DEFAULT_STALL_TIMEOUT_MS;
    this.unauthenticated = new UnauthenticatedConnections(init.maxUnauthenticatedConnections ?? DEFAULT_MAX_UNAUTHENTICATED_CONNECTIONS);
    assert(Number.isInteger(this.maxFrameBytes) && this.maxFrameBytes >= 1 && this.maxFrameBytes <= 0xffff_ffff, 'maxFrameBytes must be in [1, 2^32)');
    assert(this.maxQueueBytesPerPeer >= FRAME_HEADER_BYTES, 'maxQueueBytesPerPeer must hold at least one frame header');
    assert(this.reconnect.initialMs > 0 && this.reconnect.maxMs >= this.reconnect.initialMs, 'reconnect delays must satisfy 0 < initialMs <= maxMs');

    server.on('connection', (socket: Socket) => {
      this.acceptedSockets.add(socket);
      socket.on('close', () => this.acceptedSockets.delete(socket));
      if (this.closed) {
        socket.destroy();
        return;
      }
      if (this.unauthenticated.accepted(socket)) {
        this.count('TooManyUnauthenticated');
        // A flood would log a line per connection: the count is in stats(), the first one in the log.
        if (this.refused.TooManyUnauthenticated === 1) this.log.info('node-to-node connections closed before authentication: TooManyUnauthenticated', { remote: remoteOf(socket) });
      }
    });
    server.on('secureConnection', (socket: tls.TLSSocket) => this.onAccepted(socket));
    server.on('tlsClientError', (error: Error, socket: tls.TLSSocket) => {
      this.count('HandshakeFailed');
      this.log.info('refused node-to-node connection: HandshakeFailed', { reason: 'HandshakeFailed', remote: remoteOf(socket), error: error.message });
      socket.destroy();
    });
  }

  send(to: string, kind: number, payload: Uint8Array): boolean {
    assert(Number.isInteger(kind) && kind >= 0 && kind <= 0xff, () => `frame kind ${kind} is not a u8`);
    const peer = this.closed ? undefined : this.peers.get(to);
    if (peer === undefined) {
      this.droppedUnknownPeer++;
      return false;
    }
    const frameBytes = FRAME_HEADER_BYTES + payload.byteLength;
    if (payload.byteLength + 1 > this.maxFrameBytes) return this.drop(peer, 'frame larger than the frame limit', frameBytes);
    if (peer.queuedBytes() + frameBytes > this.maxQueueBytesPerPeer) return this.drop(peer, 'send queue full', frameBytes);
    peer.dropping = false;
    const frame = outFrameOf(kind, payload);
    if (peer.verified && !peer.waitingDrain && !peer.hasPending()) {
      this.write(peer, frame);
    } else {
      peer.pending.push(frame);
      peer.pendingBytes += frameBytesOf(frame);
    }
    peer.active = true;
    if (peer.outbound === undefined && peer.reconnectTimer === undefined) this.connect(peer);
    return true;
  }

  onFrame(handler: FrameHandler): void {
    this.handler = handler;
  }

  setPeers(peers: readonly PeerAddress[]): void {
    if (this.closed) return;
    const next = new Map<string, string>();
    for (const p of peers) if (p.nodeId !== this.identity.nodeId) next.set(p.nodeId, p.address);
    for (const [nodeId, peer] of this.peers) {
      if (!next.has(nodeId)) this.removePeer(peer);
    }
    for (const [nodeId, address] of next) {
      const peer = this.peers.get(nodeId);
      if (peer === undefined) {
        const added = new Peer(nodeId, address, this.reconnect.initialMs);
        added.hostPort = this.parsePeerAddress(nodeId, address);
        this.peers.set(nodeId, added);
        this.log.debug('node-to-node peer added', { peer: nodeId, address });
      } else if (peer.address !== address) {
        this.log.info('node-to-node peer moved', { peer: nodeId, from: peer.address, to: address });
        peer.address = address;
        peer.hostPort = this.parsePeerAddress(nodeId, address);
        this.dropOutbound(peer);
        peer.backoffMs = this.reconnect.initialMs;
        if (peer.active) this.connect(peer);
      }
    }
  }

  setIdentity(identity: ChannelIdentity): void {
    checkIdentity(identity);
    if (identity.nodeId !== this.identity.nodeId) {
      throw new ChannelError('IdentityMismatch', 'a node keeps its node id (its key) when its certificate changes', {
        nodeId: this.identity.nodeId,
        newNodeId: identity.nodeId,
      });
    }
    const context = secureContextOf(identity);
    // Built from the same options as at start: TLS 1.3 only, before and after the swap.
    this.server.setSecureContext({ key: identity.privateKeyPem, cert: identity.certificatePem, minVersion: 'TLSv1.3' });
    this.secureContext = context;
    this.identity = identity;
    this.log.info('node-to-node certificate replaced; new connections present it', { node_id: identity.nodeId });
  }

  stats(): ChannelStats {
    const peers: Record<string, PeerChannelStats> = {};
    for (const [nodeId, p] of this.peers) {
      peers[nodeId] = { connected: p.verified, queuedBytes: p.queuedBytes(), dropped: p.dropped, sent: p.sent, received: p.received };
    }
    return { peers, droppedUnknownPeer: this.droppedUnknownPeer, refused: { ...this.refused }, unauthenticatedHeld: this.unauthenticated.stats().held };
  }

  close(): Promise<void> {
    if (this.closing !== undefined) return this.closing;
    this.closed = true;
    for (const peer of [...this.peers.values()]) this.removePeer(peer);
    // server.close() waits for open connections: end them first, authenticated or not.
    for (const socket of this.acceptedSockets) socket.destroy();
    this.closing = new Promise((resolve) => this.server.close(() => resolve()));
    return this.closing;
  }

  // ---- outgoing -------------------------------------------------------------------------------

  private connect(peer: Peer): void {
    assert(peer.outbound === undefined && peer.reconnectTimer === undefined, 'one outbound connection per peer');
    if (peer.hostPort === undefined) return;
    let socket: tls.TLSSocket;
    try {
      socket = tls.connect({
        host: peer.hostPort.host,
        port: peer.hostPort.port,
        secureContext: this.secureContext,
        // The peer is authorised by the hash of its key (below), not by a CA or a host name.
        rejectUnauthorized: false,
        minVersion: 'TLSv1.3',
      });
    } catch (e) {
      peer.lastError = errorMessage(e);
      this.scheduleReconnect(peer, false);
      return;
    }
    peer.outbound = socket;
    peer.verified = false;
    socket.setNoDelay(true);
    socket.setKeepAlive(true, KEEPALIVE_DELAY_MS);
    // Inactivity timer: first the handshake deadline, then (once verified) the stall deadline.
    socket.setTimeout(this.handshakeTimeoutMs);
    socket.on('timeout', () => {
      if (!peer.verified) {
        peer.lastError = `no TLS handshake within ${this.handshakeTimeoutMs} ms`;
        socket.destroy();
      } else if (peer.waitingDrain || socket.writableLength > 0) {
        peer.lastError = `no write completed for ${this.stallTimeoutMs} ms`;
        this.log.info('node-to-node connection stalled', { peer: peer.nodeId, address: peer.address, queued_bytes: peer.queuedBytes() });
        socket.destroy();
      }
    });
    socket.once('secureConnect', () => {
      socket.setTimeout(this.stallTimeoutMs);
      const certificate = socket.getPeerX509Certificate();
      const presented = certificate === undefined ? undefined : nodeIdFromPublicKey(certificate.publicKey);
      if (presented !== peer.nodeId) {
        peer.lastError = 'PeerIdMismatch';
        this.refuse(socket, 'PeerIdMismatch', 'fail', 'closed node-to-node connection', {
          peer: peer.nodeId,
          address: peer.address,
          presented_node_id: presented ?? null,
        });
        return;
      }
      peer.verified = true;
      peer.connectedAtMs = this.clock.monotonicMs();
      peer.failedAttempts = 0;
      this.log.info('node-to-node connection established', { peer: peer.nodeId, address: peer.address });
      this.flush(peer);
    });
    // Receivers never write: anything arriving here is a protocol violation.
    socket.on('data', () => this.refuse(socket, 'UnexpectedData', 'fail', 'closed node-to-node connection', { peer: peer.nodeId, address: peer.address }));
    socket.on('drain', () => {
      if (peer.outbound === socket) this.flush(peer);
    });
    socket.on('error', (e: Error) => {
      peer.lastError = e.message;
    });
    socket.on('close', () => this.onOutboundClosed(peer, socket));
  }

  private onOutboundClosed(peer: Peer, socket: tls.TLSSocket): void {
    if (peer.outbound !== socket) return;
    const wasUp = peer.verified;
    peer.outbound = undefined;
    peer.verified = false;
    peer.waitingDrain = false;
    if (this.closed || this.peers.get(peer.nodeId) !== peer) return;
    if (wasUp && this.clock.monotonicMs() - peer.connectedAtMs >= this.reconnect.maxMs) peer.backoffMs = this.reconnect.initialMs;
    this.scheduleReconnect(peer, wasUp);
  }

  private scheduleReconnect(peer: Peer, wasUp: boolean): void {
    const delayMs = Math.round(peer.backoffMs * (1 - RECONNECT_JITTER + 2 * RECONNECT_JITTER * randomUnit(this.random)));
    peer.backoffMs = Math.min(peer.backoffMs * 2, this.reconnect.maxMs);
    peer.failedAttempts++;
    const fields = { peer: peer.nodeId, address: peer.address, error: peer.lastError ?? null, retry_in_ms: delayMs };
    // One line per outage at info; the retries of a long outage at debug.
    if (wasUp) this.log.info('node-to-node connection lost', fields);
    else if (peer.failedAttempts === 1) this.log.info('node-to-node connection failed', fields);
    else this.log.debug('node-to-node connection failed', { ...fields, attempts: peer.failedAttempts });
    peer.lastError = undefined;
    peer.reconnectTimer = this.clock.setTimer(delayMs, () => {
      peer.reconnectTimer = undefined;
      if (!this.closed && this.peers.get(peer.nodeId) === peer) this.connect(peer);
    });
  }

  private write(peer: Peer, frame: OutFrame): void {
    peer.sent++;
    const socket = peer.outbound!;
    if (Buffer.isBuffer(frame)) {
      if (!socket.write(frame)) peer.waitingDrain = true;
      return;
    }
    // Both parts, even when the socket pushes back after the header (it buffers the payload).
    const headerTaken = socket.write(frame[0]);
    if (!socket.write(frame[1]) || !headerTaken) peer.waitingDrain = true;
  }

  /** Moves pending frames to the socket until it pushes back. */
  private flush(peer: Peer): void {
    if (!peer.verified) return;
    peer.waitingDrain = false;
    while (peer.hasPending() && !peer.waitingDrain) {
      const frame = peer.pending[peer.pendingHead]!;
      peer.pending[peer.pendingHead++] = EMPTY;
      peer.pendingBytes -= frameBytesOf(frame);
      this.write(peer, frame);
    }
    if (!peer.hasPending()) peer.clearPending();
    else if (peer.pendingHead > 1024 && peer.pendingHead * 2 > peer.pending.length) {
      peer.pending = peer.pending.slice(peer.pendingHead);
      peer.pendingHead = 0;
    }
  }

  private drop(peer: Peer, reason: string, frameBytes: number): false {
    peer.dropped++;
    if (!peer.dropping) {
      peer.dropping = true;
      this.log.info('dropping node-to-node frames', { peer: peer.nodeId, reason, frame_bytes: frameBytes, queued_bytes: peer.queuedBytes() });
    }
    return false;
  }

  private dropOutbound(peer: Peer): void {
    peer.reconnectTimer?.cancel();
    peer.reconnectTimer = undefined;
    const socket = peer.outbound;
    peer.outbound = undefined;
    peer.verified = false;
    peer.waitingDrain = false;
    socket?.destroy();
  }

  private removePeer(peer: Peer): void {
    this.peers.delete(peer.nodeId);
    this.dropOutbound(peer);
    peer.inbound?.destroy();
    peer.inbound = undefined;
    peer.clearPending();
    if (!this.closed) this.log.info('node-to-node peer removed', { peer: peer.nodeId });
  }

  private parsePeerAddress(nodeId: string, address: string): HostPort | undefined {
    const parsed = parseHostPort(address);
    if (typeof parsed !== 'string') return parsed;
    // Node table data, not our configuration: keep running, never connect to it.
    this.log.fail('node-to-node peer has an unusable address', { peer: nodeId, address, error: parsed });
    return undefined;
  }

  // ---- incoming -------------------------------------------------------------------------------

  private onAccepted(socket: tls.TLSSocket): void {
    const remote = remoteOf(socket);
    socket.on('error', (e: Error) => this.log.debug('node-to-node connection error', { remote, error: e.message }));
    if (this.closed) {
      socket.destroy();
      return;
    }
    const certificate = socket.getPeerX509Certificate();
    if (certificate === undefined) {
      this.refuse(socket, 'NoPeerCertificate', 'info', 'refused node-to-node connection', { remote });
      return;
    }
    const nodeId = nodeIdFromPublicKey(certificate.publicKey);
    const peer = this.peers.get(nodeId);
    if (peer === undefined) {
      this.refuse(socket, 'UnknownPeer', 'info', 'refused node-to-node connection', { remote, presented_node_id: nodeId });
      return;
    }
    this.unauthenticated.authenticated(socket);
    // A peer has one connection to us; a new one means it reconnected (the old may be half-open).
    if (peer.inbound !== undefined) {
      this.log.debug('node-to-node connection replaced by a newer one', { peer: nodeId, remote });
      peer.inbound.destroy();
    }
    peer.inbound = socket;
    this.log.info('node-to-node connection accepted', { peer: nodeId, remote });
    const decoder = new FrameDecoder(this.maxFrameBytes);
    const deliver = (kind: number, payload: Buffer): void => {
      // The handler may have removed the peer or closed the channels while a read held more frames.
      if (peer.inbound !== socket) return;
      peer.received++;
      if (this.handler !== undefined) this.handler(nodeId, kind, payload);
    };
    socket.on('data', (chunk: Buffer) => {
      const error = decoder.push(chunk, deliver);
      if (error !== undefined && !socket.destroyed) {
        this.refuse(socket, error.code, 'fail', 'closed node-to-node connection', { peer: nodeId, remote, error: error.message });
      }
    });
    socket.on('close', () => {
      if (peer.inbound === socket) peer.inbound = undefined;
    });
  }

  private refuse(socket: tls.TLSSocket, code: ChannelErrorCode, level: LogLevel, what: string, fields: LogFields): void {
    this.count(code);
    this.log[level](`${what}: ${code}`, { reason: code, ...fields });
    socket.destroy();
  }

  private count(code: ChannelErrorCode): void {
    this.refused[code] = (this.refused[code] ?? 0) + 1;
  }
}

/** Starts listening on init.bindAddress; boundAddress is the address actually bound ("host:port"). */
export async function createTlsNodeChannels(init: TlsNodeChannelsInit): Promise<{ channels: TlsNodeChannels; boundAddress: string }> {
  const bind = parseHostPort(init.bindAddress);
  if (typeof bind === 'string') throw new ChannelError('InvalidAddress', `node_to_node_interface.bind_address: ${bind}`);
  checkIdentity(init.identity);
  secureContextOf(init.identity);
  const server = tls.createServer({
    key: init.identity.privateKeyPem,
    cert: init.identity.certificatePem,
    // Ask for the peer's certificate but accept any: the peer is authorised by its node id.
    requestCert: true,
    rejectUnauthorized: false,
    minVersion: 'TLSv1.3',
    handshakeTimeout: init.handshakeTimeoutMs ?? DEFAULT_HANDSHAKE_TIMEOUT_MS,
  });
  const channels = new TlsNodeChannels(server, init);
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ host: bind.host, port: bind.port }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  server.on('error', (e: Error) => init.logger.fail('node-to-node listener error', { error: e.message }));
  const address = server.address() as AddressInfo;
  return { channels, boundAddress: formatHostPort({ host: address.address, port: address.port }) };
}
