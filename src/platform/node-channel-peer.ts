/**
 * One peer of the node-to-node channels (its connections, send queue and counters), and the
 * identity checks that both directions of a connection rely on.
 */
import { X509Certificate } from 'node:crypto';
import type { Socket } from 'node:net';
import tls from 'node:tls';
import type { TimerHandle } from '../base/clock.js';
import { ChannelError, type ChannelIdentity } from '../base/channels.js';
import { errorMessage } from '../base/errors.js';
import { formatHostPort, type HostPort } from '../config/index.js';
import { nodeIdFromPublicKey } from '../crypto/index.js';
import type { OutFrame } from './node-channel-frames.js';

/** The connection state and counters of one peer. */
export class Peer {
  hostPort: HostPort | undefined;
  /** Whether we have sent to this peer: from then on its connection is kept up. */
  active = false;
  outbound: tls.TLSSocket | undefined;
  /** The outbound connection is up and presented the expected node id. */
  verified = false;
  connectedAtMs = 0;
  /** The outbound socket refused a write: hold frames in `pending` until 'drain'. */
  waitingDrain = false;
  /** Frames waiting for a connection or for 'drain'; [pendingHead, length) are live. */
  pending: OutFrame[] = [];
  pendingHead = 0;
  pendingBytes = 0;
  backoffMs: number;
  reconnectTimer: TimerHandle | undefined;
  failedAttempts = 0;
  lastError: string | undefined;
  inbound: tls.TLSSocket | undefined;
  dropped = 0;
  sent = 0;
  received = 0;
  /** A drop was logged and no frame has been accepted since (logs once per episode). */
  dropping = false;

  constructor(
    readonly nodeId: string,
    public address: string,
    initialBackoffMs: number,
  ) {
    this.backoffMs = initialBackoffMs;
  }

  queuedBytes(): number {
    return this.pendingBytes + (this.verified && this.outbound !== undefined ? this.outbound.writableLength : 0);
  }

  hasPending(): boolean {
    return this.pendingHead < this.pending.length;
  }

  clearPending(): void {
    this.pending = [];
    this.pendingHead = 0;
    this.pendingBytes = 0;
  }
}

/** Checks that the certificate carries the key whose hash is the node id. */
export function checkIdentity(identity: ChannelIdentity): void {
  let presented: string;
  try {
    presented = nodeIdFromPublicKey(new X509Certificate(identity.certificatePem).publicKey);
  } catch (e) {
    throw new ChannelError('InvalidIdentity', `the node-to-node certificate cannot be read: ${errorMessage(e)}`);
  }
  if (presented !== identity.nodeId) {
    throw new ChannelError('IdentityMismatch', 'the node-to-node certificate does not carry the key of the node id', {
      nodeId: identity.nodeId,
      certificateNodeId: presented,
    });
  }
}

export function secureContextOf(identity: ChannelIdentity): tls.SecureContext {
  try {
    return tls.createSecureContext({ key: identity.privateKeyPem, cert: identity.certificatePem, minVersion: 'TLSv1.3' });
  } catch (e) {
    throw new ChannelError('InvalidIdentity', `the node-to-node key and certificate cannot be used: ${errorMessage(e)}`);
  }
}

export function remoteOf(socket: Socket): string {
  return socket.remoteAddress === undefined ? 'unknown' : formatHostPort({ host: socket.remoteAddress, port: socket.remotePort ?? 0 });
}
