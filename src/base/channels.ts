/**
 * Node-to-node channels: the types shared by the interface the node layer programs against
 * (src/node/channels.ts re-exports them), the node:tls implementation (src/platform) and the
 * in-memory one (src/testing). They live in base because platform may not import node.
 *
 * Wire format of one frame (both implementations model it; the TLS one puts it on the wire):
 *
 *   u32 LE  frameBytes   length of what follows: 1 (kind) + payload length; 1 ≤ frameBytes ≤ maxFrameBytes
 *   u8      kind         message kind, opaque to the channels
 *   bytes   payload
 *
 * A connection that breaks this (an empty or oversized frame) is closed with a logged reason;
 * the sender's other connections and every other peer are unaffected.
 */
import { CovenantError } from './errors.js';

/** Where a member of the network listens for node-to-node connections. */
export interface PeerAddress {
  /** Lower-case hex SHA-256 of the DER SubjectPublicKeyInfo of the node's identity key. */
  readonly nodeId: string;
  /** "host:port" (IPv6 in brackets), the node's published node-to-node address. */
  readonly address: string;
}

/** The key and certificate a node presents on its node-to-node connections (both directions). */
export interface ChannelIdentity {
  readonly nodeId: string;
  readonly privateKeyPem: string;
  /** Self-signed before the node joins, endorsed by the service key after; the key never changes. */
  readonly certificatePem: string;
}

/** Counters of one peer, for /node metrics and tests. */
export interface PeerChannelStats {
  /** The outgoing connection to the peer is established and the peer's identity verified. */
  readonly connected: boolean;
  /** Frames accepted by send() and not yet handed to the kernel, in bytes (headers included). */
  readonly queuedBytes: number;
  /** Frames refused by send(): queue full, or frame larger than the frame limit. */
  readonly dropped: number;
  /** Frames handed to the connection (a connection that dies may still lose them). */
  readonly sent: number;
  /** Frames received from the peer and passed to the frame handler. */
  readonly received: number;
}

export interface ChannelStats {
  readonly peers: Readonly<Record<string, PeerChannelStats>>;
  /** Frames refused by send() because the destination is not a current peer. */
  readonly droppedUnknownPeer: number;
  /** Connections refused or closed for a reason in ChannelErrorCode, by reason. */
  readonly refused: Readonly<Partial<Record<ChannelErrorCode, number>>>;
  /** Incoming connections not yet authenticated as a peer's (TLS transports only). */
  readonly unauthenticatedHeld?: number;
}

/** Called once per received frame; `from` is the authenticated node id of the sender. */
export type FrameHandler = (from: string, kind: number, payload: Uint8Array) => void;

/**
 * A node's channels to the other nodes of the network. Delivery is best effort, in order per
 * ordered pair of nodes while a connection lasts; consensus tolerates loss, so nothing here
 * blocks or retries a frame that a dead connection swallowed.
 */
export interface NodeChannels {
  /**
   * Queues a frame for the peer. Returns false (and counts a drop) when the peer is unknown, the
   * frame exceeds the frame limit, or the peer's queue is full. Never blocks, never throws for a
   * dead peer. A small payload is copied; one of 64 KiB or more is written from the caller's
   * bytes, which must not change afterwards (callers pass freshly encoded bytes). `kind` is a u8.
   */
  send(to: string, kind: number, payload: Uint8Array): boolean;
  /**
   * Sets the one handler for every received frame. The payload may be a view into a receive
   * buffer that is never reused. A handler that throws is a programmer error and is not caught.
   */
  onFrame(handler: FrameHandler): void;
  /**
   * The members of the network: who we connect to (address) and whom we accept (node id). Called
   * whenever the node table changes; our own entry, if present, is ignored. A removed peer's
   * connections are closed and its queue dropped; a changed address reconnects.
   */
  setPeers(peers: readonly PeerAddress[]): void;
  /**
   * Replaces the presented certificate (a node's becomes service-endorsed after it joins). Applies
   * to connections made from now on. The node id (the key) must stay the same.
   */
  setIdentity(identity: ChannelIdentity): void;
  stats(): ChannelStats;
  /** Closes every connection and the listener; later sends return false. Idempotent. */
  close(): Promise<void>;
}

/** Bytes before the payload: u32 length + u8 kind. */
export const FRAME_HEADER_BYTES = 5;
/** Default limit of frameBytes (kind + payload). */
export const DEFAULT_MAX_FRAME_BYTES = 64 * 1024 * 1024;
/**
 * Largest ledger entry a node records (its sealed frame): an AppendEntries message carrying it
 * alone, with the message's header and a reconfiguration's node list, must fit in one frame of
 * the default limit, or the entry could never be replicated and commit would stop behind it.
 */
export const MAX_ENTRY_BYTES = DEFAULT_MAX_FRAME_BYTES - 1024 * 1024;
/**
 * Largest request body an RPC interface may be configured to accept (`max_body_size`): a backup
 * forwards a request to the primary in one frame, its body in base64.
 */
export const MAX_REQUEST_BODY_BYTES = 32 * 1024 * 1024;
/** Default bound of each peer's send queue. */
export const DEFAULT_MAX_QUEUE_BYTES_PER_PEER = 64 * 1024 * 1024;

export type ChannelErrorCode =
  /** A frame's length prefix is 0: it cannot even hold the kind byte. */
  | 'FrameEmpty'
  /** A frame's length prefix exceeds the frame limit (also what random garbage usually parses to). */
  | 'FrameTooLarge'
  /** The connecting side presented no certificate. */
  | 'NoPeerCertificate'
  /** The presented certificate's key is not the key of a current member of the network. */
  | 'UnknownPeer'
  /** The node at a peer's address presented a different key than the peer's node id. */
  | 'PeerIdMismatch'
  /** The TLS handshake failed or timed out (not TLS, bad certificate, wrong key). */
  | 'HandshakeFailed'
  /**
   * Closed before it was known to come from a peer: its address held its share of the incoming
   * connections still handshaking, or all of them were held and it was the oldest of the address
   * holding the most.
   */
  | 'TooManyUnauthenticated'
  /** The receiving side of a connection sent data; only the connecting side sends frames. */
  | 'UnexpectedData'
  /** An identity whose certificate does not carry the key of its node id, or that changes the node id. */
  | 'IdentityMismatch'
  /** A key or certificate that TLS cannot use. */
  | 'InvalidIdentity'
  /** A bind address that is not "host:port". */
  | 'InvalidAddress';

export class ChannelError extends CovenantError {
  declare readonly code: ChannelErrorCode;
  constructor(code: ChannelErrorCode, message: string, details?: Record<string, unknown>) {
    super(code, message, 500, details);
    this.name = 'ChannelError';
  }
}
