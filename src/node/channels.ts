/**
 * The node-to-node channels as the node layer sees them: no I/O here, only the interface.
 *
 * A node sends consensus messages with `send(to, kind, payload)` and receives them through the
 * one `onFrame` handler, with the sender's node id authenticated by mutual TLS on the
 * `node_to_node_interface`. The node keeps the channels' view of the network current with
 * `setPeers` (every node of the node table with its published node-to-node address) and switches
 * to its endorsed certificate with `setIdentity` once it has joined.
 *
 * Guarantees: a peer is accepted only if its node id (SHA-256 of its public key) is in the peer
 * set; frames are length-prefixed and bounded; each peer has a bounded send queue, and a full
 * queue drops (and counts) new frames rather than blocking; connections are re-established with
 * exponential backoff; a slow or dead peer never delays the others. Delivery is best effort and
 * ordered per connection: the consensus protocol tolerates loss.
 *
 * Implementations: `createTlsNodeChannels` (src/platform/node-channels.ts, node:tls) and
 * `MemoryChannelNetwork` (src/testing/memory-channels.ts, for tests). The types are declared in
 * src/base/channels.ts so that both can implement them without importing this layer.
 */
export {
  ChannelError,
  DEFAULT_MAX_FRAME_BYTES,
  DEFAULT_MAX_QUEUE_BYTES_PER_PEER,
  FRAME_HEADER_BYTES,
  MAX_ENTRY_BYTES,
  type ChannelErrorCode,
  type ChannelIdentity,
  type ChannelStats,
  type FrameHandler,
  type NodeChannels,
  type PeerAddress,
  type PeerChannelStats,
} from '../base/channels.js';
