/**
 * HTTP/1.1 pipelining, bounded per connection. Node's HTTP server reads every request a client
 * pipelines and hands each to the node at once, whether or not the earlier ones were answered;
 * it stops reading a connection only when its answers pile up unsent. A client that pipelines
 * requests that wait (linearizable reads, committed writes) could thus make the node hold any
 * number of them. Here each connection may have `maxInFlight` requests read and not yet answered.
 * At half of them the node stops reading the connection (TCP then pushes back on the client), and
 * reads again once a quarter are left: what was already read when it stopped (one read of the
 * socket holds several requests) still fits under the limit. A request beyond the limit is
 * refused and the connection is closed after its answer: it is never held.
 *
 * Only the socket is paused, not Node's HTTP parser (as Node's own pushback does): a TLS socket
 * may hand the parser the rest of what it already decrypted after the pause, and a paused parser
 * fails on it (HPE_PAUSED), closing the connection with a 400 for a request that was well formed.
 */
import type { ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { assert } from '../base/assert.js';
import { CovenantError } from '../base/errors.js';

interface ConnectionPipeline {
  inFlight: number;
  /** Stopped reading by this gate (Node may also pause the socket for its own reasons). */
  paused: boolean;
  /** Stopped reading until this timer fires: its address sent requests beyond its rate. */
  rateHold: NodeJS.Timeout | undefined;
}

/** Counts of the gate (GET /node/metrics). */
export interface PipeliningMetrics {
  readonly max_in_flight_per_session: number;
  /** The most requests one connection had in flight at once, since start. */
  readonly peak_in_flight_per_session: number;
  /** Times a connection was stopped reading because it reached its limit, since start. */
  readonly paused: number;
  /** Requests refused (and their connections closed) beyond the limit, since start. */
  readonly refused: number;
}

export class PipeliningGate {
  private readonly connections = new WeakMap<Socket, ConnectionPipeline>();
  private pausedCount = 0;
  private refusedCount = 0;
  private peakInFlight = 0;

  /** In flight at which a connection is no longer read, and at which it is read again. */
  private readonly pauseAt: number;
  private readonly resumeAt: number;

  constructor(private readonly maxInFlight: number) {
    assert(Number.isInteger(maxInFlight) && maxInFlight >= 1, 'a connection may have at least one request in flight');
    this.pauseAt = Math.ceil(maxInFlight / 2);
    this.resumeAt = Math.floor(maxInFlight / 4);
    assert(this.resumeAt < this.pauseAt && this.pauseAt <= maxInFlight, 'a paused connection is read again before it is empty of answers');
  }

  /**
   * A request's head was read on `socket` (called from the server's 'request' event, inside the
   * parser's pass). False when it is one too many: the caller refuses it with
   * tooManyPipelinedRequests() and closes the connection. `res` finishing gives its place back.
   */
  arrived(socket: Socket, res: ServerResponse): boolean {
    let pipeline = this.connections.get(socket);
    if (pipeline === undefined) {
      const created: ConnectionPipeline = { inFlight: 0, paused: false, rateHold: undefined };
      this.connections.set(socket, (pipeline = created));
      // Node resumes a socket it paused itself (its answers piled up) once they drain: ours stays paused.
      socket.on('resume', () => {
        if (created.paused || created.rateHold !== undefined) socket.pause();
      });
      socket.once('close', () => {
        if (created.rateHold !== undefined) clearTimeout(created.rateHold);
        created.rateHold = undefined;
      });
    }
    if (pipeline.inFlight >= this.maxInFlight) {
      this.refusedCount++;
      return false;
    }
    pipeline.inFlight++;
    if (pipeline.inFlight > this.peakInFlight) this.peakInFlight = pipeline.inFlight;
    const current = pipeline;
    let answered = false;
    const done = (): void => {
      if (answered) return;
      answered = true;
      current.inFlight--;
      if (current.paused && current.inFlight <= this.resumeAt && !socket.destroyed) {
        current.paused = false;
        if (current.rateHold === undefined) socket.resume();
      }
    };
    res.once('finish', done);
    res.once('close', done);
    if (pipeline.inFlight >= this.pauseAt && !pipeline.paused) {
      pipeline.paused = true;
      this.pausedCount++;
      socket.pause();
    }
    return true;
  }

  /**
   * A request on `socket` was refused because the node's waiting work is full: if the connection
   * has other requests in flight (it pipelines), it is no longer read until most of them are
   * answered, so that it does not feed the node more requests only to have them refused.
   */
  holdBack(socket: Socket): void {
    const pipeline = this.connections.get(socket);
    if (pipeline === undefined || pipeline.paused || pipeline.inFlight <= 1) return;
    pipeline.paused = true;
    this.pausedCount++;
    socket.pause();
  }

  /**
   * A request on `socket` was refused because its address exceeds its request rate: the
   * connection is not read for `ms` (what it sends meanwhile waits in TCP's buffers, costing the
   * node nothing), then read again unless the gate holds it for its pipeline.
   */
  holdBackFor(socket: Socket, ms: number): void {
    const pipeline = this.connections.get(socket);
    if (pipeline === undefined || pipeline.rateHold !== undefined || socket.destroyed) return;
    socket.pause();
    pipeline.rateHold = setTimeout(() => {
      pipeline.rateHold = undefined;
      if (!pipeline.paused && !socket.destroyed) socket.resume();
    }, ms);
    pipeline.rateHold.unref();
  }

  metrics(): PipeliningMetrics {
    return { max_in_flight_per_session: this.maxInFlight, peak_in_flight_per_session: this.peakInFlight, paused: this.pausedCount, refused: this.refusedCount };
  }
}

/** 503 TooManyPipelinedRequests (the connection is closed after it). */
export function tooManyPipelinedRequests(maxInFlight: number): CovenantError {
  return new CovenantError(
    'TooManyPipelinedRequests',
    `this connection already has ${maxInFlight} requests waiting for their answer (max_pipelined_requests): send the next once one is answered`,
    503,
    undefined,
    1,
  );
}
