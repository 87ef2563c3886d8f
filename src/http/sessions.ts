/**
 * Session accounting and admission for one RPC interface: every TCP connection is counted from
 * accept, handshake finished or not, and sorted against max_open_sessions and its address's share
 * into a session, a connection held only to be answered 503 SessionCapExhausted, or one dropped
 * at once. When every session is taken, a connection from an address holding fewer of them than
 * the address holding the most takes the place of that address's oldest idle session (or oldest
 * session): attackers on several addresses cannot lock out a client on another. A session must
 * send its first request in time. The counts feed GET /node/metrics.
 */
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import type { Logger } from '../base/log.js';

/**
 * A session that has sent no complete request head by then is closed: an idle connection would
 * otherwise hold one of max_open_sessions for as long as its client likes.
 */
export const DEFAULT_FIRST_REQUEST_TIMEOUT_MS = 10_000;

/**
 * The default share of max_open_sessions one client address may hold: half of them, but never
 * fewer than 100 (or all of them when there are fewer). Generous, so that one host running many
 * clients (a load generator, a test network on loopback) is not refused, yet a single address
 * can never lock every other client out.
 */
export function defaultMaxSessionsPerAddress(maxOpenSessions: number): number {
  return Math.max(Math.min(maxOpenSessions, 100), Math.ceil(maxOpenSessions / 2));
}

/**
 * Connections accepted beyond the session caps only to be answered 503 SessionCapExhausted: a
 * tenth of max_open_sessions, at least 10. Each address may hold the same share of these as of
 * the sessions. Connections beyond these are closed as soon as they are accepted.
 */
export function sessionRefusalSlots(maxOpenSessions: number, maxSessionsPerAddress: number): { total: number; perAddress: number } {
  const total = Math.max(10, Math.ceil(maxOpenSessions / 10));
  const perAddress = Math.min(total, Math.max(1, Math.ceil((total * maxSessionsPerAddress) / maxOpenSessions)));
  return { total, perAddress };
}

/** Counts of one interface's client connections (GET /node/metrics). */
export interface SessionMetrics {
  /** Connections counted against max_open_sessions, from TCP accept to close. */
  readonly active: number;
  /** Connections held only to be answered 503 SessionCapExhausted. */
  readonly refusing: number;
  readonly peak: number;
  /** max_open_sessions (absent: no cap). */
  readonly soft_cap?: number;
  /** Connections beyond which new ones are closed at once. */
  readonly hard_cap?: number;
  readonly per_address_cap?: number;
  /** Connections closed at accept (hard cap or address share exhausted), since start. */
  readonly dropped: number;
  /** Connections closed for want of a TLS handshake or a first request in time, since start. */
  readonly timed_out: number;
  /** Sessions closed to make room for a connection from an address holding fewer, since start. */
  readonly evicted: number;
}

export interface SessionLimits {
  /**
   * Client sessions served at once (max_open_sessions). A connection accepted beyond them (or
   * beyond its address's share) is still taken through the TLS handshake and its first request
   * answered 503 SessionCapExhausted, then closed; connections beyond that are closed at once.
   * A connection counts from TCP accept, handshake finished or not. Undefined: no cap.
   */
  readonly maxOpenSessions?: number;
  /** Sessions one client address may hold (max_sessions_per_address); default defaultMaxSessionsPerAddress. */
  readonly maxSessionsPerAddress?: number;
  /** Time from the completed TLS handshake to the first request's headers (first_request_timeout). */
  readonly firstRequestTimeoutMs?: number;
}

/** One accepted TCP connection. */
interface Connection {
  readonly address: string;
  /** Counts toward max_open_sessions; otherwise its first request is answered 503 and it is closed. */
  readonly admitted: boolean;
  /** Runs until the first request's head arrives. */
  firstRequestTimer: NodeJS.Timeout | undefined;
  /** The accepted TCP socket, and the TLS socket on it once the handshake completed. */
  readonly socket: Socket;
  tlsSocket: TLSSocket | undefined;
  /** Requests read and not yet answered (0: the session is idle). */
  inFlight: number;
  /** No longer counted (closed, or evicted and closing). */
  released: boolean;
}

interface AddressCount {
  admitted: number;
  refusing: number;
  /** The address's admitted connections, oldest first (a Set keeps insertion order). */
  readonly sessions: Set<Connection>;
}

interface SessionCaps {
  readonly sessions: number;
  readonly perAddress: number;
  readonly refusing: number;
  readonly refusingPerAddress: number;
}

/** The client connections of one interface, from TCP accept to close. */
export class SessionTable {
  private readonly sockets = new Set<Socket>();
  /** Accepted connections by "address port", until the TLS handshake hands them to `sessions`. */
  private readonly accepted = new Map<string, Connection>();
  /** Connections whose TLS handshake completed, by their TLS socket (the one requests arrive on). */
  private readonly sessions = new WeakMap<Socket, Connection>();
  private readonly byAddress = new Map<string, AddressCount>();
  private admittedCount = 0;
  private refusingCount = 0;
  private peakCount = 0;
  private droppedCount = 0;
  private timedOutCount = 0;
  private evictedCount = 0;
  private readonly caps: SessionCaps | undefined;
  private readonly firstRequestTimeoutMs: number;

  constructor(
    limits: SessionLimits,
    private readonly logger: Logger,
    private readonly interfaceName: string,
  ) {
    this.firstRequestTimeoutMs = limits.firstRequestTimeoutMs ?? DEFAULT_FIRST_REQUEST_TIMEOUT_MS;
    const maxSessions = limits.maxOpenSessions;
    if (maxSessions !== undefined && maxSessions > 0) {
      const perAddress = Math.min(maxSessions, limits.maxSessionsPerAddress ?? defaultMaxSessionsPerAddress(maxSessions));
      const refusal = sessionRefusalSlots(maxSessions, perAddress);
      this.caps = { sessions: maxSessions, perAddress, refusing: refusal.total, refusingPerAddress: refusal.perAddress };
    }
  }

  /** Connections beyond which new ones are closed at once (undefined: no cap). */
  get hardCap(): number | undefined {
    return this.caps === undefined ? undefined : this.caps.sessions + this.caps.refusing;
  }

  /** Counts every TCP connection from accept, handshake finished or not, and sorts it: session, refused or dropped. */
  accept(socket: Socket): void {
    const address = socket.remoteAddress;
    const key = connectionKey(socket);
    if (address === undefined || key === undefined) {
      // Already gone (reset before this turn).
      socket.destroy();
      return;
    }
    let count = this.byAddress.get(address);
    if (count === undefined) this.byAddress.set(address, (count = { admitted: 0, refusing: 0, sessions: new Set() }));
    let admitted = true;
    const caps = this.caps;
    if (caps !== undefined && (count.admitted >= caps.perAddress || (this.admittedCount >= caps.sessions && !this.evictForNewcomer(count)))) {
      if (this.refusingCount >= caps.refusing || count.refusing >= caps.refusingPerAddress) {
        this.droppedCount++;
        if (count.admitted === 0 && count.refusing === 0) this.byAddress.delete(address);
        socket.destroy();
        return;
      }
      admitted = false;
    }
    const connection: Connection = { address, admitted, firstRequestTimer: undefined, socket, tlsSocket: undefined, inFlight: 0, released: false };
    this.count(count, connection, +1);
    this.sockets.add(socket);
    this.accepted.set(key, connection);
    socket.once('close', () => {
      this.sockets.delete(socket);
      if (this.accepted.get(key) === connection) this.accepted.delete(key);
      this.release(connection);
    });
  }

  /** Stops counting a connection (closed, or evicted and closing); once. */
  private release(connection: Connection): void {
    if (connection.released) return;
    connection.released = true;
    if (connection.firstRequestTimer !== undefined) clearTimeout(connection.firstRequestTimer);
    connection.firstRequestTimer = undefined;
    const c = this.byAddress.get(connection.address)!;
    this.count(c, connection, -1);
    if (c.admitted === 0 && c.refusing === 0) this.byAddress.delete(connection.address);
  }

  /**
   * Every session is taken and a connection arrives from the address counted in `newcomer`: when
   * another address holds at least two more sessions, its oldest idle session (or, with none idle,
   * its oldest) is closed to make room, and true returned. The cap then shares the sessions out
   * among addresses rather than serving whoever came first.
   */
  private evictForNewcomer(newcomer: AddressCount): boolean {
    let top: AddressCount | undefined;
    for (const count of this.byAddress.values()) if (top === undefined || count.admitted > top.admitted) top = count;
    if (top === undefined || top === newcomer || top.admitted < newcomer.admitted + 2) return false;
    let victim: Connection | undefined;
    for (const connection of top.sessions) {
      victim ??= connection;
      if (connection.inFlight === 0) {
        victim = connection;
        break;
      }
    }
    if (victim === undefined) return false;
    this.evictedCount++;
    this.logger.debug('every session is taken: closing the oldest idle session of the address holding the most', {
      interface: this.interfaceName,
      address: victim.address,
      sessions: top.admitted,
    });
    this.release(victim);
    (victim.tlsSocket ?? victim.socket).destroy();
    return true;
  }

  private count(count: AddressCount, connection: Connection, delta: 1 | -1): void {
    if (connection.admitted) {
      if (delta > 0) count.sessions.add(connection);
      else count.sessions.delete(connection);
      count.admitted += delta;
      this.admittedCount += delta;
      if (this.admittedCount > this.peakCount) this.peakCount = this.admittedCount;
    } else {
      count.refusing += delta;
      this.refusingCount += delta;
    }
  }

  /** The handshake is done: the first request must now arrive within firstRequestTimeoutMs. */
  secured(socket: TLSSocket): void {
    const key = connectionKey(socket);
    const connection = key === undefined ? undefined : this.accepted.get(key);
    if (connection === undefined || key === undefined) {
      socket.destroy();
      return;
    }
    this.accepted.delete(key);
    this.sessions.set(socket, connection);
    connection.tlsSocket = socket;
    connection.firstRequestTimer = setTimeout(() => {
      connection.firstRequestTimer = undefined;
      this.timedOutCount++;
      this.logger.debug('no request in time after the TLS handshake: closing', { interface: this.interfaceName, address: connection.address });
      socket.destroy();
    }, this.firstRequestTimeoutMs);
    connection.firstRequestTimer.unref();
  }

  /**
   * A request's head arrived on `socket`: its first-request deadline no longer runs, and the
   * session is busy until `res` closes. False when the connection is one too many, to be answered
   * 503 SessionCapExhausted.
   */
  requestArrived(socket: Socket, res?: { once(event: 'close', listener: () => void): unknown }): boolean {
    const connection = this.sessions.get(socket);
    if (connection === undefined) return true;
    if (connection.firstRequestTimer !== undefined) {
      clearTimeout(connection.firstRequestTimer);
      connection.firstRequestTimer = undefined;
    }
    if (res !== undefined) {
      connection.inFlight++;
      res.once('close', () => connection.inFlight--);
    }
    return connection.admitted;
  }

  /** Whether the socket's TLS handshake completed (only then can it carry an answer). */
  isSession(socket: Socket): boolean {
    return this.sessions.has(socket);
  }

  /** A connection was closed for want of a TLS handshake in time. */
  countHandshakeTimeout(): void {
    this.timedOutCount++;
  }

  /** Session counts for GET /node/metrics. */
  metrics(): SessionMetrics {
    const caps = this.caps;
    return {
      active: this.admittedCount,
      refusing: this.refusingCount,
      peak: this.peakCount,
      ...(caps ? { soft_cap: caps.sessions, hard_cap: caps.sessions + caps.refusing, per_address_cap: caps.perAddress } : {}),
      dropped: this.droppedCount,
      timed_out: this.timedOutCount,
      evicted: this.evictedCount,
    };
  }

  /** Closes every connection still open (the interface is closing). */
  destroyAll(): void {
    for (const socket of this.sockets) socket.destroy();
  }
}

/** Identifies a live TCP connection, on the raw socket and on the TLS socket wrapping it alike. */
function connectionKey(socket: Socket): string | undefined {
  const { remoteAddress, remotePort } = socket;
  return remoteAddress === undefined || remotePort === undefined ? undefined : `${remoteAddress} ${remotePort}`;
}
