/**
 * Incoming node-to-node connections that are not yet known to come from a peer: from TCP accept
 * until the TLS handshake completes and the presented key is a peer's. Anyone who reaches the
 * node-to-node port can open them, so they are bounded: each must finish its handshake within the
 * handshake timeout (the TLS server's own deadline), at most `max` are held at once, and one
 * address holds at most half of them. A connection beyond its address's share is closed at once;
 * one beyond the total closes the oldest connection of the address that holds the most, so that a
 * flood from a few addresses only ever displaces its own connections, and a peer (one handshake,
 * completed in milliseconds) still gets through.
 */
import type { Socket } from 'node:net';
import { assert } from '../base/assert.js';

interface AddressConnections {
  /** Socket → its key, oldest first. */
  readonly sockets: Map<Socket, string>;
}

/** Counts of the unauthenticated connections (stats). */
export interface UnauthenticatedStats {
  readonly held: number;
  /** Closed at accept, their address holding its share already, since start. */
  readonly refusedOverShare: number;
  /** Closed to make room for a newer one, since start. */
  readonly evicted: number;
}

export class UnauthenticatedConnections {
  /** By "address port" (the TCP socket and the TLS socket over it share it). */
  private readonly byKey = new Map<string, { socket: Socket; address: string }>();
  private readonly byAddress = new Map<string, AddressConnections>();
  private readonly perAddressMax: number;
  private refusedOverShare = 0;
  private evicted = 0;

  constructor(private readonly max: number) {
    assert(Number.isInteger(max) && max >= 2, 'at least two unauthenticated connections are held (half per address)');
    this.perAddressMax = Math.floor(max / 2);
  }

  /**
   * A TCP connection was accepted: held, or closed (it, or an older one to make room). Returns
   * whether a connection was closed for want of room.
   */
  accepted(socket: Socket): boolean {
    const address = socket.remoteAddress;
    const key = keyOf(socket);
    if (address === undefined || key === undefined) {
      // Already reset.
      socket.destroy();
      return false;
    }
    let mine = this.byAddress.get(address);
    if (mine !== undefined && mine.sockets.size >= this.perAddressMax) {
      this.refusedOverShare++;
      socket.destroy();
      return true;
    }
    const full = this.byKey.size >= this.max;
    if (full) this.evictOne();
    if (mine === undefined) this.byAddress.set(address, (mine = { sockets: new Map() }));
    mine.sockets.set(socket, key);
    this.byKey.set(key, { socket, address });
    socket.once('close', () => this.forget(key));
    return full;
  }

  /** The connection (its TLS socket) presented a peer's key: no longer counted here. */
  authenticated(tlsSocket: Socket): void {
    const key = keyOf(tlsSocket);
    if (key !== undefined) this.forget(key);
  }

  stats(): UnauthenticatedStats {
    return { held: this.byKey.size, refusedOverShare: this.refusedOverShare, evicted: this.evicted };
  }

  private forget(key: string): void {
    const entry = this.byKey.get(key);
    if (entry === undefined) return;
    this.byKey.delete(key);
    const mine = this.byAddress.get(entry.address)!;
    mine.sockets.delete(entry.socket);
    if (mine.sockets.size === 0) this.byAddress.delete(entry.address);
  }

  /** Closes the oldest connection of the address holding the most. */
  private evictOne(): void {
    let largest: AddressConnections | undefined;
    for (const mine of this.byAddress.values()) if (largest === undefined || mine.sockets.size > largest.sockets.size) largest = mine;
    const oldest = largest?.sockets.entries().next().value;
    assert(oldest !== undefined, 'a full table has a connection to close');
    this.evicted++;
    this.forget(oldest[1]);
    oldest[0].destroy();
  }
}

function keyOf(socket: Socket): string | undefined {
  const { remoteAddress, remotePort } = socket;
  return remoteAddress === undefined || remotePort === undefined ? undefined : `${remoteAddress} ${remotePort}`;
}
